// The fault ledger's operator (bench/faults-ledger-29.ts): `agentdb restore` (into a new
// database, or in place) and `agentdb backup now` by the CLI, each run and its span kept.
import { runCli } from '../../test/helpers/processes.ts';
import { agentOf, LANES, type Lane, rand, sleep, WS, type Write } from './lanes.ts';

export interface CliRun {
  label: string;
  at: number;
  ms: number;
  code: number | null;
  out: string;
}
export interface RestoreInto {
  lane: Lane;
  into: string;
  at: number;
  fromBlob?: boolean;
  code: number | null;
  out: string;
  started: number;
  ended: number;
}
export interface RestoreInPlace {
  at: number;
  code: number | null;
  out: string;
  started: number;
  ended: number;
  duringFull?: boolean;
  ranAt?: number;
}

export class Operator {
  readonly cliRuns: CliRun[] = [];
  readonly restores: RestoreInto[] = [];
  // Session 31, F8: restores in place of lane `place`'s database (during each full disk). One that
  // answered ok takes its database back to its moment: the writes acknowledged after the moment
  // and before its answer may be undone (its undo window); every other acknowledged write is kept.
  // Session 36, F15: one answered "may still run"/"may have run" (its shard op handed to Redis,
  // Redis then lost) that its database's audit shows ran (`ranAt`, its row's time) undoes as one
  // answered ok does, up to a little after it ran (its commit): counted apart (undoneByMayHaveRun).
  readonly inPlace: RestoreInPlace[] = [];
  private forks = 0;

  constructor(private readonly env: Record<string, string>) {}

  async cli(label: string, args: string[]): Promise<CliRun> {
    const t = Date.now();
    const res = await runCli(args, { ...this.env, LOG_LEVEL: 'silent' });
    const run = { label, at: t, ms: Date.now() - t, code: res.code, out: (res.stdout.trim() || res.stderr.trim()).slice(0, 1500) };
    this.cliRuns.push(run);
    return run;
  }

  async restoreInto(l: Lane, at: number, fromBlob = false): Promise<void> {
    const into = `r${++this.forks}`;
    const db = agentOf[l] ? `${WS}/${agentOf[l]}` : WS;
    const args = ['restore', db, '--at', new Date(at).toISOString(), '--into', `${WS}/${into}`, '--json'];
    if (fromBlob) args.splice(2, 0, '--from-blob');
    const run = await this.cli(`restore ${l}→${into}`, args);
    this.restores.push({ lane: l, into, at, fromBlob, code: run.code, out: run.out, started: run.at, ended: run.at + run.ms });
  }

  async restoreInPlace(at: number): Promise<void> {
    const run = await this.cli('restore in place', ['restore', `${WS}/${agentOf.place}`, '--at', new Date(at).toISOString(), '--json']);
    this.inPlace.push({ at, code: run.code, out: run.out, started: run.at, ended: run.at + run.ms });
  }

  /** Whether `w` (lane place) may be undone by an in-place restore that began by `by`. */
  undoneBy(w: Write, by: number): boolean {
    return (
      w.lane === 'place' &&
      this.inPlace.some((p) => {
        const ended = p.code === 0 ? p.ended : p.ranAt === undefined ? undefined : Math.max(p.ended, p.ranAt + 10_000);
        return ended !== undefined && p.started <= by && w.answers.some((a) => a.ok && a.at > p.at && a.at <= ended);
      })
    );
  }

  /** Every 1.5-4 s until `stopped()`: a backup each third turn, else a restore --into of a lane in turn. */
  async loop(stopped: () => boolean): Promise<void> {
    for (let n = 0; !stopped(); n++) {
      await sleep(rand(1500, 4000));
      if (n % 3 === 2) await this.cli('backup', ['backup', 'now']);
      // A whole second, one or two behind now: the restore's moment is that second's start.
      else await this.restoreInto(LANES[n % LANES.length]!, Math.floor(Date.now() / 1000) * 1000 - 1000 * Math.ceil(rand(0, 2)));
    }
  }
}
