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

  constructor(dir: string, columns: string[]) {
    mkdirSync(dir, { recursive: true });
    this.file = path.join(dir, `${randomUUID()}.json`);
    this.fd = openSync(this.file, 'wx', 0o600);
    this.push(`{"columns":${JSON.stringify(columns)},"rows":[`);
  }

  /** Adds a row already encoded (one kept for the preview). */
  encodedRow(row: unknown[]): void {
    this.push(`${this.rows++ ? ',' : ''}${JSON.stringify(row)}`);
  }

  /** Adds a row as SQLite returned it. */
  rawRow(raw: unknown[]): void {
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
  }

  /** Ends the document and closes the file. */
  finish(): SpilledResult {
    this.push(']}');
    this.flush();
    closeSync(this.fd);
    return { file: this.file, bytes: this.bytes, rows: this.rows };
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
    this.pendingBytes += text.length;
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
