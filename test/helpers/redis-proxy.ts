import net from 'node:net';

/**
 * A TCP proxy in front of Redis that passes everything through until a process's command matches
 * `holdAfter`: that command still reaches Redis (which runs it), but nothing Redis answers on that
 * connection from then on is passed back. The process is left as one that died right after sending
 * it: a test kills it there, knowing exactly what Redis did and what the process never heard.
 */
export class RedisProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private matched?: () => void;
  /** Resolves once a command matched and was passed on to Redis. */
  readonly held: Promise<void>;

  private constructor(upstream: { host: string; port: number }, holdAfter: (sent: string) => boolean) {
    this.held = new Promise((resolve) => (this.matched = resolve));
    this.server = net.createServer((down) => {
      const up = net.connect(upstream);
      this.sockets.add(down).add(up);
      let holding = false;
      // What the process sent lately on this connection: a command may come in several chunks.
      let recent = '';
      down.on('data', (chunk) => {
        recent = (recent + chunk.toString('latin1')).slice(-256 * 1024);
        up.write(chunk);
        if (!holding && this.matched && holdAfter(recent)) {
          holding = true;
          const matched = this.matched;
          this.matched = undefined;
          matched();
        }
      });
      up.on('data', (chunk) => {
        if (!holding) down.write(chunk);
      });
      const end = () => {
        down.destroy();
        up.destroy();
      };
      down.on('error', end).on('close', end);
      up.on('error', end).on('close', end);
    });
  }

  /** Starts a proxy to `redisUrl` on a free loopback port. */
  static async start(redisUrl: string, holdAfter: (sent: string) => boolean): Promise<RedisProxy & { url: string }> {
    const { hostname, port } = new URL(redisUrl);
    const proxy = new RedisProxy({ host: hostname, port: Number(port || 6379) }, holdAfter);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    const { port: own } = proxy.server.address() as net.AddressInfo;
    return Object.assign(proxy, { url: `redis://127.0.0.1:${own}` });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
