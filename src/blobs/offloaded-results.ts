import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { AgentDbError } from '../errors.ts';
import { isInside } from '../contracts/database-id.ts';
import { spillDir, type SpilledResult } from '../sqlite/result-spill.ts';
import { readSmall, type BlobStore } from './blob-store.ts';
import type { ConcurrentSlots } from '../policy/concurrent-slots.ts';
import { downloadSlots, downloadStalled, downloadTakenBack } from './download-slots.ts';
import { DEFAULT_STALL_MS, stallDeadline } from '../policy/stall-deadline.ts';
import { OffloadsFull } from './offloads-full.ts';

/** What an envelope carries for a result moved to the blob store. */
export interface OffloadedRef {
  /** Unguessable (128 random bits, hex); names the result for `GET /v1/results/:id`. */
  id: string;
  bytes: number;
  rows: number;
  /** ISO time after which the result is gone (RESULT_TTL_HOURS after the call). */
  expiresAt: string;
}

/** Whose result it is: reading it takes a member key of this workspace, or this agent's key. */
export interface ResultOwner {
  workspace: string;
  /** The caller: an agent slug, or `@<member>` for a person's client. */
  agent: string;
  callId: string;
}

/** Who asks to read an offloaded result (`member`: the member's name, for their share of downloads). */
export type ResultReader = { kind: 'member'; workspace: string; member?: string } | { kind: 'agent'; workspace: string; agent: string };

interface ResultMeta extends ResultOwner {
  bytes: number;
  rows: number;
  expiresAt: string;
}

/** What a workspace's offloaded results may hold at once (see `RedisOffloadQuota`). */
export interface OffloadQuota {
  /** Counts `bytes` against `workspace` until `expiresAt` (ms), unless that passes its cap. */
  reserve(workspace: string, id: string, bytes: number, expiresAt: number, now: number): Promise<QuotaAnswer>;
  /** Gives back a reservation whose result was not kept after all. */
  release(workspace: string, id: string, bytes: number): Promise<void>;
}

/** A reservation's answer: refused with what the workspace holds, its cap and when the oldest expires (ms). */
export type QuotaAnswer = { ok: true } | { ok: false; held: number; cap: number; freesAt?: number };

const ID = /^[0-9a-f]{32}$/;
/** How long after its expiry a result's files may stay: the prune runs nightly (MAINTENANCE_CRON). */
const PRUNED_WITHIN_MS = 24 * 3600 * 1000;
const PREFIX = 'results/';

/**
 * Query results too large for an envelope, kept whole in the blob store for RESULT_TTL_HOURS.
 *
 * Keys are `results/<workspace>/<id>.json` (the rows, as the executor child wrote them) and
 * `results/<workspace>/<id>.meta.json` (owner, size, expiry; written last, so a result is
 * readable only once complete). The workspace is in the key so that one workspace's results
 * can be listed, backed up or deleted apart from the others; the id alone is never enough to
 * read a result: the reader's workspace must be the owner's.
 */
export class OffloadedResults {
  constructor(
    private readonly store: BlobStore,
    private readonly opts: {
      dataDir: string;
      ttlS: number;
      now?: () => number;
      logger?: { error(obj: object, msg: string): void };
      quota?: OffloadQuota;
      /** Downloads under way (default: this instance's own, `downloadSlots`). */
      downloads?: ConcurrentSlots;
      /** How long a download's reader may take nothing before it is cut off (DOWNLOAD_STALL_SECONDS; default {@link DEFAULT_STALL_MS}). */
      stallMs?: number;
    },
  ) {
    this.downloads = opts.downloads ?? downloadSlots();
  }

  /** Downloads under way, per caller, workspace and process (see {@link open}, `download-slots.ts`). */
  private readonly downloads: ConcurrentSlots;

  /** Workspaces lately refused room (`offloads-full.ts`). */
  private readonly full = new OffloadsFull();

  /**
   * Why a query of `workspace` should not spill its result to a file now (its offloaded results
   * were lately found at their quota: {@link OffloadsFull}), or undefined when it may.
   */
  refusal(workspace: string): string | undefined {
    return this.full.refusal(workspace, this.now());
  }

