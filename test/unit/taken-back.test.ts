import { describe, expect, it } from 'vitest';
import { takenBackBy, type RestoreRecord } from '../../src/calls/taken-back.ts';

// Session 38, F19: which restore keeps a write taken back, walking its database's restores in
// the order they ran (the write's job began at 100).
const r = (undoId: string, restoredTo: number, began: number, undoes?: string): RestoreRecord => ({
  undoId,
  restoredTo,
  began,
  ...(undoes ? { undoes } : {}),
});

describe('takenBackBy', () => {
  it('a restore to a moment before the write, run after it, took it back', () => {
    expect(takenBackBy([r('u1', 50, 200)], 100)?.undoId).toBe('u1');
  });
  it('a restore run before the write, or to a moment after it, did not', () => {
    expect(takenBackBy([r('u1', 50, 90)], 100)).toBeUndefined();
    expect(takenBackBy([r('u1', 150, 200)], 100)).toBeUndefined();
  });
  it('undone, the write is back; a second restore after the undo takes it again', () => {
    expect(takenBackBy([r('u1', 50, 200), r('u2', 60, 300, 'u1')], 100)).toBeUndefined();
    expect(takenBackBy([r('u1', 50, 200), r('u2', 60, 300, 'u1'), r('u3', 80, 400)], 100)?.undoId).toBe('u3');
  });
  it('the undo of a restore that ran before the write takes the write back', () => {
    expect(takenBackBy([r('u1', 10, 90), r('u2', 10, 300, 'u1')], 100)?.undoId).toBe('u2');
  });
  it('a restore to a moment after an earlier restore took the write back keeps it gone', () => {
    expect(takenBackBy([r('u1', 50, 200), r('u2', 250, 300)], 100)?.undoId).toBe('u1');
    // To a moment after the write and before the restore that took it: the write is back.
    expect(takenBackBy([r('u1', 50, 200), r('u2', 150, 300)], 100)).toBeUndefined();
  });
});
