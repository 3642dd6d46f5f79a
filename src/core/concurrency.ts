import { InvalidArgumentError } from "./errors.ts";
import { shown } from "./shown.ts";
import { checkKeys, checkObject, validateInteger, validateName } from "./validate.ts";

/** What happens to a job whose concurrency key is full when it is admitted. */
export const ON_CONFLICT = ["block", "discard"] as const;
export type OnConflict = (typeof ON_CONFLICT)[number];

/**
 * A concurrency key: at most `limit` jobs with this key are admitted (ready
 * or running) at once. A running job keeps its slot exactly as long as its
 * lease lives.
 */
export interface ConcurrencySpec {
  key: string;
  limit: number;
  onConflict: OnConflict;
}

export const MAX_KEY_LIMIT = 1_000_000;
/** Largest accepted per-queue or per-task cap. */
export const MAX_CAP = 1_000_000;

export function validateConcurrency(value: unknown, at: string): ConcurrencySpec {
  if (value === undefined) throw new InvalidArgumentError(`${at}concurrency must be an object { key, limit, onConflict }, got undefined`);
  checkObject(value, `${at}concurrency`, " { key, limit, onConflict }");
  checkKeys(value, ["key", "limit", "onConflict"], `${at}concurrency`);
  const v = value as Partial<ConcurrencySpec>;
  const key = validateName(v.key, `${at}concurrency.key`);
  const limit = validateInteger(v.limit, `${at}concurrency.limit`, 1, MAX_KEY_LIMIT);
  const onConflict = v.onConflict ?? "block";
  if (!(ON_CONFLICT as readonly string[]).includes(onConflict)) {
    throw new InvalidArgumentError(`${at}concurrency.onConflict must be one of ${ON_CONFLICT.join(", ")}, got ${shown(onConflict)}`);
  }
  return { key, limit, onConflict };
}

/** A cap is a positive integer, or null for "no cap". */
export function validateCap(value: unknown, what: string): number | null {
  if (value === null) return null;
  return validateInteger(value, what, 1, MAX_CAP);
}

/**
 * Pure admission: where a job goes when its key has `holders` admitted jobs
 * and limit `limit`. Adapters call it inside the transaction that holds the
 * key's lock.
 */
export function admit(holders: number, limit: number, onConflict: OnConflict): "ready" | "blocked" | "discarded" {
  if (holders < limit) return "ready";
  return onConflict === "block" ? "blocked" : "discarded";
}

/** The reason stored on a job discarded because its key `key` (limit `limit`) was full when it was admitted. */
export function discardReason(key: string, limit: number): string {
  return `discarded: concurrency key ${JSON.stringify(key)} is full (limit ${limit})`;
}

/** Free slots of a key, never negative. */
export function freeSlots(limit: number, holders: number): number {
  return Math.max(0, limit - holders);
}

