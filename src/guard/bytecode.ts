import type { StatementKind } from './classifier.ts';
import { ENGINE_PREFIX, FORBIDDEN_FUNCTIONS, HARMLESS_ENGINE_FUNCTIONS, INTERNAL_TABLE_PREFIX } from './names.ts';
import { asciiLower } from './tokenizer.ts';

/** One row of `EXPLAIN <statement>`: a VDBE instruction. */
export interface Op {
  addr: number;
  opcode: string;
  p1: number;
  p2: number;
  p3: number;
  p4: string | number | null;
  p5: number;
}

/** A row of the main `sqlite_schema`, keyed by root page. */
export interface SchemaObject {
  type: string;
  name: string;
  tbl_name: string;
  rootpage: number;
}

/** What the bytecode is judged against. */
export interface ProgramContext {
  /** The kind layer 1 read off the tokens; it decides which schema-changing ops are expected. */
  kind: StatementKind;
  mode: 'read' | 'write' | 'introspect';
  /** Root page → object, for the main database. */
  roots: ReadonlyMap<number, SchemaObject>;
  /** `vtab:` pointers of the eponymous tables agents may read (json_each, json_tree). */
  allowedVtabs: ReadonlySet<string>;
}

/** Opcodes no agent statement needs: file maintenance, transactions, dropping, vtab changes. */
const NEVER = new Set([
  'Vacuum',
  'IncrVacuum',
  'JournalMode',
  'Checkpoint',
  'AutoCommit',
  'Savepoint',
  'Destroy',
  'DropTable',
  'DropIndex',
  'DropTrigger',
  'VCreate',
  'VDestroy',
  'VRename',
  'VUpdate',
  'VBegin',
  'LoadAnalysis',
  'IntegrityCk',
  'Pagecount',
  'MaxPgcnt',
  'TableLock',
]);

/** Opcodes that change the schema: CREATE and ALTER emit them, nothing else may. */
const SCHEMA_OPS = new Set(['CreateBtree', 'ParseSchema', 'SetCookie', 'ReadCookie']);

const FUNCTION_OPS = new Set(['Function', 'PureFunc', 'AggStep', 'AggStep1', 'AggFinal', 'AggValue', 'AggInverse']);

/** Internal functions ALTER TABLE … RENAME / ADD compiles into its own program. */
const ALTER_FUNCTIONS = new Set(['sqlite_rename_table', 'sqlite_rename_column', 'sqlite_rename_test', 'sqlite_rename_quotefix']);

/** The check CREATE TABLE runs on generated columns (build.c: `SELECT*FROM"db"."t"`). */
const GENERATED_CHECK = /^SELECT\*FROM"main"\."(?:[^"]|"")*"$/;

const OPEN_OPS = new Set(['OpenRead', 'OpenWrite', 'ReopenIdx']);
const OPFLAG_P2ISREG = 0x10;

const CREATE_KINDS = new Set<StatementKind>(['create_table', 'create_index', 'create_view']);

/**
 * Why the compiled program may not run, or undefined. This is where names the tokenizer could
 * have been fooled about are caught by what they resolved to: a b-tree in the temp or an
 * attached database, root page 1 (sqlite_schema), a root page of an `sqlite_*` or `_agentdb_*`
 * object, an eponymous virtual table other than json_each/json_tree, a forbidden function.
 */
