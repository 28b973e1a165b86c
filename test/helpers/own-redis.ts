import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';

/** A free TCP port on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A redis-server of the test's own, with AOF on (fsync always) in a temp folder, that the
 * test can stop and start again, as Redis restarts in production with persistence on.
 */
export class OwnRedis {
  readonly dir = mkdtempSync(path.join(os.tmpdir(), 'agentdb-redis-'));
  private proc?: ChildProcess;

  private constructor(
    readonly port: number,
    readonly host: string,
  ) {}

  /**
   * `host`: the loopback address it listens on. The fault ledger's is not 127.0.0.1: `agentdb
   * start` started while no Redis answers at a local address starts its own redis-server there
   * (`ensureRedis`), which then held the port through every later Redis fault (session 35, F14).
   */
  static async start(host = '127.0.0.1'): Promise<OwnRedis> {
    const r = new OwnRedis(await freePort(), host);
    await r.start();
    return r;
  }

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  async start(): Promise<void> {
    this.proc = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', this.host, '--dir', this.dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', ''],
      {
        stdio: 'ignore',
      },
    );
    for (;;) {
      const probe = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => undefined);
      try {
        await probe.connect();
        // Ready only once the AOF is loaded back.
        if ((await probe.info('persistence')).includes('loading:0')) return;
      } catch {
        // not up yet
      } finally {
        probe.disconnect();
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Stops the server (SHUTDOWN, which flushes the AOF) and waits for it to exit. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    const admin = new Redis(this.url, { maxRetriesPerRequest: 0 });
    admin.on('error', () => undefined);
    await admin.shutdown().catch(() => undefined);
    admin.disconnect();
    await exited;
  }

  /** Kills the server (SIGKILL: nothing flushed beyond what fsync already wrote) and waits for it to exit. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
  }

  /** Sends the server a signal: SIGSTOP leaves it up but answering nothing, SIGCONT lets it go on. */
  signal(sig: NodeJS.Signals): void {
    this.proc?.kill(sig);
  }

  /** Deletes what the stopped server persisted, so that it starts again empty. */
  wipe(): void {
    for (const entry of readdirSync(this.dir)) rmSync(path.join(this.dir, entry), { recursive: true, force: true });
  }

  async remove(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
