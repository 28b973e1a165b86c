import path from 'node:path';
import type { Config } from '../config.ts';
import type { BlobInfo, BlobStore, PutResult } from './blob-store.ts';
import { FolderBlobStore } from './folder-blob-store.ts';
import type { S3StoreOptions } from './s3-blob-store.ts';

/** The blob store the configuration names (BLOB_STORE): a folder by default, or S3. */
export function openBlobStore(config: Config): BlobStore {
  const blob = config.blob;
  if (blob.kind === 's3') return new LazyS3BlobStore(blob.s3);
  return new FolderBlobStore(blob.dir ?? path.join(config.dataDir, 'blobs'));
}

/**
 * The S3 store, its SDK loaded on first use: the AWS SDK takes ~100 ms and ~30 MB to load, and
 * a worker or `agentdb start` opens its blob store at start-up whether or not a backup, an
 * offloaded result or a disaster restore ever runs.
 */
class LazyS3BlobStore implements BlobStore {
  readonly name: string;
  private store?: Promise<BlobStore>;

  constructor(private readonly opts: S3StoreOptions) {
    // As S3BlobStore names itself.
    this.name = `s3://${opts.bucket}`;
  }

  private open(): Promise<BlobStore> {
    this.store ??= import('./s3-blob-store.ts').then(({ S3BlobStore }) => new S3BlobStore(this.opts));
    return this.store;
  }

  async put(key: string, source: Parameters<BlobStore['put']>[1]): Promise<PutResult> {
    return (await this.open()).put(key, source);
  }

  async get(key: string) {
    return (await this.open()).get(key);
  }

  async head(key: string): Promise<BlobInfo | undefined> {
    return (await this.open()).head(key);
  }

  async *list(prefix: string): AsyncIterable<BlobInfo> {
    yield* (await this.open()).list(prefix);
  }

  async delete(key: string): Promise<void> {
    return (await this.open()).delete(key);
  }

  async close(): Promise<void> {
    if (this.store) await (await this.store).close();
  }
}
