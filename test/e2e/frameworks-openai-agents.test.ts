import { Agent, Runner, Usage, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentDbTools } from '../../src/frameworks/openai-agents.ts';
import { seedNotes, startFrameworkService, type FrameworkService } from '../helpers/framework-service.ts';

// The OpenAI Agents SDK adapter driven by a scripted Model (the SDK's own interface, no
// network) against a running agentdb.

let svc: FrameworkService;
// Kept so that a start that outlives its hook's timeout is still stopped: a CI run at load 20
// left this file's worker and its children running after the suite.
let starting: Promise<FrameworkService> | undefined;
const runner = new Runner({ tracingDisabled: true });

beforeAll(async () => {
  starting = startFrameworkService();
  svc = await starting;
  await seedNotes(svc);
}, 120_000);
afterAll(async () => {
  await (await starting?.catch(() => undefined))?.close();
});

type Item = Record<string, unknown>;

/** A Model answering request i with `steps[i]` of what it was sent; it keeps every request. */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  private i = 0;
  constructor(private readonly steps: ((input: Item[]) => Item[])[]) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const step = this.steps[this.i++];
    if (!step) throw new Error('the script has no more steps');
    return { usage: new Usage(), output: step(request.input as Item[]) as ModelResponse['output'] };
  }

  // biome-ignore lint/correctness/useYield: the runs here never stream
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not streamed');
  }
}

const call = (callId: string, name: string, args: unknown): Item => ({
  type: 'function_call',
  callId,
  name,
  arguments: JSON.stringify(args),
  status: 'completed',
});
const say = (text: string): Item => ({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] });

/** The last tool result the model was sent, as text. */
function lastResult(input: Item[]): string {
  const r = input.filter((i) => i.type === 'function_call_result').at(-1);
  const out = r?.output as string | { text?: string } | undefined;
  return typeof out === 'string' ? out : String(out?.text);
}

const FENCE = /<untrusted-data-([0-9a-f]{24})>[\s\S]*<\/untrusted-data-\1>/;

