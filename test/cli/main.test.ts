/** `docket --version`, `-v` and `help`, in process (no database needed). */
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";
import { main } from "../../src/cli/main.ts";
import { EXIT } from "../../src/cli/usage.ts";

afterEach(() => vi.restoreAllMocks());

describe("docket CLI: version and help", () => {
  it("--version and -v print the package's version and exit 0; help and --help print the usage and exit 0", async () => {
    const version = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
    const out: string[] = [];
    vi.spyOn(console, "log").mockImplementation((m: unknown) => void out.push(String(m)));
    expect(await main(["--version"])).toBe(EXIT.ok);
    expect(await main(["-v"])).toBe(EXIT.ok);
    expect(out.slice(0, 2)).toEqual([version, version]);
    expect(await main(["help"])).toBe(EXIT.ok);
    expect(await main(["--help"])).toBe(EXIT.ok);
    expect(out.slice(2).every((text) => text.startsWith("docket — operate a docket job queue"))).toBe(true);
  });
});
