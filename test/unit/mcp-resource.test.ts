import { describe, expect, it } from 'vitest';
import { isMcpEndpointPath, servesTools } from '../../src/oauth/mcp-resource.ts';

describe('which MCP endpoints a token is issued for', () => {
  it('at authorization: <base>/mcp and /mcp/w/<own workspace> below this base, whatever path the base has', () => {
    for (const base of ['https://x.example', 'https://x.example/agentdb', 'https://x.example/mcp']) {
      expect(servesTools(`${base}/mcp`, 'acme', base), base).toBe(true);
      expect(servesTools(`${base}/mcp/w/acme`, 'acme', base), base).toBe(true);
      expect(servesTools(`${base}/mcp/w/other`, 'acme', base), base).toBe(false);
      expect(servesTools(`${base}/mcp/t/sales`, 'acme', base), base).toBe(false);
      expect(servesTools(`${base}/mcp?x=1`, 'acme', base), base).toBe(false);
      expect(servesTools(`${base}/mcp/w/acme/x`, 'acme', base), base).toBe(false);
    }
    expect(servesTools('https://x.example/mcp', 'acme', 'https://x.example/agentdb')).toBe(false);
    expect(servesTools('https://y.example/agentdb/mcp', 'acme', 'https://x.example/agentdb')).toBe(false);
  });

  it('at a refresh (no base): the endpoint alone decides, a team endpoint under a path prefix too', () => {
    expect(servesTools('https://x.example/agentdb/mcp', 'acme')).toBe(true);
    expect(servesTools('https://x.example/agentdb/mcp/w/acme', 'acme')).toBe(true);
    expect(servesTools('https://x.example/agentdb/mcp/t/sales', 'acme')).toBe(false);
    expect(servesTools('https://x.example/mcp/t/sales', 'acme')).toBe(false);
  });

  it('reads a workspace or team named mcp as that endpoint, not as a base ending in /mcp/w (review R1)', () => {
    for (const base of ['https://x.example', 'https://x.example/agentdb']) {
      expect(servesTools(`${base}/mcp/w/mcp`, 'mcp', base), base).toBe(true);
      expect(servesTools(`${base}/mcp/w/mcp`, 'acme', base), base).toBe(false);
      expect(servesTools(`${base}/mcp/t/mcp`, 'mcp', base), base).toBe(false);
    }
    // A refresh of a team endpoint's grant: refused, as for any other team's name.
    expect(servesTools('https://x.example/mcp/t/mcp', 'acme')).toBe(false);
    expect(servesTools('https://x.example/mcp/w/mcp', 'mcp')).toBe(true);
    for (const path of ['/mcp/w/mcp', '/mcp/t/mcp']) expect(isMcpEndpointPath(path), path).toBe(true);
  });

  it('serves resource metadata for the endpoint paths alone, their names valid', () => {
    for (const path of ['/mcp', '/mcp/w/acme', '/mcp/t/sales']) expect(isMcpEndpointPath(path), path).toBe(true);
    for (const path of ['/mcp/x/acme', '/mcp/w/Acme', '/agentdb/mcp', '/mcp/w/acme/x', '/mcp/', 'mcp', `/mcp/w/${'a'.repeat(64)}`])
      expect(isMcpEndpointPath(path), path).toBe(false);
  });
});
