import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The checks of the layout (file lengths, Lua's home, what runs on import, who reads the
// environment, ARCHITECTURE.md's names) read the repository's own files: one walk for all.

/** The repository's root folder, with a trailing slash. */
export const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** Every .ts file under `dir` (repo-relative, forward slashes), declaration files included. */
export function tsFiles(dir: string): string[] {
  return readdirSync(path.join(REPO, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return tsFiles(rel);
    return entry.name.endsWith('.ts') ? [rel] : [];
  });
}

/** The text of the repo-relative `file`. */
export const repoText = (file: string): string => readFileSync(path.join(REPO, file), 'utf8');
