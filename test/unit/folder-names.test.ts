import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO, repoText } from '../helpers/repo-files.ts';

// DESIGN.md "Layout": folders are named for what they hold, not for the library that does it
// (`redis/` holds key names and the events stream; a `bullmq/` would say how, not what). Kept by
// this check: no folder of src/ bears the name of a package this repo depends on (a scoped
// package by its last part, `@aws-sdk/client-s3` as `client-s3`).

/** Every folder below `root`, from the repo root. */
function foldersOf(root: string): string[] {
  return readdirSync(path.join(REPO, root), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => [`${root}/${e.name}`, ...foldersOf(`${root}/${e.name}`)]);
}

/** The names a folder may not bear: each dependency's, a scoped one's last part too. */
function libraryNames(): Set<string> {
  const pkg = JSON.parse(repoText('package.json')) as Record<string, Record<string, string> | undefined>;
  const names = ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'].flatMap((k) => Object.keys(pkg[k] ?? {}));
  return new Set(names.flatMap((n) => [n, n.split('/').at(-1)!]));
}

/** The folders of `folders` named after a library of `libraries`. */
const namedAfterLibrary = (folders: string[], libraries: Set<string>) => folders.filter((f) => libraries.has(path.basename(f)));

describe('folders are named for what they hold', () => {
  it('names no folder of src/ after a library it uses', () => {
    const libraries = libraryNames();
    expect(libraries.has('bullmq') && libraries.has('client-s3')).toBe(true);
    expect(namedAfterLibrary(['src/shards', 'src/bullmq', 'src/blobs/client-s3'], libraries)).toEqual(['src/bullmq', 'src/blobs/client-s3']);
    const folders = foldersOf('src');
    expect(folders).toContain('src/redis/scripts');
    expect(namedAfterLibrary(folders, libraries)).toEqual([]);
  });
});
