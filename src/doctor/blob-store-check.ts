import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { BlobStore } from '../blobs/blob-store.ts';
import { readSmall } from '../blobs/blob-store.ts';
import { TIMED_OUT, within } from '../redis/bounded-wait.ts';
import { result, type CheckResult } from './check.ts';

/** How long the probe may take: an S3 endpoint that drops packets is retried by the SDK for minutes. */
const PROBE_MS = 20_000;

/**
 * Whether the blob store takes an object, gives it back unchanged and deletes it: what a
 * nightly backup and an offloaded result need. The probe's key is its own (`doctor-probe-…`) and is
 * deleted whatever happens.
 */
export async function blobStoreCheck(store: BlobStore, s3: boolean): Promise<CheckResult> {
  const check = 'blob-store';
  // At the root, so the folder store leaves no empty folder behind.
  const key = `doctor-probe-${randomUUID()}`;
  const body = `agentdb doctor ${new Date().toISOString()}`;
  const fix = s3
    ? 'Check S3_BUCKET, S3_ENDPOINT, S3_REGION and the credentials: the key needs PutObject, GetObject and DeleteObject on the bucket (S3_FORCE_PATH_STYLE=true for MinIO and most non-AWS services).'
    : 'Make BLOB_DIR (by default <AGENTDB_DATA_DIR>/blobs) a folder this user can write, or set BLOB_DIR to one.';
  const steps = (async () => {
    await store.put(key, Readable.from([Buffer.from(body)]));
    const back = await readSmall(store, key, 4096);
    if (back !== body) throw new Error(`read back ${back.length} bytes that differ from the ${body.length} written`);
    await store.delete(key);
    if (await store.head(key)) throw new Error('the probe is still there after its delete');
  })();
  try {
    const done = await within(PROBE_MS, steps);
    if (done === TIMED_OUT) {
      steps.catch(() => undefined);
      return result(check, 'fail', `${store.name} did not answer within ${PROBE_MS / 1000} s.`, fix);
    }
    return result(check, 'ok', `${store.name} takes an object, gives it back unchanged and deletes it.`);
  } catch (err) {
    await store.delete(key).catch(() => undefined);
    return result(check, 'fail', `${store.name}: ${(err as Error).message}`, fix);
  }
}
