import type { Migration } from "../shared/kysely-adapter.ts";
import { stateCheck } from "../shared/ddl.ts";

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
  ];
}
