import type { Dialect } from "kysely";
import { labelComment, type StatementLabel } from "../../adapters/kysely/labels.ts";
import { tapDialect } from "./tapped-driver.ts";

/** How long a hook waits, by default, for its statement to arrive and then to be released or crashed. */
export const HOOK_TIMEOUT_MS = 10_000;

/** A statement held at a hook: await `reached` first, then `release` or `crash` it. */
export interface HeldStatement {
  /**
   * Resolves with the statement's SQL when a statement labelled as asked
   * arrives and is held; rejects after the hook's timeout, naming the label
   * and the case, when none arrived.
   */
  readonly reached: Promise<string>;
  /** Lets the held statement run. */
  release(): void;
  /** Makes the held statement fail, so its transaction rolls back, as if its process died there. */
  crash(error?: Error): void;
}

export interface StatementHookOptions {
  /** Named in timeout messages: the case (or test) the hook serves. */
  readonly name: string;
  /** How long `reached` waits for its statement, and a held statement for its release (it is then crashed). Default HOOK_TIMEOUT_MS. */
  readonly timeoutMs?: number;
}

/**
 * Deterministic two-session races: wraps a dialect so that the next
 * statement carrying a label (`/* docket:claim *\/`, see
 * src/adapters/kysely/labels.ts) is held before it is sent, keeping its
 * session's transaction open at that point while another session runs.
 * Only the wrapped adapter's statements are held; transaction control
 * (begin/commit) never is. Nothing waits forever: a label that never comes
 * fails `reached`, and a statement held past the timeout is crashed, both
 * with a message naming the label and the case.
 */
export class StatementHook {
  readonly #name: string;
  readonly #timeoutMs: number;
  #armed: { label: StatementLabel; after: boolean; arrive: (sql: string) => void; gate: Promise<void> }[] = [];

  constructor(options: StatementHookOptions) {
    this.#name = options.name;
    this.#timeoutMs = options.timeoutMs ?? HOOK_TIMEOUT_MS;
  }

  /** Holds the next statement labelled `label`, before it is sent. */
  holdNext(label: StatementLabel): HeldStatement {
    return this.#arm(label, false);
  }

  /**
   * Holds the next statement labelled `label` after it ran, before its
   * result reaches its session: what it wrote and locked stays uncommitted
   * while another session runs. `crash` makes it fail there.
   */
  holdAfter(label: StatementLabel): HeldStatement {
    return this.#arm(label, true);
  }

  #arm(label: StatementLabel, after: boolean): HeldStatement {
    const what = `${labelComment(label)}${after ? " (after it ran)" : ""} (${this.#name})`;
    let arrive!: (sql: string) => void;
    let release!: () => void;
    let crash!: (e: Error) => void;
    let waiting: ReturnType<typeof setTimeout> | undefined;
    const reached = new Promise<string>((resolve, reject) => {
      waiting = setTimeout(() => {
        this.#armed = this.#armed.filter((a) => a.arrive !== arrive);
        reject(new Error(`statement hook: no statement labelled ${what} arrived within ${this.#timeoutMs} ms`));
      }, this.#timeoutMs);
      arrive = (sql) => {
        clearTimeout(waiting);
        // Held from now on: crashed if nobody releases it in time.
        const holding = setTimeout(() => crash(new Error(`statement hook: the statement labelled ${what} was held ${this.#timeoutMs} ms without release`)), this.#timeoutMs);
        gate.finally(() => clearTimeout(holding)).catch(() => undefined);
        resolve(sql);
      };
    });
    reached.catch(() => undefined);
    const gate = new Promise<void>((res, rej) => {
      release = res;
      crash = rej;
    });
    gate.catch(() => undefined);
    this.#armed.push({ label, after, arrive, gate });
    return { reached, release: () => release(), crash: (e = new Error("simulated crash")) => crash(e) };
  }

  wrap(dialect: Dialect): Dialect {
    return tapDialect(dialect, { query: (sql) => this.#wait(sql, false), after: (sql) => this.#wait(sql, true) });
  }

  async #wait(sql: string, after: boolean): Promise<void> {
    const i = this.#armed.findIndex((a) => a.after === after && sql.includes(labelComment(a.label)));
    if (i < 0) return;
    const [armed] = this.#armed.splice(i, 1);
    armed!.arrive(sql);
    await armed!.gate;
  }
}
