import { describe, expect, it } from 'vitest';
import { nodeCheck } from '../../src/doctor/host-checks.ts';
import { parseInfo } from '../../src/doctor/redis-checks.ts';

describe('doctor checks', () => {
  it('warns below Node 22, fails below 20, with what to change', () => {
    expect(nodeCheck('22.11.0')).toEqual({ check: 'node-version', status: 'ok', detail: 'Node 22.11.0.' });
    expect(nodeCheck('20.20.2')).toMatchObject({ status: 'warn', fix: expect.stringContaining('Node 22') });
    expect(nodeCheck('18.19.0')).toMatchObject({ status: 'fail', fix: expect.stringContaining('Node 22') });
  });

  it('reads INFO fields, skipping section headers', () => {
    const info = parseInfo('# Memory\r\nused_memory:1024\r\nmaxmemory_policy:noeviction\r\n\r\n# Persistence\r\naof_enabled:1\r\n');
    expect(Object.fromEntries(info)).toEqual({ used_memory: '1024', maxmemory_policy: 'noeviction', aof_enabled: '1' });
  });
});
