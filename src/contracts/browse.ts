import { z } from 'zod';

/**
 * What the data browser asks a database's owner for, and what it answers (web page, CSV
 * export). These are trusted reads made by agentdb itself, never agent SQL: the table and the
 * sort column are names checked against the schema, the engine's `sqlite_*` objects and
 * agentdb's `_agentdb_*` tables stay hidden as in DATA_DESCRIBE_SCHEMA.
 */

/**
 * One SQLite value, exactly, as a keyset cursor carries it: `i` an integer as decimal text (64
 * bits survive), `r` a real, `s` text, `b` a blob in hex, `n` NULL.
 */
export const cursorValue = z.discriminatedUnion('t', [
  z.strictObject({ t: z.literal('n') }),
  z.strictObject({ t: z.literal('i'), v: z.string().regex(/^-?\d{1,20}$/) }),
  z.strictObject({ t: z.literal('r'), v: z.number() }),
  z.strictObject({ t: z.literal('s'), v: z.string().max(100_000) }),
  z.strictObject({
    t: z.literal('b'),
    v: z
      .string()
      .regex(/^[0-9a-f]*$/)
      .max(200_000),
  }),
]);
export type CursorValue = z.output<typeof cursorValue>;

/** Where a keyset page starts: the sort column's value (when sorting by one) and the row's key. */
export const pageCursor = z.strictObject({ v: cursorValue.optional(), k: cursorValue });
export type PageCursor = z.output<typeof pageCursor>;

/** Largest grid page. */
export const MAX_PAGE_SIZE = 1000;

/** A grid page: after or before a cursor (keyset), or at an offset (a jump to a page). */
export const pageArgs = z.strictObject({
  table: z.string().min(1).max(4096),
  sort: z.string().min(1).max(4096).optional(),
  dir: z.enum(['asc', 'desc']).default('asc'),
  limit: z.number().int().min(1).max(MAX_PAGE_SIZE).default(100),
  after: pageCursor.optional(),
  before: pageCursor.optional(),
  offset: z.number().int().min(0).optional(),
  /** Also count the rows (a full count costs a scan: asked once, on a first page). */
  count: z.boolean().optional(),
  /** Read the table as it was at this moment (epoch ms), read-only, from history (`as_of`). */
  asOf: z.number().int().min(0).optional(),
});
export type PageArgs = z.input<typeof pageArgs>;

/** Shown in a grid cell: long text is cut and blobs only sized, so a page stays small. */
/** `cut`: the first 500 characters of a longer text, whose `length` is its UTF-8 bytes. */
export type GridCell = null | number | string | { blob: number } | { cut: string; length: number };

/** A grid page as the owner answers it. */
export interface GridPage {
  table: string;
  type: 'table' | 'view';
  columns: { name: string; type: string; primaryKey: boolean }[];
  rows: GridCell[][];
  /** Cursors of the first and last row shown (keyset paging); absent without a key or rows. */
  first?: PageCursor;
  last?: PageCursor;
  hasPrev: boolean;
  hasNext: boolean;
  /** False for views and WITHOUT ROWID tables, which page by offset. */
  keyset: boolean;
  /** The offset of the first row when it is known (first page, a jump). */
  offset?: number;
  total?: number;
  /** Time spent in SQLite, in ms. */
  sqliteMs: number;
  /** Read as of a past moment: the time of the last commit the state read holds. */
  asOf?: { restoredTo: string };
}

/** A chunk of a CSV export: keyset after `after` (or offset paging without a key). */
export const csvArgs = z.strictObject({
  table: z.string().min(1).max(4096),
  after: pageCursor.optional(),
  /** Keyset: the chunk ends at this key (inclusive), a bound an earlier chunk gave (`bounds`). */
  until: pageCursor.optional(),
  /** Keyset: also give this many bounds past the chunk's last row (see `CsvChunk.bounds`). */
  bounds: z.number().int().min(1).max(64).optional(),
  offset: z.number().int().min(0).optional(),
  /** The chunk stops at the first record past this many UTF-16 units. */
  maxChars: z
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(2 * 1024 * 1024),
});
export type CsvArgs = z.input<typeof csvArgs>;

/** One chunk of CSV text; the first holds the header row and the total row count. */
export interface CsvChunk {
  csv: string;
  rows: number;
  total?: number;
  /** Where the next chunk starts; absent once the table (or the range up to `until`) is done. */
  next?: { after?: PageCursor; offset?: number };
  /**
   * Keys past `next`, each about this chunk's rows further than the one before: ranges between
   * them can be asked for at once, before the chunk before them arrives. Absent when the table
   * ends before the first.
   */
  bounds?: PageCursor[];
}
