import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import { MAX_DELAY_MS, MAX_PAYLOAD_DEPTH, MAX_TIME_MS } from "../../core/validate.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";

/** `depth` arrays nested in each other around `inner`. */
function nestedArrays(depth: number, inner: unknown = 1): unknown {
  let v = inner;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

function nestedObjects(depth: number): unknown {
  let v: unknown = "leaf";
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

type PayloadCase = { name: string; payload: () => unknown } & ({ stored: unknown } | { rejected: RegExp });

/**
 * One corpus of edge payloads, one expected outcome each, the same on every
 * adapter: stored and read back as `stored` (deep-equal), or rejected as
 * INVALID_PAYLOAD with a message matching `rejected` (which names the path).
 */
export const PAYLOAD_CORPUS: PayloadCase[] = [
  { name: "empty object", payload: () => ({}), stored: {} },
  { name: "empty array", payload: () => [], stored: [] },
  { name: "null", payload: () => null, stored: null },
  { name: "false", payload: () => false, stored: false },
  { name: "-0 (JSON writes 0)", payload: () => -0, stored: 0 },
  { name: "1e308", payload: () => 1e308, stored: 1e308 },
  { name: "5e-324", payload: () => 5e-324, stored: 5e-324 },
  { name: "MAX_SAFE_INTEGER", payload: () => Number.MAX_SAFE_INTEGER, stored: Number.MAX_SAFE_INTEGER },
  { name: "2^53 + 2", payload: () => 2 ** 53 + 2, stored: 2 ** 53 + 2 },
  { name: "empty string", payload: () => "", stored: "" },
  { name: "emoji (a surrogate pair)", payload: () => "mail 😀 ✉", stored: "mail 😀 ✉" },
  { name: "U+2028 U+2029 U+FEFF U+FFFF", payload: () => "\u2028\u2029\uFEFF\uFFFF", stored: "\u2028\u2029\uFEFF\uFFFF" },
  { name: "control characters", payload: () => "\u0001\t\n\r\u001f\u007f", stored: "\u0001\t\n\r\u001f\u007f" },
  { name: "backslashes and quotes", payload: () => '\\"\'\\\\u0000', stored: '\\"\'\\\\u0000' },
  { name: "empty key", payload: () => ({ "": 1 }), stored: { "": 1 } },
  { name: "emoji key", payload: () => ({ "😀": [1, "2"] }), stored: { "😀": [1, "2"] } },
  { name: "__proto__ as an own key", payload: () => JSON.parse('{"__proto__": {"x": 1}}'), stored: JSON.parse('{"__proto__": {"x": 1}}') },
  { name: "a 100 000-character string", payload: () => "é".repeat(100_000), stored: "é".repeat(100_000) },
  { name: `arrays nested ${MAX_PAYLOAD_DEPTH} deep`, payload: () => nestedArrays(MAX_PAYLOAD_DEPTH), stored: nestedArrays(MAX_PAYLOAD_DEPTH) },
  { name: `objects nested ${MAX_PAYLOAD_DEPTH} deep`, payload: () => nestedObjects(MAX_PAYLOAD_DEPTH), stored: nestedObjects(MAX_PAYLOAD_DEPTH) },
  { name: `arrays nested ${MAX_PAYLOAD_DEPTH + 1} deep`, payload: () => nestedArrays(MAX_PAYLOAD_DEPTH + 1), rejected: /^payload(\[0\]){31} nests deeper than 31/ },
  { name: `objects nested ${MAX_PAYLOAD_DEPTH + 1} deep`, payload: () => nestedObjects(MAX_PAYLOAD_DEPTH + 1), rejected: /^payload(\.a){31} nests deeper/ },
  { name: "arrays nested 10 000 deep", payload: () => nestedArrays(10_000), rejected: /nests deeper than 31/ },
  { name: "a lone high surrogate", payload: () => ({ s: "a\ud800b" }), rejected: /^payload\.s contains a lone surrogate/ },
  { name: "a lone low surrogate", payload: () => ["\udc00"], rejected: /^payload\[0\] contains a lone surrogate/ },
  { name: "a NUL character", payload: () => ({ s: "a\u0000b" }), rejected: /^payload\.s contains a NUL character/ },
  { name: "a key with a NUL", payload: () => ({ "a\u0000": 1 }), rejected: /^payload has a key that contains a NUL/ },
  { name: "a key with a lone surrogate", payload: () => ({ x: { "\ud800": 1 } }), rejected: /^payload\.x has a key that contains a lone surrogate/ },
  { name: "a sparse array", payload: () => [1, , 3], rejected: /^payload\[1\] is undefined/ }, // eslint-disable-line no-sparse-arrays
  // What is stored is what was checked: toJSON and getters are not consulted a second time.
  { name: "an array with an own toJSON", payload: () => Object.assign([1, "a"], { toJSON: () => "a\u0000b" }), stored: [1, "a"] },
  { name: "a getter that changes its value", payload: () => getterOnce("ok", "a\ud800"), stored: { s: "ok" } },
  { name: "an accessor returning a NUL on first read", payload: () => getterOnce("a\u0000b", "ok"), rejected: /^payload\.s contains a NUL character/ },
];

/** An object whose `s` getter returns `first` on its first read and `then` afterwards. */
function getterOnce(first: string, then: string): unknown {
  let reads = 0;
  return {
    get s() {
      return reads++ === 0 ? first : then;
    },
  };
}

const NAME_191 = "😀".repeat(95) + "x"; // 191 UTF-16 units, 96 characters

async function count(t: CaseContext): Promise<number> {
  return (await t.adapter.list({ limit: 10_000 })).length;
}

async function rejectsWith(call: () => Promise<unknown>, code: string, message: RegExp): Promise<void> {
  await assert.rejects(call, (e: { code?: string; message?: string }) => {
    assert.equal(e.code, code, e.message);
    assert.match(e.message ?? "", message);
    return true;
  });
}

function throwsWith(call: () => unknown, code: string, message: RegExp): void {
  assert.throws(call, (e: { code?: string; message?: string }) => {
    assert.equal(e.code, code, e.message);
    assert.match(e.message ?? "", message);
    return true;
  });
}

/** Input validation: one rule per input (payloads, options, names, times), decided in the core, the same outcome on every adapter. */
export const inputCases: ConformanceCase[] = [
  {
    name: "input › every payload of the edge corpus is stored and read back, or rejected, identically on every adapter",
    async run(t) {
      const d = t.docket();
      const differences: string[] = [];
      for (const c of PAYLOAD_CORPUS) {
        try {
          const job = await d.enqueue("t", c.payload());
          const back = (await d.get(job.id))?.payload;
          if (!("stored" in c)) differences.push(`${c.name}: stored, expected rejection`);
          else {
            try {
              assert.deepStrictEqual(back, c.stored);
              assert.deepStrictEqual(job.payload, c.stored);
            } catch {
              differences.push(`${c.name}: read back differs`);
            }
          }
        } catch (error) {
          const e = error as { code?: string; message?: string };
          if (!("rejected" in c)) differences.push(`${c.name}: ${e.code ?? "thrown"} ${e.message}`);
          else if (e.code !== "INVALID_PAYLOAD" || !c.rejected.test(e.message ?? "")) differences.push(`${c.name}: ${e.code} ${e.message?.slice(0, 120)}`);
        }
      }
      assert.deepEqual(differences, []);
      assert.equal(await count(t), PAYLOAD_CORPUS.filter((c) => "stored" in c).length, "rejected payloads wrote nothing");
    },
  },
  {
    name: "input › task, queue and key names must round-trip: lone surrogates and NUL are rejected, 191-unit emoji names are kept",
    async run(t) {
      const d = t.docket();
      for (const bad of ["a\ud800", "\udfff", "a\u0000b"]) {
        await rejectsWith(() => d.enqueue(bad, {}), "INVALID_ARGUMENT", /task (contains|must)/);
        await rejectsWith(() => d.enqueue("t", {}, { queue: bad }), "INVALID_ARGUMENT", /queue contains/);
        await rejectsWith(() => d.enqueue("t", {}, { concurrency: { key: bad, limit: 1 } }), "INVALID_ARGUMENT", /concurrency\.key contains/);
      }
      assert.equal(await count(t), 0);
      const job = await d.enqueue(NAME_191, {}, { queue: NAME_191, concurrency: { key: NAME_191, limit: 1 } });
      const back = await d.get(job.id);
      assert.deepEqual([back?.task, back?.queue, back?.concurrencyKey], [NAME_191, NAME_191, NAME_191]);
      const claimed = await t.adapter.claim({ queues: [NAME_191], tasks: [NAME_191], limit: 1, now: t.clock.now(), leaseToken: "x", leaseExpiresAt: t.clock.now() + 1000 });
      assert.deepEqual(claimed.map((j) => j.id), [job.id], "a job with such names is claimed by its task name");
    },
  },
  {
    name: "input › a name ending in a space is InvalidArgumentError: MariaDB compares names ignoring trailing spaces, so it would match another name there only",
    async run(t) {
      const d = t.docket();
      for (const bad of ["t ", "t  ", " "]) {
        await rejectsWith(() => d.enqueue(bad, {}), "INVALID_ARGUMENT", /^task ends with a space/);
        await rejectsWith(() => d.enqueue("t", {}, { queue: bad }), "INVALID_ARGUMENT", /^queue ends with a space/);
        await rejectsWith(() => d.enqueue("t", {}, { concurrency: { key: bad, limit: 1 } }), "INVALID_ARGUMENT", /^options\.concurrency\.key ends with a space/);
        await rejectsWith(() => d.resumeQueue(bad), "INVALID_ARGUMENT", /^queue ends with a space/);
        await rejectsWith(() => d.list({ task: bad }), "INVALID_ARGUMENT", /^task ends with a space/);
      }
      throwsWith(() => t.docket({ defaultQueue: "q " }), "INVALID_ARGUMENT", /^defaultQueue ends with a space/);
      throwsWith(() => d.worker({ handlers: { t: () => undefined }, queues: ["q "], logger: null }), "INVALID_ARGUMENT", /^queue ends with a space/);
      throwsWith(() => d.worker({ handlers: { "t ": () => undefined }, logger: null }), "INVALID_ARGUMENT", /ends with a space/);
      assert.equal(await count(t), 0);
      // Other leading and trailing whitespace is kept and matched exactly on every adapter.
      const spaced = await d.enqueue(" t\t", {}, { queue: " q\t", concurrency: { key: "k\t", limit: 1 } });
      const plain = await d.enqueue("t", {}, { queue: "q", concurrency: { key: "k", limit: 1 } });
      assert.deepEqual([spaced.state, plain.state], ["ready", "ready"], "keys k and k\\t are distinct");
      assert.deepEqual((await d.list({ task: "t" })).map((j) => j.id), [plain.id]);
      assert.deepEqual((await d.list({ queue: " q\t" })).map((j) => j.id), [spaced.id]);
      const claimed = await t.adapter.claim({ queues: ["q"], tasks: ["t"], limit: 10, now: t.clock.now(), leaseToken: "x", leaseExpiresAt: t.clock.now() + 1000 });
      assert.deepEqual(claimed.map((j) => j.id), [plain.id]);
    },
  },
  {
    name: "input › fractional delay and runAt are rounded to whole milliseconds, identically on every adapter",
    async run(t) {
      const d = t.docket();
      const now = t.clock.now();
      const cases: [Parameters<typeof d.enqueue>[2], number][] = [
        [{ delay: 0.5 }, now + 1],
        [{ delay: 0.4 }, now],
        [{ delay: 1234.5678 }, now + 1235],
        [{ runAt: 1.5 }, 2],
        [{ runAt: now + 0.25 }, now],
        [{ runAt: new Date(now + 10) }, now + 10],
      ];
      for (const [options, runAt] of cases) {
        const job = await d.enqueue("t", {}, options);
        assert.equal(job.runAt, runAt, JSON.stringify(options));
        assert.equal((await d.get(job.id))?.runAt, runAt, JSON.stringify(options));
      }
      const random = await d.enqueue("t", {}, { delay: Math.random() * 1000 });
      assert.ok(Number.isSafeInteger((await d.get(random.id))!.runAt));
    },
  },
  {
    name: "input › a delay over 100 years, or a runAt before 1970 or after 9999, is InvalidArgumentError and writes nothing",
    async run(t) {
      const d = t.docket();
      const bad: [Parameters<typeof d.enqueue>[2], RegExp][] = [
        [{ delay: 1e300 }, /delay must be/],
        [{ delay: MAX_DELAY_MS + 1 }, /delay must be/],
        [{ runAt: -1 }, /runAt must be/],
        [{ runAt: 1e300 }, /runAt must be/],
        [{ runAt: MAX_TIME_MS + 1 }, /runAt must be/],
        [{ runAt: new Date(8.64e15) }, /runAt must be/],
        [{ backoff: { maxMs: 1e300 } }, /maxMs must be/],
      ];
      for (const [options, message] of bad) await rejectsWith(() => d.enqueue("t", {}, options), "INVALID_ARGUMENT", message);
      assert.equal(await count(t), 0);
      const edge = await d.enqueue("t", {}, { runAt: MAX_TIME_MS });
      assert.equal((await d.get(edge.id))?.runAt, MAX_TIME_MS);
    },
  },
  {
    name: "input › a misspelt option anywhere is InvalidArgumentError naming the key, and writes nothing",
    async run(t) {
      const d = t.docket();
      const enqueues: [() => Promise<unknown>, RegExp][] = [
        [() => d.enqueue("t", {}, { prio: 1 } as never), /unknown option "prio" in options \(did you mean "priority"\?\)/],
        [() => d.enqueue("t", {}, { backoff: { bogus: 1 } } as never), /unknown option "bogus" in options\.backoff/],
        [() => d.enqueue("t", {}, { backoff: { maxAttempts: 3 } } as never), /unknown option "maxAttempts" in options\.backoff/],
        [() => d.enqueue("t", {}, { concurrency: { key: "k", limit: 1, onconflict: "discard" } } as never), /"onconflict" in options\.concurrency \(did you mean "onConflict"\?\)/],
        [() => d.enqueueMany([{ task: "t", payload: {}, option: {} } as never, { task: "t", payload: {} }]), /unknown option "option" in items\[0\] \(did you mean "options"\?\)/],
        [() => d.enqueue("t", {}, { timeout: 5 } as never), /unknown option "timeout" in options \(did you mean "timeoutMs"\?\)/],
      ];
      for (const [call, message] of enqueues) await rejectsWith(call, "INVALID_ARGUMENT", message);
      assert.equal(await count(t), 0);
      const constructors: [() => unknown, RegExp][] = [
        [() => t.docket({ retyr: {} } as never), /unknown option "retyr" in new Docket\(options\) \(did you mean "retry"\?\)/],
        [() => t.docket({ retry: { basems: 5 } } as never), /unknown option "basems" in a retry policy \(did you mean "baseMs"\?\)/],
        [() => t.docket({ tasks: { x: { queeu: "q" } } } as never), /unknown option "queeu" in tasks\.x \(did you mean "queue"\?\)/],
        [() => d.worker({ handlers: { t: () => undefined }, concurency: 2 } as never), /unknown option "concurency" in worker\(options\) \(did you mean "concurrency"\?\)/],
        [() => d.worker({ handlers: { t: () => undefined }, leaseMS: 2 } as never), /did you mean "leaseMs"\?/],
      ];
      for (const [call, message] of constructors) {
        assert.throws(call, (e: { code?: string; message?: string }) => e.code === "INVALID_ARGUMENT" && message.test(e.message ?? ""), String(message));
      }
      const w = d.worker({ handlers: { t: () => undefined }, logger: null });
      await rejectsWith(() => w.stop({ timeout: 1 } as never), "INVALID_ARGUMENT", /unknown option "timeout" in stop\(options\)/);
    },
  },
  {
    name: "input › list filters are validated: a bad state, queue, task or afterId is InvalidArgumentError",
    async run(t) {
      const d = t.docket();
      await d.enqueue("t", {});
      const bad: [Parameters<typeof d.list>[0], RegExp][] = [
        [{ afterId: Number.NaN }, /afterId must be an integer/],
        [{ afterId: "x" as never }, /afterId must be an integer/],
        [{ afterId: -1 }, /afterId must be an integer/],
        [{ afterId: 1.5 }, /afterId must be an integer/],
        [{ state: "bogus" as never }, /state must be one of/],
        [{ queue: "" }, /queue must be/],
        [{ task: 5 as never }, /task must be/],
        [{ limit: 0 }, /limit must be/],
        [{ after: 1 } as never, /unknown option "after" in list\(options\) \(did you mean "afterId"\?\)/],
      ];
      for (const [options, message] of bad) await rejectsWith(() => d.list(options), "INVALID_ARGUMENT", message);
      assert.equal((await d.list({ afterId: 0 })).length, 1);
    },
  },
  {
    name: "input › options must be an object wherever one is taken: an array, null or a string is InvalidArgumentError saying what it got, and writes nothing",
    async run(t) {
      const d = t.docket();
      const item = { task: "t", payload: {} };
      const calls: [() => unknown, RegExp][] = [
        [() => d.enqueue("t", {}, [] as never), /^options must be an object, got an array$/],
        [() => d.enqueue("t", {}, null as never), /^options must be an object, got null$/],
        [() => d.enqueue("t", {}, "fast" as never), /^options must be an object, got a string \("fast"\)$/],
        [() => d.enqueue("t", {}, { backoff: [] as never }), /^options\.backoff must be an object, got an array$/],
        [() => d.enqueue("t", {}, { backoff: null as never }), /^options\.backoff must be an object, got null$/],
        [() => d.enqueue("t", {}, { concurrency: [] as never }), /^options\.concurrency must be an object/],
        [() => d.enqueueMany([{ ...item, options: [] as never }]), /^items\[0\]\.options must be an object, got an array$/],
        [() => d.enqueueMany([{ ...item, options: null as never }]), /^items\[0\]\.options must be an object, got null$/],
        [() => d.enqueueMany([{ ...item, options: "fast" as never }]), /^items\[0\]\.options must be an object, got a string \("fast"\)$/],
        [() => d.enqueueMany([item, { ...item, options: 5 as never }]), /^items\[1\]\.options must be an object, got a number \(5\)$/],
        [() => d.enqueueMany([{ ...item, opts: { priority: 1 } } as never]), /^unknown option "opts" in items\[0\] \(did you mean "options"\?\)/],
        [() => d.enqueueMany([[] as never]), /^items\[0\] must be an object, got an array$/],
        [() => d.enqueueMany([item], [] as never), /^enqueueMany\(items, options\) must be an object, got an array$/],
        [() => d.enqueueMany([item], null as never), /^enqueueMany\(items, options\) must be an object, got null$/],
        [() => d.schedules.put("s", { cron: "* * * * *", task: "t", options: null as never }), /^schedule options must be an object, got null$/],
        [() => d.schedules.put("s", { cron: "* * * * *", task: "t", options: [] as never }), /^schedule options must be an object, got an array$/],
        [() => d.list([] as never), /^list\(options\) must be an object, got an array$/],
        [() => new Docket([] as never), /^new Docket\(options\) must be an object \{ adapter, … \}, got an array$/],
        [() => new Docket(null as never), /^new Docket\(options\) must be an object \{ adapter, … \}, got null$/],
        [() => new Docket("fast" as never), /^new Docket\(options\) must be an object \{ adapter, … \}, got a string \("fast"\)$/],
        [() => t.docket({ retry: null as never }), /^a retry policy must be an object, got null$/],
        [() => t.docket({ retry: [] as never }), /^a retry policy must be an object, got an array$/],
        [() => t.docket({ retention: [] as never }), /^retention must be an object, got an array$/],
        [() => t.docket({ idempotency: null as never }), /^idempotency must be an object, got null$/],
        [() => t.docket({ tasks: [] as never }), /^tasks must be an object, got an array$/],
        [() => t.docket({ tasks: null as never }), /^tasks must be an object, got null$/],
        [() => t.docket({ tasks: { x: null } as never }), /^tasks\.x must be an object, got null$/],
        [() => t.docket({ tasks: { x: [] } as never }), /^tasks\.x must be an object, got an array$/],
        [() => d.worker([] as never), /^worker\(options\) must be an object, got an array$/],
        [() => d.worker(null as never), /^worker\(options\) must be an object, got null$/],
        [() => d.worker("fast" as never), /^worker\(options\) must be an object, got a string \("fast"\)$/],
        [() => d.scheduler([] as never), /^scheduler\(options\) must be an object, got an array$/],
      ];
      const wrong: string[] = [];
      for (const [call, message] of calls) {
        try {
          await call();
          wrong.push(`${message}: accepted`);
        } catch (error) {
          const e = error as { code?: string; message?: string };
          if (e.code !== "INVALID_ARGUMENT" || !message.test(e.message ?? "")) wrong.push(`${message}: ${e.code} ${String(e.message).slice(0, 200)}`);
        }
      }
      assert.deepEqual(wrong, []);
      assert.equal(await count(t), 0);
      assert.deepEqual(await d.schedules.list(), []);
      await d.enqueue("t", {}, undefined);
      await d.enqueueMany([{ ...item, options: undefined }], undefined);
      assert.equal(await count(t), 2, "undefined is no options");
    },
  },
  {
    name: "input › a value quoted in an error message is cut to about 100 characters, with its length: a 1 000 000-character name gives a short message",
    async run(t) {
      const huge = "x".repeat(1_000_000);
      const d = t.docket();
      const registered = t.docket({ tasks: { t: {} } });
      const calls: (() => unknown)[] = [
        () => d.enqueue(huge, {}),
        () => d.enqueue(`${huge} `, {}),
        () => d.enqueue("t", {}, { queue: huge }),
        () => d.enqueue("t", {}, { idempotencyKey: huge }),
        () => d.enqueue("t", {}, { concurrency: { key: huge, limit: 1 } }),
        () => d.enqueue("t", {}, { concurrency: { key: "k", limit: 1, onConflict: huge as never } }),
        () => d.enqueue("t", {}, { [huge]: 1 } as never),
        () => d.enqueueMany([{ task: "t", payload: {}, [huge]: 1 } as never]),
        () => d.enqueue("t", {}, huge as never),
        () => registered.enqueue("x".repeat(150) as "t", {}),
        () => d.list({ task: huge }),
        () => d.list({ state: huge as never }),
        () => d.on(huge as never, () => undefined),
        () => d.pauseQueue(huge),
        () => d.schedules.put(huge, { cron: "* * * * *", task: "t" }),
        () => d.schedules.put("s", { cron: huge, task: "t" }),
        () => d.schedules.put("s", { cron: `0 0 31 2 * ${huge}`, task: "t" }),
        () => d.schedules.put("s", { cron: "* * * * *", timezone: huge, task: "t" }),
        () => d.schedules.remove("y".repeat(150)),
        () => d.worker({ handlers: { [huge]: () => undefined } }),
        () => d.worker({ handlers: { t: () => undefined }, queues: [huge] }),
        () => t.docket({ defaultQueue: huge }),
        () => t.docket({ tasks: { [huge]: {} } }),
      ];
      const long: string[] = [];
      for (const [i, call] of calls.entries()) {
        try {
          await call();
          long.push(`call ${i}: accepted`);
        } catch (error) {
          const message = String((error as Error).message);
          if (message.length > 400 || !/…\(\d+ chars\)/.test(message)) long.push(`call ${i}: ${message.length} characters: ${message.slice(0, 300)}`);
        }
      }
      assert.deepEqual(long, []);
      assert.equal(await count(t), 0);
    },
  },
];
