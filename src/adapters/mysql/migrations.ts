import type { Migration } from "../kysely/engine.ts";
import { stateCheck, waitingStateCheck } from "../kysely/ddl.ts";
import { WAKE_SLOTS } from "./wakes.ts";

/**
 * MySQL/MariaDB schema. MySQL has neither partial indexes nor transactional
 * DDL: the indexes lead with `state` instead, and each version is ONE
 * statement so a crash cannot leave a version half applied.
 */
export function migrations(prefix: string): readonly Migration[] {
  const jobs = `${prefix}jobs`;
  return [
    {
      version: 1,
      statements: [
        `CREATE TABLE ${jobs} (
          id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
          task VARCHAR(191) NOT NULL,
          queue VARCHAR(191) NOT NULL,
          payload LONGTEXT NOT NULL,
          state VARCHAR(16) NOT NULL,
          priority INT NOT NULL,
          run_at BIGINT NOT NULL,
          attempt INT NOT NULL,
          max_attempts INT NOT NULL,
          backoff TEXT NULL,
          lease_token VARCHAR(64) NULL,
          lease_expires_at BIGINT NULL,
          created_at BIGINT NOT NULL,
          updated_at BIGINT NOT NULL,
          finished_at BIGINT NULL,
          last_error LONGTEXT NULL,
          CONSTRAINT ${jobs}_task_nonempty CHECK (CHAR_LENGTH(task) > 0),
          CONSTRAINT ${jobs}_queue_nonempty CHECK (CHAR_LENGTH(queue) > 0),
          CONSTRAINT ${jobs}_payload_json CHECK (JSON_VALID(payload)),
          CONSTRAINT ${jobs}_backoff_json CHECK (backoff IS NULL OR JSON_VALID(backoff)),
          CONSTRAINT ${jobs}_state_valid CHECK (${stateCheck()}),
          CONSTRAINT ${jobs}_attempt_valid CHECK (attempt >= 0 AND max_attempts >= 1),
          CONSTRAINT ${jobs}_lease_iff_running CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
          INDEX ${jobs}_claim (state, queue, priority, run_at, id),
          INDEX ${jobs}_lease (state, lease_expires_at)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
      ],
    },
    {
      version: 2,
      statements: [
        `ALTER TABLE ${jobs}
          ADD COLUMN concurrency_key VARCHAR(191) NULL,
          ADD CONSTRAINT ${jobs}_key_nonempty CHECK (concurrency_key IS NULL OR CHAR_LENGTH(concurrency_key) > 0),
          ADD INDEX ${jobs}_key (concurrency_key, state, priority, run_at, id),
          ADD INDEX ${jobs}_running (state, task),
          ADD INDEX ${jobs}_due (state, run_at, id)`,
      ],
    },
    {
      version: 3,
      statements: [
        `CREATE TABLE ${prefix}concurrency_keys (
          name VARCHAR(191) NOT NULL PRIMARY KEY,
          max_holders INT NOT NULL,
          CONSTRAINT ${prefix}concurrency_keys_limit CHECK (max_holders >= 1)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
      ],
    },
    {
      version: 4,
      statements: [
        `CREATE TABLE ${prefix}queues (
          name VARCHAR(191) NOT NULL PRIMARY KEY,
          paused TINYINT NOT NULL DEFAULT 0,
          max_running INT NULL,
          CONSTRAINT ${prefix}queues_paused CHECK (paused IN (0, 1)),
          CONSTRAINT ${prefix}queues_cap CHECK (max_running IS NULL OR max_running >= 1)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
      ],
    },
    {
      version: 5,
      statements: [
        `CREATE TABLE ${prefix}tasks (
          name VARCHAR(191) NOT NULL PRIMARY KEY,
          max_running INT NULL,
          CONSTRAINT ${prefix}tasks_cap CHECK (max_running IS NULL OR max_running >= 1)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
      ],
    },
    {
      version: 6,
      statements: [
        `ALTER TABLE ${jobs}
          ADD COLUMN on_conflict VARCHAR(8) NULL,
          ADD COLUMN timeout_ms BIGINT NULL,
          ADD CONSTRAINT ${jobs}_on_conflict_valid CHECK (on_conflict IS NULL OR on_conflict IN ('block', 'discard')),
          ADD CONSTRAINT ${jobs}_timeout_valid CHECK (timeout_ms IS NULL OR timeout_ms >= 1)`,
      ],
    },
    {
      // SQLite's index fix (see its migration 7); MySQL's indexes already lead with state.
      version: 7,
      statements: [],
    },
    {
      // Retention: the purge pass finds finished jobs by state and age without reading the table.
      version: 8,
      statements: [`CREATE INDEX ${jobs}_finished ON ${jobs} (state, finished_at, id)`],
    },
    {
      // Idempotency keys: unique among the jobs that hold one (a UNIQUE index allows many NULLs).
      // A succeeded job's result and a running job's progress, as JSON text.
      version: 9,
      statements: [
        `ALTER TABLE ${jobs}
          ADD COLUMN idempotency_key VARCHAR(191) NULL,
          ADD COLUMN result LONGTEXT NULL,
          ADD COLUMN progress LONGTEXT NULL,
          ADD CONSTRAINT ${jobs}_idempotency_nonempty CHECK (idempotency_key IS NULL OR CHAR_LENGTH(idempotency_key) > 0),
          ADD UNIQUE INDEX ${jobs}_idempotency (idempotency_key)`,
      ],
    },
    {
      // Recurring jobs: one row per schedule; last_tick is the last tick fired (a compare-and-set decides each tick).
      version: 10,
      statements: [
        `CREATE TABLE ${prefix}schedules (
          name VARCHAR(191) NOT NULL PRIMARY KEY,
          cron VARCHAR(191) NOT NULL,
          timezone VARCHAR(64) NOT NULL,
          task VARCHAR(191) NOT NULL,
          queue VARCHAR(191) NOT NULL,
          payload LONGTEXT NOT NULL,
          options TEXT NOT NULL,
          last_tick BIGINT NOT NULL,
          created_at BIGINT NOT NULL,
          updated_at BIGINT NOT NULL,
          CONSTRAINT ${prefix}schedules_name_nonempty CHECK (CHAR_LENGTH(name) > 0)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
      ],
    },
    {
      // Tracing: the enqueuer's trace context (a W3C carrier as JSON), so an attempt's span links to the enqueue's.
      version: 11,
      statements: [`ALTER TABLE ${jobs} ADD COLUMN trace_context TEXT NULL`],
    },
    {
      // Who ran it and how it failed: the claiming worker's name, and the job's error history (a JSON array, appended by each failed attempt).
      version: 12,
      statements: [`ALTER TABLE ${jobs} ADD COLUMN worker VARCHAR(191) NULL, ADD COLUMN errors LONGTEXT NULL`],
    },
    {
      // Rate limits: a queue's and a task's limit beside its cap, a rate key's in a table of its own; each with
      // its log of starts inside the window (JSON [time, count] pairs, rewritten under the row's lock by the
      // claim that takes them). keyed_rate: the queue has held rate-keyed jobs (its claims apply the limits).
      version: 13,
      statements: [
        `ALTER TABLE ${prefix}queues ADD COLUMN rate_limit INT NULL, ADD COLUMN rate_period_ms BIGINT NULL, ADD COLUMN rate_starts LONGTEXT NULL,
          ADD COLUMN keyed_rate SMALLINT NOT NULL DEFAULT 0,
          ADD CONSTRAINT ${prefix}queues_keyed_rate CHECK (keyed_rate IN (0, 1)),
          ADD CONSTRAINT ${prefix}queues_rate CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL) AND (rate_limit IS NULL OR (rate_limit >= 1 AND rate_period_ms >= 1)))`,
        `ALTER TABLE ${prefix}tasks ADD COLUMN rate_limit INT NULL, ADD COLUMN rate_period_ms BIGINT NULL, ADD COLUMN rate_starts LONGTEXT NULL,
          ADD CONSTRAINT ${prefix}tasks_rate CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL) AND (rate_limit IS NULL OR (rate_limit >= 1 AND rate_period_ms >= 1)))`,
        `CREATE TABLE ${prefix}rate_keys (
          name VARCHAR(191) NOT NULL PRIMARY KEY,
          rate_limit INT NOT NULL,
          rate_period_ms BIGINT NOT NULL,
          rate_starts LONGTEXT NULL,
          CONSTRAINT ${prefix}rate_keys_name_nonempty CHECK (CHAR_LENGTH(name) > 0),
          CONSTRAINT ${prefix}rate_keys_limit CHECK (rate_limit >= 1 AND rate_period_ms >= 1)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
        `ALTER TABLE ${jobs} ADD COLUMN rate_key VARCHAR(191) NULL, ADD CONSTRAINT ${jobs}_rate_key_nonempty CHECK (rate_key IS NULL OR CHAR_LENGTH(rate_key) > 0)`,
      ],
    },
    {
      // Debounce: a job's debounce key, unique per queue and task among pending jobs. No partial indexes here:
      // the unique index is on a generated column that is the key while the job is pending (the states of the
      // core's DEBOUNCE_PENDING_STATES, written out) and NULL otherwise (a UNIQUE index allows many NULLs).
      // STORED, so the claim's state change rewrites it like any column.
      version: 14,
      statements: [
        `ALTER TABLE ${jobs}
          ADD COLUMN debounce_key VARCHAR(191) NULL,
          ADD COLUMN debounce_pending VARCHAR(191) AS (CASE WHEN state IN ('scheduled', 'ready', 'blocked') THEN debounce_key END) STORED,
          ADD CONSTRAINT ${jobs}_debounce_nonempty CHECK (debounce_key IS NULL OR CHAR_LENGTH(debounce_key) > 0),
          ADD UNIQUE INDEX ${jobs}_debounce_pending (queue, task, debounce_pending)`,
      ],
    },
    {
      // Fair sharing: a queue's fairness keys, each with its weight and turn state (served: where its last turn
      // ended; used: jobs taken of the turn under way; active: may have ready jobs, cleared by a claim only when
      // the key has no live job, set again by every enqueue and replay of the key). fair: the queue has held
      // fairness-keyed jobs (its claims serve its keys in round-robin). The index finds a key's ready jobs in claim order.
      version: 15,
      statements: [
        `ALTER TABLE ${prefix}queues ADD COLUMN fair SMALLINT NOT NULL DEFAULT 0, ADD CONSTRAINT ${prefix}queues_fair CHECK (fair IN (0, 1))`,
        `CREATE TABLE ${prefix}fair_keys (
          queue VARCHAR(191) NOT NULL,
          name VARCHAR(191) NOT NULL,
          weight INT NOT NULL,
          served BIGINT NOT NULL DEFAULT 0,
          used INT NOT NULL DEFAULT 0,
          active SMALLINT NOT NULL DEFAULT 1,
          PRIMARY KEY (queue, name),
          INDEX ${prefix}fair_keys_turn (queue, active, served, name),
          CONSTRAINT ${prefix}fair_keys_queue_nonempty CHECK (CHAR_LENGTH(queue) > 0),
          CONSTRAINT ${prefix}fair_keys_weight CHECK (weight >= 1 AND used >= 0 AND active IN (0, 1))
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
        `ALTER TABLE ${jobs} ADD COLUMN fair_key VARCHAR(191) NULL, ADD CONSTRAINT ${jobs}_fair_key_nonempty CHECK (fair_key IS NULL OR CHAR_LENGTH(fair_key) > 0),
          ADD INDEX ${jobs}_fair (state, queue, fair_key, priority, run_at, id)`,
      ],
    },
    {
      // Fair sharing by tags (core/fairness.ts): each job of a fair queue carries its tag, claims take a fair queue's
      // ready jobs in tag order (the index), and a key's served column is its last tag; fair_priorities: the queue
      // has held a fair job of a priority other than 0 (its claims order each key's jobs by priority). Keys are no
      // longer read in turn order: their index goes. used: the advance of the key's latest enqueue (sum of its jobs' steps),
      // carried into the upsert that moves served.
      version: 16,
      statements: [
        `ALTER TABLE ${prefix}queues ADD COLUMN fair_priorities SMALLINT NOT NULL DEFAULT 0, ADD CONSTRAINT ${prefix}queues_fair_priorities CHECK (fair_priorities IN (0, 1))`,
        `ALTER TABLE ${jobs} ADD COLUMN fair_tag BIGINT NULL, ADD INDEX ${jobs}_fair_tag (state, queue, fair_tag, id)`,
        `ALTER TABLE ${prefix}fair_keys DROP INDEX ${prefix}fair_keys_turn, MODIFY used BIGINT NOT NULL DEFAULT 0`,
      ],
    },
    {
      // When each rate limit next has room, written by a claim that leaves it with none: a job due before then
      // was held back by it, and its claim names the limit (JobRecord.delayedBy; OpenTelemetry spans).
      version: 17,
      statements: [
        `ALTER TABLE ${prefix}queues ADD COLUMN rate_held_until BIGINT NULL`,
        `ALTER TABLE ${prefix}tasks ADD COLUMN rate_held_until BIGINT NULL`,
        `ALTER TABLE ${prefix}rate_keys ADD COLUMN rate_held_until BIGINT NULL`,
      ],
    },
    {
      // Durable steps (ctx.step): a job's recorded steps as one JSON text, written whole by its lease holder.
      version: 18,
      statements: [`ALTER TABLE ${jobs} ADD COLUMN steps LONGTEXT NULL`],
    },
    {
      // Dependencies (EnqueueOptions.after): the waiting state; waiting_on, a waiting job's count of parents not yet
      // succeeded; has_children, set on a parent under its row lock when a child names it (so a write that ends it
      // without settling children misses it); one row per edge, read by parent when a parent ends.
      version: 19,
      statements: [
        `ALTER TABLE ${jobs} ADD COLUMN waiting_on INT NOT NULL DEFAULT 0, ADD COLUMN has_children TINYINT NOT NULL DEFAULT 0, DROP CONSTRAINT ${jobs}_state_valid, ADD CONSTRAINT ${jobs}_state_valid CHECK (${waitingStateCheck()})`,
        `CREATE TABLE ${prefix}job_deps (child_id BIGINT NOT NULL, parent_id BIGINT NOT NULL, PRIMARY KEY (child_id, parent_id), INDEX ${prefix}job_deps_parent (parent_id, child_id)) ENGINE=InnoDB`,
      ],
    },
    {
      // Wake-ups across processes (wakes.ts): WAKE_SLOTS counters, bumped after whatever makes a job ready or due
      // commits, and summed by idle processes every few tens of ms. One statement: the table and its rows together.
      version: 20,
      statements: [
        `CREATE TABLE ${prefix}wakes (slot SMALLINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB
          SELECT s.slot, 0 AS n FROM (${Array.from({ length: WAKE_SLOTS }, (_, k) => `SELECT ${k} AS slot`).join(" UNION ALL ")}) AS s`,
      ],
    },
    {
      // Galera Cluster (guard-writes.ts): guard_seq, bumped where a transaction relies on a row's lock, on the rows
      // that guard (control rows, keys, parents). The unique index of pending debounce keys on ONE column: a
      // composite unique index whose last column is NULL (every job without a debounce key) certifies as one key per
      // queue and task, so concurrent enqueues on different servers conflicted; NULL in a one-column index does not.
      // Each part is length-prefixed, so no two (queue, task, key) triples spell the same slot. The lookup keeps its
      // index, no longer unique.
      version: 21,
      statements: [
        `ALTER TABLE ${jobs} ADD COLUMN guard_seq BIGINT NOT NULL DEFAULT 0,
          ADD COLUMN debounce_slot VARCHAR(600) AS (CASE WHEN state IN ('scheduled', 'ready', 'blocked') AND debounce_key IS NOT NULL
            THEN CONCAT(CHAR_LENGTH(queue), ':', queue, ':', CHAR_LENGTH(task), ':', task, ':', debounce_key) END) STORED,
          DROP INDEX ${jobs}_debounce_pending,
          ADD INDEX ${jobs}_debounce_lookup (queue, task, debounce_pending),
          ADD UNIQUE INDEX ${jobs}_debounce_slot (debounce_slot)`,
        `ALTER TABLE ${prefix}queues ADD COLUMN guard_seq BIGINT NOT NULL DEFAULT 0`,
        `ALTER TABLE ${prefix}tasks ADD COLUMN guard_seq BIGINT NOT NULL DEFAULT 0`,
        `ALTER TABLE ${prefix}concurrency_keys ADD COLUMN guard_seq BIGINT NOT NULL DEFAULT 0`,
        `ALTER TABLE ${prefix}rate_keys ADD COLUMN guard_seq BIGINT NOT NULL DEFAULT 0`,
      ],
    },
    {
      // Job.startedAt: when the latest attempt started (the claim's time), written by every claim; NULL before the first.
      version: 22,
      statements: [`ALTER TABLE ${jobs} ADD COLUMN started_at BIGINT NULL`],
    },
    {
      // The worker registry (DocketAdapter.putWorker): one row per running worker, written only by it.
      version: 23,
      statements: [
        `CREATE TABLE ${prefix}workers (id VARCHAR(191) NOT NULL PRIMARY KEY, name VARCHAR(191) NOT NULL, host VARCHAR(255) NOT NULL,
          pid INT NOT NULL, queues TEXT NOT NULL, concurrency INT NOT NULL, started_at BIGINT NOT NULL, heartbeat_at BIGINT NOT NULL,
          expires_at BIGINT NOT NULL, jobs_in_hand INT NOT NULL, INDEX ${prefix}workers_expiry (expires_at)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
      ],
    },
    {
      // Schedules pause (Schedules.pause): a paused schedule's tick does not pass fireSchedule's compare-and-set.
      version: 24,
      statements: [`ALTER TABLE ${prefix}schedules ADD COLUMN paused TINYINT NOT NULL DEFAULT 0`],
    },
    {
      // The ready index (Engine.readyQueueColumn): ready_queue is the job's queue while it is ready and NULL otherwise,
      // so a queue's ready entries are followed in the index by its other priorities and then by the next queue's,
      // never by the entries of the states after 'ready' (the claim index's order). A floored window read that finds
      // fewer rows than its LIMIT scans on past its range's end until a live entry: under a held snapshot, through
      // every delete-marked 'running' entry since (bench/results/session52.txt). STORED, as migration 14's.
      version: 25,
      statements: [
        `ALTER TABLE ${jobs} ADD COLUMN ready_queue VARCHAR(191) AS (CASE WHEN state = 'ready' THEN queue END) STORED,
          ADD INDEX ${jobs}_ready (ready_queue, priority, run_at, id)`,
      ],
    },
  ];
}
