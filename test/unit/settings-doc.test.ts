import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ENV_NAMES } from '../../src/config.ts';

// docs/operations.md promises "every setting" in one table; a variable added to the config
// schema and documented only on another page (or nowhere) leaves an operator looking for it.

/** The variables the first column of the Configuration table names (one or several per row). */
function documented(): string[] {
  const text = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const section = text.slice(text.indexOf('\n## Configuration\n'));
  const table = section.slice(0, section.indexOf('\n#', 1));
  return table
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...line.split('|')[1]!.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1]!));
}

describe("docs/operations.md's table of settings", () => {
  it('reads the table (so the check below checks something)', () => {
    expect(documented()).toContain('REDIS_URL');
    expect(documented()).toContain('STALLED_INTERVAL_MS');
    expect(ENV_NAMES).toContain('REDIS_URL');
  });

  it('lists every variable of the config schema, and none it does not read', () => {
    const listed = documented();
    expect(ENV_NAMES.filter((name) => !listed.includes(name))).toEqual([]);
    expect(listed.filter((name) => !ENV_NAMES.includes(name))).toEqual([]);
    expect(listed.length).toBe(new Set(listed).size);
  });
});
