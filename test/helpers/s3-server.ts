import { createHash } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import S3rver from 's3rver';

interface StoredObject {
  bucket: string;
  key: string;
  content: Buffer | Readable;
  metadata: Record<string, string>;
}
interface FilesystemStore {
  getResourcePath(bucket: string, key: string, kind: 'object'): string;
  putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5: string): Promise<void>;
  putObject(object: StoredObject): Promise<{ size: number; md5: string }>;
}

/**
 * s3rver 3.7.1 answers a PUT once the body has passed its md5 transform, before the file is
 * written: a GET right after could read the object empty. Real S3 reads back what a PUT answered
 * for, and agentdb's backup reads each upload back to check it, so a backup failed
 * HISTORY_CORRUPT with "read back differs" about once in six CI runs (the sha256 of no bytes).
 * This is s3rver's putObject, answering once the file is on disk.
 */
function writeObjectsBeforeAnswering(): void {
  const require = createRequire(import.meta.url);
  const store = require('s3rver/lib/stores/filesystem.js') as { prototype: FilesystemStore & { writtenBeforeAnswer?: true } };
  if (store.prototype.writtenBeforeAnswer) return;
  store.prototype.writtenBeforeAnswer = true;
  store.prototype.putObject = async function (this: FilesystemStore, object: StoredObject) {
    const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
    await mkdir(path.dirname(objectPath), { recursive: true });
    const md5 = createHash('md5');
    let size = 0;
    const measure = new Transform({
      transform(chunk: Buffer, _enc, done) {
        md5.update(chunk);
        size += chunk.length;
        done(null, chunk);
      },
    });
    const content = Buffer.isBuffer(object.content) ? [object.content] : object.content;
    await pipeline(content, measure, createWriteStream(objectPath));
    const digest = md5.digest('hex');
    await this.putMetadata(object.bucket, object.key, object.metadata, digest);
    return { size, md5: digest };
  };
}

/** A real S3 wire-protocol server (s3rver) on loopback, a free port and a temp folder. */
export interface S3Server {
  endpoint: string;
  bucket: string;
  /** The environment that points agentdb at it (BLOB_STORE=s3 and the S3_* keys). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** Starts s3rver with one bucket; s3rver's fixed credentials are S3RVER / S3RVER. */
export async function startS3Server(bucket = 'agentdb-test'): Promise<S3Server> {
  writeObjectsBeforeAnswering();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: bucket }] });
  const { port } = (await server.run()) as { port: number };
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    env: {
      BLOB_STORE: 's3',
      S3_ENDPOINT: endpoint,
      S3_BUCKET: bucket,
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      S3_FORCE_PATH_STYLE: 'true',
    },
    async stop() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
