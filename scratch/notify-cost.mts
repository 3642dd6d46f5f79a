// Scratch probe: server CPU per single-row autocommit insert, with/without pg_notify, with L listeners.
import pg from "pg";
import { cpuSecondsOf, SERVER_PROCESSES } from "../bench/cpu-time.ts";
const url = "postgres://postgres@127.0.0.1:5432/postgres";
const admin = new pg.Client(url); await admin.connect();
await admin.query("drop database if exists notifyprobe"); await admin.query("create database notifyprobe"); await admin.end();
const durl = "postgres://postgres@127.0.0.1:5432/notifyprobe";
const setup = new pg.Client(durl); await setup.connect();
await setup.query("create table t (id bigserial primary key, queue text, payload jsonb, state text, run_at bigint)");
await setup.query("create index on t (state, queue, run_at, id)");
await setup.end();
const pool = new pg.Pool({ connectionString: durl, max: 20 });
async function round(listeners: number, notify: boolean, n = 3000) {
  const ls: pg.Client[] = [];
  let got = 0;
  for (let i = 0; i < listeners; i++) { const c = new pg.Client(durl); await c.connect(); c.on("notification", () => got++); await c.query("listen ch"); ls.push(c); }
  const sqlText = notify
    ? "with i as (insert into t (queue, payload, state, run_at) values ($1, $2, 'ready', 0) returning *) select i.*, pg_notify('ch', 'rq') from i"
    : "insert into t (queue, payload, state, run_at) values ($1, $2, 'ready', 0) returning *";
  const s0 = cpuSecondsOf(SERVER_PROCESSES)!; const c0 = process.cpuUsage(); const t0 = performance.now();
  let k = 0;
  await Promise.all(Array.from({ length: 20 }, async () => { while (k++ < n) await pool.query({ name: notify ? "n" : "p", text: sqlText, values: ["q", { a: 1 }] }); }));
  const ms = performance.now() - t0; const s = cpuSecondsOf(SERVER_PROCESSES)! - s0; const c = process.cpuUsage(c0);
  await new Promise((r) => setTimeout(r, 300));
  for (const l of ls) await l.end();
  console.log(`listeners ${listeners} notify ${notify}: ${(n / ms * 1000).toFixed(0)}/s server ${(s / n * 1e6).toFixed(0)} us/insert client ${((c.user + c.system) / n).toFixed(0)} us/insert delivered ${got}`);
}
for (let r = 0; r < 2; r++) for (const [l, nf] of [[0, false], [0, true], [4, true], [4, false]] as const) await round(l, nf);
await pool.end();
