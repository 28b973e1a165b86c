import fs from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { DbTarget } from '../../src/executor/executor-protocol.ts';
import { PLAN_LIMITS, type PlanLimits } from '../../src/policy/plan-limits.ts';
import { fullCause } from '../../src/sqlite/sqlite-errors.ts';
import { describe as describeDb, drop, query, toOpError, write } from '../../src/sqlite/sqlite-ops.ts';
import { errorOf, expectFailed, storeFiles } from '../helpers/store-files.ts';

// A write within its plan's limits (tables per database, database size), on files of its own:
// refused cleanly past them, the database left as it was; the size limit held from a handle's
// first write, when it shrank, and when another program grew or shrank the file.

const { call, target, writeDb, run, send: exec, handles } = storeFiles('agentdb-size-limits-');

describe('write within the plan limits', () => {
  it('fails cleanly past the table limit and leaves the database as it was', () => {
    const t = target({ ...PLAN_LIMITS.pro, maxTables: 2, maxBytes: PLAN_LIMITS.pro.maxBytes });
    run(t, 'CREATE TABLE a (x)');
    run(t, 'CREATE TABLE b (x)');
    run(t, 'CREATE VIEW v AS SELECT * FROM a'); // views do not count
    run(t, 'CREATE INDEX ax ON a (x)'); // nor do indexes
    const id = call();
    const error = errorOf(() => write(writeDb(t), 'CREATE TABLE c (x)', [], id, t.limits));
    expect(error).toEqual({ code: 'LIMIT_EXCEEDED', detail: 'the database may hold 2 tables and this would make 3' });
    expect(describeDb(writeDb(t)).tables.map((x) => x.name)).toEqual(['a', 'b', 'v']);
    // Nothing was recorded: with a table dropped, the same call runs.
    drop(writeDb(t), 'b', call());
    expect(write(writeDb(t), 'CREATE TABLE c (x)', [], id, t.limits)).toMatchObject({ changes: 0 });
  });

  it('fails cleanly past the size limit and leaves the database as it was', () => {
    const t = target({ ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 256 * 1024 });
    run(t, 'CREATE TABLE big (b BLOB)');
    const db = writeDb(t);
    const snapshot = () => query(db, 'SELECT count(*), sum(length(b)) FROM big', [], 1, 1e6).rows;
    let error: { code: string; detail: string } | undefined;
    let before = snapshot();
    for (let i = 0; i < 100 && !error; i++) {
      before = snapshot();
      try {
        run(t, 'INSERT INTO big VALUES (randomblob(20000))');
      } catch (err) {
        // As the executor tells them apart: this disk has room, the plan's limit is what was met.
        error = toOpError(err, () => fullCause(db, t.path));
      }
    }
    expect(error).toEqual({ code: 'LIMIT_EXCEEDED', detail: 'database or disk is full' });
    expect(snapshot()).toEqual(before);
    expect(db.inTransaction).toBe(false);
    expect(fs.statSync(t.path).size).toBeLessThanOrEqual(256 * 1024);
    // Still usable: a delete frees room for the next insert.
    run(t, 'DELETE FROM big WHERE rowid IN (SELECT rowid FROM big LIMIT 2)');
    expect(run(t, 'INSERT INTO big VALUES (randomblob(20000))')).toMatchObject({ changes: 1 });
  });

  // The limit is set once before a handle's first write and then inside each write's own
  // transaction (issue 31): a handle's first call, and a limit that shrank since the last write,
  // are where a write could run under no limit or an old one.
  it('refuses past the size limit from the first write of a handle on', () => {
    const small = { ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 256 * 1024 };
    const send = (t: DbTarget, sql: string) => exec({ op: 'write', db: t, sql, params: [], callKey: call() });
    // A new database whose very first write would pass the limit.
    expectFailed(send(target(small), 'CREATE TABLE big AS SELECT randomblob(400000) AS b'), 'LIMIT_EXCEEDED');
    // A database filled to its limit, then its handle closed: the new handle's first write.
    const t = target(small);
    expect(send(t, 'CREATE TABLE big (b BLOB)').ok).toBe(true);
    let full = false;
    for (let i = 0; i < 100 && !full; i++) full = !send(t, 'INSERT INTO big VALUES (randomblob(20000))').ok;
    expect(full).toBe(true);
    const rows = () => query(writeDb(t), 'SELECT count(*) FROM big', [], 1, 1e6).rows;
    const before = rows();
    handles().closeAll();
    expectFailed(send(t, 'INSERT INTO big VALUES (randomblob(20000))'), 'LIMIT_EXCEEDED');
    expect(rows()).toEqual(before);
    expect(fs.statSync(t.path).size).toBeLessThanOrEqual(256 * 1024);
  });

  it('refuses under the limit of the write at hand when it shrank since the handle last wrote', () => {
    const t = target({ ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: PLAN_LIMITS.pro.maxBytes });
    const send = (limits: PlanLimits, sql: string) => exec({ op: 'write', db: { ...t, limits }, sql, params: [], callKey: call() });
    expect(send(t.limits, 'CREATE TABLE big (b BLOB)').ok).toBe(true);
    expect(send(t.limits, 'INSERT INTO big VALUES (randomblob(20000))').ok).toBe(true);
    expectFailed(send({ ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 64 * 1024 }, 'INSERT INTO big VALUES (randomblob(100000))'), 'LIMIT_EXCEEDED');
    expect(query(writeDb(t), 'SELECT count(*) FROM big', [], 1, 1e6).rows).toEqual([[1]]);
  });

  // A limit SQLite took as asked is not set again while it stays the same (issue 31); one it
  // raised to the file's size (a database over its limit) is set on every write, and follows
  // the file down when another program shrinks it.
  it('holds a database over its limit to its size, and to the limit once it shrank', () => {
    const t = target({ ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: PLAN_LIMITS.pro.maxBytes });
    const small = { ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 64 * 1024 };
    const send = (limits: PlanLimits, sql: string) => exec({ op: 'write', db: { ...t, limits }, sql, params: [], callKey: call() });
    expect(send(t.limits, 'CREATE TABLE big (b BLOB)').ok).toBe(true);
    for (let i = 0; i < 8; i++) expect(send(t.limits, 'INSERT INTO big VALUES (randomblob(20000))').ok).toBe(true);
    // Over the smaller limit: it may not grow at all.
    expectFailed(send(small, 'INSERT INTO big VALUES (randomblob(20000))'), 'LIMIT_EXCEEDED');
    // Another program empties and shrinks the file while this handle stays open.
    const other = new Database(t.path);
    other.exec('DELETE FROM big; VACUUM');
    other.close();
    expect(fs.statSync(t.path).size).toBeLessThan(64 * 1024);
    // Held to the limit again, not to the size the file had.
    expectFailed(send(small, 'INSERT INTO big VALUES (randomblob(100000))'), 'LIMIT_EXCEEDED');
    expect(send(small, 'INSERT INTO big VALUES (randomblob(20000))').ok).toBe(true);
    expectFailed(send(small, 'INSERT INTO big VALUES (randomblob(100000))'), 'LIMIT_EXCEEDED');
    expect(query(writeDb(t), 'SELECT count(*) FROM big', [], 1, 1e6).rows).toEqual([[1]]);
  });

  // Review R1: SQLite raises an open handle's maximum by itself when it sees the file larger
  // than it (another program grew it), after the limit was set as asked; a handle that then kept
  // its limit unset grew the file back past the limit once it had shrunk.
  it('holds a database to its limit after another program grew it past the limit and shrank it again', () => {
    const t = target({ ...PLAN_LIMITS.pro, maxTables: 50, maxBytes: 64 * 1024 });
    const send = (sql: string) => exec({ op: 'write', db: t, sql, params: [], callKey: call() });
    expect(send('CREATE TABLE big (b BLOB)').ok).toBe(true);
    const other = new Database(t.path);
    for (let i = 0; i < 8; i++) other.prepare('INSERT INTO big VALUES (randomblob(20000))').run();
    // This handle reads the grown file: SQLite raises its maximum to the file's size.
    expect(query(writeDb(t), 'SELECT count(*) FROM big', [], 1, 1e6).rows).toEqual([[8]]);
    other.exec('DELETE FROM big; VACUUM');
    other.close();
    expectFailed(send('INSERT INTO big VALUES (randomblob(100000))'), 'LIMIT_EXCEEDED');
    expect(query(writeDb(t), 'SELECT count(*) FROM big', [], 1, 1e6).rows).toEqual([[0]]);
  });
});
