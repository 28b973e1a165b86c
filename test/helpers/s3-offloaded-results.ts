import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { OffloadedResults } from '../../src/blobs/offloaded-results.ts';
import type { ConcurrentSlots } from '../../src/policy/concurrent-slots.ts';
import { spillDir } from '../../src/sqlite/result-spill.ts';
import type { Sandbox } from './harness.ts';
import { keyedApp, type KeyedApp } from './keyed-app.ts';
import { startS3Server } from './s3-server.ts';
import { s3TestStore } from './s3-test-store.ts';

/** A keyed HTTP app, listening, whose offloaded results are kept in a real S3 test server. */
export interface S3OffloadedApp {
  k: KeyedApp;
  /** The app's address (`http://127.0.0.1:port`). */
  base: string;
  /**
   * Keeps a result of about `bytes` of JSON for `workspace`'s agent `agent`, as a worker's
   * offload does.
   * @returns the result's id, for `GET /v1/results/:id`.
   */
  offload(workspace: string, agent: string, bytes: number): Promise<string>;
  /** Stops the app, the store and the S3 server (the sandbox is the caller's). */
  close(): Promise<void>;
}

/** Starts an S3 test server and a keyed app over `sb` keeping results there; `downloads`: its download slots. */
export async function s3OffloadedApp(sb: Sandbox, opts: { downloads?: ConcurrentSlots } = {}): Promise<S3OffloadedApp> {
  const s3 = await startS3Server();
  const store = s3TestStore(s3);
  const results = new OffloadedResults(store, { dataDir: sb.dataDir, ttlS: 3600, ...(opts.downloads ? { downloads: opts.downloads } : {}) });
  const k = keyedApp(sb, { results });
  const base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  return {
    k,
    base,
    async offload(workspace, agent, bytes) {
      mkdirSync(spillDir(sb.dataDir), { recursive: true });
      const file = path.join(spillDir(sb.dataDir), `${workspace}.json`);
      writeFileSync(file, JSON.stringify({ columns: ['s'], rows: [['x'.repeat(Math.max(0, bytes - 40))]] }));
      const ref = await results.keep({ file, bytes, rows: 1 } as never, { workspace, agent, callId: `${workspace}-1` });
      return ref.id;
    },
    async close() {
      await k.close();
      await store.close();
      await s3.stop();
    },
  };
}
