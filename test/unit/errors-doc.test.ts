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
