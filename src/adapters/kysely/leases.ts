import type { ExtendLeasesParams, HeldLeasesParams, LeaseKey } from "../../core/adapter.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import { BATCH_ROWS, type StoreContext } from "./context.ts";
import { guardMany } from "./guard.ts";
import { labelled } from "./labels.ts";

/** See DocketAdapter.extendLeases: one guarded statement per BATCH_ROWS leases (MariaDB: lock, update, in one transaction). */
export async function extendLeases(ctx: StoreContext, params: ExtendLeasesParams): Promise<LeaseKey[]> {
  const { tables, engine } = ctx;
  const kept: LeaseKey[] = [];
  const set = { state: TRANSITIONS.heartbeat.to, lease_expires_at: params.leaseExpiresAt, updated_at: params.now };
  for (let i = 0; i < params.items.length; i += BATCH_ROWS) {
    const keys = params.items.slice(i, i + BATCH_ROWS);
    const rows = await engine.writeStatement(ctx.db, async (db) => {
      const update = labelled(guardMany(db.updateTable(tables.jobs).set(set), "heartbeat", keys, engine.capabilities), "heartbeat");
      if (engine.capabilities.returning) return (await update.returning(["id", "lease_token"]).execute()) as { id: number | string; lease_token: string }[];
      // Without RETURNING: lock the rows that pass the fence, extend them, in one transaction.
      let pick = guardMany(db.selectFrom(tables.jobs).select(["id", "lease_token"]), "heartbeat", keys, engine.capabilities);
      if (engine.capabilities.rowLocks) pick = pick.forUpdate();
      const held = (await pick.execute()) as { id: number | string; lease_token: string }[];
      if (held.length > 0) await update.where("id", "in", held.map((r) => Number(r.id))).execute();
      return held;
    });
    for (const r of rows) kept.push({ id: Number(r.id), leaseToken: r.lease_token });
  }
  return kept;
}

/** See DocketAdapter.heldLeases: one read per BATCH_ROWS leases, fenced like a heartbeat. */
export async function heldLeases(ctx: StoreContext, params: HeldLeasesParams): Promise<LeaseKey[]> {
  const held: LeaseKey[] = [];
  for (let i = 0; i < params.items.length; i += BATCH_ROWS) {
    const keys = params.items.slice(i, i + BATCH_ROWS);
    const rows = (await guardMany(ctx.db.selectFrom(ctx.tables.jobs).select(["id", "lease_token"]), "heartbeat", keys, ctx.engine.capabilities).execute()) as {
      id: number | string;
      lease_token: string;
    }[];
    for (const r of rows) held.push({ id: Number(r.id), leaseToken: r.lease_token });
  }
  return held;
}
