/**
 * A preview made its temporary triggers and logs inside the transaction it rolls back, and
 * SQLite resets every schema of the connection when a rollback undoes a schema change: the next
 * statement parsed every CREATE TABLE of the database again (47 ms of CPU beside 500 tables of
 * 200 columns, `bench/effect-schema.ts`; R10's and R12's leftover, session 38, R13). The recorder
 * is now made and dropped in transactions that commit. What is observed here is the parse itself:
 * another connection rewrites a view's SQL in the file without bumping the schema cookie, so only
 * a connection that parses its schema again reads the new text.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';

describe("a preview keeps the connection's parsed schema", () => {
  const t = effectDatabase(
    'agentdb-effect-schema-kept-',
    `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE);
     CREATE VIEW kv AS SELECT 'as parsed' AS s;`,
  );

  /** Rewrites kv's SQL in the file behind the connection's back, the schema cookie left as it was. */
  function rewriteBehind(): void {
    const other = new Database(t.db.name);
    try {
      other.unsafeMode(true);
      other.exec(`PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = 'CREATE VIEW kv AS SELECT ''parsed again'' AS s' WHERE name = 'kv'`);
    } finally {
      other.close();
    }
  }

  const seen = () => t.db.prepare('SELECT s FROM kv').pluck().get();
  const tempObjects = () => t.db.prepare('SELECT count(*) FROM temp.sqlite_schema').pluck().get();

  it('does not make the next statement parse the schema again', () => {
    expect(seen()).toBe('as parsed');
    rewriteBehind();
    expect(seen()).toBe('as parsed');
    const fx = previewEffect(t.db, "INSERT INTO t (v) VALUES ('a')", [], LIMITS, FX);
    expect(fx).toMatchObject({ tables: [{ table: 't', inserted: 1 }] });
    expect(seen()).toBe('as parsed');
    expect(tempObjects()).toBe(0);
    expect(t.db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(0);
  });

  it('leaves no trigger or log behind, nor the pragma it turned on, when the write fails', () => {
    t.db.exec("INSERT INTO t (v) VALUES ('a')");
    expect(() => previewEffect(t.db, "INSERT INTO t (v) VALUES ('a')", [], LIMITS, FX)).toThrow(/UNIQUE/);
    expect(tempObjects()).toBe(0);
    expect(t.db.inTransaction).toBe(false);
    expect(t.db.pragma('recursive_triggers', { simple: true })).toBe(0);
    expect(t.db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(1);
  });
});
