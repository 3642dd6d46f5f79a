/**
 * Durable steps (`ctx.step(name, fn)`), as stored: a job's steps are one
 * JSON text, an array of `{ name, result, at }` in the order they were
 * recorded, written whole by the attempt that holds the job's lease
 * (DocketAdapter.recordStep, fenced by the lease token: a stale attempt
 * writes nothing). Nothing here reads storage.
 */
import { InvalidArgumentError } from "./errors.ts";
import { shown } from "./shown.ts";
import { validateName } from "./validate.ts";

/** One recorded step: its name, its function's result (JSON; null for undefined), and when it was recorded. */
export interface Step {
  name: string;
  result: unknown;
  at: number;
}

/** The steps of stored text (null: none), oldest first. */
export function readSteps(text: string | null): Step[] {
  if (text === null) return [];
  const parsed = JSON.parse(text) as unknown;
  return Array.isArray(parsed) ? (parsed as Step[]) : [];
}

/** `steps` and then `name` recorded with `resultText` (JSON text) at `at`; `steps` is left as it was. */
export function appendStep(steps: readonly Step[], name: string, resultText: string, at: number): Step[] {
  return [...steps, { name, result: JSON.parse(resultText) as unknown, at }];
}

/** The stored text after recording `name` with `resultText` (JSON text) at `at`. */
export function withStep(text: string | null, name: string, resultText: string, at: number): string {
  return JSON.stringify(appendStep(readSteps(text), name, resultText, at));
}

/** A step's name: a non-empty string of at most MAX_NAME_LENGTH characters; InvalidArgumentError otherwise. */
export function validateStepName(name: unknown): string {
  return validateName(name, "ctx.step: name");
}

/** The error of a second `ctx.step` with one name in one attempt (names are unique within a job). */
export function repeatedStep(name: string): InvalidArgumentError {
  return new InvalidArgumentError(`ctx.step: the step ${shown(name)} ran already in this attempt; step names must be unique within a job`);
}
