import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors.ts';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
const rows = new Map([...doc.matchAll(/^\| `([A-Z_]+)` \| (\d+) \| (yes|no) \|/gm)].map((m) => [m[1], { status: Number(m[2]), retryable: m[3] === 'yes' }]));

describe('docs/errors.md', () => {
  it('documents every registry code with its status and retryability', () => {
    for (const [code, spec] of Object.entries(ERRORS)) {
      expect(rows.get(code), code).toEqual({ status: spec.status, retryable: spec.retryable });
    }
  });

  it('documents no code the registry lacks', () => {
    expect([...rows.keys()].sort()).toEqual(Object.keys(ERRORS).sort());
  });
});

describe("docs/errors.md's exit status", () => {
  const section = doc.slice(doc.indexOf('## Exit status of `agentdb` commands'));
  const codesOf = (exit: number) =>
    [...(new RegExp(`^\\| ${exit} \\|[^|]*\\| ([^|]*) \\|$`, 'm').exec(section)?.[1] ?? '').matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]).sort();

  it('names every code that exits 2 and 3, as the CLI maps them', async () => {
    const { exitFor } = await import('../../src/cli/exit-status.ts');
    const codes = Object.keys(ERRORS) as (keyof typeof ERRORS)[];
    expect(codesOf(2)).toEqual(codes.filter((c) => exitFor(c) === 2).sort());
    expect(codesOf(3)).toEqual(codes.filter((c) => exitFor(c) === 3).sort());
    for (const c of codesOf(1)) expect(exitFor(c as keyof typeof ERRORS), c).toBe(1);
  });
});
