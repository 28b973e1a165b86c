import { S3BlobStore } from '../../src/blobs/s3-blob-store.ts';
import type { S3Server } from './s3-server.ts';

/** The S3 blob store on the test server `s3` (s3rver's fixed credentials, path-style addresses). */
export function s3TestStore(s3: S3Server): S3BlobStore {
  return new S3BlobStore({
    bucket: s3.bucket,
    region: 'us-east-1',
    endpoint: s3.endpoint,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    forcePathStyle: true,
  });
}
