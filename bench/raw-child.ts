// The child of the "raw BullMQ + child" reference: answers the benchmark's primary-key query
// from its own SQLite file, over Node's IPC channel, as agentdb's executor child does.
import Database from 'better-sqlite3';

const db = new Database(process.argv[2]!);
db.pragma('journal_mode = WAL');
db.exec('CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)');
db.prepare("INSERT OR IGNORE INTO kv SELECT value, 'value-' || value FROM json_each(?)").run(JSON.stringify(Array.from({ length: 1000 }, (_, i) => i)));
const stmt = db.prepare('SELECT v FROM kv WHERE id = ?').raw(true);
process.on('message', (m: { id: number; key: number }) => process.send!({ id: m.id, rows: stmt.all(m.key) }));
process.send!('ready');
