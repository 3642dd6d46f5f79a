import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import { InvalidArgumentError, InvalidPayloadError, NotFoundError, UnknownTaskError } from "../../core/errors.ts";
import type { ConformanceCase } from "../harness.ts";

const MINUTE = 60_000;

/** Recurring jobs: cron schedules, their ticks, time zones and definitions. */
export const scheduleCases: ConformanceCase[] = [
  {
    name: "schedules › a tick fires once: the pass at or after it enqueues one job due at the tick; later passes, and another docket racing it, add none",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 30));
      const d = t.docket();
      const s = await d.schedules.put("report", { cron: "*/5 * * * *", task: "report", payload: { kind: "daily" }, options: { queue: "reports", priority: 3 } });
      assert.equal(s.nextTickAt, Date.UTC(2030, 0, 1, 10, 5));
      assert.deepEqual(await d.schedules.runDue(), [], "the tick at creation (10:00) does not fire");
      t.clock.set(Date.UTC(2030, 0, 1, 10, 5, 0));
      const other = new Docket({ adapter: await t.connect(), clock: t.clock });
      const [a, b] = await Promise.all([d.schedules.runDue(), other.schedules.runDue()]);
      const fired = [...a, ...b];
      assert.equal(fired.length, 1, "one of the two passes fires the tick");
      const job = fired[0]!.job;
      assert.deepEqual([job.task, job.queue, job.priority, job.runAt, job.state, job.payload], ["report", "reports", 3, Date.UTC(2030, 0, 1, 10, 5), "ready", { kind: "daily" }]);
      t.clock.advance(MINUTE);
      assert.deepEqual(await d.schedules.runDue(), []);
      assert.equal((await d.list({ queue: "reports" })).length, 1);
      const [listed] = await d.schedules.list();
      assert.equal(listed!.lastTickAt, Date.UTC(2030, 0, 1, 10, 5));
      assert.equal(listed!.nextTickAt, Date.UTC(2030, 0, 1, 10, 10));
    },
  },
  {
    name: "schedules › after downtime only the latest missed tick fires (one catch-up job, not one per missed tick)",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 0, 0, 10));
      const d = t.docket();
      await d.schedules.put("sync", { cron: "* * * * *", task: "sync" });
      t.clock.set(Date.UTC(2030, 0, 1, 3, 17, 42));
      const fired = await d.schedules.runDue();
      assert.deepEqual(fired.map((f) => f.tick), [Date.UTC(2030, 0, 1, 3, 17)]);
      assert.equal((await d.list()).length, 1);
    },
  },
  {
    name: "schedules › ticks that never fired (no scheduler ran) are listed as missed, with the first; a pass that fires the latest clears them",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 30));
      const d = t.docket();
      await d.schedules.put("report", { cron: "*/5 * * * *", task: "report" });
      const missed = async () => (await d.schedules.list()).map((s) => [s.missedTicks, s.firstMissedAt]);
      t.clock.set(Date.UTC(2030, 0, 1, 10, 5, 30));
      assert.deepEqual(await missed(), [[0, null]], "a tick less than a minute old is not missed yet (a scheduler fires within its interval)");
      t.clock.set(Date.UTC(2030, 0, 1, 10, 13));
      assert.deepEqual(await missed(), [[2, Date.UTC(2030, 0, 1, 10, 5)]], "10:05 and 10:10 never fired");
      assert.deepEqual((await d.schedules.runDue()).map((f) => f.tick), [Date.UTC(2030, 0, 1, 10, 10)]);
      assert.deepEqual(await missed(), [[0, null]]);
    },
  },
  {
    name: "schedules › time zones: 09:00 in Europe/Berlin is 08:00 UTC in winter and 07:00 UTC in summer",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 14, 12));
      const d = t.docket();
      const winter = await d.schedules.put("standup", { cron: "0 9 * * 1-5", timezone: "Europe/Berlin", task: "standup" });
      assert.equal(winter.nextTickAt, Date.UTC(2030, 0, 15, 8));
      t.clock.set(Date.UTC(2030, 6, 15, 12));
      const [summer] = await d.schedules.list();
      assert.equal(summer!.nextTickAt, Date.UTC(2030, 6, 16, 7));
      t.clock.set(Date.UTC(2030, 6, 16, 7, 0, 1));
      assert.deepEqual((await d.schedules.runDue()).map((f) => f.tick), [Date.UTC(2030, 6, 16, 7)]);
    },
  },
  {
    name: "schedules › daylight-saving changes (docs/operating.md): a spring local time that does not exist fires an hour later; the autumn's repeated hour fires once",
    async run(t) {
      const d = t.docket();
      t.clock.set(Date.UTC(2026, 2, 29, 0, 0));
      const spring = await d.schedules.put("spring", { cron: "30 2 * * *", timezone: "Europe/Berlin", task: "t" });
      assert.equal(spring.nextTickAt, Date.UTC(2026, 2, 29, 1, 30), "02:30 does not exist on 29 March 2026 in Berlin: 03:30 CEST");
      t.clock.set(Date.UTC(2026, 9, 25, 0, 40));
      const autumn = await d.schedules.put("autumn", { cron: "30 * * * *", timezone: "Europe/Berlin", task: "t" });
      assert.equal(autumn.nextTickAt, Date.UTC(2026, 9, 25, 2, 30), "02:30 CEST (00:30 UTC) fired; 02:30 CET (01:30 UTC) is not a second tick");
    },
  },
  {
    name: "schedules › replacing a schedule keeps its fired ticks (no re-fire); removing it keeps its jobs; bad definitions are typed errors and store nothing",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 0));
      const d = t.docket<{ known: { n: number } }>({ tasks: { known: {} } });
      await d.schedules.put("s", { cron: "0 * * * *", task: "known", payload: { n: 1 } });
      t.clock.set(Date.UTC(2030, 0, 1, 11, 0, 0));
      assert.equal((await d.schedules.runDue()).length, 1);
      await d.schedules.put("s", { cron: "*/30 * * * *", task: "known", payload: { n: 2 } });
      assert.deepEqual(await d.schedules.runDue(), [], "the 11:00 tick of the new expression already fired");
      for (const bad of [
        { cron: "61 * * * *", task: "known" },
        { cron: "* * * * *", timezone: "Mars/Olympus", task: "known" },
        { cron: "", task: "known" },
        { cron: "* * * * *", task: "known", options: { runAt: 5 } },
        { cron: "* * * * *", task: "known", surprise: true },
      ]) {
        await assert.rejects(d.schedules.put("bad", bad as never), InvalidArgumentError, JSON.stringify(bad, (_k, v) => (typeof v === "bigint" ? `${v}n` : v)));
      }
      // Refused at run time too, for a caller whose types let them through.
      await assert.rejects(d.schedules.put("bad", { cron: "* * * * *", task: "unknown" } as never), UnknownTaskError);
      await assert.rejects(d.schedules.put("bad", { cron: "* * * * *", task: "known", payload: { n: 1n } } as never), InvalidPayloadError);
      assert.deepEqual((await d.schedules.list()).map((s) => s.name), ["s"]);
      await d.schedules.remove("s");
      await assert.rejects(d.schedules.remove("s"), NotFoundError);
      assert.equal((await d.list()).length, 1, "the job it enqueued stays");
    },
  },
  {
    name: "schedules › an expression that never fires is InvalidArgumentError (\"never fires\") and stores nothing; one that fires every four years (29 February) is kept and fires",
    async run(t) {
      t.clock.set(Date.UTC(2030, 10, 25, 12));
      const d = t.docket();
      const refused = (message: RegExp) => (e: unknown) => e instanceof InvalidArgumentError && e.code === "INVALID_ARGUMENT" && message.test(e.message);
      for (const cron of ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4 *", "0 0 0 1 1 * 2020"]) {
        await assert.rejects(d.schedules.put("never", { cron, task: "t" }), refused(/never fires/), cron);
      }
      for (const cron of ["0 0 * * 8", "0 0 32 * *", "* * * * * * * *", "@fortnightly", "0 0 L W *"]) {
        await assert.rejects(d.schedules.put("bad", { cron, task: "t" }), refused(/is not a valid expression/), cron);
      }
      assert.deepEqual(await d.schedules.list(), []);
      const leap = await d.schedules.put("leap", { cron: "0 0 29 2 *", task: "t" });
      const berlin = await d.schedules.put("leap-berlin", { cron: "0 0 29 2 *", timezone: "Europe/Berlin", task: "t" });
      assert.deepEqual([leap.lastTickAt, leap.nextTickAt], [Date.UTC(2028, 1, 29), Date.UTC(2032, 1, 29)]);
      assert.deepEqual([berlin.lastTickAt, berlin.nextTickAt], [Date.UTC(2028, 1, 28, 23), Date.UTC(2032, 1, 28, 23)]);
      assert.deepEqual(await d.schedules.runDue(), []);
      t.clock.set(Date.UTC(2032, 1, 29, 0, 0, 1));
      assert.deepEqual((await d.schedules.runDue()).map((f) => [f.schedule, f.tick]), [
        ["leap", Date.UTC(2032, 1, 29)],
        ["leap-berlin", Date.UTC(2032, 1, 28, 23)],
      ]);
      t.clock.set(Date.UTC(2033, 5, 1));
      assert.deepEqual(await d.schedules.runDue(), []);
      assert.deepEqual((await d.schedules.list()).map((s) => [s.lastTickAt, s.nextTickAt]), [
        [Date.UTC(2032, 1, 29), Date.UTC(2036, 1, 29)],
        [Date.UTC(2032, 1, 28, 23), Date.UTC(2036, 1, 28, 23)],
      ]);
    },
  },
  {
    name: "schedules › runNow enqueues the schedule's job now, outside its ticks (the next tick still fires); an unknown name is NotFoundError and enqueues nothing",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 30));
      const d = t.docket();
      await d.schedules.put("report", { cron: "*/5 * * * *", task: "report", payload: { kind: "daily" }, options: { queue: "reports", priority: 3 } });
      const job = await d.schedules.runNow("report");
      assert.deepEqual([job.task, job.queue, job.priority, job.runAt, job.state, job.payload], ["report", "reports", 3, t.clock.now(), "ready", { kind: "daily" }]);
      await assert.rejects(d.schedules.runNow("nope"), NotFoundError);
      assert.equal((await d.list({})).length, 1);
      t.clock.set(Date.UTC(2030, 0, 1, 10, 5));
      const fired = await d.schedules.runDue();
      assert.equal(fired.length, 1, "the 10:05 tick fires as it would have");
      assert.equal((await d.list({ queue: "reports" })).length, 2);
    },
  },
  {
    name: "schedules › a paused schedule fires no tick, also raced by another docket's pass; resumed, it fires from its next tick, skipping those while paused",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 30));
      const d = t.docket();
      await d.schedules.put("sync", { cron: "*/5 * * * *", task: "sync" });
      const paused = await d.schedules.pause("sync");
      assert.equal(paused.paused, true);
      t.clock.set(Date.UTC(2030, 0, 1, 10, 20));
      const other = new Docket({ adapter: await t.connect(), clock: t.clock });
      assert.deepEqual([...(await d.schedules.runDue()), ...(await other.schedules.runDue())], [], "no tick fires while paused");
      // A pass that read the schedule before the pause still finds the tick refused by the row (the compare-and-set requires it not paused).
      const [stored] = await t.adapter.listSchedules();
      const job = { task: "sync", queue: "default", payload: "null", state: "ready" as const, priority: 0, runAt: Date.UTC(2030, 0, 1, 10, 20), maxAttempts: 3, backoff: null };
      assert.equal(await t.adapter.fireSchedule({ name: stored!.name, tick: Date.UTC(2030, 0, 1, 10, 20), job, now: t.clock.now() }), null);
      const [listed] = await d.schedules.list();
      assert.deepEqual([listed!.paused, listed!.missedTicks], [true, 0], "a paused schedule's ticks are not missed");
      const resumed = await d.schedules.resume("sync");
      assert.deepEqual([resumed.paused, resumed.lastTickAt], [false, Date.UTC(2030, 0, 1, 10, 20)]);
      assert.deepEqual(await d.schedules.runDue(), [], "the ticks of the pause are skipped");
      t.clock.set(Date.UTC(2030, 0, 1, 10, 25));
      assert.deepEqual((await d.schedules.runDue()).map((f) => f.tick), [Date.UTC(2030, 0, 1, 10, 25)]);
      assert.equal((await d.list({})).length, 1);
      await assert.rejects(d.schedules.pause("nope"), NotFoundError);
      await d.schedules.put("sync", { cron: "*/10 * * * *", task: "sync" });
      await d.schedules.pause("sync");
      await d.schedules.put("sync", { cron: "*/15 * * * *", task: "sync" });
      assert.equal((await d.schedules.list())[0]!.paused, true, "redefining keeps the pause");
    },
  },
  {
    name: "schedules › the same definition put again (a process's start) keeps a due tick and the missed count: the next pass fires it; a changed definition skips it",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 0, 0, 10));
      const d = t.docket();
      const definition = { cron: "0 3 * * *", task: "report", payload: { kind: "nightly" }, options: { queue: "reports" } };
      await d.schedules.put("nightly", definition);
      // Down over 03:00; at 03:20 a process starts and puts the same definition before its first pass.
      t.clock.set(Date.UTC(2030, 0, 1, 3, 20));
      const other = new Docket({ adapter: await t.connect(), clock: t.clock });
      const again = await other.schedules.put("nightly", definition);
      assert.deepEqual([again.lastTickAt, again.missedTicks], [Date.UTC(2029, 11, 31, 3), 1], "the put left the last tick and the missed tick as they were");
      assert.deepEqual((await d.schedules.runDue()).map((f) => f.tick), [Date.UTC(2030, 0, 1, 3)], "the 03:00 tick fires after the put");
      // A tick due and not yet fired, then a put of the same definition from another process: still fires.
      t.clock.set(Date.UTC(2030, 0, 2, 3, 0, 0, 400));
      await other.schedules.put("nightly", definition);
      assert.deepEqual((await d.schedules.runDue()).map((f) => f.tick), [Date.UTC(2030, 0, 2, 3)]);
      // A changed definition fires from its next tick on, as before.
      t.clock.set(Date.UTC(2030, 0, 3, 3, 0, 0, 400));
      await other.schedules.put("nightly", { ...definition, payload: { kind: "changed" } });
      assert.deepEqual(await d.schedules.runDue(), [], "a redefined schedule does not fire the tick before it was stored");
      assert.equal((await d.list({ queue: "reports" })).length, 2);
    },
  },
  {
    name: "schedules › concurrent puts of one new name from several connections all succeed and store one schedule",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 30));
      for (let round = 0; round < 3; round++) {
        const dockets = await Promise.all(Array.from({ length: 4 }, async () => new Docket({ adapter: await t.connect(), clock: t.clock })));
        const name = `together-${round}`;
        const puts = await Promise.allSettled(dockets.map((x, i) => x.schedules.put(name, { cron: `*/${5 + (round === 2 ? i : 0)} * * * *`, task: "t" })));
        const refused = puts.filter((p) => p.status === "rejected").map((p) => String((p as PromiseRejectedResult).reason));
        assert.deepEqual(refused, [], `round ${round}: every put succeeds`);
      }
      assert.deepEqual((await t.docket().schedules.list()).map((s) => s.name), ["together-0", "together-1", "together-2"]);
    },
  },
  {
    name: "schedules › a schedule that cannot fire here (its task unknown to this docket) does not hold back the others: they fire, its error comes after (or to onError with its name)",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 30));
      const before = t.docket<{ gone: null; kept: null }>({ tasks: { gone: {}, kept: {} } });
      await before.schedules.put("a-gone", { cron: "*/5 * * * *", task: "gone" });
      await before.schedules.put("b-kept", { cron: "*/5 * * * *", task: "kept" });
      // After a deploy that dropped the task "gone" from the registry.
      const after = t.docket<{ kept: null }>({ tasks: { kept: {} } });
      t.clock.set(Date.UTC(2030, 0, 1, 10, 5));
      await assert.rejects(after.schedules.runDue(), UnknownTaskError);
      assert.deepEqual((await after.list({})).map((j) => j.task), ["kept"], "b-kept fired though a-gone failed before it");
      t.clock.set(Date.UTC(2030, 0, 1, 10, 10));
      const errors: [string, string][] = [];
      const fired = await after.schedules.runDue({ onError: (error, schedule) => void errors.push([error.name, schedule]) });
      assert.deepEqual(fired.map((f) => f.schedule), ["b-kept"]);
      assert.deepEqual(errors, [["UnknownTaskError", "a-gone"]]);
      const [gone] = await after.schedules.list();
      assert.equal(gone!.lastTickAt, Date.UTC(2030, 0, 1, 10, 0), "a-gone's ticks stay unfired: a process that knows the task fires the latest");
      assert.deepEqual((await before.schedules.runDue()).map((f) => f.schedule), ["a-gone"]);
    },
  },
  {
    name: "schedules › a cron expression over 191 characters is InvalidArgumentError on every adapter and stores nothing; a long one within it is stored",
    async run(t) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 30));
      const d = t.docket();
      const minutes = Array.from({ length: 60 }, (_, i) => i).join(",");
      const long = `${minutes} * * * *`;
      assert.ok(long.length > 150 && long.length <= 191);
      await d.schedules.put("long", { cron: long, task: "t" });
      const tooLong = `${minutes} ${Array.from({ length: 24 }, (_, i) => i).join(",")} * * *`;
      assert.ok(tooLong.length > 191);
      await assert.rejects(d.schedules.put("too-long", { cron: tooLong, task: "t" }), (e: unknown) => e instanceof InvalidArgumentError && /at most 191 characters/.test(e.message));
      assert.deepEqual((await d.schedules.list()).map((s) => [s.name, s.cron]), [["long", long]]);
    },
  },
];
