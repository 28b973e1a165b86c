// The fault ledger's faults (bench/faults-ledger-29.ts): each kind of fault, landed by `inject`,
// each in its resource's turn; what each did is kept in `faults`.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { OwnRedis } from '../../test/helpers/own-redis.ts';
import { fillDisk } from '../../test/helpers/tmpfs.ts';
import { LANES, rand, sleep } from './lanes.ts';
import type { Operator } from './operator.ts';
import { childrenOf, type Supervisor } from './supervisor.ts';

/** A fill of `fillDisk` given back: emptied, closed, removed. */
function freeFill(filled: { fd: number }, file: string): void {
  fs.ftruncateSync(filled.fd, 0);
  fs.closeSync(filled.fd);
  fs.rmSync(file);
}

export class Faults {
  readonly faults: { fault: string; at: string; ms: number; detail?: string }[] = [];
  readonly redisStray: { fault: string; at: string; held?: number; answering: number }[] = [];
  /** When the data tmpfs was full (fill to free). */
  readonly fullSpans: [number, number][] = [];
  private workerKills = 0;
  private workerStops = 0;
  private filling: { fd: number } | undefined;

  constructor(
    private readonly redis: OwnRedis,
    private readonly r: Redis,
    /** The registry as an operator keeps it: put back after Redis comes back empty. */
    private readonly registry: [string, Buffer][],
    private readonly supervisor: Supervisor,
    private readonly operator: Operator,
    private readonly dataDir: string,
  ) {}

  private redisProc(): ChildProcess | undefined {
    return (this.redis as unknown as { proc?: ChildProcess }).proc;
  }

