import assert from "node:assert/strict";
import type { JobRecord } from "../../core/job.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { settleAndRead } from "../lease-writes.ts";
import { insert } from "./helpers.ts";

const code = (e: unknown) => (e as { code?: string }).code;

/** A job of `queue` whose attempt failed with `error`: dead, or scheduled for a retry a minute on. */
async function failed(t: CaseContext, error: string, retry = false, queue = "default"): Promise<JobRecord> {
  const job = await insert(t, { queue });
  const [running] = await t.adapter.claim({ queues: [queue], limit: 1, now: t.clock.now(), leaseToken: `errors-${job.id}`, leaseExpiresAt: t.clock.now() + 30_000 });
  assert.equal(running?.id, job.id);
  const now = t.clock.now();
  const after = await settleAndRead(t.adapter, { kind: "fail", id: job.id, leaseToken: running.leaseToken!, now, error, retryAt: retry ? now + 60_000 : null });
  assert.equal(after?.state, retry ? "scheduled" : "dead");
  return after!;
}

/** list({ errorContains }): jobs by the text of their last error. */
export const listErrorCases: ConformanceCase[] = [
  {
    name: "list › errorContains: the jobs whose last error contains the text, literally (% _ \\ ! are plain characters) and case-sensitively, with the other filters, in id order after afterId",
    async run(t) {
      const d = t.docket();
      const percent = await failed(t, "charge failed: 100% of quota used");
      const hundred = await failed(t, "charge failed: 100 of quota used");
      const underscore = await failed(t, "file a_b missing");
      const anyChar = await failed(t, "file axb missing");
      const backslash = await failed(t, "path C:\\tmp\\x not found");
      const noBackslash = await failed(t, "path C:tmpx not found");
      const bang = await failed(t, "bang! stopped");
      const upper = await failed(t, "Timeout after 5 s");
      const lower = await failed(t, "timeout after 5 s");
      const umlaut = await failed(t, "Überweisung abgelehnt");
      const lines = await failed(t, "Error: first line\n    at second line");
      const retrying = await failed(t, "Timeout again", true);
      const elsewhere = await failed(t, "Timeout in another queue", false, "other");
      // Jobs without a last error: never matched.
      await insert(t);
      await d.cancel((await insert(t)).id);
      const ids = async (errorContains: string, more: { state?: "dead" | "scheduled"; queue?: string; afterId?: number; limit?: number } = { state: "dead" }) =>
        (await d.list({ errorContains, ...more })).map((j) => j.id);

      assert.deepEqual(await ids("100%"), [percent.id]);
      assert.deepEqual(await ids("%"), [percent.id]);
      assert.deepEqual(await ids("a_b"), [underscore.id]);
      assert.deepEqual(await ids("_"), [underscore.id]);
      assert.deepEqual(await ids("C:\\tmp"), [backslash.id]);
      assert.deepEqual(await ids("\\"), [backslash.id]);
      assert.deepEqual(await ids("bang!"), [bang.id]);
      assert.deepEqual(await ids("!"), [bang.id]);
      assert.deepEqual(await ids("Timeout"), [upper.id, elsewhere.id]);
      assert.deepEqual(await ids("timeout"), [lower.id]);
      assert.deepEqual(await ids("Über"), [umlaut.id]);
      assert.deepEqual(await ids("über"), []);
      assert.deepEqual(await ids("second line"), [lines.id]);
      assert.deepEqual(await ids("line\n    at"), [lines.id]);
      assert.deepEqual(await ids("nothing like it"), []);
      assert.deepEqual(await ids("x".repeat(200)), []);
      // The other filters, and keyset pages by id.
      assert.deepEqual(await ids("Timeout", {}), [upper.id, retrying.id, elsewhere.id]);
      assert.deepEqual(await ids("Timeout", { state: "scheduled" }), [retrying.id]);
      assert.deepEqual(await ids("Timeout", { state: "dead", queue: "other" }), [elsewhere.id]);
      assert.deepEqual(await ids("of quota", { state: "dead", limit: 1 }), [percent.id]);
      assert.deepEqual(await ids("of quota", { state: "dead", afterId: percent.id }), [hundred.id]);
      assert.deepEqual(await ids(" missing", { state: "dead", afterId: underscore.id }), [anyChar.id]);
      assert.deepEqual(await ids("C:", {}), [backslash.id, noBackslash.id]);
    },
  },
  {
    name: "list › errorContains: a non-string, an empty string, more than 200 characters or a NUL is InvalidArgumentError",
    async run(t) {
      const d = t.docket();
      await failed(t, "boom");
      for (const bad of [42, null, "", "x".repeat(201), "a\u0000b"]) {
        await assert.rejects(d.list({ state: "dead", errorContains: bad as string }), (e) => code(e) === "INVALID_ARGUMENT", `errorContains ${JSON.stringify(bad)}`);
      }
      assert.equal((await d.list({ state: "dead", errorContains: "boom" })).length, 1);
    },
  },
];