export function programRefusal(ops: readonly Op[], ctx: ProgramContext): string | undefined {
  const isCreate = CREATE_KINDS.has(ctx.kind);
  const isAlter = ctx.kind === 'alter_table';
  const createsBtree = ops.some((op) => op.opcode === 'CreateBtree' && op.p1 === 0);
  const writesAgentTable = ops.some((op) => op.opcode === 'OpenWrite' && op.p3 === 0 && isAgentRoot(op.p2, ctx.roots));
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    const { opcode } = op;
    // sqlite3ForceNotReadOnly: `CREATE … IF NOT EXISTS` on an existing object only queries
    // the journal mode (P3 = PAGER_JOURNALMODE_QUERY), to count as a write.
    if (opcode === 'JournalMode' && op.p3 === -1) continue;
    if (NEVER.has(opcode)) return `the statement compiles to ${opcode}, which is never allowed`;
    if (SCHEMA_OPS.has(opcode)) {
      const why = schemaOpRefusal(op, isCreate, isAlter);
      if (why) return why;
      continue;
    }
    if (opcode === 'SqlExec') {
      if (ctx.kind === 'create_table' && op.p1 === 1 && GENERATED_CHECK.test(String(op.p4))) continue;
      return 'the statement runs nested SQL, which is not allowed';
    }
    if (opcode === 'Program' && ctx.mode !== 'write') return 'a query cannot run triggers or foreign key actions';
    if (opcode === 'Transaction') {
      if (op.p1 === 0) continue;
      if (op.p1 === 1 && (isAlter || (ctx.mode === 'introspect' && op.p2 === 0))) continue;
      return 'the statement uses the temp schema or another database; only the main database is allowed';
    }
    if (OPEN_OPS.has(opcode)) {
      const bookkeeping = isAutoincrementBookkeeping(ops, i);
      const why = btreeRefusal(op.p2, op.p3, opcode === 'OpenWrite', (op.p5 & OPFLAG_P2ISREG) !== 0, ctx, createsBtree, writesAgentTable, bookkeeping);
      if (why) return why;
      continue;
    }
    if (opcode === 'Clear') {
      const why = btreeRefusal(op.p1, op.p2, true, false, ctx, createsBtree, writesAgentTable, false);
      if (why) return why;
      continue;
    }
    if (opcode === 'VOpen') {
      // ALTER TABLE … ADD COLUMN checks existing rows through pragma_quick_check itself; the
      // ALTER's own text (no FROM clause is possible in it) was vetted token by token.
      if (isAlter || ctx.allowedVtabs.has(String(op.p4))) continue;
      return 'the statement reads a virtual table; only json_each and json_tree are allowed';
    }
    if (FUNCTION_OPS.has(opcode)) {
      const why = functionRefusal(String(op.p4 ?? ''), isAlter);
      if (why) return why;
      continue;
    }
    if (opcode === 'String8' && isAlter && asciiLower(String(op.p4 ?? '')).startsWith(INTERNAL_TABLE_PREFIX)) {
      return `names starting with ${INTERNAL_TABLE_PREFIX} are internal to agentdb`;
    }
  }
  return undefined;
}

function btreeRefusal(
  root: number,
  db: number,
  write: boolean,
  rootInRegister: boolean,
  ctx: ProgramContext,
  createsBtree: boolean,
  writesAgentTable: boolean,
  autoincrementBookkeeping: boolean,
): string | undefined {
  const isAlter = ctx.kind === 'alter_table';
  if (db !== 0) {
    // ALTER TABLE … RENAME rewrites references in temp triggers: it scans sqlite_temp_schema.
    if (isAlter && db === 1 && root === 1 && !rootInRegister) return undefined;
    return 'the statement opens a table in the temp schema or another database; only the main database is allowed';
  }
  if (rootInRegister) {
    // The root was made by CreateBtree earlier in this program: the new table or index.
    if (write && createsBtree && (ctx.kind === 'create_table' || ctx.kind === 'create_index')) return undefined;
    return 'the statement opens a b-tree chosen at run time';
  }
  if (root === 1) {
    if (isAlter) return undefined;
    if (write && CREATE_KINDS.has(ctx.kind)) return undefined; // the new object's sqlite_schema row
    return "the statement reads sqlite_schema, the engine's own table; use DATA_DESCRIBE_SCHEMA to see tables";
  }
  const obj = ctx.roots.get(root);
  if (obj === undefined) return `the statement opens b-tree ${root}, which belongs to no table of this database`;
  const owner = asciiLower(obj.tbl_name);
  const name = asciiLower(obj.name);
  if (owner.startsWith(INTERNAL_TABLE_PREFIX) || name.startsWith(INTERNAL_TABLE_PREFIX)) {
    return `the statement touches ${obj.tbl_name}, which is internal to agentdb`;
  }
  if (owner.startsWith(ENGINE_PREFIX)) {
    // AUTOINCREMENT keeps its counters in sqlite_sequence: every such insert into an agent
    // table looks its counter up and stores it back, and ALTER TABLE … RENAME renames it. Any
    // other opening (a subquery reading the counters, even beside such an insert) is refused.
    if (owner === 'sqlite_sequence' && ctx.mode === 'write' && (isAlter || (writesAgentTable && autoincrementBookkeeping))) return undefined;
    return `the statement touches ${obj.tbl_name}, the engine's own table`;
  }
  return undefined;
}

