import { describe, expect, it } from 'vitest';
import { db } from '../../src/index.ts';
import { applyDbPolicy, translateDbCall } from '../../src/policy/db-surface.ts';

const thrown = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  }
  return undefined;
};

describe('db() options', () => {
  it('fails at once, with INVALID_ARGUMENTS naming the option, on bad options', () => {
    const base = { workspace: 'acme', agent: 'scout' };
    expect(thrown(() => db({ ...base } as never))).toMatchObject({
      code: 'INVALID_ARGUMENTS',
      message: expect.stringContaining('client must be an AgentDbClient'),
    });
    expect(thrown(() => db({ ...base, client: {} } as never))?.message).toContain('client must be an AgentDbClient');
    expect(thrown(() => db({ client: {}, workspace: 'Acme!', agent: 'scout' } as never))?.message).toContain('workspace: workspace must be 1 to 63');
    expect(thrown(() => db({ ...base, client: {}, mode: 'rw' } as never))?.message).toContain('mode: Invalid option: expected one of "read"|"write"');
    expect(thrown(() => db({ ...base, client: {}, policy: 'maybe' } as never))?.message).toContain(
      'policy must be one of allow, require-approval, deny, retryable-failure',
    );
    expect(thrown(() => db({ ...base, client: {}, extra: 1 } as never))?.message).toContain('extra');
    expect(thrown(() => db(undefined as never))).toMatchObject({ code: 'INVALID_ARGUMENTS' });
  });
});

describe('applyDbPolicy', () => {
  const surface = { kind: 'db', mode: 'write', schemaMode: 'read', policy: 'allow' } as const;
  const exec = translateDbCall(surface, 'db_exec', { statement: 'INSERT INTO t VALUES (1)', rationale: 'why' });

  it('gates db_exec only, as translateDbCall does with the same policy', () => {
    for (const policy of ['allow', 'require-approval', 'deny', 'retryable-failure'] as const) {
      const fixed = translateDbCall({ ...surface, policy }, 'db_exec', { statement: 'INSERT INTO t VALUES (1)', rationale: 'why' });
      expect(applyDbPolicy(exec, policy)).toEqual(fixed);
    }
    const query = translateDbCall(surface, 'db_query', { statement: 'SELECT 1' });
    expect(applyDbPolicy(query, 'deny')).toEqual(query);
  });

  it('leaves a refusal as it is: the checks come before any policy', () => {
    const refused = translateDbCall(surface, 'db_exec', { statement: 'SELECT 1', rationale: 'why' });
    expect(applyDbPolicy(refused, 'allow')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
  });
});
