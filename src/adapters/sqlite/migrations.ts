import type { Migration } from "../kysely/engine.ts";
import { stateCheck, stateIn, waitingStateCheck } from "../kysely/ddl.ts";

/** SQLite schema. Times are INTEGER epoch ms; SQLite has no date type. */
export function migrations(prefix: string): readonly Migration[] {
  const jobs = `${prefix}jobs`;
  return [
    {
      version: 1,
      statements: [
        `CREATE TABLE ${jobs} (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          task TEXT NOT NULL CHECK (length(task) > 0),
          queue TEXT NOT NULL CHECK (length(queue) > 0),
          payload TEXT NOT NULL CHECK (json_valid(payload)),
          state TEXT NOT NULL CHECK (${stateCheck()}),
          priority INTEGER NOT NULL,
          run_at INTEGER NOT NULL,
          attempt INTEGER NOT NULL CHECK (attempt >= 0),
          max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
          backoff TEXT CHECK (backoff IS NULL OR json_valid(backoff)),
          lease_token TEXT,
          lease_expires_at INTEGER,
          created_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL,
          finished_at INTEGER,
          last_error TEXT,
          CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL))
        )`,
        `CREATE INDEX ${jobs}_claim ON ${jobs} (queue, priority, run_at, id) WHERE ${stateIn(["ready", "scheduled"])}`,
        `CREATE INDEX ${jobs}_lease ON ${jobs} (lease_expires_at) WHERE state = 'running'`,
      ],
    },
    {
      version: 2,
      statements: [
        `ALTER TABLE ${jobs} ADD COLUMN concurrency_key TEXT CHECK (concurrency_key IS NULL OR length(concurrency_key) > 0)`,
        `CREATE INDEX ${jobs}_key ON ${jobs} (concurrency_key, state, priority, run_at, id) WHERE concurrency_key IS NOT NULL`,
        `CREATE INDEX ${jobs}_running ON ${jobs} (queue, task) WHERE state = 'running'`,
        `CREATE INDEX ${jobs}_due ON ${jobs} (run_at, id) WHERE state = 'scheduled'`,
      ],
    },
    {
      version: 3,
      statements: [`CREATE TABLE ${prefix}concurrency_keys (name TEXT PRIMARY KEY, max_holders INTEGER NOT NULL CHECK (max_holders >= 1))`],
    },
    {
      version: 4,
      statements: [
        `CREATE TABLE ${prefix}queues (
          name TEXT PRIMARY KEY,
          paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
          max_running INTEGER CHECK (max_running IS NULL OR max_running >= 1)
        )`,
      ],
    },
    {
      version: 5,
      statements: [`CREATE TABLE ${prefix}tasks (name TEXT PRIMARY KEY, max_running INTEGER CHECK (max_running IS NULL OR max_running >= 1))`],
    },
    {
      version: 6,
      statements: [
        `ALTER TABLE ${jobs} ADD COLUMN on_conflict TEXT CHECK (on_conflict IS NULL OR on_conflict IN ('block', 'discard'))`,
        `ALTER TABLE ${jobs} ADD COLUMN timeout_ms INTEGER CHECK (timeout_ms IS NULL OR timeout_ms >= 1)`,
      ],
    },
    {
      // SQLite uses a partial index only when it can prove the query implies the index's
      // WHERE, which it cannot for a bound parameter (`state IN (?)`): the claim, due and
      // lease queries scanned the whole table. State-leading indexes serve them at every size.
      version: 7,
      statements: [
        `CREATE INDEX ${jobs}_claim_by_state ON ${jobs} (state, queue, priority, run_at, id)`,
        `CREATE INDEX ${jobs}_due_by_state ON ${jobs} (state, concurrency_key, run_at, id)`,
        `CREATE INDEX ${jobs}_lease_by_state ON ${jobs} (state, lease_expires_at, id)`,
        `DROP INDEX ${jobs}_claim`,
        `DROP INDEX ${jobs}_due`,
        `DROP INDEX ${jobs}_lease`,
        // Fixed planner statistics (SQLite's documented way to make plans stable): without them
        // SQLite guesses `state = ?` is selective and runs the claim's `UPDATE … WHERE id IN (…)
        // AND state IN (?)` through a state index, reading every ready job, instead of by rowid.
        // A later ANALYZE replaces them with measured ones, which lead to the same plans.
        `ANALYZE sqlite_schema`,
        `DELETE FROM sqlite_stat1 WHERE tbl = '${jobs}'`,
        `INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
          ('${jobs}', '${jobs}_claim_by_state', '1000000 200000 50000 5000 10 1'),
          ('${jobs}', '${jobs}_due_by_state', '1000000 200000 1000 10 1'),
          ('${jobs}', '${jobs}_lease_by_state', '1000000 200000 10 1')`,
        `ANALYZE sqlite_schema`,
      ],
    },
    {
      // Retention: the purge pass finds finished jobs by state and age without reading the table.
      version: 8,
      statements: [
        `CREATE INDEX ${jobs}_finished_by_state ON ${jobs} (state, finished_at, id)`,
        `INSERT OR REPLACE INTO sqlite_stat1 (tbl, idx, stat) VALUES ('${jobs}', '${jobs}_finished_by_state', '1000000 200000 10 1')`,
        `ANALYZE sqlite_schema`,
      ],
    },
    {
      // Idempotency keys: unique among the jobs that hold one; a partial index, so jobs without a key cost nothing.
      // A succeeded job's result and a running job's progress, as JSON text.
      version: 9,
      statements: [
        `ALTER TABLE ${jobs} ADD COLUMN idempotency_key TEXT CHECK (length(idempotency_key) > 0)`,
        `ALTER TABLE ${jobs} ADD COLUMN result TEXT`,
        `ALTER TABLE ${jobs} ADD COLUMN progress TEXT`,
        `CREATE UNIQUE INDEX ${jobs}_idempotency ON ${jobs} (idempotency_key) WHERE idempotency_key IS NOT NULL`,
      ],
    },
    {
      // Recurring jobs: one row per schedule; last_tick is the last tick fired (a compare-and-set decides each tick).
      version: 10,
      statements: [
        `CREATE TABLE ${prefix}schedules (
          name TEXT PRIMARY KEY CHECK (length(name) > 0),
          cron TEXT NOT NULL,
          timezone TEXT NOT NULL,
          task TEXT NOT NULL,
          queue TEXT NOT NULL,
          payload TEXT NOT NULL,
          options TEXT NOT NULL,
          last_tick INTEGER NOT NULL,
          created_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL
        )`,
      ],
    },
    {
      // Tracing: the enqueuer's trace context (a W3C carrier as JSON), so an attempt's span links to the enqueue's.
      version: 11,
      statements: [`ALTER TABLE ${jobs} ADD COLUMN trace_context TEXT`],
    },
    {
      // Who ran it and how it failed: the claiming worker's name, and the job's error history (a JSON array, appended by each failed attempt).
      version: 12,
      statements: [`ALTER TABLE ${jobs} ADD COLUMN worker TEXT`, `ALTER TABLE ${jobs} ADD COLUMN errors TEXT`],
    },
    {
      // Fewer index writes per state change. SQLite rewrites an entry of every index whose columns an UPDATE
      // changes: with state leading four whole-table indexes, a claim and an outcome each rewrote four entries.
      // The due, lease and retention indexes hold only the rows they serve: scheduled jobs (the due queries
      // name the state as a literal, which SQLite needs to prove a partial index applies), and rows with a
      // lease expiry or a finish time (implied by the `lease_expires_at <= ?` and `finished_at <= ?` / `>= ?`
      // their queries compare). A claim now writes two small entries there, an outcome three.
      version: 13,
      statements: [
        `CREATE INDEX ${jobs}_due_scheduled ON ${jobs} (concurrency_key, run_at, id) WHERE state = 'scheduled'`,
        `CREATE INDEX ${jobs}_lease_held ON ${jobs} (state, lease_expires_at, id) WHERE lease_expires_at IS NOT NULL`,
        `CREATE INDEX ${jobs}_finished_at ON ${jobs} (state, finished_at, id) WHERE finished_at IS NOT NULL`,
        `DROP INDEX ${jobs}_due_by_state`,
        `DROP INDEX ${jobs}_lease_by_state`,
        `DROP INDEX ${jobs}_finished_by_state`,
        `DELETE FROM sqlite_stat1 WHERE tbl = '${jobs}' AND idx IN ('${jobs}_due_by_state', '${jobs}_lease_by_state', '${jobs}_finished_by_state')`,
        `INSERT OR REPLACE INTO sqlite_stat1 (tbl, idx, stat) VALUES
          ('${jobs}', '${jobs}_due_scheduled', '100000 1000 10 1'),
          ('${jobs}', '${jobs}_lease_held', '10000 10000 10 1'),
          ('${jobs}', '${jobs}_finished_at', '1000000 200000 10 1')`,
        `ANALYZE sqlite_schema`,
      ],
    },
    {
      // Rate limits: a queue's and a task's limit beside its cap, a rate key's in a table of its own; each with
      // its log of starts inside the window (JSON [time, count] pairs, rewritten under the row's lock by the
      // claim that takes them). keyed_rate: the queue has held rate-keyed jobs (its claims apply the limits).
      version: 14,
      statements: [
        `ALTER TABLE ${prefix}queues ADD COLUMN rate_limit INTEGER CHECK (rate_limit IS NULL OR rate_limit >= 1)`,
        `ALTER TABLE ${prefix}queues ADD COLUMN rate_period_ms INTEGER CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL) AND (rate_period_ms IS NULL OR rate_period_ms >= 1))`,
        `ALTER TABLE ${prefix}queues ADD COLUMN rate_starts TEXT`,
        `ALTER TABLE ${prefix}queues ADD COLUMN keyed_rate INTEGER NOT NULL DEFAULT 0 CHECK (keyed_rate IN (0, 1))`,
        `ALTER TABLE ${prefix}tasks ADD COLUMN rate_limit INTEGER CHECK (rate_limit IS NULL OR rate_limit >= 1)`,
        `ALTER TABLE ${prefix}tasks ADD COLUMN rate_period_ms INTEGER CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL) AND (rate_period_ms IS NULL OR rate_period_ms >= 1))`,
        `ALTER TABLE ${prefix}tasks ADD COLUMN rate_starts TEXT`,
        `CREATE TABLE ${prefix}rate_keys (
          name TEXT PRIMARY KEY CHECK (length(name) > 0),
          rate_limit INTEGER NOT NULL CHECK (rate_limit >= 1),
          rate_period_ms INTEGER NOT NULL CHECK (rate_period_ms >= 1),
          rate_starts TEXT
        )`,
        `ALTER TABLE ${jobs} ADD COLUMN rate_key TEXT CHECK (rate_key IS NULL OR length(rate_key) > 0)`,
      ],
    },
    {
      // Debounce: a job's debounce key, unique per queue and task among pending jobs (the states of the core's
      // DEBOUNCE_PENDING_STATES, written out: a shipped migration never changes), so a key has at most one pending job.
      version: 15,
      statements: [
        `ALTER TABLE ${jobs} ADD COLUMN debounce_key TEXT CHECK (debounce_key IS NULL OR length(debounce_key) > 0)`,
        `CREATE UNIQUE INDEX ${jobs}_debounce_pending ON ${jobs} (queue, task, debounce_key) WHERE debounce_key IS NOT NULL AND state IN ('scheduled', 'ready', 'blocked')`,
      ],
    },
    {
      // Fair sharing: a queue's fairness keys, each with its weight and turn state (served: where its last turn
      // ended; used: jobs taken of the turn under way; active: may have ready jobs, cleared by a claim only when
      // the key has no live job, set again by every enqueue and replay of the key). fair: the queue has held
      // fairness-keyed jobs (its claims serve its keys in round-robin). The index finds a key's ready jobs in claim order;
      // partial, so that jobs without a fairness key (every job of most queues) cost no entry: the implicit key's
      // jobs are read through the claim index.
      version: 16,
      statements: [
        `ALTER TABLE ${prefix}queues ADD COLUMN fair INTEGER NOT NULL DEFAULT 0 CHECK (fair IN (0, 1))`,
        `CREATE TABLE ${prefix}fair_keys (
          queue TEXT NOT NULL CHECK (length(queue) > 0),
          name TEXT NOT NULL,
          weight INTEGER NOT NULL CHECK (weight >= 1),
          served INTEGER NOT NULL DEFAULT 0,
          used INTEGER NOT NULL DEFAULT 0 CHECK (used >= 0),
          active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
          PRIMARY KEY (queue, name)
        )`,
        `CREATE INDEX ${prefix}fair_keys_turn ON ${prefix}fair_keys (queue, active, served, name)`,
        `ALTER TABLE ${jobs} ADD COLUMN fair_key TEXT CHECK (fair_key IS NULL OR length(fair_key) > 0)`,
        `CREATE INDEX ${jobs}_fair ON ${jobs} (queue, fair_key, priority, run_at, id) WHERE state = 'ready' AND fair_key IS NOT NULL`,
      ],
    },
    {
      // Fair sharing by tags (core/fairness.ts): each job of a fair queue carries its tag, claims take a fair queue's
      // ready jobs in tag order (the index), and a key's served column is its last tag; fair_priorities: the queue
      // has held a fair job of a priority other than 0 (its claims order each key's jobs by priority). Keys are no
      // longer read in turn order: their index goes. used: the advance of the key's latest enqueue (sum of its jobs' steps),
      // carried into the upsert that moves served.
      version: 17,
      statements: [
        `ALTER TABLE ${prefix}queues ADD COLUMN fair_priorities INTEGER NOT NULL DEFAULT 0 CHECK (fair_priorities IN (0, 1))`,
        `ALTER TABLE ${jobs} ADD COLUMN fair_tag INTEGER`,
        `CREATE INDEX ${jobs}_fair_tag ON ${jobs} (queue, fair_tag, id) WHERE state = 'ready' AND fair_tag IS NOT NULL`,
        `DROP INDEX ${prefix}fair_keys_turn`,
      ],
    },
    {
      // When each rate limit next has room, written by a claim that leaves it with none: a job due before then
      // was held back by it, and its claim names the limit (JobRecord.delayedBy; OpenTelemetry spans).
      version: 18,
      statements: [
        `ALTER TABLE ${prefix}queues ADD COLUMN rate_held_until INTEGER`,
        `ALTER TABLE ${prefix}tasks ADD COLUMN rate_held_until INTEGER`,
        `ALTER TABLE ${prefix}rate_keys ADD COLUMN rate_held_until INTEGER`,
      ],
    },
    {
      // Durable steps (ctx.step): a job's recorded steps as one JSON text, written whole by its lease holder.
      version: 19,
      statements: [`ALTER TABLE ${jobs} ADD COLUMN steps TEXT`],
    },
    {
      // Dependencies (EnqueueOptions.after): the waiting state; waiting_on, a waiting job's count of parents not yet
      // succeeded; has_children, set on a parent when a child names it (so a write that ends it without settling
      // children misses it); one row per edge, read by parent when a parent ends. SQLite cannot alter a CHECK: the
      // jobs table is rebuilt (its definition as versions 1-19 left it, the state check widened), its rows copied,
      // its id sequence carried over (AUTOINCREMENT: ids of purged jobs are never reused), its indexes re-created
      // with their planner statistics.
      version: 20,
      statements: [
        `CREATE TABLE ${jobs}_v20 (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          task TEXT NOT NULL CHECK (length(task) > 0),
          queue TEXT NOT NULL CHECK (length(queue) > 0),
          payload TEXT NOT NULL CHECK (json_valid(payload)),
          state TEXT NOT NULL CHECK (${waitingStateCheck()}),
          priority INTEGER NOT NULL,
          run_at INTEGER NOT NULL,
          attempt INTEGER NOT NULL CHECK (attempt >= 0),
          max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
          backoff TEXT CHECK (backoff IS NULL OR json_valid(backoff)),
          lease_token TEXT,
          lease_expires_at INTEGER,
          created_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL,
          finished_at INTEGER,
          last_error TEXT,
          concurrency_key TEXT CHECK (concurrency_key IS NULL OR length(concurrency_key) > 0),
          on_conflict TEXT CHECK (on_conflict IS NULL OR on_conflict IN ('block', 'discard')),
          timeout_ms INTEGER CHECK (timeout_ms IS NULL OR timeout_ms >= 1),
          idempotency_key TEXT CHECK (length(idempotency_key) > 0),
          result TEXT,
          progress TEXT,
          trace_context TEXT,
          worker TEXT,
          errors TEXT,
          rate_key TEXT CHECK (rate_key IS NULL OR length(rate_key) > 0),
          debounce_key TEXT CHECK (debounce_key IS NULL OR length(debounce_key) > 0),
          fair_key TEXT CHECK (fair_key IS NULL OR length(fair_key) > 0),
          fair_tag INTEGER,
          steps TEXT,
          waiting_on INTEGER NOT NULL DEFAULT 0 CHECK (waiting_on >= 0),
          has_children INTEGER NOT NULL DEFAULT 0 CHECK (has_children IN (0, 1)),
          CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL))
        )`,
        `INSERT INTO ${jobs}_v20 (id, task, queue, payload, state, priority, run_at, attempt, max_attempts, backoff, lease_token, lease_expires_at, created_at, updated_at, finished_at, last_error, concurrency_key, on_conflict, timeout_ms, idempotency_key, result, progress, trace_context, worker, errors, rate_key, debounce_key, fair_key, fair_tag, steps) SELECT id, task, queue, payload, state, priority, run_at, attempt, max_attempts, backoff, lease_token, lease_expires_at, created_at, updated_at, finished_at, last_error, concurrency_key, on_conflict, timeout_ms, idempotency_key, result, progress, trace_context, worker, errors, rate_key, debounce_key, fair_key, fair_tag, steps FROM ${jobs}`,
        `DELETE FROM sqlite_sequence WHERE name = '${jobs}_v20'`,
        `INSERT INTO sqlite_sequence (name, seq) SELECT '${jobs}_v20', seq FROM sqlite_sequence WHERE name = '${jobs}'`,
        // The fixed planner statistics of versions 7, 8 and 13 go with the table on DROP: kept aside, restored below.
        `UPDATE sqlite_stat1 SET tbl = '${jobs}_v20' WHERE tbl = '${jobs}'`,
        `DROP TABLE ${jobs}`,
        `ALTER TABLE ${jobs}_v20 RENAME TO ${jobs}`,
        `CREATE INDEX ${jobs}_key ON ${jobs} (concurrency_key, state, priority, run_at, id) WHERE concurrency_key IS NOT NULL`,
        `CREATE INDEX ${jobs}_running ON ${jobs} (queue, task) WHERE state = 'running'`,
        `CREATE INDEX ${jobs}_claim_by_state ON ${jobs} (state, queue, priority, run_at, id)`,
        `CREATE UNIQUE INDEX ${jobs}_idempotency ON ${jobs} (idempotency_key) WHERE idempotency_key IS NOT NULL`,
        `CREATE INDEX ${jobs}_due_scheduled ON ${jobs} (concurrency_key, run_at, id) WHERE state = 'scheduled'`,
        `CREATE INDEX ${jobs}_lease_held ON ${jobs} (state, lease_expires_at, id) WHERE lease_expires_at IS NOT NULL`,
        `CREATE INDEX ${jobs}_finished_at ON ${jobs} (state, finished_at, id) WHERE finished_at IS NOT NULL`,
        `CREATE UNIQUE INDEX ${jobs}_debounce_pending ON ${jobs} (queue, task, debounce_key) WHERE debounce_key IS NOT NULL AND state IN ('scheduled', 'ready', 'blocked')`,
        `CREATE INDEX ${jobs}_fair ON ${jobs} (queue, fair_key, priority, run_at, id) WHERE state = 'ready' AND fair_key IS NOT NULL`,
        `CREATE INDEX ${jobs}_fair_tag ON ${jobs} (queue, fair_tag, id) WHERE state = 'ready' AND fair_tag IS NOT NULL`,
        `UPDATE sqlite_stat1 SET tbl = '${jobs}' WHERE tbl = '${jobs}_v20'`,
        `ANALYZE sqlite_schema`,
        `CREATE TABLE ${prefix}job_deps (child_id INTEGER NOT NULL, parent_id INTEGER NOT NULL, PRIMARY KEY (child_id, parent_id)) WITHOUT ROWID`,
        `CREATE INDEX ${prefix}job_deps_parent ON ${prefix}job_deps (parent_id, child_id)`,
      ],
    },
    {
      // Job.startedAt: when the latest attempt started (the claim's time), written by every claim; NULL before the first.
      version: 21,
      statements: [`ALTER TABLE ${jobs} ADD COLUMN started_at INTEGER`],
    },
    {
      // The worker registry (DocketAdapter.putWorker): one row per running worker, written only by it.
      version: 22,
      statements: [
        `CREATE TABLE ${prefix}workers (id TEXT PRIMARY KEY, name TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, queues TEXT NOT NULL,
          concurrency INTEGER NOT NULL, started_at INTEGER NOT NULL, heartbeat_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, jobs_in_hand INTEGER NOT NULL)`,
        `CREATE INDEX ${prefix}workers_expiry ON ${prefix}workers (expires_at)`,
      ],
    },
    {
      // Schedules pause (Schedules.pause): a paused schedule's tick does not pass fireSchedule's compare-and-set.
      version: 23,
      statements: [`ALTER TABLE ${prefix}schedules ADD COLUMN paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1))`],
    },
  ];
}
