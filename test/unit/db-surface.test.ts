import { describe, expect, it } from 'vitest';
import { errorEnvelope, okEnvelope } from '../../src/contracts/envelope.ts';
import { REFUSAL_NOTE, UNTRUSTED_NOTE } from '../../src/contracts/tool-output.ts';
import { toolResult, untrustedFence } from '../../src/mcp/tool-result.ts';
import { translateDbCall } from '../../src/policy/db-surface.ts';

const FENCED = /<untrusted-data-([0-9a-f]{24})>\n[\s\S]*\n<\/untrusted-data-\1>/;

type DbSurface = Parameters<typeof translateDbCall>[0];

const write: DbSurface = { kind: 'db', mode: 'write', schemaMode: 'write', policy: 'allow' };
const exec = (statement: string, surface: DbSurface = write) => translateDbCall(surface, 'db_exec', { statement, rationale: 'why' });

describe('translateDbCall', () => {
  it.each([
    ['DROP TABLE leads', 'leads'],
    ['drop view IF EXISTS v1', 'v1'],
    ['DROP TABLE main."Old Leads"', 'old leads'],
    ['DROP TABLE `x`;', 'x'],
  ])('runs %s as a drop of %s', (statement, table) => {
    expect(exec(statement)).toMatchObject({ ok: true, tool: 'DATA_DROP_TABLE', arguments: { table, rationale: 'why' } });
  });

  it.each(['DROP INDEX i', 'DROP TRIGGER t', 'DROP TABLE temp.t', 'DROP TABLE a, b'])('refuses %s', (statement) => {
    expect(exec(statement)).toMatchObject({ ok: false });
  });

  it('maps data and DDL statements to DATA_WRITE_SQL, and require-approval marks the call', () => {
    expect(exec("UPDATE t SET a = 'drop table x'")).toMatchObject({ ok: true, tool: 'DATA_WRITE_SQL', arguments: { sql: "UPDATE t SET a = 'drop table x'" } });
    expect(exec('WITH x AS (SELECT 1) DELETE FROM t')).toMatchObject({ ok: true, tool: 'DATA_WRITE_SQL' });
    expect(exec('INSERT INTO t VALUES (1)', { ...write, policy: 'require-approval' })).toMatchObject({ ok: true, requireApproval: true });
  });

  it('passes db_query an as_of (a time or a call id) and refuses one that is neither', () => {
    expect(translateDbCall(write, 'db_query', { statement: 'SELECT 1', as_of: '2026-12-01T02:00:00Z' })).toMatchObject({
      ok: true,
      tool: 'DATA_QUERY_SQL',
      arguments: { sql: 'SELECT 1', as_of: '2026-12-01T02:00:00Z' },
    });
    expect(translateDbCall(write, 'db_query', { statement: 'SELECT 1', as_of: 'call-7' })).toMatchObject({ ok: true, arguments: { as_of: 'call-7' } });
    expect(translateDbCall(write, 'db_query', { statement: 'SELECT 1' })).toMatchObject({ ok: true, arguments: { sql: 'SELECT 1', max_rows: 1000 } });
    expect(translateDbCall(write, 'db_query', { statement: 'SELECT 1', as_of: 'last tuesday' })).toMatchObject({ ok: false, code: 'INVALID_ARGUMENTS' });
  });

  it('checks before policy: mode, schemaMode, read-only SQL, one statement', () => {
    const denied: DbSurface = { ...write, policy: 'deny' };
    expect(exec('SELECT 1', denied)).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
    expect(exec('INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)', denied)).toMatchObject({ ok: false, code: 'SQL_MULTIPLE_STATEMENTS' });
    expect(exec('INSERT INTO t VALUES (1)', denied)).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
    expect(exec('INSERT INTO t VALUES (1)', { ...write, mode: 'read' })).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
    expect(exec('CREATE TABLE t (x)', { ...write, schemaMode: 'read' })).toMatchObject({ ok: false, code: 'NOT_PERMITTED' });
    expect(exec('BEGIN')).toMatchObject({ ok: false, code: 'SQL_REFUSED' });
  });
});

describe('untrustedFence', () => {
  it('never uses a boundary that occurs in the data', () => {
    const text = untrustedFence('rows');
    const boundary = /<untrusted-data-([0-9a-f]+)>/.exec(text)![1]!;
    expect(text.endsWith(`</untrusted-data-${boundary}>`)).toBe(true);
    expect(untrustedFence('x')).not.toContain(boundary);
  });

  it("a refusal is fenced as agentdb's message that may quote stored data, never as data read from the database", () => {
    const refused = toolResult(errorEnvelope('c1', 'DATA_WRITE_SQL', 'INSUFFICIENT_SCOPE', 'The app was not granted that.'));
    const text = refused.content[0]!.text;
    expect(text).toMatch(FENCED);
    expect(text).toContain("is agentdb's message about this call; it may quote data stored in the database");
    expect(text).not.toContain('read from the database');
    expect(refused.structuredContent).toMatchObject({ untrusted: true, untrustedNote: REFUSAL_NOTE });
    // Rows still say where they come from.
    const read = toolResult(okEnvelope('c2', 'DATA_QUERY_SQL', 1, { columns: ['v'], rows: [['x']], truncated: false }));
    expect(read.content[0]!.text).toContain('was read from the database');
    expect(read.structuredContent).toMatchObject({ untrustedNote: UNTRUSTED_NOTE });
  });
});
