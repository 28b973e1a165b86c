import { describe, expect, it } from 'vitest';
import { nodeCheck } from '../../src/doctor/host-checks.ts';
import { parseInfo, settingFix } from '../../src/doctor/redis-checks.ts';

describe('doctor checks', () => {
  it('fails below Node 22, Node 20 included (better-sqlite3 13 crashes on it: session 38, N16), with what to change', () => {
    expect(nodeCheck('22.11.0')).toEqual({ check: 'node-version', status: 'ok', detail: 'Node 22.11.0.' });
    expect(nodeCheck('20.20.2')).toMatchObject({ status: 'fail', fix: expect.stringContaining('Node 22') });
    expect(nodeCheck('18.19.0')).toMatchObject({ status: 'fail', fix: expect.stringContaining('Node 22') });
  });

  it('reads INFO fields, skipping section headers', () => {
    const info = parseInfo('# Memory\r\nused_memory:1024\r\nmaxmemory_policy:noeviction\r\n\r\n# Persistence\r\naof_enabled:1\r\n');
    expect(Object.fromEntries(info)).toEqual({ used_memory: '1024', maxmemory_policy: 'noeviction', aof_enabled: '1' });
  });

  it('says CONFIG REWRITE only to a Redis with a config file to write (review N10)', () => {
    const withFile = parseInfo('# Server\r\nconfig_file:/etc/redis/redis.conf\r\n');
    expect(settingFix(withFile, '--maxmemory 1gb', 'CONFIG SET maxmemory 1gb')).toBe(
      '--maxmemory 1gb where Redis is started, or CONFIG SET maxmemory 1gb, then CONFIG REWRITE',
    );
    const flagsOnly = parseInfo('# Server\r\nconfig_file:\r\n');
    expect(settingFix(flagsOnly, '--maxmemory 1gb', 'CONFIG SET maxmemory 1gb')).toMatch(
      /^--maxmemory 1gb where Redis is started: this Redis has no config file \(started with flags alone\), so CONFIG SET maxmemory 1gb lasts only until it restarts \(and CONFIG REWRITE refuses\)/,
    );
  });
});
