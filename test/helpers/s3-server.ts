import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';

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
