// Session 30, G8: the mechanism under F6's (g), without agentdb. POSIX record locks belong to the process: closing ANY
// descriptor of a file drops every lock the process holds on it, and SQLite cannot know. A writer process (an executor
// child) keeps a WAL database open, reads the database file once with Node's fs (the first generation's snapshot,
// `copyWithSha256`), writes on, then closes a descriptor of its own on the -shm (capture's `readWalIndex` fd, closed by
// `closeWal` when a capture fails). Another process then opens and closes the database: holding no lock of the writer,
// it believes it is the last connection, checkpoints, and DELETES the -wal and -shm. The writer goes on committing into
// the deleted WAL: no other connection sees those commits (reads, restores, history's copies), and they die with the
// writer if it is killed. Prints "DELETED ... sees 100" with the -shm close, "there ... sees 200" without (noshm).
// Session 31, F7: `excl` closes no -shm descriptor, and the other process takes the file whole (locking_mode =
// EXCLUSIVE, as an operator's sqlite3 shell may): SQLite's guard looks at the -shm, which that connection does not
// use, so the database file's close alone is enough: "DELETED ... sees SQLITE_IOERR_SHORT_READ".
//   node --import tsx bench/wal-deleted-under-writer.ts [noshm|excl]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-walgone-'));
const file = path.join(dir, 'x.sqlite');
const other = (code: string) =>
  execFileSync(process.execPath, ['--input-type=module', '-e', `import D from 'better-sqlite3'; ${code}`], { cwd: process.cwd() })
    .toString()
    .trim();
try {
  const x = new Database(file);
  x.pragma('journal_mode = WAL');
  x.pragma('wal_autocheckpoint = 0');
  x.exec('CREATE TABLE t (v)');
  fs.closeSync(fs.openSync(file, 'r')); // the first generation's snapshot, read with Node's fs
  const insert = x.prepare('INSERT INTO t VALUES (?)');
  for (let i = 0; i < 100; i++) insert.run(i);
  const excl = process.argv[2] === 'excl';
  if (process.argv[2] !== 'noshm' && !excl) fs.closeSync(fs.openSync(`${file}-shm`, 'r')); // capture's -shm descriptor closed
  const whole = excl ? "d.pragma('locking_mode = EXCLUSIVE'); " : '';
  other(`const d = new D(${JSON.stringify(file)}); ${whole}d.prepare('SELECT count(*) FROM t').get(); d.close();`);
  const walThere = fs.existsSync(`${file}-wal`);
  for (let i = 100; i < 200; i++) insert.run(i);
  const seen = other(
    `const d = new D(${JSON.stringify(file)}, { readonly: true }); try { console.log(d.prepare('SELECT count(*) c FROM t').get().c); } catch (e) { console.log(e.code); }`,
  );
  const held = fs
    .readdirSync(`/proc/${process.pid}/fd`)
    .map((fd) => {
      try {
        return fs.readlinkSync(`/proc/${process.pid}/fd/${fd}`);
      } catch {
        return '';
      }
    })
    .filter((l) => l.startsWith(dir))
    .map((l) => path.basename(l));
  console.log(
    `${process.argv[2] ?? 'shm'}: the WAL ${walThere ? 'is there' : 'was DELETED'} after another process's close; the writer committed 200 rows, a new connection sees ${seen}; the writer holds ${held.join(', ')}`,
  );
  x.close();
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
