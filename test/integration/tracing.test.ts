import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, type ReadableSpan, SimpleSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { db, type AgentDbClient, type AwaitingAnswer } from '../../src/index.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

/** Tells a test when a span it waits for has ended: the worker's spans end after the caller has its answer. */
class EndedSpans implements SpanProcessor {
  private readonly waits = new Set<{ match: (s: ReadableSpan) => boolean; resolve: (s: ReadableSpan) => void }>();
  constructor(private readonly exporter: InMemorySpanExporter) {}
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    for (const w of this.waits) {
      if (w.match(span)) {
        this.waits.delete(w);
        w.resolve(span);
      }
    }
  }
  /** The first ended span that matches, already or later. */
  until(match: (s: ReadableSpan) => boolean): Promise<ReadableSpan> {
    const done = this.exporter.getFinishedSpans().find(match);
    if (done) return Promise.resolve(done);
    return new Promise((resolve) => this.waits.add({ match, resolve }));
  }
  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

const exporter = new InMemorySpanExporter();
const ended = new EndedSpans(exporter);
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), ended] });

let sb: Sandbox;
let client: AgentDbClient;
let k: KeyedApp;
let base: string;

beforeAll(async () => {
  // What a runtime's own SDK setup does; agentdb itself only uses the API.
  provider.register();
  sb = sandbox({ TRACING: 'on' });
  await sb.pool();
  client = sb.client();
  k = keyedApp(sb);
  base = await k.app.listen({ port: 0, host: '127.0.0.1' });
  expect(
    await client.call({ workspace: 'tr', agent: 'a', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v TEXT)' } }),
  ).toMatchObject({ ok: true });
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
  await provider.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const traceOf = (traceId: string) => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
const named = (spans: ReadableSpan[], prefix: string) => {
  const found = spans.filter((s) => s.name.startsWith(prefix));
  if (found.length === 0) throw new Error(`no span "${prefix}…" among ${spans.map((s) => s.name).join(', ')}`);
  return found;
};
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
/** Everything a span tells an exporter, to look for what must never be there. */
const told = (spans: ReadableSpan[]) =>
  JSON.stringify(spans.map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, status: s.status, links: s.links })));

