// `node --import tsx bench/layout-variant.ts <dist> <out-dir> act|one|noact`: a throwaway copy of a
// build whose executor child writes a small insert's record and activity row in another layout
// (issue 31, session 36 P14), to drive with bench/insert-parts.ts, bench/child-read.ts or
// bench/worker-ab.ts beside the build as it is. For measuring only: the copy patches the built
// JavaScript of sqlite-activity.js and call-record.js, creates the new layout only in new files, and
// does not carry it through listings, restores, prunes or drops.
//   act    the activity table a rowid table, a call's row inserted through a view's INSTEAD OF
//          trigger so that last_insert_rowid() stays the agent's (session 30, P5's cut)
//   one    as act, with the exactly-once record's columns (call key, result, digest) on the call's
//          activity row and a unique index on the call key: one row a write, not two
//   noact  no activity row at all: the bound of what any layout of the row could save
// The out-dir must be inside a checkout (its imports find node_modules there).
import fs from 'node:fs';
import path from 'node:path';

const [dist, out, variant] = process.argv.slice(2);
if (!dist || !out || !['act', 'one', 'noact'].includes(variant ?? '')) throw new Error('usage: layout-variant.ts <dist> <out-dir> act|one|noact');
const target = path.join(out, 'dist');
fs.rmSync(target, { recursive: true, force: true });
fs.cpSync(dist, target, { recursive: true });

function patch(file: string, edits: [string, string][]): void {
  const p = path.join(target, file);
  let text = fs.readFileSync(p, 'utf8');
  for (const [from, to] of edits) {
    if (!text.includes(from)) throw new Error(`${file}: not found: ${from.slice(0, 80)}`);
    text = text.replace(from, to);
  }
  fs.writeFileSync(p, text);
}

const ACT = 'src/sqlite/sqlite-activity.js';
const REC = 'src/sqlite/call-record.js';
const table = 'rationale TEXT, approved_by TEXT, changes INTEGER) WITHOUT ROWID`);';
const insert = `    const seq = seqEnsured(db);
    trusted(db, \`INSERT INTO \${ACTIVITY_TABLE} (\${COLUMNS}) VALUES (?, 'call', ?, ?, ?, ?, ?, ?, ?, ?, ?)\`).run(seq, at,`;
const cols = 'kind, at, call_id, tool, by, statement, statement_bytes, rationale, approved_by, changes';
const news = 'NEW.kind, NEW.at, NEW.call_id, NEW.tool, NEW.by, NEW.statement, NEW.statement_bytes, NEW.rationale, NEW.approved_by, NEW.changes';
const viewAndTrigger = (c: string, n: string) => `
      CREATE VIEW IF NOT EXISTS _agentdb_activity_add AS SELECT ${c} FROM \${ACTIVITY_TABLE};
      CREATE TRIGGER IF NOT EXISTS _agentdb_activity_add_t INSTEAD OF INSERT ON _agentdb_activity_add BEGIN INSERT INTO \${ACTIVITY_TABLE} (${c}) VALUES (${n}); END`;

if (variant === 'noact') {
  patch(ACT, [
    [
      'export function recordCallActivity(db, note, changes, at = Date.now()) {\n',
      'export function recordCallActivity(db, note, changes, at = Date.now()) {\n    if (note) return;\n',
    ],
  ]);
} else if (variant === 'act') {
  patch(ACT, [
    [table, `rationale TEXT, approved_by TEXT, changes INTEGER);${viewAndTrigger(cols, news)}\`);`],
    [
      insert,
      `    ensureActivityTable(db);\n    trusted(db, \`INSERT INTO _agentdb_activity_add (${cols}) VALUES ('call', ?, ?, ?, ?, ?, ?, ?, ?, ?)\`).run(at,`,
    ],
  ]);
} else {
  const all = `${cols}, call_key, result, digest`;
  patch(ACT, [
    [
      table,
      `rationale TEXT, approved_by TEXT, changes INTEGER, call_key TEXT, result TEXT, digest TEXT);
      CREATE UNIQUE INDEX IF NOT EXISTS _agentdb_activity_key ON \${ACTIVITY_TABLE} (call_key);${viewAndTrigger(all, `${news}, NEW.call_key, NEW.result, NEW.digest`)}\`);`,
    ],
    [
      insert,
      `    ensureActivityTable(db);\n    const rec = globalThis.__layoutPending;\n    globalThis.__layoutPending = undefined;\n    trusted(db, \`INSERT INTO _agentdb_activity_add (${all}) VALUES ('call', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)\`).run(at,`,
    ],
    ['note.approvedBy ?? null, changes);', 'note.approvedBy ?? null, changes, rec?.[0] ?? null, rec?.[1] ?? null, rec?.[2] ?? null);'],
  ]);
  // The record waits for the activity row that write() records right after it (a write with no
  // row, such as the bench's set-up, records nothing: enough for measuring, not for running).
  // The built JavaScript's own template literals, matched as text.
  const calls = ['$', '{CALLS_TABLE}'].join('');
  patch(REC, [
    [
      `    trusted(db, \`INSERT INTO ${calls} (call_id, result, at, digest) VALUES (?, ?, ?, ?)\`)`,
      `    globalThis.__layoutPending = [call.key, JSON.stringify(recordable(result)), call.digest];\n    return;\n    trusted(db, \`INSERT INTO ${calls} (call_id, result, at, digest) VALUES (?, ?, ?, ?)\`)`,
    ],
    [
      `return trusted(db, \`SELECT result, digest, at FROM ${calls} WHERE call_id = ?\`).get(key);`,
      'return trusted(db, `SELECT result, digest, at FROM _agentdb_activity WHERE call_key = ?`).get(key);',
    ],
  ]);
}
console.log(target);