/**
 * The two code sequences through which an INSERT into an AUTOINCREMENT table touches
 * sqlite_sequence (insert.c, `autoIncBegin` and `autoIncrementEnd`), matched opcode by opcode
 * on one cursor from the open at `at`. The lookup reads the row whose name equals the table's
 * (loaded by the String8) into registers; the store writes one record back. A subquery over
 * sqlite_sequence compiles to neither.
 */
const AUTOINC_LOOKUP = ['OpenRead', 'String8', 'Null', 'Rewind', 'Column', 'Ne', 'Rowid', 'Column', 'AddImm', 'Copy', 'Goto', 'Next', 'Integer', 'Close'];
const AUTOINC_STORE = ['OpenWrite', 'NotNull', 'NewRowid', 'MakeRecord', 'Insert', 'Close'];

function isAutoincrementBookkeeping(ops: readonly Op[], at: number): boolean {
  const open = ops[at]!;
  const template = open.opcode === 'OpenRead' ? AUTOINC_LOOKUP : open.opcode === 'OpenWrite' ? AUTOINC_STORE : undefined;
  if (template === undefined || at + template.length > ops.length) return false;
  const cursor = open.p1;
  const onCursor = (k: number) => ops[at + k]!.p1 === cursor;
  if (!template.every((opcode, k) => ops[at + k]!.opcode === opcode)) return false;
  if (template === AUTOINC_STORE) return onCursor(2) && onCursor(4) && onCursor(5);
  // Rewind, Column name, Rowid, Column seq, Next and Close all on the sqlite_sequence cursor.
  return onCursor(3) && onCursor(4) && ops[at + 4]!.p2 === 0 && onCursor(6) && onCursor(7) && ops[at + 7]!.p2 === 1 && onCursor(11) && onCursor(13);
}

/** A root page of a table or index agents own: not the engine's, not agentdb's. */
function isAgentRoot(root: number, roots: ReadonlyMap<number, SchemaObject>): boolean {
  const obj = roots.get(root);
  if (obj === undefined) return false;
  const owner = asciiLower(obj.tbl_name);
  return !owner.startsWith(ENGINE_PREFIX) && !owner.startsWith(INTERNAL_TABLE_PREFIX) && !asciiLower(obj.name).startsWith(INTERNAL_TABLE_PREFIX);
}

/**
 * CREATE and ALTER read and set the schema cookies and reparse the schema; nothing else may.
 * Of the cookies (btree.h), only the schema version (1), file format (2) and text encoding (5)
 * are theirs to set: user_version (6) and application_id (8) are PRAGMA territory. A CREATE
 * that reparses a trigger (`type='trigger'`) is a CREATE TRIGGER, whatever layer 1 read.
 */
function schemaOpRefusal(op: Op, isCreate: boolean, isAlter: boolean): string | undefined {
  const refusal = `the statement changes the schema (${op.opcode}) in a way only PRAGMA or a trigger would`;
  if (!(isCreate || isAlter)) return `the statement changes the schema (${op.opcode}) but is not CREATE or ALTER`;
  const dbs = op.opcode === 'ParseSchema' && isAlter ? [0, 1] : [0];
  if (!dbs.includes(op.p1)) return 'the statement changes the temp schema; only the main database is allowed';
  if (op.opcode === 'SetCookie' && ![1, 2, 5].includes(op.p2)) return refusal;
  if (op.opcode === 'ParseSchema' && /type='trigger'/.test(String(op.p4 ?? ''))) return refusal;
  return undefined;
}

function functionRefusal(p4: string, isAlter: boolean): string | undefined {
  const paren = p4.indexOf('(');
  const name = asciiLower(paren < 0 ? p4 : p4.slice(0, paren));
  if (FORBIDDEN_FUNCTIONS.has(name)) return `${name} is not allowed: extensions, tokenizers and integrity checks are off limits`;
  if (!name.startsWith(ENGINE_PREFIX) || HARMLESS_ENGINE_FUNCTIONS.has(name)) return undefined;
  if (isAlter && ALTER_FUNCTIONS.has(name)) return undefined;
  return `${name} is an internal function of the SQLite engine and is not allowed`;
}
