import { describe, expect, it } from "vitest";
import { loadDriver } from "../src/adapters/kysely/driver.ts";
import { AdapterError } from "../src/core/errors.ts";

/** A specifier held in a variable: the bundler and tsc must not resolve it. */
const absent = "docket-test-no-such-driver";

describe("loadDriver", () => {
  it("a driver that is not installed is an AdapterError naming it and how to install it", async () => {
    const error = await loadDriver(absent, "Test", () => import(absent)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AdapterError);
    expect((error as Error).message).toBe(`the Test adapter needs the "${absent}" driver, which is not installed: npm install ${absent}`);
    expect((error as Error).cause).toMatchObject({ code: "ERR_MODULE_NOT_FOUND" });
  });

  it("an installed driver loads", async () => {
    const mod = await loadDriver("kysely", "Test", () => import("kysely"));
    expect(typeof mod.Kysely).toBe("function");
  });

  it("another package missing (a dependency of the driver) is not reported as the driver missing", async () => {
    const error = await loadDriver("docket-test", "Test", () => import(absent)).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(AdapterError);
    expect(error).toMatchObject({ code: "ERR_MODULE_NOT_FOUND" });
  });

  it("a driver that fails to load for another reason fails with its own error", async () => {
    const own = new Error("native binding built for another Node");
    await expect(loadDriver("pg", "Test", () => Promise.reject(own))).rejects.toBe(own);
  });
});
