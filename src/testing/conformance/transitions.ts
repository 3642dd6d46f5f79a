import assert from "node:assert/strict";
import type { SettledJob } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { JOB_STATES, type JobState } from "../../core/states.ts";
import { TRANSITIONS, TRANSITION_EVENTS, type TransitionEvent } from "../../core/transitions.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { LEASE_MS, claim, completeParents, jobInState, newJob, token } from "./helpers.ts";
import { extendLease, settleOne } from "../lease-writes.ts";

/**
 * Attempts `event` on `job` through the adapter, as the lease holder where
 * the job has a lease. Returns the record when the write won, else null.
 * For the expiry events the clock is first moved past the lease.
 */
async function attempt(t: CaseContext, event: TransitionEvent, job: JobRecord): Promise<SettledJob | null> {
  const a = t.adapter;
  const leaseToken = job.leaseToken ?? token();
  let now = t.clock.now();
  switch (event) {
    case "claim": {
      const claimed = await claim(t, 100);
      return claimed.find((c) => c.id === job.id) ?? null;
    }
    case "heartbeat":
      return (await extendLease(a, { id: job.id, leaseToken, now, leaseExpiresAt: now + 2 * LEASE_MS })) ? a.get({ id: job.id }) : null;
    case "complete":
      return settleOne(a, { kind: "complete", id: job.id, leaseToken, now });
    case "retry":
      return settleOne(a, { kind: "fail", id: job.id, leaseToken, now, error: "e", retryAt: now + 1000 });
    case "bury":
      return settleOne(a, { kind: "fail", id: job.id, leaseToken, now, error: "e", retryAt: null });
    case "release":
      return settleOne(a, { kind: "release", id: job.id, leaseToken, now });
    case "expireRetry":
    case "expireBury":
      now = t.clock.advance(LEASE_MS + 1);
      return a.expire({ id: job.id, leaseToken, now, error: "expired", retryAt: event === "expireRetry" ? now + 1000 : null });
    case "cancel":
      return a.cancel({ id: job.id, now });
    case "replay":
      return a.replay({ id: job.id, now });
    case "runNow":
      return a.runNow({ id: job.id, now });
    case "stage":
    case "stageBlocked":
    case "stageDiscard":
      // Admission of due jobs runs at the start of every claim; claim from a queue nobody uses.
      t.clock.advance(60_000);
      await a.claim({ queues: ["__no_such_queue__"], limit: 1, now: t.clock.now(), leaseToken: token(), leaseExpiresAt: t.clock.now() + LEASE_MS });
      return moved(t, job, event);
    case "debounce": {
      // A debounced enqueue merges only into a pending job that carries its key: give the job one, as stored.
      // Its own row is the one a merge may write; the job has no debounce key, so the enqueue stores a new job.
      const [merged] = await a.enqueue({ jobs: [{ ...newJob({ state: "scheduled", runAt: now + 1000 }), task: job.task, queue: job.queue, debounce: { key: `d${job.id}`, delayMs: 1000, maxWaitMs: null } }], now });
      return merged && merged.id === job.id ? merged : null;
    }
    case "unwait":
      await completeParents(t, job.id, now);
      return moved(t, job, event);
    case "unblock": {
      // Free the job's key by cancelling the jobs that hold its slots.
      if (job.concurrencyKey !== null) {
        for (const holder of await a.list({ limit: 1000 })) {
          if (holder.concurrencyKey === job.concurrencyKey && holder.id !== job.id && ["ready", "running"].includes(holder.state)) {
            await a.cancel({ id: holder.id, now });
          }
        }
      }
      return moved(t, job, event);
    }
  }
}

/** The job as it is now when `event` moved it to its target state, else null. */
async function moved(t: CaseContext, job: JobRecord, event: TransitionEvent): Promise<JobRecord | null> {
  const now = await t.adapter.get({ id: job.id });
  return now && now.state === TRANSITIONS[event].to && now.state !== job.state ? now : null;
}

/** Every legal move of the core table succeeds, and lands in the table's target state. */
function legalCases(): ConformanceCase[] {
  // stageBlocked and stageDiscard need a full key: covered by the key cases. debounce needs a job with a
  // debounce key (jobInState makes none): covered by the debounce cases.
  return TRANSITION_EVENTS.filter((e) => e !== "stageBlocked" && e !== "stageDiscard" && e !== "debounce").flatMap((event) =>
    TRANSITIONS[event].from.map((from: JobState) => ({
      name: `${event} › moves a ${from} job to ${TRANSITIONS[event].to}`,
      async run(t: CaseContext) {
        const job = await jobInState(t, from);
        const result = await attempt(t, event, job);
        assert.ok(result, `${event} on a ${from} job should win`);
        assert.equal(result.state, TRANSITIONS[event].to);
        assert.equal((await t.adapter.get({ id: job.id }))?.state, TRANSITIONS[event].to);
      },
    })),
  );
}

/** Every illegal predecessor: the write matches nothing and the job is unchanged. */
function illegalCases(): ConformanceCase[] {
  return TRANSITION_EVENTS.flatMap((event) =>
    JOB_STATES.filter((s) => !(TRANSITIONS[event].from as readonly JobState[]).includes(s)).map((from) => ({
      name: `${event} › does not move a ${from} job`,
      async run(t: CaseContext) {
        const job = await jobInState(t, from);
        const before = await t.adapter.get({ id: job.id });
        const result = await attempt(t, event, job);
        assert.equal(result, null, `${event} must not apply to a ${from} job`);
        assert.deepEqual(await t.adapter.get({ id: job.id }), before);
      },
    })),
  );
}

export const transitionCases: ConformanceCase[] = [...legalCases(), ...illegalCases()];
