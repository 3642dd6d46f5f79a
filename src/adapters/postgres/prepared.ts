import type { PostgresPoolClient } from "kysely";

/** How many statement texts one process names at most; past that, texts run unnamed. */
const MAX_NAMES = 256;

/**
 * This process's part of every statement name. Behind a pooler that shares
 * server connections between clients (PgBouncer in transaction mode), a
 * name another process prepared may be found on the connection a statement
 * lands on, and pg, having parsed the name on its own connection once, sends
 * only "execute <name>": with names unique to the process, that can only
 * fail (SQLSTATE 26000), never run another process's statement.
 */
const PROCESS_TAG = crypto.randomUUID().replace(/-/g, "").slice(0, 16);

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
 * do later calls. Once a name is found missing or taken on a connection
 * (`stopNaming`), nothing is named any more.
 */
export class PreparedTexts {
  readonly #mine = new Set<string>();
  #stopped = false;

  /** `warn` gets one line, the first time `stopNaming` is called. */
  constructor(private readonly warn: (message: string) => void = () => undefined) {}

  register(text: string): void {
    if (this.#stopped || this.#mine.has(text)) return;
    if (!namesInProcess.has(text)) {
      if (namesInProcess.size >= MAX_NAMES) return;
      namesInProcess.set(text, `docket_${PROCESS_TAG}_${namesInProcess.size}`);
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

  /** Every text runs unnamed from now on; the first call logs why, and the option that skips naming. */
  stopNaming(cause: unknown): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#mine.clear();
    const e = cause as { code?: unknown; message?: unknown } | undefined;
    try {
      this.warn(
        `docket postgres: a prepared statement was refused (${String(e?.message)}, SQLSTATE ${String(e?.code)}): ` +
          "the server connections are shared between clients, as behind PgBouncer in transaction mode. " +
          "This adapter now runs every statement unnamed; set postgresAdapter({ preparedStatements: false }) to start that way.",
      );
    } catch {
      // A logger's failure must not fail the call.
    }
  }
}

function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | undefined)?.code;
}

/** PostgreSQL's refusal to run a prepared statement whose result columns changed (SQLSTATE 0A000). */
function isPlanChange(error: unknown): boolean {
  return codeOf(error) === "0A000" && /cached plan must not change result type/i.test(String((error as { message?: unknown }).message));
}

/** A named statement missing (26000) or its name taken (42P05) on the server connection: server connections are shared. */
function isNameLost(error: unknown): boolean {
  return codeOf(error) === "26000" || codeOf(error) === "42P05";
}

/**
 * True for the refusals of a named statement `namingClient` answers by
 * running it unnamed: refused before it ran. Inside a transaction the
 * refusal aborted it; a transaction run again from the start runs that
 * statement unnamed.
 */
export function isNamedStatementRefusal(error: unknown): boolean {
  return isPlanChange(error) || isNameLost(error);
}

type Query = (text: unknown, values?: unknown) => Promise<unknown>;

/**
 * `client` as kysely sees it, with the registered texts run as named
 * statements (one wrapper per client: kysely keys its connections by the
 * client object). Everything else passes through unchanged. A named
 * statement refused before it ran (`isNamedStatementRefusal`) runs again at
 * once, unnamed; inside a transaction, which the refusal aborted, the
 * refusal is thrown instead.
 */
export function namingClient(client: PostgresPoolClient, texts: PreparedTexts, wrappers: WeakMap<object, PostgresPoolClient>): PostgresPoolClient {
  let wrapper = wrappers.get(client);
  if (wrapper !== undefined) return wrapper;
  const query = (client.query as Query).bind(client);
  wrapper = {
    query: ((text: unknown, values?: unknown) => {
      const name = typeof text === "string" ? texts.nameOf(text) : undefined;
      if (name === undefined) return query(text, values);
      return query({ name, text, values }).catch(async (error: unknown) => {
        if (isPlanChange(error)) texts.forget(text as string);
        else if (isNameLost(error)) texts.stopNaming(error);
        else throw error;
        try {
          return await query(text, values);
        } catch (retryError) {
          // 25P02: the transaction the refusal aborted ignores the retry.
          throw codeOf(retryError) === "25P02" ? error : retryError;
        }
      });
    }) as PostgresPoolClient["query"],
    release: (...args: unknown[]) => (client.release as (...a: unknown[]) => void)(...args),
  };
  wrappers.set(client, wrapper);
  return wrapper;
}
