import { describe, expect, it } from 'vitest';
import { positionIn, positionToken } from '../../src/history/position-token.ts';

describe('history positions marked with their database', () => {
  it('gives a position back in its own database, and refuses it in another with HISTORY_POSITION_FOREIGN', () => {
    const token = positionToken('acme/scout', 'g0000000001.00000001.3');
    expect(token).toMatch(/^g0000000001\.00000001\.3~[0-9a-f]{8}$/);
    expect(positionIn('acme/scout', token)).toBe('g0000000001.00000001.3');
    for (const other of ['acme/scouts', 'acme', 'beta/scout'])
      expect(() => positionIn(other, token)).toThrow(expect.objectContaining({ code: 'HISTORY_POSITION_FOREIGN' }));
    // A held call's id and a generation are positions too.
    expect(positionIn('acme', positionToken('acme', 'g0000000002.held.65'))).toBe('g0000000002.held.65');
    expect(positionIn('acme', positionToken('acme', 'g0000000002'))).toBe('g0000000002');
  });

  it('refuses a mark agentdb never gives out as a malformed position, not as another database’s (review R1)', () => {
    const token = positionToken('acme/scout', 'g0000000001.00000001.3');
    const position = token.slice(0, token.indexOf('~'));
    const mark = token.slice(token.indexOf('~') + 1);
    for (const bad of [
      `${position}~`,
      `${position}~${mark.toUpperCase()}`,
      `${position}~${mark.slice(0, 7)}`,
      `${position}~${mark}\u0000`,
      `${position}~${mark}0`,
    ])
      expect(() => positionIn('acme/scout', bad)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENTS' }));
  });

  it('reads a plain position (the form given out before marks) as the database’s own', () => {
    expect(positionIn('acme/scout', 'g0000000001.00000001.3')).toBe('g0000000001.00000001.3');
  });
});
