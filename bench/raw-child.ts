// The child of the "raw BullMQ + child" reference: answers the benchmark's primary-key query
// from its own SQLite file, over Node's IPC channel, as agentdb's executor child does. With a
// second argument `insert`, each message adds one row to `log` instead (the small insert's floor,
// bench/insert-floor.ts): one plain commit, WAL and synchronous = NORMAL as agentdb's handles, with
// no exactly-once record, activity row or history capture.
import Database from 'better-sqlite3';

const db = new Database(process.argv[2]!);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.exec('CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, v TEXT)');
const add = db.prepare('INSERT INTO log (v) VALUES (?)');
db.exec('CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)');
db.prepare("INSERT OR IGNORE INTO kv SELECT value, 'value-' || value FROM json_each(?)").run(JSON.stringify(Array.from({ length: 1000 }, (_, i) => i)));
const stmt = db.prepare('SELECT v FROM kv WHERE id = ?').raw(true);
const inserts = process.argv[3] === 'insert';
process.on('message', (m: { id: number; key: number }) =>
  process.send!(inserts ? { id: m.id, rows: [], changes: add.run(`row ${m.key}`).changes } : { id: m.id, rows: stmt.all(m.key) }),
);
process.send!('ready');
