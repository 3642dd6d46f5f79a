import { afterAll, beforeAll } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import { openTarget, type DisposableTarget } from "./targets.ts";

/**
 * A Docket on a fresh, migrated SQLite store for the file's tests, opened
 * before them and closed after (with `onClose` steps first, last added
 * first). Read `docket` inside a test or hook, not at import time.
 */
export function sqliteDocketForFile(): { readonly docket: Docket; onClose(step: () => Promise<void>): void } {
  let target: DisposableTarget | undefined;
  let docket: Docket | undefined;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    target = (await openTarget("sqlite"))!;
    const store = await target.open();
    const adapter = await store.connect();
    await adapter.migrate();
    docket = new Docket({ adapter });
    closers.push(() => adapter.close());
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await target?.dispose();
  });
  return {
    get docket() {
      if (!docket) throw new Error("the SQLite docket is opened in beforeAll: read it inside a test");
      return docket;
    },
    onClose: (step) => void closers.push(step),
  };
}
