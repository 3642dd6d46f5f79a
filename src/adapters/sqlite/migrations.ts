import type { Migration } from "../shared/kysely-adapter.ts";
import { stateCheck, stateIn } from "../shared/ddl.ts";

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
  ];
}
