import { describe, expect, it } from 'vitest';
import { repoText, tsFiles } from '../helpers/repo-files.ts';

// DESIGN.md "Layout": redis/ holds every Lua script (scripts/*.lua) and one loader
// (src/redis/lua-scripts.ts). Lua written inline elsewhere, or a script defined or sent by EVAL
// outside the loader, is a second way of running scripts: a file of src/ outside redis/ that
// holds Lua (`redis.call(`) or runs it (`defineCommand(`, `.eval(`, `evalsha(`) fails here, but
// for the exceptions named, each with why.
const RUNS_LUA = /redis\.p?call\(|defineCommand\(|\.eval\(|evalsha\(/;

/** Files allowed to hold or run Lua outside redis/, and why. */
const EXCEPTIONS: Record<string, string> = {
  'src/calls/admitted-add-batch.ts':
    "splices BullMQ's own addStandardJob, which admitted-add.ts captures from BullMQ's client at run time (redis/ may not import calls/)",
  'src/shards/shard-worker.ts': "splices BullMQ's own moveToActive, read from BullMQ's package, into the worker's fetch",
};

const holding = tsFiles('src').filter((file) => RUNS_LUA.test(repoText(file)));

describe('every Lua script lives in src/redis/', () => {
  it('finds the loader and the exceptions (so the check below checks something)', () => {
    expect(holding).toContain('src/redis/lua-scripts.ts');
    for (const file of Object.keys(EXCEPTIONS)) expect(holding, file).toContain(file);
  });

  it('holds and runs Lua in no file of src/ outside redis/, but the named exceptions', () => {
    expect(holding.filter((file) => !file.startsWith('src/redis/') && !(file in EXCEPTIONS))).toEqual([]);
  });
});
