/**
 * The operations the executor child runs against an open database: pure functions over a
 * better-sqlite3 handle, one concept per file. This module gathers them for the child.
 */
export { describe, type ColumnInfo, type DescribeResult, type ForeignKeyInfo, type IndexInfo, type TableInfo, type TableStub } from './sqlite-describe.ts';
export { query, type QueryResult } from './sqlite-query.ts';
export { write, replayedWrite, DEFAULT_MAX_RESULT_BYTES, MAX_RETURNING_ROWS, type Replayable, type WriteResult } from './sqlite-write.ts';
export { checkDropName, drop, dropObject, dropTarget, type DropResult } from './sqlite-drop.ts';
export { tryDropAlone } from './drop-cascade.ts';
export { toOpError, type OpError } from './sqlite-errors.ts';
export { encodeValue, bindParams, type EncodedBlob, type EncodedValue, type Param } from './sqlite-values.ts';
export { CALLS_TABLE } from './call-record.ts';
