import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// Every setting src/config.ts reads from the environment has a row in docs/operations.md's
// configuration table: DRAIN_GRACE_MS and SCHEDULER_CHECK_MS were added to the schema (issue 25)
// and an operator could learn of them only from the source.
const root = path.resolve(import.meta.dirname, '../..');

function schemaKeys(): string[] {
  const text = fs.readFileSync(path.join(root, 'src/config.ts'), 'utf8');
  const start = text.indexOf('const envSchema = z.object({');
  expect(start, 'src/config.ts no longer declares envSchema: update this test').toBeGreaterThanOrEqual(0);
  const body = text.slice(start, text.indexOf('\n});', start));
  return [...body.matchAll(/^ {2}([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]!);
}

describe('docs/operations.md configuration table', () => {
  it('has a row for every environment setting of src/config.ts', () => {
    const keys = schemaKeys();
    expect(keys.length).toBeGreaterThan(30);
    const rows = fs
      .readFileSync(path.join(root, 'docs/operations.md'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('| `'))
      .map((l) => l.split('|')[1]!);
    const documented = new Set(rows.flatMap((cell) => [...cell.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!)));
    expect(keys.filter((k) => !documented.has(k))).toEqual([]);
  });
});
