import { randomUUID } from 'node:crypto';
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { encodeValue } from './sqlite-values.ts';

/** A query's whole result, written to a file by the executor child (see {@link ResultSpill}). */
export interface SpilledResult {
  /** Absolute path under `<AGENTDB_DATA_DIR>/tmp/results`; the worker uploads it and deletes it. */
  file: string;
  bytes: number;
  rows: number;
  /** Set when rows were left out because the file reached its cap (MAX_OFFLOAD_BYTES). */
  capped?: { maxBytes: number };
}

/** The folder spilled results are written to, under the data folder. */
export function spillDir(dataDir: string): string {
  return path.join(dataDir, 'tmp', 'results');
}

/** Write in pieces of this size: few system calls, little memory. */
const FLUSH_BYTES = 256 * 1024;
/** Blobs are base64-encoded in slices (a multiple of 3 bytes, so slices join without padding). */
const BLOB_SLICE = 3 * 64 * 1024;

/**
 * The rows of a result too large for its envelope, written as they are read to one JSON file,
 * `{"columns":[…],"rows":[[…],…]}` — the same shape and encoding as a result's own rows. The
 * executor child is synchronous (better-sqlite3), so this writes with `writeSync`, a piece at a
 * time: a result of a million rows never exists as one string, and a 500 MB blob is encoded in
 * slices (its base64 would not even fit in a JS string).
 */
export class ResultSpill {
  readonly file: string;
  private readonly fd: number;
  private pending: string[] = [];
  private pendingBytes = 0;
  private bytes = 0;
  private rows = 0;
  private capped = false;

  /**
   * `maxBytes` caps the file (MAX_OFFLOAD_BYTES): a row that would take it past the cap is not
   * written, nor is any row after it, so a query cannot fill the disk for the price of one call.
   */
  constructor(
    dir: string,
    columns: string[],
    private readonly maxBytes = Number.POSITIVE_INFINITY,
  ) {
    mkdirSync(dir, { recursive: true });
    this.file = path.join(dir, `${randomUUID()}.json`);
    this.fd = openSync(this.file, 'wx', 0o600);
    this.push(`{"columns":${JSON.stringify(columns)},"rows":[`);
  }

  /** True once a row was refused for the cap: the caller stops reading. */
  get full(): boolean {
    return this.capped;
  }

  /** Adds a row already encoded (one kept for the preview); false when it would pass the cap. */
  encodedRow(row: unknown[]): boolean {
    const text = `${this.rows ? ',' : ''}${JSON.stringify(row)}`;
    if (!this.fits(Buffer.byteLength(text))) return false;
    this.rows++;
    this.push(text);
    return true;
  }

  /** Adds a row as SQLite returned it; false (nothing written) when it would pass the cap. */
  rawRow(raw: unknown[]): boolean {
    // Sized before anything is written, so the file never grows past the cap, not even by the
    // one row that crosses it. A large blob is sized by its base64 length, never encoded for it.
    let size = 2 + (this.rows ? 1 : 0) + Math.max(0, raw.length - 1);
    for (const value of raw) {
      size +=
        Buffer.isBuffer(value) && value.length > BLOB_SLICE ? 12 + Math.ceil(value.length / 3) * 4 : Buffer.byteLength(JSON.stringify(encodeValue(value)));
    }
    if (!this.fits(size)) return false;
    this.push(this.rows++ ? ',[' : '[');
    raw.forEach((value, i) => {
      if (i) this.push(',');
      if (Buffer.isBuffer(value) && value.length > BLOB_SLICE) {
        this.push('{"$blob":"');
        for (let at = 0; at < value.length; at += BLOB_SLICE) this.push(value.subarray(at, at + BLOB_SLICE).toString('base64'));
        this.push('"}');
      } else {
        this.push(JSON.stringify(encodeValue(value)));
      }
    });
    this.push(']');
    return true;
  }

  /** Whether `size` more bytes, and the document's closing `]}`, stay within the cap. */
  private fits(size: number): boolean {
    if (this.capped) return false;
    if (this.bytes + this.pendingBytes + size + 2 <= this.maxBytes) return true;
    this.capped = true;
    return false;
  }

  /** Ends the document and closes the file. */
  finish(): SpilledResult {
    this.push(']}');
    this.flush();
    closeSync(this.fd);
    return this.capped
      ? { file: this.file, bytes: this.bytes, rows: this.rows, capped: { maxBytes: this.maxBytes } }
      : { file: this.file, bytes: this.bytes, rows: this.rows };
  }

  /** Closes and deletes the file (the query failed midway). */
  abort(): void {
    try {
      closeSync(this.fd);
    } finally {
      rmSync(this.file, { force: true });
    }
  }

  private push(text: string): void {
    this.pending.push(text);
    this.pendingBytes += Buffer.byteLength(text);
    if (this.pendingBytes >= FLUSH_BYTES) this.flush();
  }

  private flush(): void {
    if (!this.pending.length) return;
    const buf = Buffer.from(this.pending.join(''), 'utf8');
    this.pending = [];
    this.pendingBytes = 0;
    let at = 0;
    while (at < buf.length) at += writeSync(this.fd, buf, at, buf.length - at);
    this.bytes += buf.length;
  }
}
