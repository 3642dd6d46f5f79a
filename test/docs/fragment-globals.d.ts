/**
 * What the documentation's TypeScript fragments use without defining it,
 * for test/docs/code-blocks.test.ts (which type-checks every ```ts block of
 * README.md and docs/*.md). A fragment's own imports and declarations
 * shadow these. Payloads are typed loosely (`DocTasks`): the fragments name
 * many tasks between them, and what they check is docket's API.
 * test/docs/block-runner.ts defines each of them for real when
 * test/docs/run-blocks.test.ts runs the blocks: keep the two in step.
 *
 * A script (no import or export): its declarations are global.
 */

/** Every task, with any payload. */
type DocTasks = Record<string, any>;
/** The `Tasks` of a fragment that writes `new Docket<Tasks>` without defining them. */
type Tasks = DocTasks;

declare const Docket: typeof import("../../src/index.ts").Docket;
declare const docket: import("../../src/index.ts").Docket<DocTasks>;
declare const adapter: import("../../src/index.ts").DocketAdapter;

/** The application's database, as the transaction examples use it (kysely). */
interface Db {
  orders: { id: number };
  shipments: { order_id: number };
}
declare const db: import("kysely").Kysely<Db>;
declare const pool: import("pg").Pool;

// Values a fragment's payloads name.
declare const id: number;
declare const orderId: number;
declare const cents: number;
declare const tenantId: string;
declare const rev: number;

// The application's own functions and services.
declare function sendEmail(payload: { to: string }): Promise<void>;
declare function sendReceipt(payload: { orderId: number }): Promise<void>;
declare function signUp(docket: import("../../src/index.ts").Docket<any>, email: string): Promise<void>;
declare function isAdmin(request: Request): boolean;
declare const mailer: {
  send(orderId: number, ...attachments: unknown[]): Promise<string>;
  receipt(orderId: number, chargeId: string): Promise<void>;
};
declare const payments: { charge(orderId: number, cents: number): Promise<{ id: string }> };

// The servers the dashboard is mounted on.
declare const honoApp: import("hono").Hono;
declare const expressApp: import("express").Express;
/** Deno's global, as far as the fragments use it (they are checked with Node's types). */
declare const Deno: { serve(handler: (request: Request) => Response | Promise<Response>): unknown };

/** `node:sqlite` (Deno 2, Node 22.5+), which the pinned @types/node 20 lacks: the part docs/deno.md uses. */
declare module "node:sqlite" {
  export const DatabaseSync: new (path: string) => import("../../src/adapters/sqlite/index.ts").NodeSqliteDatabaseSync;
}
