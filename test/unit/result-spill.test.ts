import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ResultSpill } from '../../src/sqlite/result-spill.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-spill-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a spilled result', () => {
  it('is one JSON document of the columns and rows, encoded as envelopes encode them', () => {
    const spill = new ResultSpill(dir, ['id', 'v']);
    spill.encodedRow([1, 'kept']);
    const big = Buffer.alloc(1024 * 1024 + 7, 0xab);
    spill.rawRow([2n, big]);
    spill.rawRow([2n ** 60n, 'tab\tand "quote"']);
    spill.rawRow([null, 1.5]);
    const done = spill.finish();
    const text = readFileSync(done.file, 'utf8');
    expect(done).toMatchObject({ rows: 4, bytes: Buffer.byteLength(text) });
    expect(JSON.parse(text)).toEqual({
      columns: ['id', 'v'],
      rows: [
        [1, 'kept'],
        // A blob larger than one base64 slice joins into one valid base64 string.
        [2, { $blob: big.toString('base64') }],
        [String(2n ** 60n), 'tab\tand "quote"'],
        [null, 1.5],
      ],
    });
  });

  it('leaves nothing behind when aborted', () => {
    const spill = new ResultSpill(dir, ['x']);
    spill.rawRow([1n]);
    spill.abort();
    expect(existsSync(spill.file)).toBe(false);
  });
});

describe('a spilled result with a cap', () => {
  it('never grows past the cap, stays one JSON document, and says it was capped', () => {
    const cap = 10_000;
    const spill = new ResultSpill(dir, ['i', 'b'], cap);
    let written = 0;
    for (let i = 0; i < 100; i++) {
      if (!spill.rawRow([BigInt(i), Buffer.alloc(1000, 1)])) break;
      written++;
    }
    expect(spill.full).toBe(true);
    // A row larger than the cap on its own is refused whole, not written in part.
    expect(spill.rawRow([1n, Buffer.alloc(1024 * 1024)])).toBe(false);
    const done = spill.finish();
    const text = readFileSync(done.file, 'utf8');
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(cap);
    expect(done).toMatchObject({ rows: written, capped: { maxBytes: cap } });
    expect(JSON.parse(text).rows).toHaveLength(written);
    expect(written).toBeGreaterThan(5);
  });
});
