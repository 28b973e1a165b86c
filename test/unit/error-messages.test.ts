import { describe, expect, it } from 'vitest';
import { asSentence, ERRORS, type ErrorCode, errorBody } from '../../src/errors.ts';

// Session 31, H6: a detail was joined to the registry's message as written, a phrase, so messages
// read "The statement is not allowed here. no such table: t" or "… nothing was stored, created or
// run. writes refused: workspace w holds …". Every message reads as sentences now.
const codes = Object.keys(ERRORS) as ErrorCode[];
/** A sentence opens with a capital, or with agentdb's own name (written in lower case). */
const opensSentence = (text: string) => /^([A-Z]|agentdb )/.test(text);

describe("the registry's messages", () => {
  it('are sentences: each opens with a capital and ends with a full stop', () => {
    for (const code of codes) {
      const { message } = ERRORS[code];
      expect(opensSentence(message), code).toBe(true);
      expect(message.endsWith('.'), code).toBe(true);
    }
  });

  it('joined with a detail written as a phrase, read as sentences, whatever the code', () => {
    for (const code of codes) {
      const { message } = errorBody(code, 'writes refused: workspace w holds 5 bytes (its quota is 4)');
      expect(message, code).toBe(`${ERRORS[code].message} Writes refused: workspace w holds 5 bytes (its quota is 4).`);
      for (const sentence of message.split(/(?<=[.!?]) /)) expect(opensSentence(sentence), `${code}: ${sentence}`).toBe(true);
    }
  });
});

describe('a detail as a sentence', () => {
  it("capitalises an opening word and ends with a full stop, SQLite's own words included", () => {
    expect(asSentence('no such table: leads')).toBe('No such table: leads.');
    expect(asSentence('near "FROMM": syntax error')).toBe('Near "FROMM": syntax error.');
    expect(asSentence('Rejected by bob: not today')).toBe('Rejected by bob: not today.');
    expect(asSentence('the table is gone.')).toBe('The table is gone.');
    expect(asSentence('is it?')).toBe('Is it?');
    // A detail cut to its bound ends with the cut's own mark, not a stop after it.
    expect(asSentence('near "ss… [99030 bytes cut]')).toBe('Near "ss… [99030 bytes cut]');
  });

  it('keeps a name that opens it as written: a field, an identifier, a quote, a figure', () => {
    expect(asSentence('sql: Required')).toBe('sql: Required.');
    expect(asSentence('arguments.max_rows: Too big')).toBe('arguments.max_rows: Too big.');
    expect(asSentence('as_of 2026-01-01T00:00:00Z is in the future')).toBe('as_of 2026-01-01T00:00:00Z is in the future.');
    expect(asSentence('"x.1" is no history position')).toBe('"x.1" is no history position.');
    expect(asSentence('3 of 4 tables')).toBe('3 of 4 tables.');
  });
});
