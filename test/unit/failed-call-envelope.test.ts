import { describe, expect, it } from 'vitest';
import { failedCallEnvelope } from '../../src/calls/call-answers.ts';

// Session 29, F5: the fault ledger's writes answered INTERNAL "The call failed: job stalled more
// than allowable limit" had committed, each once. BullMQ fails a job that stalled twice (its
// process SIGSTOPped 10 s while it ran, then the worker that took it over SIGKILLed): the call
// was running, so it may have run, and a resend under its id answers its outcome (a failed call
// runs again; a write that committed is replayed by its record).
describe('failedCallEnvelope', () => {
  it('answers a job failed for stalling UNAVAILABLE, mayStillRun: it was running', () => {
    const env = failedCallEnvelope({ callId: 'w-1', tool: 'DATA_WRITE_SQL' }, 'job stalled more than allowable limit');
    expect(env).toMatchObject({ ok: false, callId: 'w-1', error: { code: 'UNAVAILABLE' }, mayStillRun: true });
    expect((env as { error: { message: string } }).error.message).toMatch(/may have run.*same call id/);
  });

  // Session 36, F15: a read has no effect; stalled past its limit (its run once more stalled too)
  // it is refused without a "may have run" the caller could do nothing with.
  it('answers a read failed for stalling UNAVAILABLE without mayStillRun: nothing was changed', () => {
    const env = failedCallEnvelope({ callId: 'r-1', tool: 'DATA_QUERY_SQL' }, 'job stalled more than allowable limit');
    expect(env).toMatchObject({ ok: false, callId: 'r-1', error: { code: 'UNAVAILABLE' } });
    expect(env).not.toHaveProperty('mayStillRun');
    expect((env as { error: { message: string } }).error.message).toMatch(/nothing was changed.*same call id/);
  });

  // Session 32, F9: a write run again on a full disk whose database could be neither opened nor
  // read, or whose child died and whose record could not be read, runs again; its retries spent,
  // it may have committed, and is not answered as if nothing ran.
  it('says mayStillRun for a write whose record could not be read', () => {
    const reason =
      'UNAVAILABLE: the disk is full and the database cannot be opened, and whether it committed in an earlier run of this write (its worker gone before answering) could not be read from its files';
    expect(failedCallEnvelope({ callId: 'w-2', tool: 'DATA_WRITE_SQL' }, reason)).toMatchObject({ error: { code: 'UNAVAILABLE' }, mayStillRun: true });
    const died = 'UNAVAILABLE: the database process died during the write (EXECUTOR_CRASHED) and whether it committed could not be read: gone';
    expect(failedCallEnvelope({ callId: 'w-3', tool: 'DATA_WRITE_SQL' }, died)).toMatchObject({ mayStillRun: true });
    expect(failedCallEnvelope({ callId: 'c', tool: 'T' }, 'UNAVAILABLE: no database process could start')).not.toHaveProperty('mayStillRun');
  });

  it('keeps INTERNAL for a fault of its own, and a retryable code for one that says it', () => {
    expect(failedCallEnvelope({ callId: 'c', tool: 'T' }, 'boom')).toMatchObject({ error: { code: 'INTERNAL' } });
    expect(failedCallEnvelope({ callId: 'c', tool: 'T' }, 'UNAVAILABLE: no database process could start')).toMatchObject({
      error: { code: 'UNAVAILABLE', message: expect.stringContaining('No database process') },
    });
  });
});
