import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { lockHolders } from '../../src/sqlite/lock-holders.ts';
import { mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';

// Two tmpfs mounts number their inodes alike from the start: a -shm locked in one and a file of
// the same inode in the other. /proc/locks names a file by device and inode; read by inode alone,
// the second file's -shm was taken as open, and the cut of a failed commit's frames
// (`cutUnenteredTail`) was skipped: a write answered as failed was in the database after the
// next open (disk-full-killed-before-cut failed so, 4 of 4, beside another tmpfs of SQLite files).

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-lock-devices-'));
const [a, b] = [path.join(root, 'a'), path.join(root, 'b')];
fs.mkdirSync(a);
fs.mkdirSync(b);
const refused = mountTmpfs(a, '1m') ?? mountTmpfs(b, '1m');
if (refused) console.warn(`lock-holders-devices.test.ts: skipped, this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);

afterAll(() => {
  for (const dir of [a, b]) {
    try {
      unmountTmpfs(dir);
    } catch {
      // Not mounted (the mount was refused).
    }
  }
  fs.rmSync(root, { recursive: true, force: true });
});

describe.runIf(!refused)('who holds a lock on a file', () => {
  it('is read for that file, not for a file of the same inode on another file system', () => {
    const open = new Database(path.join(a, 'x.db'));
    try {
      open.pragma('journal_mode = WAL');
      open.exec('CREATE TABLE t (x)');
      const shm = path.join(a, 'x.db-shm');
      expect(lockHolders(shm)).toContain(process.pid);
      // A file on the other mount with the -shm's inode: fresh tmpfs mounts count up alike.
      const target = fs.statSync(shm).ino;
      let twin: string | undefined;
      for (let i = 0; i < 64 && !twin; i++) {
        const file = path.join(b, `f${i}`);
        fs.writeFileSync(file, '');
        if (fs.statSync(file).ino === target) twin = file;
      }
      expect(twin, `no file of inode ${target} made on the second mount`).toBeDefined();
      expect(lockHolders(twin!)).toEqual(new Set());
    } finally {
      open.close();
    }
  });
});
