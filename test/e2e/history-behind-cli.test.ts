import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentDbClient } from '../../src/calls/client.ts';
import { historyDir } from '../../src/history/history-files.ts';
import { pastMs } from '../helpers/history.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { runCli, startCli, stop } from '../helpers/processes.ts';
import { growTmpfs, mountTmpfs, unmountTmpfs } from '../helpers/tmpfs.ts';

// History on a full volume of its own (a 1 MB tmpfs on the database's history folder) while the
// data disk has room: writes are answered ok while their frames wait in the WAL for their copy
// (history-behind-bound.test.ts). `agentdb history` listed the last commits copied, with no word
// that acknowledged writes came after them (review R2: `agentdb activity` said so, history did
// not), and a restore's dry run listed what it would take away as if complete.
let sb: Sandbox;
let worker: ChildProcess | undefined;
let client: AgentDbClient;
let refused: string | undefined;
const who = { workspace: 'acme', agent: 'scout', settings: { database: 'agent' as const } };
const cli = (...args: string[]) => runCli(args, sb.env);
const mnt = () => historyDir(sb.dataDir, 'acme/scout');

beforeAll(async () => {
  sb = sandbox();
  fs.mkdirSync(mnt(), { recursive: true });
  refused = mountTmpfs(mnt(), '1m');
  if (refused) return;
  worker = await startCli(['worker'], sb.env);
  client = sb.client();
  const made = await client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v INTEGER, pad TEXT)' } });
  expect(made).toMatchObject({ ok: true });
});
afterAll(async () => {
  if (worker) await stop(worker);
  if (!refused) unmountTmpfs(mnt());
  await sb.cleanup();
});

describe('agentdb history while history is behind its database', () => {
  it('says that acknowledged writes are not yet in history, in the list and in a dry run', async (ctx) => {
    if (refused) ctx.skip(`this machine refused to mount a tmpfs (${refused}); it needs root and mount(2)`);
    const write = (v: number) =>
      client.call({ ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: "INSERT INTO t (v, pad) VALUES (?, printf('%.3000c', 'x'))", params: [v] } });
    for (let v = 1; v <= 5; v++) expect(await write(v)).toMatchObject({ ok: true });
    const moment = Date.now();
    pastMs(moment);
    // Past the tmpfs's megabyte: the later writes are answered ok with their frames in the WAL.
    for (let v = 6; v <= 400; v++) expect(await write(v)).toMatchObject({ ok: true });
    const view = JSON.parse((await cli('history', 'acme/scout', '--json')).stdout);
    expect(view.recentNote).toMatch(/history is behind: \d+ writes? not yet captured/);
    expect((await cli('history', 'acme/scout')).stdout).toMatch(/history is behind: \d+ writes? not yet captured/);
    const plan = JSON.parse((await cli('restore', 'acme/scout', '--at', String(moment / 1000), '--dry-run', '--json')).stdout);
    expect(plan.after.note).toMatch(/history is behind: \d+ writes? not yet captured/);

    // Room again: capture catches up and the note goes.
    growTmpfs(mnt(), '64m');
    const caughtUp = JSON.parse((await cli('history', 'acme/scout', '--json')).stdout);
    expect(caughtUp.recentNote).toBeUndefined();
  });
});
