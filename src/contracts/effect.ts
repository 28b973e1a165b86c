/**
 * What a parked write or drop would do to its database, as a person approves it: computed on the
 * shard's worker in a transaction that is always rolled back (see `sqlite/sqlite-effect.ts`),
 * and computed again inside the approved call's own transaction, which commits only while the
 * digest is the approved one.
 */
export interface Effect {
  /** Per table the statement changed (foreign-key actions included), by name. */
  tables: EffectTable[];
  /** Up to APPROVAL_EFFECT_ROWS changed rows, in the digest's order; fewer when `cut`. */
  rows: EffectRow[];
  /** True when rows were left out or values shortened to fit (the digest covers them all). */
  cut: boolean;
  /**
   * sha256 (hex) over the canonical form of the whole effect, uncut: per table its columns and
   * counts, every updated or deleted row's key and values before, and the values every updated
   * or inserted row gets. Values made as the statement runs are left out, the same in the
   * preview and the run (`sqlite/effect-volatile.ts`): a volatile DEFAULT (CURRENT_TIMESTAMP,
   * randomblob()) of a column the statement does not name, the rowid SQLite assigns, a column
   * set to an expression of only literals, the clock and randomness, and a written value that
   * reads as the instant the run read the clock at (a CTAS: a time of its recording's window), its
   * form (type, text shape) bound. Any other difference changes the digest.
   */
  digest: string;
  /** For a drop: the object removed, with its schema and row count. */
  dropped?: { type: 'table' | 'view'; name: string; definition: string; rows?: number };
}

/** Rows one table gains, changes and loses. */
export interface EffectTable {
  table: string;
  inserted: number;
  updated: number;
  deleted: number;
}

/** A value as the effect shows it: like a query's cell, or the start of one too long to show. */
export type EffectValue = string | number | null | { $blob: string } | EffectCut;

/** A value shortened to fit: its first bytes (base64 for a blob) and its whole size. */
export interface EffectCut {
  $cut: string;
  bytes: number;
}

/** One changed row: its key (rowid, or primary key of a WITHOUT ROWID table) and its values. */
export interface EffectRow {
  table: string;
  op: 'insert' | 'update' | 'delete';
  key: Record<string, EffectValue>;
  /** The row before (null for an insert). */
  before: Record<string, EffectValue> | null;
  /** The row after (null for a delete). */
  after: Record<string, EffectValue> | null;
  /**
   * The names (of `key` and `after`) whose shown value is the preview's, made as the row is
   * written — the rowid SQLite assigns, a volatile DEFAULT, the clock or randomness — and left
   * out of the digest: the run may write another (an insert approved meanwhile takes the shown
   * rowid). Absent when the digest binds every value shown.
   */
  madeAtRun?: string[];
}

/** How much of an effect is kept for a person; the digest never depends on it. */
export interface EffectLimits {
  /** Rows kept at most (APPROVAL_EFFECT_ROWS). */
  maxRows: number;
  /** JSON bytes the kept rows may take (what MAX_PARKED_CALL_BYTES leaves beside the call's arguments). */
  maxBytes: number;
}

/** The longest value a kept row shows, in UTF-8 bytes (a blob: in bytes before base64). */
export const MAX_EFFECT_VALUE_BYTES = 256;