  /**
   * Moves a spilled result file into the store and deletes the file (also when the upload
   * fails: the call is then retried, and runs its query again).
   * @throws AgentDbError LIMIT_EXCEEDED when the workspace's offloaded results already hold
   *   what its quota allows (nothing is uploaded; the caller answers with the preview).
   */
  async keep(spill: SpilledResult, owner: ResultOwner): Promise<OffloadedRef> {
    // The path came back from a child process: it must be one the child may write.
    if (!isInside(spillDir(this.opts.dataDir), spill.file)) throw new Error(`spilled result ${spill.file} is outside ${spillDir(this.opts.dataDir)}`);
    let reserved: { id: string; bytes: number } | undefined;
    try {
      const id = randomBytes(16).toString('hex');
      const now = this.now();
      const expiresMs = now + this.opts.ttlS * 1000;
      const expiresAt = new Date(expiresMs).toISOString();
      if (this.opts.quota) {
        const bytes = (await fs.stat(spill.file)).size;
        // Counted until the nightly prune can have deleted it, not only until it expires: the
        // files stay that long, and a short RESULT_TTL_HOURS refilled the quota many times a day.
        const answer = await this.opts.quota.reserve(owner.workspace, id, bytes, expiresMs + PRUNED_WITHIN_MS, now);
        if (!answer.ok) {
          const frees = answer.freesAt
            ? `; room comes back from ${new Date(answer.freesAt).toISOString()} (the oldest result's expiry, and a day for the nightly prune to delete it)`
            : '';
          const held = `workspace ${owner.workspace}'s offloaded results hold ${answer.held} bytes`;
          const cap = `MAX_OFFLOADED_BYTES_PER_WORKSPACE (${answer.cap})${frees}`;
          this.full.refused(owner.workspace, `${held}, at ${cap}`, answer.freesAt, now);
          throw new AgentDbError('LIMIT_EXCEEDED', `${held}, and this one (${bytes}) would pass ${cap}`);
        }
        reserved = { id, bytes };
      }
      const put = await this.store.put(dataKey(owner.workspace, id), { file: spill.file });
      // Stored: it holds its room until the prune deletes it, kept or not.
      reserved = undefined;
      const meta: ResultMeta = { ...owner, bytes: put.size, rows: spill.rows, expiresAt };
      await this.store.put(metaKey(owner.workspace, id), Readable.from([Buffer.from(JSON.stringify(meta))]));
      return { id, bytes: put.size, rows: spill.rows, expiresAt };
    } catch (err) {
      if (reserved) await this.opts.quota!.release(owner.workspace, reserved.id, reserved.bytes).catch(() => undefined);
      if ((err as AgentDbError).code === 'LIMIT_EXCEEDED') throw err;
      this.opts.logger?.error({ store: this.store.name, workspace: owner.workspace, callId: owner.callId, err: String(err) }, 'could not offload a result');
      throw err;
    } finally {
      await fs.rm(spill.file, { force: true });
    }
  }

