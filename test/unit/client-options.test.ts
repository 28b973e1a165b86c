import { describe, expect, it } from 'vitest';
import { AgentDbClient } from '../../src/index.ts';

const made = (opts: unknown) => {
  try {
    new AgentDbClient(opts as never);
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  }
  return undefined;
};

describe('AgentDbClient options', () => {
  it('refuses a bad Redis URL, prefix or number at once, naming each, before connecting', () => {
    expect(made({ redisUrl: 'localhost:6379' })).toEqual({
      code: 'INVALID_ARGUMENTS',
      message: 'INVALID_ARGUMENTS: AgentDbClient: redisUrl: must be a redis:// or rediss:// URL',
    });
    expect(made({ redisUrl: 'redis://[bad' })?.message).toContain('redisUrl: must be a redis:// or rediss:// URL');
    expect(made({ prefix: 'agent db:{x}' })?.message).toContain('prefix: letters, digits, _ and - only (1 to 64)');
    expect(made({ shardCount: 0, approvalTtlMs: -5 })?.message).toMatch(/shardCount: .*; approvalTtlMs: /);
    expect(made({ tracing: 'yes' })?.message).toContain('tracing: ');
  });
});
