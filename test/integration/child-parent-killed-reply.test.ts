import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, expect, it } from 'vitest';
import { databasePath } from '../../src/contracts/database-id.ts';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS } from '../../src/policy/plan-limits.ts';

// Session 30, F6's fault ledger (run 1): an executor child whose worker was SIGKILLed while the
// child ran a statement answered it into the closed channel and died of an unhandled `EPIPE`
// ('error' emitted on process, no listener), a stack trace in the worker's log. Here the child's
// write waits on SQLite's write lock, held by this test, while its parent is SIGKILLed; the lock
// let go, the child answers a parent gone, and must exit quietly.
const PARENT = fileURLToPath(new URL('../helpers/blocked-write-parent.mjs', import.meta.url));
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-parent-killed-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** Whether process `pid` runs still (neither gone nor a zombie awaiting its reaper). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

it('exits quietly when it answers after its parent was SIGKILLed', async () => {
  const db: DbTarget = { id: 'w/a', path: databasePath(dataDir, 'w', 'a', 0), shard: 0, limits: PLAN_LIMITS.pro };
  fs.mkdirSync(path.dirname(db.path), { recursive: true });
  const lock = new Database(db.path);
  lock.pragma('journal_mode = WAL');
  lock.exec('CREATE TABLE t (v INTEGER)');
  lock.exec('BEGIN IMMEDIATE');
  const parent = spawn(process.execPath, [PARENT, JSON.stringify({ dataDir, db })], { stdio: ['ignore', 'pipe', 'pipe'] });
  // The child's stderr is its parent's: it stays open after the parent dies, until the child exits.
  let stderr = '';
  parent.stderr.on('data', (d: Buffer) => {
    stderr += String(d);
  });
  const stderrClosed = new Promise<void>((resolve) => parent.stderr.once('close', () => resolve()));
  const sent = await new Promise<{ child: number }>((resolve, reject) => {
    let out = '';
    parent.stdout.on('data', (d: Buffer) => {
      out += String(d);
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]!) as { child: number });
    });
    parent.once('exit', (code) => reject(new Error(`the parent exited (${code}) before its write was sent: ${stderr}`)));
  });
  const gone = new Promise((resolve) => parent.once('exit', resolve));
  parent.kill('SIGKILL');
  await gone;
  // The child's write commits now and its answer meets the closed channel.
  lock.exec('COMMIT');
  await stderrClosed;
  lock.close();
  expect(stderr).toBe('');
  // Its stderr closes as it exits, a moment before the process is gone (a CI run saw it still
  // there): it must be gone, or a zombie, soon after, not go on running.
  await expect.poll(() => running(sent.child), { timeout: 10_000 }).toBe(false);
  // It ran the write it had in hand.
  const rows = new Database(db.path, { readonly: true });
  expect(rows.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 1 });
  rows.close();
});

it('exits quietly when its parent was SIGKILLed before it said it was ready', async () => {
  const db: DbTarget = { id: 'w/b', path: databasePath(dataDir, 'w', 'b', 0), shard: 0, limits: PLAN_LIMITS.pro };
  const parent = spawn(process.execPath, [PARENT, JSON.stringify({ dataDir, db, dies: true })], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  parent.stderr.on('data', (d: Buffer) => {
    stderr += String(d);
  });
  // Open until the child, which holds the parent's stderr, exits.
  await new Promise<void>((resolve) => parent.stderr.once('close', () => resolve()));
  // Session 31, F8's ledger on main: 3 such deaths in 6 runs, each `send({ type: 'ready' })` EPIPE.
  expect(stderr).toBe('');
});