  async inject(f: string, arg?: string): Promise<void> {
    const { redis, r, registry, supervisor, operator } = this;
    const t0 = Date.now();
    const at = new Date().toISOString();
    // Its start too: a fault that never ends (run 6 of session 30 stopped its streams) shows which.
    console.error(`${at} ${f} begins`);
    let detail = '';
    // Session 34, F11: at the end of each Redis fault, in its turn, whether the Redis answering
    // is the one the driver holds (F11's run 2: one started during an emptyfull answered to the
    // end while later faults killed and started processes that exited at once, the port taken).
    let stray: { held?: number; answering: number } | undefined;
    const checkRedis = async () => {
      const held = this.redisProc()?.pid;
      const answering = Number(/process_id:(\d+)/.exec(await r.info('server').catch(() => ''))?.[1] ?? 0);
      if (answering !== held) stray = { held, answering };
    };
    if (f === 'worker' || f === 'child') {
      const which =
        arg === 'worker' || arg === 'start' ? arg : f === 'worker' ? (this.workerKills++ % 2 ? 'worker' : 'start') : Math.random() < 0.5 ? 'worker' : 'start';
      detail = await supervisor.inTurn(which, async () => {
        if (f === 'child') {
          const kids = childrenOf(supervisor.procs[which]!.pid!);
          for (const k of kids) process.kill(k, 'SIGKILL');
          return `${which}: ${kids.length}`;
        }
        await supervisor.kill(which);
        await sleep(rand(200, 1500));
        await supervisor.start(which);
        return which;
      });
    } else if (f === 'full') {
      const file = path.join(this.dataDir, `.fill-${t0}`);
      const filled = fillDisk(file);
      this.filling = filled;
      const hold = arg ? Number(arg) : rand(3000, 8000);
      // A restore while the disk is full: refused STORAGE_FULL, or (room found) every acknowledged row.
      const during = operator.restoreInto(LANES[Math.floor(rand(0, LANES.length))]!, Math.floor(Date.now() / 1000) * 1000 - 1000);
      // Session 31, F8: and one in place; and (ROOM_P of the time, 0.5 by default) a little room
      // given back after a second, as a process gone frees its files, so restores get under way.
      const inPlaceDuring = operator.restoreInPlace(Math.floor(Date.now() / 1000) * 1000 - 1000);
      let room = '';
      if (Math.random() < Number(process.env.ROOM_P ?? 0.5)) {
        await sleep(1000);
        const kb = Math.round(rand(2000, 8000));
        fs.ftruncateSync(filled.fd, Math.max(0, fs.fstatSync(filled.fd).size - kb * 1024));
        room = `, ${kb} KiB given back`;
      }
      await sleep(hold);
      this.filling = undefined;
      freeFill(filled, file);
      this.fullSpans.push([t0, Date.now()]);
      await during;
      await inPlaceDuring;
      detail = `${Math.round(hold)} ms${room}`;
    } else if (f === 'room') {
      // Session 30, G8: during a full disk, arg KiB given back (a process gone frees its files), as run 3's kill of `start` did.
      const filling = this.filling;
      if (filling) fs.ftruncateSync(filling.fd, Math.max(0, fs.fstatSync(filling.fd).size - Number(arg ?? 4096) * 1024));
      detail = filling ? `${arg ?? 4096} KiB` : 'no full disk';
    } else if (f === 'idle') {
      await supervisor.inTurn('worker', () => supervisor.idleKill(at));
      const last = supervisor.childrenLeft.at(-1)!;
      detail = `children ${last.children}, left ${last.left.length}`;
    } else if (f === 'stopw') {
      const which = arg === 'worker' || arg === 'start' ? arg : this.workerStops++ % 2 ? 'worker' : 'start';
      await supervisor.inTurn(which, async () => {
        supervisor.procs[which]!.kill('SIGSTOP');
        await sleep(10_000);
        supervisor.procs[which]!.kill('SIGCONT');
      });
      detail = which;
    } else if (f === 'stopr') {
      await supervisor.inTurn('redis', async () => {
        redis.signal('SIGSTOP');
        await sleep(10_000);
        redis.signal('SIGCONT');
      });
    } else if (f === 'misconf' || f === 'misconfe') {
      detail = await supervisor.inTurn('redis', async () => {
        // misconfe: under appendfsync everysec Redis refuses writes (MISCONF) instead of exiting.
        if (f === 'misconfe') await r.config('SET', 'appendfsync', 'everysec');
        const file = path.join(redis.dir, `.fill-${t0}`);
        const filled = fillDisk(file);
        const hold = arg ? Number(arg) : rand(3000, 8000);
        await sleep(hold);
        freeFill(filled, file);
        const p = this.redisProc();
        const exited = !p || p.exitCode !== null || p.signalCode !== null;
        if (exited) await redis.start();
        else if (f === 'misconfe') {
          // Redis takes writes again once a write of its AOF works (it retries each second).
          for (let i = 0; i < 100; i++) {
            const info = await r.info('persistence').catch(() => '');
            if (/aof_last_write_status:ok/.test(info)) break;
            await sleep(100);
          }
          await r.config('SET', 'appendfsync', 'always').catch(() => undefined);
        }
        await checkRedis();
        return `${Math.round(hold)} ms${exited ? `, Redis exited (${p?.exitCode ?? p?.signalCode}), started from its AOF` : ''}`;
      });
    } else if (f === 'emptyfull') {
      // Session 33, F10: Redis SIGKILLed and started again EMPTY on its own full disk (its AOF
      // cannot be written: under appendfsync always it exits at its first write), the disk freed
      // after 3-8 s, Redis started again if it exited, and the registry put back then.
      detail = await supervisor.inTurn('redis', async () => {
        await redis.kill();
        redis.wipe();
        const file = path.join(redis.dir, `.fill-${t0}`);
        const filled = fillDisk(file);
        // Its start waits until it answers: one that exits at once on the full disk never does.
        const up = await Promise.race([redis.start().then(() => 'answered'), sleep(5000).then(() => 'did not answer')]);
        const startedOnFull = this.redisProc()?.pid;
        const hold = arg ? Number(arg) : rand(3000, 8000);
        await sleep(hold);
        freeFill(filled, file);
        const p = this.redisProc();
        const exited = !p || p.exitCode !== null || p.signalCode !== null;
        const how = `pid ${p?.pid} ${exited ? `exited ${p?.exitCode ?? p?.signalCode}` : 'alive'} (started on the full disk: ${startedOnFull})`;
        if (exited) await redis.start();
        // A Redis whose AOF write failed answers MISCONF until a write works again: put back
        // once it does (run 2 of F11's driver died of the MISCONF here).
        for (const [k, v] of registry)
          for (let tries = 0; ; tries++) {
            const put = await r.restore(k, 0, v, 'REPLACE').then(
              () => true,
              (err) => (tries < 100 ? false : Promise.reject(err)),
            );
            if (put) break;
            await sleep(100);
          }
        await checkRedis();
        return `${Math.round(hold)} ms, empty on the full disk: ${up}${exited ? ', exited, started again' : ''}; ${how}, then pid ${this.redisProc()?.pid}`;
      });
    } else if (f === 'aof' || f === 'empty') {
      await supervisor.inTurn('redis', async () => {
        await redis.kill();
        if (f === 'empty') redis.wipe();
        await sleep(rand(300, 2000));
        await redis.start();
        if (f === 'empty') for (const [k, v] of registry) await r.restore(k, 0, v, 'REPLACE');
        await checkRedis();
      });
    }
    if (stray) {
      this.redisStray.push({ fault: f, at, ...stray });
      detail += ` (Redis answering is pid ${stray.answering}, the driver holds ${stray.held})`;
    }
    this.faults.push({ fault: f, at, ms: Date.now() - t0, detail });
    console.error(`${at} ${f} ${detail}`);
  }
}
