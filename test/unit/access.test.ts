import { describe, expect, it } from 'vitest';
import { agentSettings, type AgentSettingsInput } from '../../src/contracts/settings.ts';
import type { ToolName } from '../../src/contracts/tools.ts';
import { resolveAccess, type Caller, type TargetArgs } from '../../src/policy/access.ts';
import { gateFor } from '../../src/policy/approval-rule.ts';

const agent = (settings: AgentSettingsInput): Caller => ({
  kind: 'agent',
  workspace: 'acme',
  agent: 'scout',
  settings: agentSettings.parse(settings),
});
const member: Caller = { kind: 'member', workspace: 'acme', member: 'ada', role: 'member' };
const admin: Caller = { kind: 'member', workspace: 'acme', member: 'bo', role: 'admin' };

function verdict(caller: Caller, tool: ToolName, args: TargetArgs = {}) {
  const v = resolveAccess(caller, tool, args);
  return v.ok ? `ok ${v.target.workspace}/${v.target.agent ?? '*'}` : v.code;
}

describe('who may do what (DESIGN.md table)', () => {
  it.each<[string, Caller, ToolName, TargetArgs, string]>([
    ['database off: no tools', agent({}), 'DATA_DESCRIBE_SCHEMA', {}, 'DATABASE_OFF'],
    ['database off explicitly', agent({ database: 'off' }), 'DATA_QUERY_SQL', {}, 'DATABASE_OFF'],
    ['own tables by default', agent({ database: 'agent' }), 'DATA_WRITE_SQL', {}, 'ok acme/scout'],
    ['own drop', agent({ database: 'agent' }), 'DATA_DROP_TABLE', {}, 'ok acme/scout'],
    ['naming itself is its own', agent({ database: 'agent' }), 'DATA_WRITE_SQL', { agent: 'scout' }, 'ok acme/scout'],
    ['agent scope cannot reach shared', agent({ database: 'agent' }), 'DATA_QUERY_SQL', { scope: 'workspace' }, 'NOT_PERMITTED'],
    ['workspace scope reads shared', agent({ database: 'workspace' }), 'DATA_QUERY_SQL', { scope: 'workspace' }, 'ok acme/*'],
    ['shared write needs grant', agent({ database: 'workspace' }), 'DATA_WRITE_SQL', { scope: 'workspace' }, 'NOT_PERMITTED'],
    ['shared write with grant', agent({ database: 'workspace', sharedData: true }), 'DATA_WRITE_SQL', { scope: 'workspace' }, 'ok acme/*'],
    ['shared drop with grant', agent({ database: 'workspace', sharedData: true }), 'DATA_DROP_TABLE', { scope: 'workspace' }, 'ok acme/*'],
    ['other agent read needs grant', agent({ database: 'workspace' }), 'DATA_QUERY_SQL', { agent: 'outreach' }, 'NOT_PERMITTED'],
    ['other agent read with grant', agent({ database: 'workspace', sharedData: true }), 'DATA_QUERY_SQL', { agent: 'outreach' }, 'ok acme/outreach'],
    ['other agent never written', agent({ database: 'workspace', sharedData: true }), 'DATA_WRITE_SQL', { agent: 'outreach' }, 'NOT_PERMITTED'],
    ['other agent never dropped', agent({ database: 'workspace', sharedData: true }), 'DATA_DROP_TABLE', { agent: 'outreach' }, 'NOT_PERMITTED'],
    ['scope and agent together', agent({ database: 'workspace', sharedData: true }), 'DATA_QUERY_SQL', { agent: 'o', scope: 'workspace' }, 'INVALID_ARGUMENTS'],
    ['client defaults to shared', member, 'DATA_WRITE_SQL', {}, 'ok acme/*'],
    ['client has no own database', member, 'DATA_QUERY_SQL', { scope: 'agent' }, 'NOT_PERMITTED'],
    ['client reads an agent', member, 'DATA_QUERY_SQL', { agent: 'scout' }, 'ok acme/scout'],
    ['client never writes an agent', admin, 'DATA_WRITE_SQL', { agent: 'scout' }, 'NOT_PERMITTED'],
    ['member cannot drop shared', member, 'DATA_DROP_TABLE', {}, 'NOT_PERMITTED'],
    ['admin drops shared', admin, 'DATA_DROP_TABLE', {}, 'ok acme/*'],
  ])('%s', (_name, caller, tool, args, expected) => {
    expect(verdict(caller, tool, args)).toBe(expected);
  });

  it("tells a call without a key that an agent's registered settings are not its own", () => {
    // The usual surprise: `agents set --database agent`, then a CLI call without --settings.
    expect(resolveAccess(agent({}), 'DATA_QUERY_SQL', {})).toMatchObject({
      ok: false,
      code: 'DATABASE_OFF',
      detail: expect.stringContaining('without an agent key runs with the settings it passes'),
    });
  });
});

describe('approval gate', () => {
  it('runs reads and writes without approval by default', () => {
    expect(gateFor(agent({ database: 'agent' }), 'read').kind).toBe('run');
    expect(gateFor(agent({ database: 'agent' }), 'write').kind).toBe('run');
  });
  it('parks every write with approval: "write"', () => {
    expect(gateFor(agent({ database: 'agent', approval: 'write' }), 'write').kind).toBe('approval');
    expect(gateFor(agent({ database: 'agent', approval: 'write' }), 'read').kind).toBe('run');
  });
  it('parks every drop whatever the setting, and refuses it in a sandbox', () => {
    expect(gateFor(agent({ database: 'agent' }), 'destructive').kind).toBe('approval');
    expect(gateFor(agent({ database: 'agent', sandbox: true }), 'destructive')).toMatchObject({
      kind: 'refuse',
      code: 'SANDBOX_REFUSED',
    });
  });
  it('never parks a person’s own client', () => {
    expect(gateFor(admin, 'destructive').kind).toBe('run');
  });
});
