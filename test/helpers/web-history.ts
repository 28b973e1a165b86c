import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { keysFor } from '../../src/redis/keys.ts';
import { AgentRegistry } from '../../src/registry/agents.ts';
import { HistoryClient } from '../../src/shards/history-client.ts';
import { ShardOpClient } from '../../src/shards/shard-op-client.ts';
import { sandbox, type Sandbox } from './harness.ts';
import { signedInCookie, startWebServer, type WebServer } from './web-server.ts';

/** What {@link withWebHistory} makes: `cookie` is admin ada's web session in workspace acme. */
export interface WebHistory {
  box: Sandbox;
  web: WebServer;
  redis: Redis;
  ops: ShardOpClient;
  history: HistoryClient;
  cookie: string;
}

/**
 * The web page's history of `acme/scout` (a table `t` and two inserts, three activity entries)
 * with admin ada signed in, and the operator's history client beside it to look, for the tests
 * of one file (or describe): made before them and closed after; `set` receives it once made.
 */
export function withWebHistory(set: (h: WebHistory) => void): void {
  let h: Partial<WebHistory> = {};
  beforeAll(async () => {
    const box = sandbox();
    h = { box };
    await box.pool();
    h.web = await startWebServer(box);
    h.redis = new Redis(box.config.redisUrl);
    h.ops = new ShardOpClient({ redisUrl: box.config.redisUrl, prefix: box.config.prefix });
    h.history = new HistoryClient(h.ops, box.config.shardCount, new AgentRegistry(h.redis, keysFor(box.config.prefix)));
    h.cookie = await signedInCookie(h.web, 'acme', 'ada', 'admin');
    const client = box.client();
    for (const sql of ['CREATE TABLE t (a)', 'INSERT INTO t VALUES (1)', 'INSERT INTO t VALUES (2)'])
      expect(
        await client.call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql } }),
      ).toMatchObject({
        ok: true,
      });
    set(h as WebHistory);
  }, 60_000);
  afterAll(async () => {
    await h.ops?.close();
    h.redis?.disconnect();
    await h.web?.close();
    await h.box?.cleanup();
  });
}
