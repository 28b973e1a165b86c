import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { deadHere, leaseToken } from '../../src/shards/shard-lease.ts';

// A shard's lease held by a process that no longer runs on this machine is taken at once, so a
// restarted service has its shards (and answers its calls in flight) without waiting for the
// lease to lapse. Anything else is waited for.
describe('whether a lease holder is a dead process on this machine', () => {
  const ours = leaseToken('ours');
  const [host, pidns] = ours.split(':');
  const gone = spawnSync(process.execPath, ['-e', '']).pid!;

  it('is dead when its pid no longer runs in our pid namespace on our host', () => {
    // (Where there is no pid namespace to read, nothing is known, and the lease is waited for.)
    expect(deadHere(`${host}:${pidns}:${gone}:theirs`, ours)).toBe(pidns !== '');
  });

  it('is alive, or unknown, otherwise', () => {
    expect(deadHere(`${host}:${pidns}:${process.ppid}:theirs`, ours)).toBe(false);
    // Another pool of this very process (tests run several).
    expect(deadHere(`${host}:${pidns}:${process.pid}:theirs`, ours)).toBe(false);
    // Another host or container: its pids mean nothing here.
    expect(deadHere(`elsewhere:${pidns}:${gone}:theirs`, ours)).toBe(false);
    expect(deadHere(`${host}:1:${gone}:theirs`, ours)).toBe(false);
    // A token of the old form (host:pid:uuid) says nothing of its namespace.
    expect(deadHere(`${host}:${gone}:theirs`, ours)).toBe(false);
  });
});
