import { readFileSync } from 'node:fs';

/**
 * agentdb's version, from the nearest package.json above this file: the repository's when run
 * from the sources (src/cli/) or a build (dist/src/cli/), the installed package's when installed.
 */
export function packageVersion(): string {
  for (let dir = new URL('./', import.meta.url); ; dir = new URL('../', dir)) {
    try {
      return (JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { version: string }).version;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      if (dir.pathname === '/') return 'unknown';
    }
  }
}
