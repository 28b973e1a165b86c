import { describe, expect, it } from 'vitest';
import { errorEnvelope } from '../../src/contracts/envelope.ts';
import { errorBody, MAX_DETAIL_BYTES } from '../../src/errors.ts';
import { ENVELOPE_RESERVE_BYTES, resultBudget, shortened } from '../../src/sqlite/result-budget.ts';

describe('shortened', () => {
  it('leaves text of up to 256 bytes alone', () => {
    expect(shortened('n'.repeat(256))).toBe('n'.repeat(256));
    expect(shortened('日'.repeat(85))).toBe('日'.repeat(85));
  });

  it('cuts longer text to 256 bytes in all, ending with how long it was', () => {
    const cut = shortened('n'.repeat(90_000));
    expect(cut).toMatch(/^n+…\[90000 bytes\]$/);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(256);
    expect(Buffer.byteLength(cut)).toBeGreaterThan(230);
  });

  it('never cuts a character in half', () => {
    for (const text of ['日'.repeat(100), '🙂'.repeat(100), `a${'🙂'.repeat(100)}`]) {
      const cut = shortened(text);
      expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(256);
      expect(cut).not.toContain('\uFFFD');
      expect(Buffer.from(cut, 'utf8').toString('utf8')).toBe(cut);
      expect(cut.endsWith(`…[${Buffer.byteLength(text)} bytes]`)).toBe(true);
    }
  });
});

describe('error details', () => {
  it('are cut past MAX_DETAIL_BYTES, saying how much was cut', () => {
    const body = errorBody('SQL_SYNTAX', `near "'${'s'.repeat(100_000)}'": syntax error`);
    expect(body.message).toMatch(/^The SQL could not be parsed\. Near "'s+… \[\d+ bytes cut\]$/);
    expect(Buffer.byteLength(body.message)).toBeLessThan(MAX_DETAIL_BYTES + 100);
  });

  it('are kept whole up to the cap', () => {
    // Whole, as a sentence (its first word capitalised, a full stop at its end).
    const detail = 'x'.repeat(MAX_DETAIL_BYTES);
    expect(errorBody('SQL_ERROR', detail).message).toBe(`SQLite refused the statement. X${detail.slice(1)}.`);
  });

  it('fit any allowed MAX_RESULT_BYTES in their envelope, whatever the caller sent as call id and tool', () => {
    const env = errorEnvelope('c'.repeat(100_000), '\u0001'.repeat(100_000), 'NOT_PERMITTED', '\u0001'.repeat(100_000));
    expect(Buffer.byteLength(JSON.stringify(env))).toBeLessThanOrEqual(4096);
  });
});

describe('resultBudget', () => {
  it('keeps room for the envelope', () => {
    expect(resultBudget(1024 * 1024)).toBe(1024 * 1024 - ENVELOPE_RESERVE_BYTES);
    expect(resultBudget(4096)).toBeGreaterThan(2048);
  });
});
