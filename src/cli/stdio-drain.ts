import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** What `answered` returns: a wait for every request received so far to have been answered. */
export interface Answers {
  /** Resolves once no request that reached the server is still without its response. */
  settled(): Promise<void>;
}

/**
 * Counts the requests a connected transport passed to its server and the responses the server
 * sent back, so `agentdb mcp --stdio` can answer what it already read before it exits on the
 * end of stdin (a client that pipes its requests and closes stdin would otherwise lose the
 * answers still running). Own code: the SDK's Protocol keeps its in-flight requests private.
 * Call after `server.connect(transport)`, which installs the `onmessage` this wraps.
 */
export function answered(transport: Transport): Answers {
  const open = new Set<string | number>();
  let wake: (() => void) | undefined;
  const onmessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if ('method' in message && 'id' in message) open.add(message.id);
    onmessage?.(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message: JSONRPCMessage, options) => {
    try {
      await send(message, options);
    } finally {
      if (!('method' in message) && 'id' in message && message.id !== undefined && open.delete(message.id) && open.size === 0) wake?.();
    }
  };
  return {
    settled: () => (open.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => (wake = resolve))),
  };
}
