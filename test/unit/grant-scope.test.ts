import { describe, expect, it } from 'vitest';
import { levelAllows, levelOfScope, narrowerLevel, roleLevel, scopeOfLevel } from '../../src/contracts/grant-scope.ts';
import { resolveAccess, type Caller } from '../../src/policy/access.ts';

const granted = (role: 'member' | 'admin', level?: 'read' | 'write' | 'drop'): Caller => ({
  kind: 'member',
  workspace: 'acme',
  member: 'ada',
  role,
  ...(level ? { granted: level } : {}),
});
const code = (c: Caller, tool: 'DATA_QUERY_SQL' | 'DATA_WRITE_SQL' | 'DATA_DROP_TABLE', agent?: string) => {
  const v = resolveAccess(c, tool, agent ? { agent } : {});
  return v.ok ? 'ok' : v.code;
};

describe('OAuth grant scopes', () => {
  it('a scope asks for its highest known level; unknown scopes are left out', () => {
    expect(levelOfScope('read write drop')).toBe('drop');
    expect(levelOfScope('write')).toBe('write');
    expect(levelOfScope('openid read')).toBe('read');
    expect(levelOfScope('openid')).toBeUndefined();
    expect(levelOfScope(undefined)).toBeUndefined();
    expect(scopeOfLevel('write')).toBe('read write');
    expect(narrowerLevel('drop', roleLevel('member'))).toBe('write');
    expect(narrowerLevel('read', roleLevel('admin'))).toBe('read');
    expect(levelAllows('write', 'destructive')).toBe(false);
    expect(levelAllows('drop', 'destructive')).toBe(true);
  });

  it.each([
    ['read grant reads', granted('admin', 'read'), 'DATA_QUERY_SQL', 'ok'],
    ['read grant may not write', granted('admin', 'read'), 'DATA_WRITE_SQL', 'INSUFFICIENT_SCOPE'],
    ['write grant may not drop', granted('admin', 'write'), 'DATA_DROP_TABLE', 'INSUFFICIENT_SCOPE'],
    ['drop grant drops (admin)', granted('admin', 'drop'), 'DATA_DROP_TABLE', 'ok'],
    ['the role refuses first: a member drops nothing', granted('member', 'read'), 'DATA_DROP_TABLE', 'NOT_PERMITTED'],
    ['a key (no grant) goes as far as its role', granted('member'), 'DATA_WRITE_SQL', 'ok'],
  ] as const)('%s', (_name, caller, tool, expected) => {
    expect(code(caller, tool)).toBe(expected);
  });

  it("a read grant still reads another agent's tables, and writing them stays the role's refusal", () => {
    expect(code(granted('admin', 'read'), 'DATA_QUERY_SQL', 'scout')).toBe('ok');
    expect(code(granted('admin', 'read'), 'DATA_WRITE_SQL', 'scout')).toBe('NOT_PERMITTED');
  });
});