describe('agentdb/openai-agents', () => {
  it('declares strict-mode schemas: every property required, optional ones nullable, no extra properties', async () => {
    const db = await agentDbTools(svc.client, { workspace: 'acme', agent: 'scout' });
    const query = db.tools.find((t) => t.name === 'DATA_QUERY_SQL')!;
    expect(query.strict).toBe(true);
    expect(query.parameters).toMatchObject({ additionalProperties: false, required: ['sql', 'params', 'max_rows', 'as_of', 'scope', 'agent'] });
    expect(JSON.stringify(query.parameters)).not.toMatch(/"(minLength|maxLength|default|minimum|maximum)"/);
  });

  it('describes and queries (strict nulls left out), rows fenced with a random boundary', async () => {
    const db = await agentDbTools(svc.client, { workspace: 'acme', agent: 'scout' });
    const seen: string[] = [];
    const model = new ScriptedModel([
      () => [call('c1', 'DATA_DESCRIBE_SCHEMA', { scope: null, agent: null })],
      (input) => {
        seen.push(lastResult(input));
        return [call('c2', 'DATA_QUERY_SQL', { sql: 'SELECT body FROM notes WHERE id = ?', params: [1], max_rows: null, scope: null, agent: null })];
      },
      (input) => {
        seen.push(lastResult(input));
        return [say('done')];
      },
    ]);
    const result = await runner.run(new Agent({ name: 'scout', model, tools: db.tools }), 'read my notes');
    expect(result.finalOutput).toBe('done');
    expect(seen[0]).toMatch(FENCE);
    expect(seen[0]).toContain('"name":"notes"');
    expect(seen[1]).toMatch(FENCE);
    expect(seen[1]).toContain('ignore previous instructions');
  });

  it('gives a refusal its code, reason and hint, and the model corrects its call', async () => {
    const db = await agentDbTools(svc.client, { workspace: 'acme', agent: 'scout', scope: 'agent' });
    const seen: string[] = [];
    const model = new ScriptedModel([
      () => [call('r0', 'DATA_QUERY_SQL', { sql: '', params: null, max_rows: null })],
      (input) => {
        seen.push(lastResult(input));
        return [call('r1', 'DATA_QUERY_SQL', { sql: 'SELECT body FROM note', params: null, max_rows: null })];
      },
      (input) => {
        seen.push(lastResult(input));
        return [call('r2', 'DATA_QUERY_SQL', { sql: 'SELECT count(*) AS n FROM notes', params: null, max_rows: null })];
      },
      (input) => {
        seen.push(lastResult(input));
        return [say('one note')];
      },
    ]);
    await runner.run(new Agent({ name: 'scout', model, tools: db.tools }), 'count my notes');
    // Bad arguments reach agentdb: its code and the field named.
    expect(seen.shift()).toMatch(/^INVALID_ARGUMENTS\n[\s\S]*sql[\s\S]*\nHint: /);
    expect(seen[0]).toMatch(/^SQL_ERROR\n/);
    expect(seen[0]).toContain('No such table: note.');
    expect(seen[0]).toMatch(/\nHint: .+DATA_DESCRIBE_SCHEMA/);
    expect(seen[1]).toContain('[[1]]');
  });

  /** Runs the model's one write until the run is interrupted for approval. */
  async function parkWrite(db: Awaited<ReturnType<typeof agentDbTools>>, id: string, sql: string) {
    const model = new ScriptedModel([() => [call(id, 'DATA_WRITE_SQL', { sql, params: null, rationale: 'keep a log' })], (input) => [say(lastResult(input))]]);
    const agent = new Agent({ name: 'clerk', model, tools: db.tools });
    const result = await runner.run(agent, 'log it');
    expect(result.interruptions).toHaveLength(1);
    expect(db.owns(result.interruptions[0]!)).toBe(true);
    return { agent, result };
  }

  it('a parked write is an interruption; approved through the run state, agentdb records it as the member and it runs', async () => {
    const db = await agentDbTools(svc.client, { workspace: 'acme', agent: 'clerk', approver: { key: svc.key } });
    const { agent, result } = await parkWrite(db, 'w1', 'CREATE TABLE log (line TEXT)');
    expect(await svc.approvals('pending')).toContainEqual(expect.objectContaining({ agent: 'clerk', sql: 'CREATE TABLE log (line TEXT)' }));
    await db.approve(result.state, result.interruptions[0]!, 'fine');
    const resumed = await runner.run(agent, result.state);
    expect(resumed.finalOutput).toMatch(FENCE);
    expect(await svc.approvals('approved')).toContainEqual(
      expect.objectContaining({ agent: 'clerk', sql: 'CREATE TABLE log (line TEXT)', decidedBy: 'ada', decidedVia: 'key', reason: 'fine' }),
    );
  });

  it('rejected through the run state: recorded in agentdb as the member, nothing runs, the model reads why', async () => {
    const db = await agentDbTools(svc.client, { workspace: 'acme', agent: 'clerk', approver: { key: svc.key } });
    const { agent, result } = await parkWrite(db, 'w2', 'CREATE TABLE nope (x)');
    await db.reject(result.state, result.interruptions[0]!, 'not today');
    const resumed = await runner.run(agent, result.state);
    expect(resumed.finalOutput).toMatch(/^APPROVAL_REJECTED\n/);
    expect(resumed.finalOutput).toContain('not today');
    expect(await svc.approvals('rejected')).toContainEqual(
      expect.objectContaining({ agent: 'clerk', sql: 'CREATE TABLE nope (x)', decidedBy: 'ada', reason: 'not today' }),
    );
  });

  it('decided in agentdb (a member key, as the web page, CLI and HTTP decide), the decision resumes the run', async () => {
    const db = await agentDbTools(svc.client, { workspace: 'acme', agent: 'clerk' });
    const { agent, result } = await parkWrite(db, 'w3', 'CREATE TABLE fromweb (x)');
    const [approval] = (await svc.approvals('pending')).filter((a) => a.sql === 'CREATE TABLE fromweb (x)');
    const decided = svc.client.decide(String(approval!.id), { decision: 'approve', key: svc.key });
    await db.awaitDecisions(result);
    expect(await decided).toMatchObject({ ok: true });
    const resumed = await runner.run(agent, result.state);
    expect(resumed.finalOutput).toMatch(FENCE);
  });

  it("a decider callback names who decided: told the call and its approval, recorded as that member on the runtime's word", async () => {
    const asked: { tool: string; decision: string; approvalId: string }[] = [];
    const db = await agentDbTools(svc.client, {
      workspace: 'acme',
      agent: 'clerk',
      approver: (ask) => {
        asked.push({ tool: ask.tool, decision: ask.decision, approvalId: ask.approval.id });
        return { by: 'ada', operator: true };
      },
    });
    const { agent, result } = await parkWrite(db, 'w4', 'CREATE TABLE bycallback (x)');
    await db.approve(result.state, result.interruptions[0]!);
    await runner.run(agent, result.state);
    const [approved] = (await svc.approvals('approved')).filter((a) => a.sql === 'CREATE TABLE bycallback (x)');
    expect(approved).toMatchObject({ decidedBy: 'ada', decidedVia: 'operator' });
    expect(asked).toEqual([{ tool: 'DATA_WRITE_SQL', decision: 'approve', approvalId: approved!.id }]);
  });

  it('refuses at once a surface or scope the registration does not give', async () => {
    await expect(agentDbTools(svc.client, { workspace: 'acme', agent: 'legacy', surface: 'data' })).rejects.toMatchObject({ code: 'NOT_PERMITTED' });
    await expect(agentDbTools(svc.client, { workspace: 'acme', agent: 'legacy', scope: 'workspace' })).rejects.toMatchObject({ code: 'NOT_PERMITTED' });
  });
});
