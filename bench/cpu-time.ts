/**
 * CPU time from /proc (Linux), for a benchmark's look at where a 2-core
 * machine's time went (BENCH_DEBUG): the database server's processes, this
 * process, and worker processes. Not a measurement of record; null where
 * /proc is not readable.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Summed user + system CPU seconds of every process whose command name matches `name`, or null without /proc. */
export function cpuSecondsOf(name: RegExp): number | null {
  let ticks = 0;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return null;
  }
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (!name.test(stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")))) continue;
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // utime, stime, cutime, cstime (fields 14-17 of proc(5)), in clock ticks (100 a second on Linux).
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return ticks / 100;
}

/** The database servers' process names (PostgreSQL's backends and MariaDB's server). */
export const SERVER_PROCESSES = /^(postgres|mariadbd|mysqld)$/;
