import { describe, expect, it } from 'vitest';
import { errorEnvelope } from '../../src/contracts/envelope.ts';
import { toolResult } from '../../src/mcp/tool-result.ts';

// An MCP client gets what the client library and HTTP say when Redis dies under a call: the
// code, and whether the call may still run (and where its outcome will be, since an MCP client
// cannot re-send under a call id of its own).
describe('an MCP answer to a call whose Redis died', () => {
  const down = errorEnvelope(
    'c-1',
    'DATA_WRITE_SQL',
    'UNAVAILABLE',
    'Redis at redis://127.0.0.1:6379 does not answer (the connection dropped 3 s ago and has not come back).',
  );

  it('says the call may still run, and where its outcome will be', () => {
    const r = toolResult({ ...down, mayStillRun: true });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toMatchObject({ callId: 'c-1', mayStillRun: true, error: { code: 'UNAVAILABLE' } });
    expect(r.content[0]!.text).toMatch(/^UNAVAILABLE\n/);
    expect(r.content[0]!.text).toContain('The call may still run once Redis is back; its outcome will be at GET /v1/calls/c-1');
  });

  it('says nothing of the kind for a call that never reached Redis', () => {
    const r = toolResult({ ...down, mayStillRun: false });
    expect(r.structuredContent).toMatchObject({ mayStillRun: false });
    expect(r.content[0]!.text).not.toContain('may still run');
  });
});
