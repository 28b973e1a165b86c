import type { Readable } from 'node:stream';
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { AgentDbError } from '../errors.ts';
import { checkBlobKey, checkBlobPrefix, Measure, type BlobInfo, type BlobStore, type PutResult } from './blob-store.ts';

/** Where an S3-compatible store is and how to sign for it (S3_* config keys). */
export interface S3StoreOptions {
  bucket: string;
  region: string;
  /** For S3-compatible services (MinIO, R2, s3rver); AWS itself when absent. */
  endpoint?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** `https://host/bucket/key` instead of `https://bucket.host/key`: most non-AWS services need it. */
  forcePathStyle?: boolean;
}

/** Multipart parts of 8 MiB, four in flight: at most ~32 MiB of a big upload held at once. */
const PART_SIZE = 8 * 1024 * 1024;
const QUEUE_SIZE = 4;

/**
 * A bucket on S3 or an S3-compatible service. Uploads go through `@aws-sdk/lib-storage`'s
 * `Upload`, which splits a stream of unknown length into multipart parts, so a 1 GB snapshot
 * streams from disk without being held; the SHA-256 is computed on the way.
 */
export class S3BlobStore implements BlobStore {
  readonly name: string;
  private readonly client: S3Client;

  constructor(private readonly opts: S3StoreOptions) {
    this.name = `s3://${opts.bucket}`;
    this.client = new S3Client({
      region: opts.region,
      ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
      forcePathStyle: opts.forcePathStyle ?? false,
      ...(opts.accessKeyId && opts.secretAccessKey ? { credentials: { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey } } : {}),
    });
  }

  async put(key: string, source: Readable | { file: string }): Promise<PutResult> {
    checkBlobKey(key);
    const measure = new Measure();
    const input = 'file' in source ? createReadStream(source.file) : source;
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.opts.bucket, Key: key, Body: measure },
      partSize: PART_SIZE,
      queueSize: QUEUE_SIZE,
    });
    // Both sides at once: the upload pulls from `measure` while the pipeline feeds it.
    await Promise.all([pipeline(input, measure), upload.done()]);
    return { key, size: measure.bytes, sha256: measure.sha256() };
  }

  async get(key: string): Promise<Readable> {
    checkBlobKey(key);
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.opts.bucket, Key: key }));
      return out.Body as Readable;
    } catch (err) {
      if (isMissing(err)) throw new AgentDbError('NOT_FOUND', `no blob ${key} in ${this.name}`);
      throw err;
    }
  }

  async head(key: string): Promise<BlobInfo | undefined> {
    checkBlobKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.opts.bucket, Key: key }));
      return { key, size: out.ContentLength ?? 0, lastModified: out.LastModified ?? new Date(0) };
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async *list(prefix: string): AsyncIterable<BlobInfo> {
    checkBlobPrefix(prefix);
    let token: string | undefined;
    do {
      const out = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.opts.bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }),
      );
      for (const o of out.Contents ?? []) {
        if (o.Key) yield { key: o.Key, size: o.Size ?? 0, lastModified: o.LastModified ?? new Date(0) };
      }
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  }

  async delete(key: string): Promise<void> {
    checkBlobKey(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.opts.bucket, Key: key }));
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}
