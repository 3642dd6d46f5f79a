/**
 * The payload limit in force: the largest JSON text a docket stores as a
 * payload, result or progress value, and the check enqueues and schedules
 * run against it before writing.
 */
import type { DocketAdapter } from "../core/adapter.ts";
import { PayloadTooLargeError } from "../core/errors.ts";
import { utf8Bytes } from "../core/validate.ts";

/**
 * The largest JSON text a docket stores as a payload, result or progress
 * value: `maxPayloadBytes`, or the adapter's own limit
 * (DocketAdapter.payloadLimit) where that is lower. The adapter's limit is
 * asked for once, on first use, and kept.
 */
export class PayloadLimit {
  readonly #adapter: DocketAdapter;
  readonly #maxBytes: number;
  /** The adapter's limit once read (null: none); undefined before. */
  #database: number | null | undefined;

  constructor(adapter: DocketAdapter, maxBytes: number) {
    this.#adapter = adapter;
    this.#maxBytes = maxBytes;
    if (typeof adapter.payloadLimit !== "function") this.#database = null;
  }

  /** The limit in force, in UTF-8 bytes. */
  async bytes(transaction?: object): Promise<number> {
    return this.#inForce(await this.#read(transaction));
  }

  /** The limit in force once the adapter's limit is known (at once when it has none), else undefined: no promise on a hot path. */
  known(): number | undefined {
    return this.#database === undefined ? undefined : this.#inForce(this.#database);
  }

  #inForce(database: number | null): number {
    return database === null ? this.#maxBytes : Math.min(database, this.#maxBytes);
  }

  /**
   * Throws PayloadTooLargeError for the first of `texts` (each already within
   * `maxPayloadBytes`) that is longer than the database stores; writes nothing.
   * Throws at once when the adapter's limit is known; otherwise the promise rejects.
   */
  check(texts: readonly string[], transaction?: object): void | Promise<void> {
    const database = this.#database;
    // Synchronous once the adapter's limit is known: an enqueue allocates no promise for it.
    if (database === undefined) return this.#read(transaction).then(() => this.check(texts));
    if (database === null || database >= this.#maxBytes) return;
    for (const text of texts) {
      // UTF-8 takes at most 3 bytes per UTF-16 unit: a text this short fits without being measured.
      if (text.length * 3 <= database) continue;
      const bytes = utf8Bytes(text);
      if (bytes > database) throw new PayloadTooLargeError(bytes, database, `the most this ${this.#adapter.name} database stores, below maxPayloadBytes`);
    }
  }

  async #read(transaction: object | undefined): Promise<number | null> {
    if (this.#database !== undefined) return this.#database;
    const limit = await this.#adapter.payloadLimit!(transaction === undefined ? {} : { transaction });
    this.#database = limit;
    return limit;
  }
}
