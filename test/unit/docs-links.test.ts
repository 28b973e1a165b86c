import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The README is short and sends readers into docs/: a link that leads nowhere loses them, so
// every relative link of README.md, ARCHITECTURE.md and docs/*.md must reach a file, and its
// #anchor a heading. (The source paths ARCHITECTURE.md names: architecture-paths.test.ts.)
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const PAGES = [
  'README.md',
  'ARCHITECTURE.md',
  ...readdirSync(path.join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text of a page outside fenced code blocks and inline code, where links are links. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's heading anchors: lower case, punctuation dropped, each space a hyphen; repeats get -1, -2. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const base = m[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Every relative link target of a page: [text](target) and ![alt](target). */
function links(text: string): string[] {
  return [...prose(text).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

describe('links of README.md, ARCHITECTURE.md and docs/', () => {
  it('finds the pages and their links (so the check below checks something)', () => {
    expect(PAGES).toContain('README.md');
    expect(PAGES).toContain('docs/errors.md');
    expect(links(readFileSync(path.join(REPO, 'README.md'), 'utf8')).length).toBeGreaterThan(10);
  });

  it('reads anchors and links as GitHub does', () => {
    expect(anchors('# Security model\n## The db_* surface\n## Blob store: big, small\n```sh\n# not a heading\n```\n## Tests\n## Tests\n')).toEqual(
      new Set(['security-model', 'the-db_-surface', 'blob-store-big-small', 'tests', 'tests-1']),
    );
    expect(links('[a](b.md) `[c](d.md)` ![e](f.png) [g](https://x.io/h) [i](#j)\n```\n[k](l.md)\n```\n')).toEqual(['b.md', 'f.png', '#j']);
  });

  it('resolves every relative link to an existing file, and every #anchor to a heading of it', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      for (const target of links(readFileSync(path.join(REPO, page), 'utf8'))) {
        const [file, anchor] = target.split('#') as [string, string | undefined];
        const resolved = file ? path.posix.normalize(path.posix.join(path.posix.dirname(page), file)) : page;
        const where = path.join(REPO, resolved);
        if (!existsSync(where)) {
          broken.push(`${page}: ${target} (no file ${resolved})`);
          continue;
        }
        if (anchor === undefined) continue;
        if (!statSync(where).isFile() || !anchors(readFileSync(where, 'utf8')).has(anchor))
          broken.push(`${page}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    expect(broken).toEqual([]);
  });
});
