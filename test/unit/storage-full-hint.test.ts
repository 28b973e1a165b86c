import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors.ts';

// A write refused STORAGE_FULL ran nothing and runs when sent again under its id
// (retry-under-id.test.ts; an approved write's too, session 34, D1): its hint sent callers to a new
// call id, saying the same id would answer the refusal again, which it does not.
describe("STORAGE_FULL's hint", () => {
  it('says to send the write again under its call id, which runs it', () => {
    expect(ERRORS.STORAGE_FULL.hint).toContain('runs when sent again under the same call id');
    expect(ERRORS.STORAGE_FULL.hint).not.toContain('answers this outcome again');
  });
});
