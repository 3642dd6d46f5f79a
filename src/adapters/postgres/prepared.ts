import type { PostgresPoolClient } from "kysely";

/** How many statement texts one process names at most; past that, texts run unnamed. */
const MAX_NAMES = 256;

/**
 * One name per statement text in this process, so that adapters sharing a
 * pool never give one name to two texts (pg refuses that on a connection).
 */
const namesInProcess = new Map<string, string>();

/**
 * The statement texts an adapter runs as named (server-side prepared)
 * statements: PostgreSQL parses and plans such a text once per connection
 * instead of at every execution. Only texts registered here are named: the
 * ones docket compiles once and runs again and again (claim, completion,
 * single enqueue). A text refused with "cached plan must not change
 * result type" (its table changed shape, e.g. a migration added a column
 * while this process ran) is forgotten and that call runs again unnamed, as
 * do later calls.
 */
export class PreparedTexts {
  readonly #mine = new Set<string>();

  register(text: string): void {
    if (this.#mine.has(text)) return;
    if (!namesInProcess.has(text)) {
      if (namesInProcess.size >= MAX_NAMES) return;
      namesInProcess.set(text, `docket_${namesInProcess.size}`);
    }
    this.#mine.add(text);
  }

  /** The name to run `text` under, or undefined to run it unnamed. */
  nameOf(text: string): string | undefined {
    return this.#mine.has(text) ? namesInProcess.get(text) : undefined;
  }

  forget(text: string): void {
    this.#mine.delete(text);
  }
}

/** PostgreSQL's refusal to run a prepared statement whose result columns changed (SQLSTATE 0A000). */
function isPlanChange(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | undefined;
  return e?.code === "0A000" && /cached plan must not change result type/i.test(String(e?.message));
}

type Query = (text: unknown, values?: unknown) => Promise<unknown>;

/**
 * `client` as kysely sees it, with the registered texts run as named
 * statements (one wrapper per client: kysely keys its connections by the
 * client object). Everything else passes through unchanged.
 */
export function namingClient(client: PostgresPoolClient, texts: PreparedTexts, wrappers: WeakMap<object, PostgresPoolClient>): PostgresPoolClient {
  let wrapper = wrappers.get(client);
  if (wrapper !== undefined) return wrapper;
  const query = (client.query as Query).bind(client);
  wrapper = {
    query: ((text: unknown, values?: unknown) => {
      const name = typeof text === "string" ? texts.nameOf(text) : undefined;
      if (name === undefined) return query(text, values);
      return query({ name, text, values }).catch((error: unknown) => {
        if (!isPlanChange(error)) throw error;
        // Refused before it ran: in autocommit, running it unnamed is the same call; inside a
        // transaction (now aborted) that fails too, as the call would have.
        texts.forget(text as string);
        return query(text, values);
      });
    }) as PostgresPoolClient["query"],
    release: (...args: unknown[]) => (client.release as (...a: unknown[]) => void)(...args),
  };
  wrappers.set(client, wrapper);
  return wrapper;
}
