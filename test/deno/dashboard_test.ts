/**
 * The dashboard handler under Deno.serve (issue 11 item 2: a web-standard
 * handler usable from Deno): pages render and a pause posted through a
 * real HTTP server takes effect, on SQLite through node:sqlite.
 */
import { Docket } from "../../src/client/docket.ts";
import { sqliteTarget } from "./targets.ts";

Deno.test("dashboard: served by Deno.serve, the overview renders and a CSRF-carrying POST pauses a queue", async () => {
  const target = await sqliteTarget();
  const store = await target.open();
  const adapter = await store.connect();
  await adapter.migrate();
  const docket = new Docket({ adapter });
  await docket.enqueue("email", { to: "<b>x</b>" }, { queue: "mail" });
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => undefined }, docket.dashboard({ authorize: () => true }));
  try {
    const base = `http://127.0.0.1:${server.addr.port}/`;
    const page = await (await fetch(base)).text();
    if (!page.includes('data-queue="mail"')) throw new Error("the queues table does not list mail");
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(page)?.[1];
    if (!csrf) throw new Error("no CSRF token in the page");
    const posted = await fetch(`${base}queues/mail/pause`, { method: "POST", body: new URLSearchParams({ csrf }), redirect: "manual" });
    await posted.body?.cancel();
    if (posted.status !== 303) throw new Error(`pause answered ${posted.status}`);
    const paused = (await docket.listControls()).queues.find((q) => q.queue === "mail")?.paused;
    if (paused !== true) throw new Error("the queue is not paused");
    const job = await (await fetch(`${base}jobs/1`)).text();
    if (!job.includes("&lt;b&gt;x&lt;/b&gt;")) throw new Error("the payload is not escaped");
  } finally {
    await server.shutdown();
    await adapter.close();
    await store.close();
    await target.dispose();
  }
});