  /**
   * The result `id` as a stream of its JSON (`{"columns":[…],"rows":[…]}`), for `reader`.
   * `charge` (an API download's rate, `KeyedCalls.chargeDownload`) is asked with 0 before the
   * store is, then with the result's bytes before it is sent, and throws its refusal.
   * @throws AgentDbError NOT_FOUND for an unknown id, or one of another workspace or agent
   *   (alike, so ids cannot be probed); RESULT_EXPIRED past its expiry; what `charge` throws.
   */
  async open(id: string, reader: ResultReader, charge?: (bytes: number) => Promise<void>): Promise<{ ref: OffloadedRef; body: Readable }> {
    const missing = new AgentDbError(
      'NOT_FOUND',
      `no offloaded result ${JSON.stringify(String(id).slice(0, 64))} in ${reader.kind === 'agent' ? `${reader.workspace}/${reader.agent}` : `workspace ${reader.workspace}`}: an id is read in the workspace (and, with an agent key, by the agent) whose call offloaded it — check the workspace, agent and id`,
    );
    if (typeof id !== 'string' || !ID.test(id)) throw missing;
    // Charged as a lookup before the store is asked, then by the bytes it will send (see `charge`).
    await charge?.(0);
    const meta = await this.meta(reader.workspace, id);
    if (!meta || meta.workspace !== reader.workspace || (reader.kind === 'agent' && meta.agent !== reader.agent)) throw missing;
    if (Date.parse(meta.expiresAt) <= this.now()) throw new AgentDbError('RESULT_EXPIRED', `result ${id} expired at ${meta.expiresAt}`);
    await charge?.(meta.bytes);
    // Held from here until the stream ends, fails or is dropped: a client that reads nothing holds
    // its connection to the store for as long as it stays (see `download-slots.ts`).
    // With the process's downloads all under way, one may be taken back for a workspace holding
    // fewer (see ConcurrentSlots): its stream fails, which cuts its answer off.
    let takenBack: AgentDbError | undefined;
    let stream: Readable | undefined;
    const end = () => {
      takenBack = downloadTakenBack();
      stream?.destroy(takenBack);
    };
    const release = this.downloads.take(reader.workspace, reader.kind === 'agent' ? reader.agent : `@${reader.member ?? ''}`, end);
    const body = await this.store.get(dataKey(reader.workspace, id)).catch((err) => {
      release();
      // Pruned between the two reads.
      if ((err as AgentDbError).code === 'NOT_FOUND') throw new AgentDbError('RESULT_EXPIRED', `result ${id} expired at ${meta.expiresAt}`);
      throw err;
    });
    if (takenBack) {
      body.destroy();
      throw takenBack;
    }
    stream = body;
    // A reader that takes nothing for the stall deadline is cut off too, its place given back.
    const stallMs = this.opts.stallMs ?? DEFAULT_STALL_MS;
    stallDeadline(body, stallMs, () => body.destroy(downloadStalled(stallMs)));
    body.once('close', release);
    body.once('end', release);
    body.once('error', release);
    return { ref: { id, bytes: meta.bytes, rows: meta.rows, expiresAt: meta.expiresAt }, body };
  }

  /**
   * Deletes every result past its expiry, and rows left without metadata (a worker that died
   * between the two puts) once older than the TTL. Returns how many results went.
   */
  async prune(): Promise<number> {
    const now = this.now();
    let deleted = 0;
    for await (const blob of this.store.list(PREFIX)) {
      const m = /^results\/([^/]+)\/([0-9a-f]{32})\.(meta\.)?json$/.exec(blob.key);
      if (!m) continue;
      const [, workspace, id, isMeta] = m;
      if (isMeta) {
        const meta = await this.meta(workspace!, id!).catch(() => undefined);
        if (meta && Date.parse(meta.expiresAt) > now) continue;
        await this.store.delete(dataKey(workspace!, id!));
        await this.store.delete(blob.key);
        deleted++;
      } else if (blob.lastModified.getTime() + this.opts.ttlS * 1000 < now) {
        if (!(await this.store.head(metaKey(workspace!, id!)))) {
          await this.store.delete(blob.key);
          deleted++;
        }
      }
    }
    await this.sweepSpills(now);
    return deleted;
  }

  /** Spilled files a crashed worker never uploaded: any older than an hour is nobody's. */
  private async sweepSpills(now: number): Promise<void> {
    const dir = spillDir(this.opts.dataDir);
    const names = await fs.readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      const file = path.join(dir, name);
      const stat = await fs.stat(file).catch(() => undefined);
      if (stat && stat.mtimeMs < now - 3600_000) await fs.rm(file, { force: true });
    }
  }

  private async meta(workspace: string, id: string): Promise<ResultMeta | undefined> {
    try {
      return JSON.parse(await readSmall(this.store, metaKey(workspace, id), 64 * 1024)) as ResultMeta;
    } catch (err) {
      if ((err as AgentDbError).code === 'NOT_FOUND') return undefined;
      throw err;
    }
  }

  private now(): number {
    return this.opts.now ? this.opts.now() : Date.now();
  }
}

function dataKey(workspace: string, id: string): string {
  return `${PREFIX}${workspace}/${id}.json`;
}

function metaKey(workspace: string, id: string): string {
  return `${PREFIX}${workspace}/${id}.meta.json`;
}
