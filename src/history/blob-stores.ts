import path from 'node:path';
import type { Config } from '../config.ts';
import type { BlobStore } from './blob-store.ts';
import { FolderBlobStore } from './folder-blob-store.ts';
import { S3BlobStore } from './s3-blob-store.ts';

/** The blob store the configuration names (BLOB_STORE): a folder by default, or S3. */
export function openBlobStore(config: Config): BlobStore {
  const blob = config.blob;
  if (blob.kind === 's3') return new S3BlobStore(blob.s3);
  return new FolderBlobStore(blob.dir ?? path.join(config.dataDir, 'blobs'));
}