describe('OpenTelemetry spans of a call (TRACING=on)', () => {
  it("follows one call from the client through the queue and the worker to the executor, in the caller's trace", async () => {
    const traceId = hex(16);
    const callerSpan = hex(8);
    const secret = `param-${hex(6)}`;
    const answer = await client.call(
      {
        workspace: 'tr',
        agent: 'a',
        settings: { database: 'agent' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: 'INSERT INTO t VALUES (?)', params: [secret] },
        callId: 'traced-1',
      },
      { traceparent: `00-${traceId}-${callerSpan}-01` },
    );
    expect(answer).toMatchObject({ ok: true });
    await ended.until((s) => s.name.startsWith('process ') && s.spanContext().traceId === traceId);

    const spans = traceOf(traceId);
    const [call] = named(spans, 'execute_tool DATA_WRITE_SQL');
    expect(call!.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'DATA_WRITE_SQL',
      'gen_ai.tool.call.id': 'traced-1',
    });
    expect(parentOf(call!)).toBe(callerSpan);
    const [add] = named(spans, 'add ');
    expect(add!.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(add!)).toBe(call!.spanContext().spanId);
    const [process] = named(spans, 'process ');
    expect(process!.kind).toBe(SpanKind.CONSUMER);
    expect(parentOf(process!)).toBe(add!.spanContext().spanId);
    const [run] = named(spans, 'run_call DATA_WRITE_SQL');
    expect(run!.attributes).toMatchObject({ 'gen_ai.tool.call.id': 'traced-1' });
    expect(parentOf(run!)).toBe(process!.spanContext().spanId);
    const [exec] = named(spans, 'executor write');
    expect(exec!.attributes).toMatchObject({ 'db.system.name': 'sqlite', 'db.operation.name': 'write' });
    expect(parentOf(exec!)).toBe(run!.spanContext().spanId);

    // Never a statement's parameters, nor its text.
    expect(told(exporter.getFinishedSpans())).not.toContain(secret);
    expect(told(exporter.getFinishedSpans())).not.toContain('INSERT INTO');
  });

  it("names a db() call's span after its db_* tool, around the client's span of the engine tool, and a call the surface refused too", async () => {
    const traceId = hex(16);
    const callerSpan = hex(8);
    const query = db({ client, workspace: 'tr', agent: 'a' }).find((t) => t.name === 'db_query')!;
    const answer = await query.execute({ statement: 'SELECT count(*) FROM t' }, { traceparent: `00-${traceId}-${callerSpan}-01` });
    expect(answer).toMatchObject({ ok: true });
    await ended.until((s) => s.name.startsWith('process ') && s.spanContext().traceId === traceId);
    const spans = traceOf(traceId);
    const [outer] = named(spans, 'execute_tool db_query');
    expect(outer!.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'db_query', 'gen_ai.tool.call.id': answer.callId });
    expect(parentOf(outer!)).toBe(callerSpan);
    const [inner] = named(spans, 'execute_tool DATA_QUERY_SQL');
    expect(parentOf(inner!)).toBe(outer!.spanContext().spanId);

    // Refused by the surface's rules (db_query runs reads only): nothing was sent, and the span says why.
    const refusedTrace = hex(16);
    const refused = await query.execute({ statement: 'DELETE FROM t' }, { traceparent: `00-${refusedTrace}-${hex(8)}-01` });
    expect(refused).toMatchObject({ ok: false, error: { code: expect.any(String) } });
    const [alone] = named(traceOf(refusedTrace), 'execute_tool db_query');
    expect(alone!.attributes['error.type']).toBe((refused as { error: { code: string } }).error.code);
  });

  it("never puts a read's rows or a refusal's detail in a span: BullMQ's job result and failure events are not recorded", async () => {
    const traceId = hex(16);
    const secret = `row-${hex(6)}`;
    const read = await client.call(
      {
        workspace: 'tr',
        agent: 'a',
        settings: { database: 'agent' },
        tool: 'DATA_QUERY_SQL',
        arguments: { sql: 'SELECT ? AS v', params: [secret] },
        callId: 'traced-rows',
      },
      { traceparent: `00-${traceId}-${hex(8)}-01` },
    );
    expect(read).toMatchObject({ ok: true });
    expect(JSON.stringify(read)).toContain(secret);
    const failedTrace = hex(16);
    const refused = await client.call(
      {
        workspace: 'tr',
        agent: 'a',
        settings: { database: 'agent' },
        tool: 'DATA_QUERY_SQL',
        arguments: { sql: `SELECT * FROM missing_${secret.replace('-', '_')}` },
        callId: 'traced-err',
      },
      { traceparent: `00-${failedTrace}-${hex(8)}-01` },
    );
    expect(refused).toMatchObject({ ok: false, error: { code: 'SQL_ERROR' } });
    await ended.until((s) => s.name.startsWith('process ') && s.spanContext().traceId === traceId);
    await ended.until((s) => s.name.startsWith('process ') && s.spanContext().traceId === failedTrace);
    expect(told(traceOf(traceId))).not.toContain(secret);
    expect(told(traceOf(failedTrace))).not.toContain(secret.replace('-', '_'));
  });

  it('continues the active span when the caller gives no traceparent, and ignores a malformed one', async () => {
    const outer = trace.getTracer('runtime').startSpan('agent turn');
    await context.with(trace.setSpan(context.active(), outer), () =>
      client.call({ workspace: 'tr', agent: 'a', settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, callId: 'traced-2' }),
    );
    outer.end();
    const call = await ended.until((s) => s.name === 'execute_tool DATA_QUERY_SQL' && s.attributes['gen_ai.tool.call.id'] === 'traced-2');
    expect(call.spanContext().traceId).toBe(outer.spanContext().traceId);
    expect(parentOf(call)).toBe(outer.spanContext().spanId);

    await client.call(
      { workspace: 'tr', agent: 'a', settings: { database: 'agent' }, tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' }, callId: 'traced-3' },
      { traceparent: '00-00000000000000000000000000000000-0000000000000000-01' },
    );
    const fresh = await ended.until((s) => s.name === 'execute_tool DATA_QUERY_SQL' && s.attributes['gen_ai.tool.call.id'] === 'traced-3');
    expect(fresh.spanContext().traceId).not.toMatch(/^0+$/);
    expect(parentOf(fresh)).toBeUndefined();
  });

  it("records a parked call's wait for a person in its trace, and its run after the approval", async () => {
    const traceId = hex(16);
    const parked = (await client.call(
      {
        workspace: 'tr',
        agent: 'a',
        settings: { database: 'agent', approval: 'write' },
        tool: 'DATA_WRITE_SQL',
        arguments: { sql: "INSERT INTO t VALUES ('x')" },
        callId: 'traced-4',
      },
      { wait: false, traceparent: `00-${traceId}-${hex(8)}-01` },
    )) as AwaitingAnswer;
    expect(parked.status).toBe('awaiting_approval');
    await k.memberKey('tr', 'alice', 'member');
    expect(await client.decide(parked.approval.id, { decision: 'approve', by: 'alice', operator: true })).toMatchObject({ ok: true });
    expect(await client.result('traced-4', { workspace: 'tr', agent: 'a', wait: true })).toMatchObject({ ok: true });
    const wait = await ended.until((s) => s.name === 'await_approval DATA_WRITE_SQL' && s.spanContext().traceId === traceId);
    expect(wait.attributes).toMatchObject({
      'agentdb.approval.id': parked.approval.id,
      'agentdb.approval.state': 'approved',
      'gen_ai.tool.call.id': 'traced-4',
    });
    await ended.until((s) => s.name === 'executor write' && s.spanContext().traceId === traceId);
    // Run twice in the trace: parked, then run once approved.
    expect(named(traceOf(traceId), 'run_call DATA_WRITE_SQL').length).toBeGreaterThanOrEqual(2);
  });

  it('records an approval nobody decided as a wait that ended expired', async () => {
    const short = sandbox({ TRACING: 'on', APPROVAL_TTL_MS: '1000' });
    try {
      await short.pool();
      const c = short.client();
      const who = { workspace: 'tr', agent: 'late', settings: { database: 'agent' as const, approval: 'write' as const } };
      await c.call({ ...who, settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: 'CREATE TABLE t (v)' } });
      const traceId = hex(16);
      const parked = (await c.call(
        { ...who, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (1)' }, callId: 'traced-late' },
        { wait: false, traceparent: `00-${traceId}-${hex(8)}-01` },
      )) as AwaitingAnswer;
      expect(await c.result('traced-late', { workspace: 'tr', agent: 'late', wait: true })).toMatchObject({ ok: false, error: { code: 'APPROVAL_EXPIRED' } });
      const wait = await ended.until((s) => s.name === 'await_approval DATA_WRITE_SQL' && s.spanContext().traceId === traceId);
      expect(wait.attributes).toMatchObject({ 'agentdb.approval.id': parked.approval.id, 'agentdb.approval.state': 'expired' });
    } finally {
      await short.cleanup();
    }
  });

  it("takes the trace from /v1/calls' traceparent header and from MCP's _meta, and never puts a key in a span", async () => {
    const key = await k.agentKey('tr', 'keyed', { displayName: 'keyed', settings: { database: 'agent' } });
    const httpTrace = hex(16);
    const res = await k.app.inject({
      method: 'POST',
      url: '/v1/calls',
      headers: { authorization: `Bearer ${key}`, traceparent: `00-${httpTrace}-${hex(8)}-01` },
      payload: { tool: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 1' } },
    });
    expect(res.statusCode).toBe(200);
    await ended.until((s) => s.name === 'run_call DATA_QUERY_SQL' && s.spanContext().traceId === httpTrace);
    named(traceOf(httpTrace), 'execute_tool DATA_QUERY_SQL');

    const mcp = new Client({ name: 'traced', version: '1' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    const mcpTrace = hex(16);
    const mcpCaller = hex(8);
    await mcp.callTool({ name: 'DATA_QUERY_SQL', arguments: { sql: 'SELECT 2' }, _meta: { traceparent: `00-${mcpTrace}-${mcpCaller}-01` } });
    await mcp.close();
    await ended.until((s) => s.name === 'run_call DATA_QUERY_SQL' && s.spanContext().traceId === mcpTrace);
    const spans = traceOf(mcpTrace);
    const [server] = named(spans, 'tools/call DATA_QUERY_SQL');
    expect(server!.kind).toBe(SpanKind.SERVER);
    expect(server!.attributes).toMatchObject({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'DATA_QUERY_SQL' });
    expect(parentOf(server!)).toBe(mcpCaller);
    const [call] = named(spans, 'execute_tool DATA_QUERY_SQL');
    expect(parentOf(call!)).toBe(server!.spanContext().spanId);

    expect(told(exporter.getFinishedSpans())).not.toContain(key);
    expect(told(exporter.getFinishedSpans())).not.toContain(key.slice(-16));
  });
});
