// RSS of the HTTP process while downloads of large offloaded results are held open by clients
// that read nothing (session 31, T8): `node --import tsx bench/download-rss.ts [folder|s3]`.
// Prints the process's RSS before, with N downloads of one result under way (4 per caller, 8 per
// workspace: two workspaces' agents each hold their 4), and once they are dropped.
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { FolderBlobStore } from '../src/blobs/folder-blob-store.ts';
import { OffloadedResults } from '../src/blobs/offloaded-results.ts';
import { S3BlobStore } from '../src/blobs/s3-blob-store.ts';
import { spillDir } from '../src/sqlite/result-spill.ts';
import { sandbox } from '../test/helpers/harness.ts';
import { keyedApp } from '../test/helpers/keyed-app.ts';
import { startS3Server } from '../test/helpers/s3-server.ts';

const BIG = Number(process.env.RESULT_MB ?? 64) * 1024 * 1024;
const kind = process.argv[2] ?? 'folder';
const sb = sandbox();
const s3 = kind === 's3' ? await startS3Server() : undefined;
const store = s3
  ? new S3BlobStore({ bucket: s3.bucket, region: 'us-east-1', endpoint: s3.endpoint, accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', forcePathStyle: true })
  : new FolderBlobStore(path.join(sb.dataDir, 'blobs'));
const results = new OffloadedResults(store, { dataDir: sb.dataDir, ttlS: 3600 });
const k = keyedApp(sb, { results });
const mb = (n: number) => (n / 1024 / 1024).toFixed(0);
const rss = () => {
  globalThis.gc?.();
  return process.memoryUsage().rss;
};
/** The JS heap and buffers outside it (what a held result would be), after a collection. */
const js = () => {
  globalThis.gc?.();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
};

async function offload(workspace: string, agent: string): Promise<string> {
  mkdirSync(spillDir(sb.dataDir), { recursive: true });
  const file = path.join(spillDir(sb.dataDir), `${workspace}.json`);
  writeFileSync(file, JSON.stringify({ columns: ['s'], rows: [['x'.repeat(BIG - 40)]] }));
  return (await results.keep({ file, bytes: BIG, rows: 1 } as never, { workspace, agent, callId: `${workspace}-1` })).id;
}

const held: http.ClientRequest[] = [];
const callers: { key: string; id: string }[] = [];
for (const ws of ['w1', 'w2']) {
  const key = await k.agentKey(ws, 'mal', { displayName: 'Mal', settings: { database: 'agent' } });
  callers.push({ key, id: await offload(ws, 'mal') });
}
const base = await k.app.listen({ port: 0, host: '127.0.0.1' });
await new Promise((r) => setTimeout(r, 500));
const before = rss();
const jsBefore = js();
let answered = 0;
await new Promise<void>((resolve) => {
  for (const { key, id } of callers)
    for (let i = 0; i < 4; i++) {
      const req = http.get(`${base}/v1/results/${id}`, { headers: { authorization: `Bearer ${key}` } }, (res) => {
        res.pause();
        if (++answered === 8) resolve();
      });
      req.on('error', () => undefined);
      held.push(req);
    }
});
// Let the streams fill whatever they fill.
await new Promise((r) => setTimeout(r, 3000));
const during = rss();
const jsDuring = js();
for (const req of held) req.destroy();
await new Promise((r) => setTimeout(r, 1000));
const after = rss();
console.log(
  `${kind}: result ${mb(BIG)} MB, 8 downloads held unread: RSS before ${mb(before)} MB, during ${mb(during)} MB (+${mb(during - before)}), after ${mb(after)} MB; heap + external ${mb(jsBefore)} → ${mb(jsDuring)} MB`,
);
await k.close();
if ('close' in store) await (store as S3BlobStore).close();
await s3?.stop();
await sb.cleanup();
process.exit(0);
