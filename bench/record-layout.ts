// `node --import tsx bench/record-layout.ts`: WAL frames and CPU per commit of a small insert's
// transaction under layouts of the exactly-once record and the activity row (issue 31, P9's "the
// record and the activity row in one table"), in raw better-sqlite3, no history: the agent's row
// (a rowid table), then the record and the row as each layout writes them, in one BEGIN IMMEDIATE
// transaction, WAL with autocheckpoint off and a RESTART checkpoint past 4 MiB as capture runs it.
// Frames are read off the WAL's size, so each layout's frames are what history copies per insert.
// Layouts (LAYOUTS, default all):
//   now          the calls table (WITHOUT ROWID, by call key) and the activity table (WITHOUT ROWID, by seq)
//   noact        the calls table alone: the bound any layout that keeps an activity row can reach
//   one-by-seq   one WITHOUT ROWID table by seq, the record's columns on it, a unique index on the call key
//   one-by-key   one WITHOUT ROWID table by call key, the activity's columns on it, an index on seq
//   one-rowid    one rowid table (seq the rowid) and a unique index on the call key, inserted through a
//                view's INSTEAD OF trigger so last_insert_rowid() stays the agent's (P5's way)
//   act-rowid    the calls table as now, the activity table a rowid table through the trigger (P5's cut)
// ROUNDS (default 6, alternating), COMMITS (default 4000 a round), WARM (default 20000 commits first),
// IDS (default uuid: random call ids as clients send them; seq: counting up).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID, createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { median, round } from './stats.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 6);
const COMMITS = Number(process.env.COMMITS ?? 4000);
const WARM = Number(process.env.WARM ?? 20000);
const LAYOUTS = (process.env.LAYOUTS ?? 'now,noact,one-by-seq,one-by-key,one-rowid,act-rowid').split(',');
const CHECKPOINT_BYTES = 4 * 1024 * 1024;
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-record-layout-'));

const ACT_COLS =
  'kind TEXT NOT NULL, at INTEGER NOT NULL, call_id TEXT, tool TEXT, by TEXT, statement TEXT, statement_bytes INTEGER, rationale TEXT, approved_by TEXT, changes INTEGER';
const REC_COLS = 'result TEXT, digest TEXT';

interface Layout {
  name: string;
  db: Database.Database;
  wal: string;
  frames: number[];
  cpu: number[];
  one(n: number): void;
}

