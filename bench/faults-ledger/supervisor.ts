// The fault ledger's processes (bench/faults-ledger-29.ts): `agentdb start` and `agentdb worker`
// started, killed and started again as a supervisor would, each fault in its resource's turn.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { startCli } from '../../test/helpers/processes.ts';
import { sleep } from './lanes.ts';

export type Which = 'start' | 'worker';

/** The two processes of the run, what they did by themselves, and what the driver did to them. */
export class Supervisor {
  readonly procs: Record<Which, ChildProcess | undefined> = { start: undefined, worker: undefined };
  readonly restartsRefused: string[] = [];
  readonly unexpectedExits: { which: string; at: string; code: number | null; signal: string | null; tail: string }[] = [];
  readonly childrenLeft: { when: string; children: number; left: number[] }[] = [];
  /** Set once the lanes stop: an exit from then on is the driver's. */
  stopping = false;
  private readonly killing = new Set<ChildProcess>();
  private readonly turns: Record<string, Promise<unknown>> = {};

  constructor(
    private readonly env: Record<string, string>,
    private readonly logs: fs.WriteStream,
  ) {}

  /**
   * Faults of two streams may overlap (a worker killed while the disk is full), but one thing is
   * broken by one fault at a time: each takes its resource's turn.
   */
  inTurn<T>(resource: string, fn: () => Promise<T>): Promise<T> {
    const next = (this.turns[resource] ?? Promise.resolve()).then(fn);
    this.turns[resource] = next.catch(() => undefined);
    return next;
  }

  async start(which: Which): Promise<void> {
    // A process started while Redis is stopped or down exits at once (it checks Redis first):
    // started again, as a supervisor would.
    let p: Awaited<ReturnType<typeof startCli>> | undefined;
    for (let tries = 1; !p; tries++) {
      try {
        p = await startCli([which], which === 'worker' && process.env.CUT_KILL === '1' ? { ...this.env, AGENTDB_TEST_KILL_BEFORE_TAIL_CUT: '1' } : this.env);
      } catch (err) {
        if (tries >= 60) throw err;
        this.restartsRefused.push(`${new Date().toISOString()} ${which}: ${String((err as Error).message).slice(0, 160)}`);
        await sleep(1000);
      }
    }
    p.stdout!.pipe(this.logs, { end: false });
    p.stderr!.pipe(this.logs, { end: false });
    // The last of what it printed, for an exit nobody asked for.
    let tail = p.readyLog.slice(-2000);
    const keep = (d: Buffer) => {
      tail = (tail + String(d)).slice(-4000);
    };
    p.stdout!.on('data', keep);
    p.stderr!.on('data', keep);
    p.removeAllListeners('exit');
    this.procs[which] = p;
    // A process that ends by itself is counted (a finding) and started again, as a supervisor would.
    p.once('exit', (code, signal) => {
      if (this.killing.has(p) || this.stopping) return;
      this.unexpectedExits.push({ which, at: new Date().toISOString(), code, signal, tail: tail.slice(-1500) });
      console.error(`${new Date().toISOString()} ${which} exited by itself (${code ?? signal})`);
      void this.inTurn(which, async () => {
        // Unless a fault in its turn started it again meanwhile.
        if (this.procs[which] === p) await this.start(which);
      });
    });
  }

  async kill(which: Which): Promise<void> {
    const p = this.procs[which]!;
    // Already gone by itself: its exit was counted, and its restart waits for this turn.
    if (p.exitCode !== null || p.signalCode !== null) return;
    this.killing.add(p);
    const gone = new Promise((res) => p.once('exit', res));
    p.kill('SIGKILL');
    await gone;
  }

  /** SIGKILL of `agentdb worker`, its children listed first: each must exit by itself (counted). */
  async idleKill(when: string): Promise<void> {
    const p = this.procs.worker!;
    const kids = childrenOf(p.pid!);
    await this.kill('worker');
    // Each child hears its parent go (its channel closes; a child that served a request also
    // has its parent watch): none may outlive it by more than a few seconds.
    let left = kids;
    for (let i = 0; i < 50 && left.length; i++) {
      await sleep(100);
      left = left.filter(alive);
    }
    this.childrenLeft.push({ when, children: kids.length, left });
    for (const k of left) process.kill(k, 'SIGKILL');
    await this.start('worker');
  }

  /** Both processes stopped (SIGTERM, then SIGKILL after 10 s). */
  async stopAll(): Promise<void> {
    for (const p of Object.values(this.procs))
      if (p && p.exitCode === null && p.signalCode === null) {
        const gone = new Promise((res) => p.once('exit', res));
        p.kill('SIGTERM');
        await Promise.race([gone, sleep(10_000)]);
        p.kill('SIGKILL');
      }
  }
}

export function childrenOf(pid: number): number[] {
  try {
    return fs
      .readdirSync(`/proc/${pid}/task`)
      .flatMap((t) => fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {
    // Gone by itself (counted in unexpectedExits).
    return [];
  }
}

function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
