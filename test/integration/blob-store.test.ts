import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf } from '../../src/errors.ts';
import { readBackSha256, type BlobStore } from '../../src/blobs/blob-store.ts';
import { FolderBlobStore } from '../../src/blobs/folder-blob-store.ts';
import { startS3Server, type S3Server } from '../helpers/s3-server.ts';
import { s3TestStore } from '../helpers/s3-test-store.ts';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'agentdb-blob-'));
let s3: S3Server;

beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

async function text(store: BlobStore, key: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of await store.get(key)) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function keys(store: BlobStore, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const b of store.list(prefix)) out.push(b.key);
  return out;
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

// One contract, two stores: everything a backup or an offloaded result relies on.
const stores: [string, () => BlobStore][] = [
  ['folder', () => new FolderBlobStore(mkdtempSync(path.join(tmp, 'folder-')))],
  ['s3', () => s3TestStore(s3)],
];

describe.each(stores)('%s blob store', (kind, make) => {
  let store: BlobStore;
  const root = `c-${kind}-${randomBytes(4).toString('hex')}`;
  beforeAll(() => {
    store = make();
  });
  afterAll(async () => {
    await store.close();
  });

  it('stores a stream and gives the same bytes back, with the size and sha256 measured on the way', async () => {
    const body = randomBytes(300_000);
    const put = await store.put(`${root}/a/one.bin`, Readable.from([body.subarray(0, 1000), body.subarray(1000)]));
    expect(put).toEqual({ key: `${root}/a/one.bin`, size: body.length, sha256: sha(body) });
    expect(await readBackSha256(store, `${root}/a/one.bin`)).toEqual({ sha256: sha(body), size: body.length });
    expect((await store.head(`${root}/a/one.bin`))?.size).toBe(body.length);
  });

  it('uploads a file larger than one multipart part from disk', async () => {
    // 20 MiB: three parts of the S3 store's 8 MiB.
    const file = path.join(tmp, `big-${kind}.bin`);
    const body = randomBytes(20 * 1024 * 1024);
    writeFileSync(file, body);
    const put = await store.put(`${root}/big.bin`, { file });
    expect(put.sha256).toBe(sha(body));
    expect(await readBackSha256(store, `${root}/big.bin`)).toEqual({ sha256: sha(body), size: body.length });
  });

  it('replaces an object whole', async () => {
    await store.put(`${root}/r.txt`, Readable.from([Buffer.from('first')]));
    await store.put(`${root}/r.txt`, Readable.from([Buffer.from('second')]));
    expect(await text(store, `${root}/r.txt`)).toBe('second');
  });

  it('lists by prefix in key order, partial last segments included', async () => {
    for (const k of ['l/b/2', 'l/a', 'l/b/1', 'l/ab', 'm/x']) await store.put(`${root}/${k}`, Readable.from([Buffer.from(k)]));
    expect(await keys(store, `${root}/l/`)).toEqual(['l/a', 'l/ab', 'l/b/1', 'l/b/2'].map((k) => `${root}/${k}`));
    expect(await keys(store, `${root}/l/a`)).toEqual([`${root}/l/a`, `${root}/l/ab`]);
    expect(await keys(store, `${root}/none/`)).toEqual([]);
  });

  it('deletes, and answers a missing key with NOT_FOUND on get and undefined on head', async () => {
    await store.put(`${root}/d`, Readable.from([Buffer.from('x')]));
    await store.delete(`${root}/d`);
    await store.delete(`${root}/d`);
    expect(await store.head(`${root}/d`)).toBeUndefined();
    const err = await store.get(`${root}/d`).catch((e) => e);
    expect(codeOf(err)).toBe('NOT_FOUND');
  });

  it('refuses keys that could leave the store, before touching anything', async () => {
    for (const bad of ['../x', 'a/../../x', '/abs', 'a//b', '.hidden', 'a/.tmp-1', '', 'a\\b']) {
      const err = await store.put(bad, Readable.from([Buffer.from('x')])).catch((e) => e);
      expect(codeOf(err), bad).toBe('INVALID_ARGUMENTS');
      expect(codeOf(await store.get(bad).catch((e) => e)), bad).toBe('INVALID_ARGUMENTS');
    }
  });
});

describe('folder blob store', () => {
  it('leaves no temp file behind when the source fails midway, and keeps the old object', async () => {
    const dir = mkdtempSync(path.join(tmp, 'fail-'));
    const store = new FolderBlobStore(dir);
    await store.put('k', Readable.from([Buffer.from('old')]));
    const failing = new Readable({
      read() {
        this.push(Buffer.from('partial'));
        this.destroy(new Error('disk went away'));
      },
    });
    await expect(store.put('k', failing)).rejects.toThrow('disk went away');
    expect(await text(store, 'k')).toBe('old');
    expect(readdirSync(dir)).toEqual(['k']);
  });
});