function layout(name: string): Layout {
  const file = path.join(root, `${name}.sqlite`);
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('CREATE TABLE log (id INTEGER PRIMARY KEY, v TEXT)');
  const ddl: Record<string, string> = {
    now: `CREATE TABLE calls (call_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, digest TEXT) WITHOUT ROWID;
      CREATE TABLE act (seq INTEGER PRIMARY KEY, ${ACT_COLS}) WITHOUT ROWID`,
    noact: 'CREATE TABLE calls (call_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, digest TEXT) WITHOUT ROWID',
    'one-by-seq': `CREATE TABLE one (seq INTEGER PRIMARY KEY, key TEXT, ${REC_COLS}, ${ACT_COLS}) WITHOUT ROWID; CREATE UNIQUE INDEX one_key ON one (key)`,
    'one-by-key': `CREATE TABLE one (key TEXT PRIMARY KEY, seq INTEGER NOT NULL, ${REC_COLS}, ${ACT_COLS}) WITHOUT ROWID; CREATE UNIQUE INDEX one_seq ON one (seq)`,
    'one-rowid': `CREATE TABLE one (seq INTEGER PRIMARY KEY, key TEXT, ${REC_COLS}, ${ACT_COLS}); CREATE UNIQUE INDEX one_key ON one (key);
      CREATE VIEW one_add AS SELECT key, result, digest, kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes FROM one;
      CREATE TRIGGER one_add_t INSTEAD OF INSERT ON one_add BEGIN INSERT INTO one (key, result, digest, kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes)
        VALUES (NEW.key, NEW.result, NEW.digest, NEW.kind, NEW.at, NEW.call_id, NEW.tool, NEW.by, NEW.statement, NEW.statement_bytes, NEW.rationale, NEW.approved_by, NEW.changes); END`,
    'act-rowid': `CREATE TABLE calls (call_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL, digest TEXT) WITHOUT ROWID;
      CREATE TABLE act (seq INTEGER PRIMARY KEY, ${ACT_COLS});
      CREATE VIEW act_add AS SELECT kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes FROM act;
      CREATE TRIGGER act_add_t INSTEAD OF INSERT ON act_add BEGIN INSERT INTO act (kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes)
        VALUES (NEW.kind, NEW.at, NEW.call_id, NEW.tool, NEW.by, NEW.statement, NEW.statement_bytes, NEW.rationale, NEW.approved_by, NEW.changes); END`,
  };
  db.exec(ddl[name]!);
  const row = db.prepare('INSERT INTO log (v) VALUES (?)');
  const lookups: Record<string, string> = {
    now: 'SELECT result, digest, at FROM calls WHERE call_id = ?',
    noact: 'SELECT result, digest, at FROM calls WHERE call_id = ?',
    'act-rowid': 'SELECT result, digest, at FROM calls WHERE call_id = ?',
  };
  const lookup = db.prepare(lookups[name] ?? 'SELECT result, digest, at FROM one WHERE key = ?');
  const rec =
    name === 'now' || name === 'noact' || name === 'act-rowid' ? db.prepare('INSERT INTO calls (call_id, result, at, digest) VALUES (?, ?, ?, ?)') : undefined;
  const nextSeq =
    name === 'now'
      ? db.prepare('SELECT coalesce(max(seq), 0) + 1 FROM act').pluck()
      : name === 'one-by-seq' || name === 'one-by-key'
        ? db.prepare('SELECT coalesce(max(seq), 0) + 1 FROM one').pluck()
        : undefined;
  const actNow =
    name === 'now'
      ? db.prepare(
          'INSERT INTO act (seq, kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        )
      : undefined;
  const actRowid =
    name === 'act-rowid'
      ? db.prepare(
          'INSERT INTO act_add (kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        )
      : undefined;
  const oneSeq = name.startsWith('one-by')
    ? db.prepare(
        'INSERT INTO one (seq, key, result, digest, kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      )
    : undefined;
  const oneRowid =
    name === 'one-rowid'
      ? db.prepare(
          'INSERT INTO one_add (key, result, digest, kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        )
      : undefined;
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const sql = 'INSERT INTO log (v) VALUES (?)';
  const wal = `${file}-wal`;
  return {
    name,
    db,
    wal,
    frames: [],
    cpu: [],
    one(n) {
      const callId = process.env.IDS === 'seq' ? `call-${String(n).padStart(9, '0')}` : randomUUID();
      const key = `bench:reader:${callId}`;
      const digest = createHash('sha256')
        .update(`["write",${JSON.stringify(sql)},["row ${n}"]]`)
        .digest('base64url');
      const at = Date.now();
      begin.run();
      lookup.get(key);
      const info = row.run(`row ${n}`);
      const result = JSON.stringify({ changes: 1, lastInsertRowid: Number(info.lastInsertRowid) });
      const act = ['call', at, callId, 'DATA_WRITE_SQL', 'agent:reader', sql, sql.length, null, null, 1] as const;
      rec?.run(key, result, at, digest);
      if (actNow) actNow.run(nextSeq!.get(), ...act);
      if (actRowid) actRowid.run(...act);
      if (oneSeq) oneSeq.run(nextSeq!.get(), key, result, digest, ...act);
      if (oneRowid) oneRowid.run(key, result, digest, ...act);
      commit.run();
      if (fs.statSync(wal).size >= CHECKPOINT_BYTES) db.pragma('wal_checkpoint(TRUNCATE)');
    },
  };
}

// Node 24's; the typings here predate it.
const threadCpu = (process as unknown as { threadCpuUsage: () => NodeJS.CpuUsage }).threadCpuUsage.bind(process);
const threadUs = () => {
  const u = threadCpu();
  return u.user + u.system;
};

try {
  const all = LAYOUTS.map(layout);
  // The rowid layouts' trigger must leave the agent's last_insert_rowid() as the agent's insert set it.
  for (const l of all) {
    l.one(0);
    const last = l.db.prepare('SELECT last_insert_rowid()').pluck().get();
    const agent = l.db.prepare('SELECT max(id) FROM log').pluck().get();
    if (last !== agent && !l.name.includes('direct')) throw new Error(`${l.name}: last_insert_rowid() ${last}, the agent's ${agent}`);
  }
  for (const l of all) for (let i = 1; i < WARM; i++) l.one(i);
  let n = WARM;
  for (let r = 0; r < ROUNDS; r++) {
    for (const l of r % 2 ? [...all].reverse() : all) {
      let frames = 0;
      let cpu = 0;
      for (let i = 0; i < COMMITS; i++) {
        const before = fs.statSync(l.wal, { throwIfNoEntry: false })?.size ?? 0;
        const t0 = threadUs();
        l.one(n++);
        cpu += threadUs() - t0;
        const after = fs.statSync(l.wal).size;
        // A checkpoint after the commit truncated the WAL: count that commit by the next one's.
        if (after >= before) frames += (after - before - (before === 0 ? 32 : 0)) / (4096 + 24);
        else i--;
      }
      l.frames.push(frames / COMMITS);
      l.cpu.push(cpu / COMMITS);
    }
  }
  for (const l of all) {
    console.log(
      JSON.stringify({
        layout: l.name,
        framesPerCommit: round(median(l.frames), 3),
        cpuUsPerCommit: round(median(l.cpu), 1),
        rounds: l.cpu.map((x) => round(x, 1)),
      }),
    );
    l.db.close();
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
