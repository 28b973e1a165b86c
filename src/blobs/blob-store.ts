import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import { AgentDbError } from '../errors.ts';

/** One stored object as a listing or `head` knows it. */
export interface BlobInfo {
  key: string;
  size: number;
  lastModified: Date;
}

/** What a `put` stored: the size and SHA-256 (hex) measured while the bytes streamed through. */
export interface PutResult {
  key: string;
  size: number;
  sha256: string;
}

/**
 * Where backups and offloaded results go: a local folder or an S3-compatible bucket, behind
 * this one small interface (as Litestream keeps each replica backend behind one). Everything
 * streams: a 1 GB database passes through in chunks and never sits whole in memory.
 *
 * Keys are `/`-separated paths of plain segments (see {@link checkBlobKey}); a key that would
 * leave the store's root is refused before anything is touched.
 */
export interface BlobStore {
  /** Which store this is, for logs and reports (`folder:/path`, `s3://bucket`). */
  readonly name: string;
  /** Stores `source` (a stream, or the path of a file) under `key`, replacing what was there. */
  put(key: string, source: Readable | { file: string }): Promise<PutResult>;
  /** The object's bytes. @throws AgentDbError NOT_FOUND when there is no such key. */
  get(key: string): Promise<Readable>;
  /** The object's size and time, or undefined when there is none. */
  head(key: string): Promise<BlobInfo | undefined>;
  /** Every object whose key starts with `prefix`, in key order. */
  list(prefix: string): AsyncIterable<BlobInfo>;
  /** Deletes the object; deleting what is not there is no error. */
  delete(key: string): Promise<void>;
  /** Lets go of connections. */
  close(): Promise<void>;
}

const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._=@-]{0,199}$/;

/**
 * Throws unless `key` is a safe object key: segments of letters, digits and `._=@-`, none
 * starting with a dot (no `..`, no hidden temp names), no empty segment, at most 1,024 bytes.
 * The folder store joins keys onto its root, so this is what keeps it inside.
 */
export function checkBlobKey(key: string): void {
  const ok = typeof key === 'string' && key.length > 0 && key.length <= 1024 && key.split('/').every((s) => SEGMENT.test(s));
  if (!ok) throw new AgentDbError('INVALID_ARGUMENTS', `not a valid blob key: ${JSON.stringify(String(key).slice(0, 200))}`);
}

/** Throws unless `prefix` is empty or a key, or a key followed by `/` or a partial last segment. */
export function checkBlobPrefix(prefix: string): void {
  if (prefix === '') return;
  checkBlobKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);
}

/**
 * A pass-through stream that measures what flows through it: its `bytes` and `sha256()` are
 * final once it has ended. (Not `size`: lib-storage's `Upload` reads a body's `size` as its
 * length, and a stream's 0 made it reject every multipart upload.)
 */
export class Measure extends Transform {
  bytes = 0;
  private readonly hash = createHash('sha256');
  private digest?: string;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void): void {
    this.bytes += chunk.length;
    this.hash.update(chunk);
    done(null, chunk);
  }

  /** The hex SHA-256 of everything that passed; call after the stream ended. */
  sha256(): string {
    this.digest ??= this.hash.digest('hex');
    return this.digest;
  }
}

/** The SHA-256 (hex) and size of a stored object, read back in full (a backup's verification). */
export async function readBackSha256(store: BlobStore, key: string): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of await store.get(key)) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), size };
}

/** Reads a whole small object (a manifest, a result's metadata) as text. */
export async function readSmall(store: BlobStore, key: string, maxBytes = 16 * 1024 * 1024): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of await store.get(key)) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new AgentDbError('INVALID_ARGUMENTS', `blob ${key} is larger than ${maxBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
