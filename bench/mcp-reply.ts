/**
 * The JSON-RPC message of a `/mcp` POST's reply text: the body itself when it is JSON, else the
 * first `data:` line of its event stream (the MCP SDK answers either way). The two fault ledgers
 * read their `/mcp` answers through it.
 */
export function mcpReplyJson(text: string): { result?: Record<string, unknown> & { structuredContent?: Record<string, unknown> }; error?: unknown } {
  const body = text.startsWith('{')
    ? text
    : text
        .split('\n')
        .find((l) => l.startsWith('data:'))!
        .slice(5);
  return JSON.parse(body);
}
