/**
 * A worker's row in the worker registry (DocketAdapter.putWorker): written
 * when it starts and every heartbeat (with the jobs it holds), deleted when
 * it stops. A crashed worker's row expires a lease after its last write, so
 * `docket.workers()` stops listing it within `leaseMs`.
 */
import { hostname } from "node:os";
import process from "node:process";
import type { WorkerRecord } from "../core/adapter.ts";
import type { WorkerHost } from "./host.ts";

export interface RegistrationInfo {
  name: string;
  queues: readonly string[];
  concurrency: number;
  leaseMs: number;
}

export class Registration {
  readonly #host: WorkerHost;
  readonly #info: RegistrationInfo;
  readonly #inHand: () => number;
  readonly id: string;
  #startedAt: number | null = null;

  constructor(host: WorkerHost, info: RegistrationInfo, inHand: () => number) {
    this.#host = host;
    this.#info = info;
    this.#inHand = inHand;
    this.id = `${info.name}#${Math.floor(host.random() * 2 ** 48).toString(36)}`;
  }

  /** Writes the row as of now (the first call dates the worker's start). */
  async put(): Promise<void> {
    const now = this.#host.clock.now();
    this.#startedAt ??= now;
    const row: WorkerRecord = {
      id: this.id,
      name: this.#info.name,
      host: machineName(),
      pid: process.pid,
      queues: JSON.stringify(this.#info.queues),
      concurrency: this.#info.concurrency,
      startedAt: this.#startedAt,
      heartbeatAt: now,
      expiresAt: now + this.#info.leaseMs,
      jobsInHand: this.#inHand(),
    };
    await this.#host.adapter.putWorker(row);
  }

  /** Deletes the row (the worker stopped). */
  async remove(): Promise<void> {
    this.#startedAt = null;
    await this.#host.adapter.removeWorker({ id: this.id });
  }
}

let known: string | null = null;

/**
 * This machine's name, read once; "unknown" where the runtime may not tell:
 * under Deno without `--allow-sys=hostname` it is not asked for (Deno would
 * prompt on a terminal, or refuse).
 */
function machineName(): string {
  if (known !== null) return known;
  type Permissions = { querySync?(d: { name: "sys"; kind: "hostname" }): { state: string } };
  const deno = (globalThis as { Deno?: { permissions?: Permissions } }).Deno;
  try {
    known = deno?.permissions?.querySync && deno.permissions.querySync({ name: "sys", kind: "hostname" }).state !== "granted" ? "unknown" : hostname();
  } catch {
    known = "unknown";
  }
  return known;
}
