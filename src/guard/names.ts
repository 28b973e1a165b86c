import { asciiLower } from './tokenizer.ts';

/** Prefix of agentdb's own tables (e.g. `_agentdb_calls`): hidden from agents and refused. */
export const INTERNAL_TABLE_PREFIX = '_agentdb_';

/** Prefix SQLite reserves for its own objects (`sqlite_schema`, `sqlite_sequence`, …). */
export const ENGINE_PREFIX = 'sqlite_';

/**
 * `sqlite_*` functions that only report on the build. Every other `sqlite_*` name, function
 * or not, is refused: the internal ones (`sqlite_rename_table`, …) rewrite the schema.
 */
export const HARMLESS_ENGINE_FUNCTIONS: ReadonlySet<string> = new Set([
  'sqlite_version',
  'sqlite_source_id',
  'sqlite_compileoption_used',
  'sqlite_compileoption_get',
]);

/**
 * Functions refused wherever they appear. `fts3_tokenizer` with two arguments installs a
 * tokenizer from a raw pointer; `rtreecheck` runs SQL of its own against any table name it
 * is given, out of sight of the bytecode check (and no agent has an R*Tree to check).
 */
export const FORBIDDEN_FUNCTIONS: ReadonlySet<string> = new Set(['load_extension', 'fts3_tokenizer', 'rtreecheck']);

/**
 * Every pragma SQLite 3.53 knows (`SELECT name FROM pragma_pragma_list`). Each is also an
 * eponymous table `pragma_<name>`; a test keeps this list in step with the engine.
 */
export const PRAGMA_NAMES: ReadonlySet<string> = new Set(
  (
    'analysis_limit application_id auto_vacuum automatic_index busy_timeout cache_size cache_spill ' +
    'case_sensitive_like cell_size_check checkpoint_fullfsync collation_list compile_options ' +
    'count_changes data_version database_list defer_foreign_keys empty_result_callbacks encoding ' +
    'foreign_key_check foreign_key_list foreign_keys freelist_count full_column_names fullfsync ' +
    'function_list hard_heap_limit ignore_check_constraints incremental_vacuum index_info index_list ' +
    'index_xinfo integrity_check journal_mode journal_size_limit legacy_alter_table locking_mode ' +
    'max_page_count mmap_size module_list optimize page_count page_size pragma_list query_only ' +
    'quick_check read_uncommitted recursive_triggers reverse_unordered_selects schema_version ' +
    'secure_delete short_column_names shrink_memory soft_heap_limit synchronous table_info table_list ' +
    'table_xinfo temp_store temp_store_directory threads trusted_schema user_version ' +
    'wal_autocheckpoint wal_checkpoint writable_schema'
  ).split(' '),
);

/** The read-only PRAGMAs `db_query` may run (db-capability.md). */
export const INTROSPECTION_PRAGMAS: ReadonlySet<string> = new Set([
  'table_info',
  'table_xinfo',
  'table_list',
  'index_list',
  'index_info',
  'index_xinfo',
  'foreign_key_list',
  'foreign_key_check',
]);

/**
 * The longest name (of a table, view, column, index or alias) agent SQL may use, in UTF-8 bytes.
 * Every result carries its column names and DATA_DESCRIBE_SCHEMA every name: a 90,000-byte
 * column name selected 600 times made a 54 MB result from 1 KB of SQL.
 */
export const MAX_NAME_BYTES = 256;

/** Why `name` is too long to use, or undefined when it fits {@link MAX_NAME_BYTES}. */
export function nameLengthRefusal(name: string): string | undefined {
  // A UTF-16 unit is at most 3 UTF-8 bytes: short names skip the measure.
  if (name.length * 3 <= MAX_NAME_BYTES) return undefined;
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes <= MAX_NAME_BYTES) return undefined;
  const start = [...name.slice(0, 40)].slice(0, 32).join('');
  return `the name ${JSON.stringify(`${start}…`)} is ${bytes} bytes long; names of tables, views, columns, indexes and aliases may be at most ${MAX_NAME_BYTES} bytes (UTF-8)`;
}

/** Virtual tables that exist without CREATE VIRTUAL TABLE and expose the file's pages. */
const PAGE_TABLES: ReadonlySet<string> = new Set(['dbstat', 'sqlite_dbpage']);

/** How a name is used where it appears. */
export interface NameUse {
  /** Where SQLite reads a table, view, index or table-valued function name. */
  readonly tableSlot: boolean;
  /** Followed by `(`: a call (function or table-valued function). */
  readonly call: boolean;
}

/**
 * Why `name` may not appear in agent SQL used this way, or undefined when it may. Shared by
 * both tools and by DATA_DROP_TABLE, so a name refused in one place is refused everywhere.
 */
export function nameRefusal(name: string, use: NameUse): string | undefined {
  const n = asciiLower(name);
  if (FORBIDDEN_FUNCTIONS.has(n)) return `${n} is not allowed: extensions, tokenizers and integrity checks are off limits`;
  if (n.startsWith(INTERNAL_TABLE_PREFIX)) {
    return `${JSON.stringify(name)} is internal to agentdb (names starting with ${INTERNAL_TABLE_PREFIX} are reserved); use DATA_DESCRIBE_SCHEMA to see your tables`;
  }
  if (PAGE_TABLES.has(n)) {
    return `${n} is not allowed: virtual tables that read the database file are refused; use DATA_DESCRIBE_SCHEMA for table sizes and structure`;
  }
  if (n.startsWith(ENGINE_PREFIX)) {
    if (use.call && !use.tableSlot && HARMLESS_ENGINE_FUNCTIONS.has(n)) return undefined;
    return `${JSON.stringify(name)} belongs to the SQLite engine (sqlite_* names are refused); use DATA_DESCRIBE_SCHEMA to see tables, columns and indexes`;
  }
  if (n.startsWith('pragma_') && (PRAGMA_NAMES.has(n.slice(7)) || use.tableSlot || use.call)) {
    return `${n} is a PRAGMA table function, and PRAGMA is not allowed; use DATA_DESCRIBE_SCHEMA to see tables and columns`;
  }
  return undefined;
}
