import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// Session 36, N13: `.ci/run` read as a new contributor's. On a machine that is not CI's (not
// root, or no apt-get) and lacks what the tests need, it failed inside apt-get (as root's
// command not found, or its lock refused) instead of saying what was missing.

const repo = path.resolve(import.meta.dirname, '../..');
const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-ci-bin-'));

afterAll(() => fs.rmSync(bin, { recursive: true, force: true }));

describe('.ci/run on a machine that lacks what the tests need', () => {
  it('says which packages are missing and how to install them, and runs nothing, when it is not root', async () => {
    // Every command of this machine but redis-server, sqlite3 and apt-get, and an `id` that says
    // uid 1000: a contributor's machine without them.
    const missing = new Set(['redis-server', 'sqlite3', 'apt-get', 'id']);
    for (const dir of ['/usr/bin', '/bin'])
      for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : [])
        if (!missing.has(name) && !fs.existsSync(path.join(bin, name))) fs.symlinkSync(path.join(dir, name), path.join(bin, name));
    fs.writeFileSync(path.join(bin, 'id'), '#!/bin/sh\necho 1000\n', { mode: 0o755 });
    const child = spawn('bash', [path.join(repo, '.ci/run')], { env: { PATH: bin, HOME: bin, CI: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, stderr).toBe(1);
    expect(stderr).toMatch(/^\.ci\/run: missing .*redis-server.*sqlite3/);
    expect(stderr).toMatch(/sudo apt-get install .*redis-server.*sqlite3.*or run it as root/);
    // Stopped before it fetched Node or ran npm ci.
    expect(stdout).toBe('');
  });
});
