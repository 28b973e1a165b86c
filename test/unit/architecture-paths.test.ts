import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO, repoText, tsFiles } from '../helpers/repo-files.ts';

// ARCHITECTURE.md names the file (and function) behind each flow and invariant. Files move and
// functions get renamed; a map that names what is gone sends a reader nowhere, so every path it
// names must exist, and every name in brackets after a `src/…` path must be declared there.
const DOC = readFileSync(path.join(REPO, 'ARCHITECTURE.md'), 'utf8');

/** Every `src/…` path in the page, prose and code blocks alike (a trailing full stop is prose). */
function srcPaths(text: string): string[] {
  return [...new Set([...text.matchAll(/\bsrc\/[\w.*/-]+/g)].map((m) => m[0].replace(/[.,]+$/, '')))];
}

/** Whether `rel` (from the repo root) exists; a `*` in its last part matches any name in its folder. */
function exists(rel: string): boolean {
  if (!rel.includes('*')) return existsSync(path.join(REPO, rel));
  const dir = path.join(REPO, path.dirname(rel));
  const pattern = new RegExp(`^${path.basename(rel).replace(/[.]/g, '\\.').replace(/\*/g, '[^/]*')}$`);
  return existsSync(dir) && readdirSync(dir).some((f) => pattern.test(f));
}

/** Backticked file names outside src/ (`.dependency-cruiser.cjs`, `test/unit/….test.ts`): from the repo root. */
function otherFiles(text: string): string[] {
  return [...text.matchAll(/`([\w.-]+(?:\/[\w.-]+)*\.(?:ts|lua|cjs|md|json))`/g)].map((m) => m[1]!).filter((p) => !p.startsWith('src/'));
}

/**
 * The folder map (the code block under "## Folders"): each folder of src/ it lists, and each file
 * name it gives, resolved in the folder of its entry (`scripts/*.lua` under redis/, `cli/main.ts`
 * under src/ for the entry points).
 */
function folderMap(text: string): { folders: string[]; files: string[] } {
  const block = /## Folders\n+```\n([\s\S]*?)```/.exec(text)?.[1] ?? '';
  const folders: string[] = [];
  const files: string[] = [];
  let folder = '';
  for (const line of block.split('\n')) {
    // An entry may list several folders (`mcp/  http/  cli/`); file names follow one folder only.
    const entry = /^ {2}((?:[a-z]+\/ +)+)/.exec(line);
    if (entry) {
      const names = entry[1]!.trim().split(/\/ */).filter(Boolean);
      folders.push(...names);
      folder = names.length === 1 ? names[0]! : '';
    } else if (/^\S/.test(line) || /^ {2}[a-z]+\.ts/.test(line)) folder = '';
    for (const m of line.matchAll(/(?<![\w/])([\w*-]+(?:\/[\w*-]+)*\.(?:ts|lua))\b/g)) {
      files.push(path.posix.join('src', folder, m[1]!));
    }
  }
  return { folders, files };
}

/** Each `src/x.ts` (`name`, `Class.member`) of the page: the file and the names after it. */
function namedSymbols(text: string): { file: string; names: string[] }[] {
  return [...text.matchAll(/`(src\/[\w./-]+\.ts)`\s+\(((?:`[\w$.]+`(?:,\s*)?)+)\)/g)].map((m) => ({
    file: m[1]!,
    names: [...m[2]!.matchAll(/`([\w$.]+)`/g)].map((n) => n[1]!),
  }));
}

const regexSafe = (s: string) => s.replace(/[$]/g, '\\$');

/** Whether `source` declares `name` (`fn`, `Class`, `CONST`) or, for `Class.member`, the class and a member of that name. */
function declares(source: string, name: string): boolean {
  const [top, ...members] = name.split('.');
  const declared = new RegExp(`\\b(?:function|class|const|let|interface|type|enum)\\s+${regexSafe(top!)}\\b`).test(source);
  return (
    declared &&
    members.every((member) =>
      new RegExp(`^\\s*(?:(?:private|protected|public|static|readonly|async|get|set|override)\\s+)*${regexSafe(member)}\\s*[(<:=]`, 'm').test(source),
    )
  );
}

describe('ARCHITECTURE.md names only what exists', () => {
  it('finds the paths, the folder map and the named functions (so the checks below check something)', () => {
    expect(srcPaths(DOC).length).toBeGreaterThan(40);
    expect(folderMap(DOC).folders).toContain('history');
    expect(namedSymbols(DOC).length).toBeGreaterThan(30);
    expect(declares('export class A {\n  private async go(x: number) {}\n}', 'A.go')).toBe(true);
    expect(declares('export class A {\n  go() {}\n}', 'A.stop')).toBe(false);
    expect(declares('export const blobRestoreOp: H = async () => {}', 'blobRestoreOp')).toBe(true);
    expect(srcPaths('`src/a/b.ts`. and src/c.ts, and `src/…`')).toEqual(['src/a/b.ts', 'src/c.ts']);
  });

  it('names every src/ path as one that exists', () => {
    expect(srcPaths(DOC).filter((p) => !exists(p))).toEqual([]);
  });

  it('names other files (tests, tool configs) as ones that exist', () => {
    expect(otherFiles(DOC).filter((p) => !exists(p))).toEqual([]);
  });

  it("lists every folder of src/ in the folder map, and each file it names there in that entry's folder", () => {
    const map = folderMap(DOC);
    const actual = readdirSync(path.join(REPO, 'src')).filter((f) => statSync(path.join(REPO, 'src', f)).isDirectory());
    expect([...map.folders].sort()).toEqual([...actual].sort());
    expect(map.files.length).toBeGreaterThan(5);
    expect(map.files.filter((f) => !exists(f))).toEqual([]);
  });

  it('names every folder inside a folder of src/ in the folder map (`ops/`, `web/browser/`)', () => {
    const block = /## Folders\n+```\n([\s\S]*?)```/.exec(DOC)?.[1] ?? '';
    const inner = (dir: string): string[] =>
      readdirSync(path.join(REPO, dir), { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .flatMap((e) => [`${dir}/${e.name}`, ...inner(`${dir}/${e.name}`)]);
    const nested = inner('src').filter((d) => d.split('/').length > 2);
    expect(nested).toContain('src/shards/ops');
    // Named as the part below its top folder, as its entry gives it: `ops/` under shards/.
    expect(nested.filter((d) => !block.includes(`${d.split('/').slice(2).join('/')}/`))).toEqual([]);
  });

  it('declares each name given in brackets after a src/ path in that file', () => {
    const missing: string[] = [];
    for (const { file, names } of namedSymbols(DOC)) {
      const source = readFileSync(path.join(REPO, file), 'utf8');
      for (const name of names) if (!declares(source, name)) missing.push(`${file}: ${name}`);
    }
    expect(missing).toEqual([]);
  });

  it('declares each Class.member named on its own (`CallParking.resume`) in some file of src/', () => {
    const sources = new Map(tsFiles('src').map((file) => [file, repoText(file)]));
    const named = [...new Set([...DOC.matchAll(/`([A-Z]\w*\.[a-z]\w*)`/g)].map((m) => m[1]!))];
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((name) => ![...sources.values()].some((source) => declares(source, name)))).toEqual([]);
  });
});
