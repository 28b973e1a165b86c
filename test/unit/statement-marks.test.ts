import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { StatementMarks } from '../../src/executor/statement-marks.ts';

// What a dead child's unanswered requests became, by its last marks (see statement-marks.ts).
function sorted(started: number, finished: number, ids: number[]) {
  const marks = new StatementMarks({} as ChildProcess);
  Object.assign(marks, { started, finished });
  const { finished: done, running, unread } = marks.sort(ids.map((id) => ({ id })));
  return { finished: done.map((s) => s.id), running: running?.id, unread: unread.map((s) => s.id) };
}

describe('statement marks', () => {
  it('blames the last request started, reruns the ones before it, hands back the ones after', () => {
    expect(sorted(7, 4, [5, 6, 7, 8, 9])).toEqual({ finished: [5, 6], running: 7, unread: [8, 9] });
  });

  it('blames nobody when the child said it finished what it started', () => {
    expect(sorted(7, 7, [6, 7, 8])).toEqual({ finished: [6, 7], running: undefined, unread: [8] });
  });

  it('hands everything back when the child started none of it (killed while idle)', () => {
    expect(sorted(4, 4, [5, 6])).toEqual({ finished: [], running: undefined, unread: [5, 6] });
    expect(sorted(0, 0, [1])).toEqual({ finished: [], running: undefined, unread: [1] });
  });
});
