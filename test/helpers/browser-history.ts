import { Redis } from 'ioredis';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import type { ShardWorkerPool } from '../../src/shards/shard-worker-pool.ts';
import { CHROMIUM } from './chromium.ts';
import { sandbox, type Sandbox } from './harness.ts';
import { startWebServer, type WebServer } from './web-server.ts';

/** What {@link withBrowserHistory} makes: `adminKey` is admin ada's of workspace acme. */
export interface BrowserHistory {
  box: Sandbox;
  pool: ShardWorkerPool;
  client: AgentDbClient;
  server: WebServer;
  adminKey: string;
  browser: Browser;
  redis: Redis;
  ops: ShardOpClient;
  history: HistoryClient;
}

/**
 * The web server over a sandbox (`env` its), admin ada's key, a browser, and the operator's
 * history client beside them, for the browser tests of the history page: made before the file's
 * tests (call it before the file's own `beforeAll`, which writes what its page shows) and closed
 * after; `set` receives them once made.
 */
export function withBrowserHistory(env: Record<string, string> | undefined, set: (h: BrowserHistory) => void): void {
  let h: Partial<BrowserHistory> = {};
  beforeAll(async () => {
    const box = sandbox(env);
    h = { box };
    h.pool = await box.pool();
    h.client = box.client();
    h.server = await startWebServer(box);
    h.adminKey = (await h.server.members.add('acme', 'ada', 'admin')).key;
    h.browser = await chromium.launch(CHROMIUM);
    h.redis = new Redis(box.config.redisUrl);
    h.ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
    h.history = new HistoryClient(h.ops, box.config.shardCount, new AgentRegistry(h.redis, keysFor(box.config.prefix)));
    set(h as BrowserHistory);
  }, 60_000);
  afterAll(async () => {
    await h.browser?.close();
    await h.ops?.close();
    h.redis?.disconnect();
    await h.server?.close();
    await h.box?.cleanup();
  });
}
