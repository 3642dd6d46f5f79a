import type { Dialect } from "kysely";
import { tapDialect } from "./tapped-driver.ts";

/** A statement held at a hook: resolve `reached` first, then `release` or `crash` it. */
export interface HeldStatement {
  /** Resolves when a matching statement arrives and is held. */
  readonly reached: Promise<string>;
  /** Lets the held statement run. */
  release(): void;
  /** Makes the held statement fail, so its transaction rolls back, as if its process died there. */
  crash(error?: Error): void;
}

/**
 * Deterministic two-session races: wraps a dialect so that the next
 * statement matching a pattern is held before it is sent, keeping its
 * session's transaction open at that point while another session runs.
 * Only the wrapped adapter's statements are held. Transaction control
 * (begin/commit) is never held.
 */
export class StatementHook {
  #armed: { pattern: RegExp; arrive: (sql: string) => void; gate: Promise<void> }[] = [];

  /** Holds the next statement whose SQL matches `pattern` (case-insensitive match on the compiled SQL). */
  holdNext(pattern: RegExp): HeldStatement {
    let arrive!: (sql: string) => void;
    let release!: () => void;
    let crash!: (e: Error) => void;
    const reached = new Promise<string>((r) => (arrive = r));
    const gate = new Promise<void>((res, rej) => {
      release = res;
      crash = rej;
    });
    gate.catch(() => undefined);
    this.#armed.push({ pattern, arrive, gate });
    return { reached, release: () => release(), crash: (e = new Error("simulated crash")) => crash(e) };
  }

  wrap(dialect: Dialect): Dialect {
    return tapDialect(dialect, { query: (sql) => this.#wait(sql) });
  }

  async #wait(sql: string): Promise<void> {
    const i = this.#armed.findIndex((a) => a.pattern.test(sql));
    if (i < 0) return;
    const [armed] = this.#armed.splice(i, 1);
    armed!.arrive(sql);
    await armed!.gate;
  }
}
