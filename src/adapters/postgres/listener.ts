import type { ReadyNotice } from "../../core/adapter.ts";

/** The part of a `pg.Client` (or pooled client) a listener uses, declared instead of importing pg's types. */
export interface ListenClient {
  query(sql: string): Promise<unknown>;
  on(event: "notification", listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: "error" | "end", listener: (error?: unknown) => void): unknown;
  removeAllListeners?(event?: string): unknown;
}


/** Encodes a notice's payload: "r" (ready) or "d" (due, stage first), then the queue name; "a" for any queue (read as due). */
export function readyPayload(queue: string | null, due: boolean): string {
  return queue === null ? "a" : (due ? "d" : "r") + queue;
}

/** A probe's payload: "p" then a nonce; never a notice (see NotifyProbe). */
function probePayload(nonce: string): string {
  return "p" + nonce;
}

function parsePayload(payload: string | undefined): ReadyNotice {
  if (!payload || (payload[0] !== "r" && payload[0] !== "d")) return { queue: null, due: true };
  return { queue: payload.slice(1), due: payload[0] === "d" };
}

/**
 * How the listener learns whether its notices arrive: after each LISTEN it
 * sends a probe (`send`, through the statement connections, never the
 * listening one), and calls `onSilent` when the probe has not come back
 * within `withinMs` (a transaction pooler in between delivers nothing to a
 * client that is not running a statement).
 */
export interface NotifyProbe {
  send(channel: string, payload: string): Promise<void>;
  withinMs: number;
  onSilent(): void;
}

/** How long a probe may take to come back before the notices are taken to be lost (default). */
export const PROBE_WITHIN_MS = 5_000;

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5_000;

/**
 * One dedicated connection that LISTENs on `channel` while anyone is
 * subscribed, and hands each notice to every subscriber. Guarantees: a
 * dropped connection is reported to `report` (never thrown) and re-opened
 * with backoff; after every (re)connect the subscribers get a notice with
 * queue null, since notices sent meanwhile are lost. Notices are hints:
 * polling stays the fallback. With a `probe`, every (re)connect checks
 * that a notice sent through the statement connections comes back (see
 * NotifyProbe); the check never throws.
 */
export class ReadyListener {
  readonly #subscribers = new Set<(notice: ReadyNotice) => void>();
  #client: ListenClient | null = null;
  #release: ((client: ListenClient) => Promise<void>) | null = null;
  #connecting = false;
  #failures = 0;
  #retry: ReturnType<typeof setTimeout> | null = null;
  #closed = false;
  /** The probe in flight: its nonce and the timer that declares it lost. */
  #probe: { nonce: string; timer: ReturnType<typeof setTimeout> } | null = null;

  constructor(
    private readonly open: () => Promise<{ client: ListenClient; release: (client: ListenClient) => Promise<void> }>,
    private readonly channel: string,
    private readonly report: (error: unknown) => void,
    private readonly probe: NotifyProbe | null = null,
  ) {}

  subscribe(listener: (notice: ReadyNotice) => void): () => void {
    this.#subscribers.add(listener);
    if (this.#subscribers.size === 1) void this.#connect();
    return () => {
      this.#subscribers.delete(listener);
      if (this.#subscribers.size === 0) void this.#disconnect();
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#subscribers.clear();
    await this.#disconnect();
  }

  #tell(notice: ReadyNotice): void {
    for (const s of this.#subscribers) {
      try {
        s(notice);
      } catch {
        // A subscriber's failure must not stop the others.
      }
    }
  }

  async #connect(): Promise<void> {
    if (this.#connecting || this.#client || this.#closed || this.#subscribers.size === 0) return;
    this.#connecting = true;
    try {
      const { client, release } = await this.open();
      const lost = (error?: unknown) => {
        if (this.#client !== client) return;
        this.#client = null;
        if (error !== undefined) this.report(error);
        client.removeAllListeners?.("notification");
        void release(client).catch(() => undefined);
        this.#scheduleReconnect();
      };
      client.on("error", (error) => lost(error ?? new Error("LISTEN connection failed")));
      client.on("end", () => lost(new Error("LISTEN connection ended")));
      client.on("notification", (m) => {
        if (m.channel !== this.channel) return;
        if (m.payload?.[0] === "p") return this.#heard(m.payload.slice(1));
        this.#tell(parsePayload(m.payload));
      });
      await client.query(`LISTEN "${this.channel.replace(/"/g, '""')}"`);
      this.#client = client;
      this.#release = release;
      this.#failures = 0;
      if (this.#subscribers.size === 0 || this.#closed) await this.#disconnect();
      else {
        this.#tell({ queue: null, due: true });
        this.#sendProbe();
      }
    } catch (error) {
      this.report(error);
      this.#scheduleReconnect();
    } finally {
      this.#connecting = false;
    }
  }

  #sendProbe(): void {
    const probe = this.probe;
    if (!probe) return;
    this.#endProbe();
    const nonce = crypto.randomUUID();
    const timer = setTimeout(() => {
      if (this.#probe?.nonce !== nonce) return;
      this.#probe = null;
      // Lost only while this listener still listens: a reconnect meanwhile sent a probe of its own.
      if (this.#client && !this.#closed) probe.onSilent();
    }, probe.withinMs);
    (timer as { unref?: () => void }).unref?.();
    this.#probe = { nonce, timer };
    probe.send(this.channel, probePayload(nonce)).catch(() => this.#endProbe());
  }

  #heard(nonce: string): void {
    if (this.#probe?.nonce === nonce) this.#endProbe();
  }

  #endProbe(): void {
    if (this.#probe) clearTimeout(this.#probe.timer);
    this.#probe = null;
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#subscribers.size === 0 || this.#retry) return;
    const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** this.#failures++);
    this.#retry = setTimeout(() => {
      this.#retry = null;
      void this.#connect();
    }, delay);
  }

  async #disconnect(): Promise<void> {
    this.#endProbe();
    if (this.#retry) clearTimeout(this.#retry);
    this.#retry = null;
    const client = this.#client;
    const release = this.#release;
    this.#client = null;
    if (!client || !release) return;
    client.removeAllListeners?.("notification");
    await client.query(`UNLISTEN *`).catch(() => undefined);
    await release(client).catch(() => undefined);
  }
}
