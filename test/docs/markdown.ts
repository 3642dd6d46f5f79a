/**
 * Reading the repository's documentation for the docs tests: the Markdown
 * files (README.md and docs/*.md), their fenced code blocks, their relative
 * links, and the anchors their headings get on GitHub.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** README.md and every docs/*.md, as paths relative to the repository root. */
export function docFiles(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort();
  return ["README.md", ...docs.map((f) => `docs/${f}`)];
}

export function readDoc(file: string): string {
  return readFileSync(join(ROOT, file), "utf8");
}

export interface CodeBlock {
  /** The fence's info string's first word ("ts", "sh", "" for none). */
  lang: string;
  /** 1-based line of the block's first code line in its file. */
  line: number;
  code: string;
  /** The text inside an HTML comment (`<!-- … -->`, on one line) that is the last non-blank line before the fence, trimmed; null when there is none. */
  comment: string | null;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/;

/** The fenced code blocks of `text`; an unclosed fence runs to the end, as GitHub renders it. */
export function codeBlocks(text: string): CodeBlock[] {
  const lines = text.split("\n");
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = new RegExp(`^\\s*${fence![0]}{${fence!.length},}\\s*$`).exec(lines[j]!);
      if (close) break;
      body.push(lines[j]!.startsWith(indent!) ? lines[j]!.slice(indent!.length) : lines[j]!);
    }
    let k = i - 1;
    while (k >= 0 && lines[k]!.trim() === "") k--;
    const comment = k >= 0 ? /^\s*<!--([\s\S]*?)-->\s*$/.exec(lines[k]!) : null;
    blocks.push({ lang: lang!.toLowerCase(), line: i + 2, code: body.join("\n"), comment: comment ? comment[1]!.trim() : null });
    i = j;
  }
  return blocks;
}

/** `text` with the lines of fenced blocks (fences included) blanked out, line count kept. */
function withoutFences(text: string): string {
  let fence: string | null = null;
  return text
    .split("\n")
    .map((line) => {
      const m = FENCE.exec(line);
      if (fence === null && m) {
        fence = m[2]!;
        return "";
      }
      if (fence !== null) {
        if (new RegExp(`^\\s*${fence[0]}{${fence.length},}\\s*$`).test(line)) fence = null;
        return "";
      }
      return line;
    })
    .join("\n");
}

/** `text` with fenced blocks and inline code spans blanked out, line count kept: the prose. */
export function prose(text: string): string {
  return withoutFences(text).replace(/(`+)[\s\S]*?\1/g, (span) => span.replace(/[^\n]/g, " "));
}

export interface Link {
  line: number;
  /** The target as written: `path`, `path#anchor` or `#anchor`. */
  target: string;
}

/** The relative links and images of `text` (`[text](target)`, `![alt](target)`), outside code; URLs with a scheme are left out. */
export function relativeLinks(text: string): Link[] {
  const links: Link[] = [];
  prose(text)
    .split("\n")
    .forEach((line, i) => {
      for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
        const target = m[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        links.push({ line: i + 1, target });
      }
    });
  return links;
}

/** GitHub's anchor for a heading's text: lower case, markup and punctuation dropped, spaces to `-`. */
export function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of every heading in `text` (ATX headings outside code), repeats numbered `-1`, `-2` as GitHub does. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const line of withoutFences(text).split("\n")) {
    const m = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    result.add(n === 0 ? base : `${base}-${n}`);
  }
  return result;
}
