import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';

describe('loadConfig', () => {
  it('fills every default from an empty environment', () => {
    const c = loadConfig({});
    expect(c.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(c.prefix).toBe('agentdb');
    expect(c.shardCount).toBe(16);
    expect(c.port).toBe(7070);
    expect(c.statementTimeoutMs).toBe(10_000);
    expect(c.statementCacheBytes).toBe(32 * 1024 * 1024);
    expect([c.maxResultBytes, c.maxCallBytes]).toEqual([64 * 1024, 1024 * 1024]);
    expect([c.resultTtlS, c.maxParkedCallBytes, c.redisBytesPerWorkspace, c.redisMemoryHeadroomPercent]).toEqual([24 * 3600, 64 * 1024, 0, 20]);
    expect(c.dataDir.endsWith('/data')).toBe(true);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('waits for a decision over MCP 25 s by default, and never as long as an MCP client waits for an answer (60 s)', () => {
    expect(loadConfig({}).mcpApprovalWaitMs).toBe(25_000);
    expect(loadConfig({ MCP_APPROVAL_WAIT_MS: '59999' }).mcpApprovalWaitMs).toBe(59_999);
    expect(() => loadConfig({ MCP_APPROVAL_WAIT_MS: '60000' })).toThrow(/MCP_APPROVAL_WAIT_MS/);
  });

  it('bounds HTTP connections and web-page CSV exports by settings, with the reviewed values as defaults', () => {
    const c = loadConfig({});
    expect(c.httpConnections).toEqual({ requestTimeoutMs: 30_000, perAddress: 256, total: 8_192 });
    expect(c.exportBounds).toEqual({ perMember: 4, perWorkspace: 8, total: 64 });
    const set = loadConfig({
      HTTP_REQUEST_TIMEOUT_MS: '60000',
      HTTP_CONNECTIONS_PER_ADDRESS: '2048',
      HTTP_MAX_CONNECTIONS: '20000',
      EXPORTS_PER_MEMBER: '2',
      EXPORTS_PER_WORKSPACE: '16',
      EXPORTS_MAX: '100',
    });
    expect(set.httpConnections).toEqual({ requestTimeoutMs: 60_000, perAddress: 2048, total: 20_000 });
    expect(set.exportBounds).toEqual({ perMember: 2, perWorkspace: 16, total: 100 });
    expect(() => loadConfig({ EXPORTS_PER_MEMBER: '0' })).toThrow(/EXPORTS_PER_MEMBER/);
    expect(() => loadConfig({ HTTP_CONNECTIONS_PER_ADDRESS: 'many' })).toThrow(/HTTP_CONNECTIONS_PER_ADDRESS/);
    expect(() => loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '10' })).toThrow(/HTTP_REQUEST_TIMEOUT_MS/);
  });

  it('reads and coerces values', () => {
    const c = loadConfig({ SHARD_COUNT: '4', PORT: '8080', AGENTDB_PREFIX: 'test-1', STATEMENT_TIMEOUT_MS: '' });
    expect([c.shardCount, c.port, c.prefix, c.statementTimeoutMs]).toEqual([4, 8080, 'test-1', 10_000]);
  });

  it('sizes the executor pool and the fair shares from the CPUs and WORKER_CONCURRENCY', () => {
    const c = loadConfig({});
    const cpus = Math.max(2, os.availableParallelism());
    expect([c.executorPoolSize, c.executorWorkspaceShare, c.agentShardConcurrency]).toEqual([cpus, Math.ceil(cpus / 2), 8]);
    const small = loadConfig({ EXECUTOR_POOL_SIZE: '5', WORKER_CONCURRENCY: '3' });
    expect([small.executorPoolSize, small.executorWorkspaceShare, small.agentShardConcurrency]).toEqual([5, 3, 1]);
    const set = loadConfig({ EXECUTOR_POOL_SIZE: '4', EXECUTOR_WORKSPACE_SHARE: '9', AGENT_SHARD_CONCURRENCY: '2' });
    // A share above the pool is no limit at all: what is enforced is the pool.
    expect([set.executorPoolSize, set.executorWorkspaceShare, set.agentShardConcurrency]).toEqual([4, 4, 2]);
  });

  it("bounds a workspace's calls on a shard at half the worker's slots, or as set, never under one agent's share", () => {
    expect(loadConfig({}).workspaceShardConcurrency).toBe(16);
    expect(loadConfig({ WORKER_CONCURRENCY: '5' }).workspaceShardConcurrency).toBe(3);
    // A deployment of one workspace gives it every slot.
    expect(loadConfig({ WORKSPACE_SHARD_CONCURRENCY: '32' }).workspaceShardConcurrency).toBe(32);
    expect(loadConfig({ WORKSPACE_SHARD_CONCURRENCY: '2', AGENT_SHARD_CONCURRENCY: '6' }).workspaceShardConcurrency).toBe(6);
  });

  it('keeps one overflow-lane child and a 250 ms threshold unless told otherwise; 0 turns the lane off', () => {
    expect([loadConfig({}).executorOverflow, loadConfig({}).executorLongMs]).toEqual([1, 250]);
    const off = loadConfig({ EXECUTOR_OVERFLOW: '0', EXECUTOR_LONG_MS: '50' });
    expect([off.executorOverflow, off.executorLongMs]).toEqual([0, 50]);
  });

  it.each([
    ['EXECUTOR_POOL_SIZE', '0'],
    ['EXECUTOR_OVERFLOW', '-1'],
    ['EXECUTOR_LONG_MS', '0'],
    ['EXECUTOR_WORKSPACE_SHARE', 'half'],
    ['AGENT_SHARD_CONCURRENCY', '0'],
    ['WORKSPACE_SHARD_CONCURRENCY', '0'],
    ['SHARD_COUNT', 'many'],
    ['SHARD_COUNT', '0'],
    ['PORT', '70000'],
    ['REDIS_URL', 'http://x'],
    ['AGENTDB_PREFIX', 'a:b'],
    ['LOG_LEVEL', 'loud'],
    ['MAINTENANCE_CRON', 'not a cron'],
    ['MAINTENANCE_CRON', '61 3 * * *'],
    ['MAINTENANCE_CRON', '* * * * * * *'],
    ['SCHEDULE_TZ', 'Mars/Base'],
    // Below 4 KiB not even an error envelope would fit.
    ['MAX_RESULT_BYTES', '1024'],
    ['MAX_CALL_BYTES', '0'],
    ['RESULT_TTL_HOURS', '0'],
    ['REDIS_MEMORY_HEADROOM_PERCENT', '95'],
    // Replaced by RESULT_TTL_HOURS: refused rather than ignored, so 7 days in seconds is not taken for 24 h.
    ['RESULT_TTL_S', '604800'],
  ])('refuses %s=%s with a message naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });

  it('reads the keys the CLI uses when no --key is given, and keeps them out of a config without them', () => {
    const c = loadConfig({ AGENTDB_MEMBER_KEY: 'adb_member', AGENTDB_KEY: 'adb_mcp' });
    expect([c.memberKey, c.mcpKey]).toEqual(['adb_member', 'adb_mcp']);
    expect(Object.keys(loadConfig({ AGENTDB_KEY: '' }))).not.toContain('mcpKey');
  });

  it('takes any schedule BullMQ takes: a cron with seconds, in a named time zone', () => {
    const c = loadConfig({ MAINTENANCE_CRON: '0 30 4 * * 1-5', SCHEDULE_TZ: 'Europe/Paris' });
    expect([c.maintenanceCron, c.scheduleTz]).toEqual(['0 30 4 * * 1-5', 'Europe/Paris']);
  });
});
