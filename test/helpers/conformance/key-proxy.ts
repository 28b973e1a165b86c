// A pass-through proxy that adds `Authorization: Bearer <key>` to every request and changes nothing
// else: the MCP conformance CLI cannot send a header, and /mcp takes no call without a key. Used by
// test/e2e/mcp-official-tools.test.ts, and by hand (docs/mcp-http.md):
//   AGENTDB_KEY=adb_… node --import tsx test/helpers/conformance/key-proxy.ts <agentdb port> [<listen port>]
// which prints the URL to give the conformance CLI's `server --url`.
import http from 'node:http';
import { pathToFileURL } from 'node:url';

/**
 * Starts the proxy on 127.0.0.1 (`listenPort` 0: any free port) in front of agentdb at
 * 127.0.0.1:`upstreamPort`. Resolves to the server and its `/mcp` URL.
 */
export async function startKeyProxy(upstreamPort: number, key: string, listenPort = 0): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer((req, res) => {
    const upstream = http.request(
      { host: '127.0.0.1', port: upstreamPort, path: req.url, method: req.method, headers: { ...req.headers, authorization: `Bearer ${key}` } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(listenPort, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : listenPort;
  return { server, url: `http://127.0.0.1:${port}/mcp` };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const upstreamPort = Number(process.argv[2]);
  const key = process.env.AGENTDB_KEY;
  if (!Number.isInteger(upstreamPort) || upstreamPort <= 0 || !key) {
    process.stderr.write('usage: AGENTDB_KEY=<key> node --import tsx test/helpers/conformance/key-proxy.ts <agentdb port> [<listen port>]\n');
    process.exit(2);
  }
  const { url } = await startKeyProxy(upstreamPort, key, Number(process.argv[3] ?? 0));
  process.stdout.write(`${url}\n`);
}
