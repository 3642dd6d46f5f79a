import { existsSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, anchors, docFiles, readDoc, relativeLinks } from "./markdown.ts";

/** The README a newcomer reads in ten minutes (issue 28); the rest lives in docs/. */
const README_MAX_LINES = 250;

describe("documentation links", () => {
  it("every relative link of README.md and docs/*.md names a file that exists, and every #anchor a heading of its target", () => {
    const broken: string[] = [];
    const headings = new Map<string, Set<string>>();
    const anchorsOf = (file: string) => {
      let found = headings.get(file);
      if (!found) headings.set(file, (found = anchors(readDoc(file))));
      return found;
    };
    for (const file of docFiles()) {
      for (const { line, target } of relativeLinks(readDoc(file))) {
        const hash = target.indexOf("#");
        const path = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
        const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
        const resolved = path === "" ? file : normalize(join(dirname(file), path));
        const where = `${file}:${line}: ${target}`;
        if (resolved.startsWith("..") || !existsSync(join(ROOT, resolved))) {
          broken.push(`${where} (no file ${resolved})`);
          continue;
        }
        if (anchor === null) continue;
        if (!resolved.endsWith(".md") || statSync(join(ROOT, resolved)).isDirectory()) {
          broken.push(`${where} (an anchor into ${resolved}, which has no headings)`);
        } else if (!anchorsOf(resolved).has(anchor)) {
          broken.push(`${where} (no heading #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("README.md links every docs page", () => {
    const linked = new Set(relativeLinks(readDoc("README.md")).map((l) => normalize(l.target.replace(/#.*$/, ""))));
    const pages = docFiles().filter((f) => f.startsWith("docs/"));
    expect(pages.filter((page) => !linked.has(page))).toEqual([]);
  });

  it(`README.md has at most ${README_MAX_LINES} lines`, () => {
    const lines = readDoc("README.md").replace(/\n$/, "").split("\n").length;
    expect(lines).toBeLessThanOrEqual(README_MAX_LINES);
  });
});

describe("the markdown reader the docs tests use", () => {
  it("finds GitHub's anchors (lower case, punctuation and markup dropped, spaces to -, repeats numbered) and the relative links outside code", () => {
    const text = [
      "# Operating docket",
      "## Completion in the handler's transaction",
      "## `docket/otel` and *W3C* propagation",
      "## Events",
      "```sh",
      "# not a heading",
      "```",
      "## Events",
      "See [a](b.md#c), ![img](d.png), [web](https://example.com) and `[code](x.md)`.",
    ].join("\n");
    expect([...anchors(text)]).toEqual([
      "operating-docket",
      "completion-in-the-handlers-transaction",
      "docketotel-and-w3c-propagation",
      "events",
      "events-1",
    ]);
    expect(relativeLinks(text).map((l) => l.target)).toEqual(["b.md#c", "d.png"]);
  });
});
