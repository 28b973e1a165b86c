// The fault ledger's writers (bench/faults-ledger-29.ts): its six lanes, each a surface of the
// service writing into a database of its own under call ids of its own, and every answer kept.
import type { AgentDbClient } from '../../src/calls/client.ts';
import { mcpReplyJson } from '../mcp-reply.ts';

export const WS = 'f4';
export const LANES = ['lib', 'slow', 'v1', 'mcp', 'member', 'place'] as const;
export type Lane = (typeof LANES)[number];
/** The agent each lane writes as; `member` writes into the workspace's shared database. */
export const agentOf: Record<Lane, string | undefined> = { lib: 'alib', slow: 'aslow', v1: 'av1', mcp: 'amcp', member: undefined, place: 'aplace' };
const RETRYABLE = new Set(['STORAGE_FULL', 'UNAVAILABLE', 'RETRY_LATER', 'RESTORE_RUNNING', 'RESOURCE_LIMIT', 'INTERNAL']);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

export interface Answer {
  at: number;
  ok?: boolean;
  code?: string;
  mayStillRun?: boolean;
  status?: string;
  rowid?: number;
  error?: string;
  message?: string;
  /** A late ok's `takenBack`: the undo id of the restore in place that took the write back (session 38, F19). */
  takenBack?: string;
}
export interface Write {
  lane: Lane;
  cid: string;
  sent: number;
  answers: Answer[];
  outcome?: 'ok' | 'failed';
  /** When the answer that settled it came. */
  settled?: number;
}
export interface Envelope {
  ok?: boolean;
  status?: string;
  mayStillRun?: boolean;
  error?: { code: string; message?: string };
  result?: { lastInsertRowid?: number; takenBack?: { undoId: string } };
  takenBack?: { undoId: string };
}

export const sqlOf = (lane: Lane) =>
  lane === 'slow'
    ? 'INSERT INTO t (cid, pad) SELECT ?, (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 150000) SELECT max(x) FROM c)'
    : 'INSERT INTO t (cid, pad) VALUES (?, ?)';
export const paramsOf = (lane: Lane, cid: string) => (lane === 'slow' ? [cid] : [cid, 'x'.repeat(300)]);

/** One send of a write by its lane's surface, as an envelope. */
export type Send = (lane: Lane, cid: string, sql: string, params: unknown[]) => Promise<Envelope>;

/** The lanes' surfaces: the client library, `/mcp` and `/v1/calls` at `base` with each lane's key. */
export function sender(client: AgentDbClient, base: string, key: Record<string, string>): Send {
  const headers = (lane: Lane) => ({
    authorization: `Bearer ${key[lane]}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  });
  return async (lane, cid, sql, params) => {
    const args = { sql, params };
    if (lane === 'lib' || lane === 'slow' || lane === 'place')
      return (await client.call(
        { workspace: WS, agent: agentOf[lane]!, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', callId: cid, arguments: args },
        { timeoutMs: 8000 },
      )) as Envelope;
    if (lane === 'mcp') {
      const res = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: headers(lane),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'DATA_WRITE_SQL', arguments: args, _meta: { 'agentdb/callId': cid } },
        }),
      });
      const text = await res.text();
      const json = mcpReplyJson(text);
      if (!json.result) return { ok: false, error: { code: `JSONRPC ${JSON.stringify(json.error ?? json).slice(0, 80)}` } };
      const sc = json.result.structuredContent ?? {};
      if (sc.status) return sc;
      if (json.result.isError) return { ok: false, error: sc.error, ...(sc.mayStillRun ? { mayStillRun: true } : {}) };
      return { ok: true, result: sc };
    }
    const res = await fetch(`${base}/v1/calls`, {
      method: 'POST',
      headers: headers(lane),
      body: JSON.stringify({ tool: 'DATA_WRITE_SQL', callId: cid, arguments: args }),
    });
    return (await res.json()) as Envelope;
  };
}

export const answerOf = (env: Envelope): Answer => {
  const a: Answer = { at: Date.now() };
  if (env.status) a.status = env.status;
  else {
    a.ok = env.ok;
    // MCP's structuredContent carries `takenBack` beside the result's fields.
    const took = env.takenBack ?? env.result?.takenBack;
    if (env.ok) {
      a.rowid = Number(env.result?.lastInsertRowid);
      if (took) a.takenBack = took.undoId;
    } else {
      a.code = env.error?.code;
      if (a.code === 'QUOTA_EXCEEDED' || a.code === 'INTERNAL' || a.code === 'IDEMPOTENCY_CONFLICT') a.message = env.error?.message?.slice(0, 300);
    }
    if (env.mayStillRun) a.mayStillRun = true;
  }
  return a;
};

/** Each lane's table, made before the lanes start (sent again until it answers ok). */
export async function makeTables(send: Send): Promise<void> {
  for (const lane of LANES) {
    for (;;) {
      const made = await send(lane, `setup-${lane}`, 'CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, cid TEXT NOT NULL, pad TEXT)', []);
      if (made.ok) break;
      await sleep(200);
    }
  }
}

/** The writers' shared state: every write in `writes`, until `stop`. */
export interface Writers {
  writes: Write[];
  stop: boolean;
  seq: number;
}

/**
 * One lane writing until `w.stop`: a status, `mayStillRun`, a transport error or UNAUTHENTICATED
 * is sent again under the same id; a retryable refusal half the time, else it stays refused.
 */
export async function runLane(send: Send, state: Writers, l: Lane): Promise<void> {
  while (!state.stop) {
    const w: Write = { lane: l, cid: `${l}-${++state.seq}`, sent: Date.now(), answers: [] };
    state.writes.push(w);
    for (let tries = 0; ; tries++) {
      let a: Answer;
      try {
        a = answerOf(await send(l, w.cid, sqlOf(l), paramsOf(l, w.cid)));
      } catch (err) {
        a = { at: Date.now(), error: String((err as Error).message).slice(0, 120) };
      }
      w.answers.push(a);
      const resend = a.status || a.error || a.mayStillRun || a.code === 'UNAUTHENTICATED' || a.code?.startsWith('JSONRPC');
      if (!resend && !(a.ok === false && RETRYABLE.has(a.code!) && Math.random() < 0.5)) {
        w.outcome = a.ok ? 'ok' : 'failed';
        w.settled = a.at;
        break;
      }
      if (state.stop && tries > 300) break;
      await sleep(a.ok === false || a.error ? 150 : 20);
    }
  }
}
