import type { Redis } from 'ioredis';
import type { Principal } from './principal.ts';

/**
 * Who recently seen keys are, by the key's sha256, so that a request with a known key skips the
 * four or five Redis lookups of the registry (each a socket write and a wait: together they
 * cost more than the rest of an MCP request's Redis traffic); OAuth access tokens too, by
 * theirs and the resource they were sent to (src/oauth/oauth-grants.ts: three lookups each).
 *
 * A cached answer must never outlive the key: every registry change (a revoked key or member,
 * an agent's narrowed settings, a removed workspace, an ended OAuth grant or access token, an
 * access token replaced by a refresh) is published on `keys.registryChanges` in
 * the same transaction as the change, and any message drops the whole cache, but one that names
 * the entries it ends: by their keys' prefix ({@link forgetMessage}: an OAuth access token that
 * ended) or by their workspace ({@link workspaceChanged}: a key, member, agent or the workspace
 * itself changed, which can change no other workspace's principals). The cache is used
 * only while its subscription is live: when the connection drops, messages may be lost, so the
 * cache empties and stays unused until it has subscribed again. A revoked key therefore stops
 * working as soon as Redis delivers the message (well under a millisecond on a live connection),
 * and at the latest after `ttlMs` in any case (the bound for a writer that does not announce,
 * such as an older agentdb against the same Redis).
 *
 * Only active keys are cached: an unknown key is looked up every time, so a key minted a moment
 * ago works at once.
 *
 * Apart from the cache, what each key was last found to be is kept through a lost connection
 * ({@link lastKnown}): while Redis does not answer, `/mcp` lists the tools of a key it saw
 * active rather than refusing the client's `tools/list` (no call runs on it: a call needs Redis).
 */
export class PrincipalCache {
  private readonly entries = new Map<string, { principal: Principal; until: number; lapses?: number }>();
  /** What each key was last found to be, and when: see {@link lastKnown}. Forgotten on a change heard, not on a lost connection. */
  private readonly known = new Map<string, { principal: Principal; seen: number; lapses?: number }>();
  /** Bumped by every change heard, so a lookup begun before a change cannot refill the cache after it. */
  private epoch = 0;
  /** The epoch of the last whole drop: no lookup marked before it is put. */
  private floor = 0;
  /**
   * The epoch of each recent partial change, by what it ended (`key <prefix>`, `workspace <name>`):
   * a lookup marked before it whose entry it would have ended is not put. Others are, so one
   * tenant changing its own members in a loop keeps no other tenant's lookups from being cached.
   */
  private readonly ended = new Map<string, number>();
  private live = false;
  private closed = false;
  private started?: Promise<void>;
  private waiting: (() => void)[] = [];

  /**
   * @param subscriber a connection of its own (it is put in subscriber mode).
   * @param ttlMs the longest an entry is used; 0 turns the cache off.
   */
  constructor(
    private readonly subscriber: Redis,
    private readonly channel: string,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  /** Subscribes; resolves once the cache is live. Resubscribes after every reconnect. */
  start(): Promise<void> {
    this.started ??= this.begin();
    return this.started;
  }

  /** Resolves when the cache next drops what it holds (a registry change was heard). */
  changed(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private async begin(): Promise<void> {
    if (this.ttlMs === 0) return;
    this.subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      const only = message.startsWith(FORGET) ? message.slice(FORGET.length) : '';
      const workspace = message.startsWith(WORKSPACE) ? message.slice(WORKSPACE.length) : '';
      if (only) this.forget(only);
      else if (workspace) this.forgetWorkspace(workspace);
      else this.drop(true);
    });
    // Anything may have changed while the connection was down: forget, and wait for the
    // subscription before trusting the cache again.
    let lost = false;
    this.subscriber.on('close', () => {
      lost = true;
      this.live = false;
      this.drop(false);
    });
    // Only a 'ready' after a lost connection subscribes again. The first 'ready' of a connection
    // still connecting at start comes after the subscription below was sent (ioredis emits it on
    // the next tick, its offline queue already flushed): subscribing again then answered after
    // start() had resolved, and its drop forgot the keys seen in between, which /mcp then could
    // not list while Redis was away (a loaded CI run: 3 of 4; session 31, H6).
    this.subscriber.on('ready', () => {
      if (!lost) return;
      lost = false;
      void this.subscribe();
    });
    await this.subscribe();
  }

  /**
   * The cached principal of `keyHash`, when the cache is live and the entry fresh; `now`: the
   * time on the clock an entry's `lapses` was given in (see {@link put}).
   */
  get(keyHash: string, now?: number): Principal | undefined {
    if (!this.live) return undefined;
    const hit = this.entries.get(keyHash);
    if (!hit) return undefined;
    if (hit.until <= Date.now() || (hit.lapses !== undefined && hit.lapses <= (now ?? Date.now()))) {
      this.entries.delete(keyHash);
      return undefined;
    }
    // Shared, frozen (see put): no request may change another's principal, and a copy per
    // request (structuredClone, ~8 µs on a loaded core) was a visible share of a keyed call's CPU.
    return hit.principal;
  }

  /** Where a lookup starts: pass it to {@link put} with the lookup's answer. */
  mark(): number {
    return this.epoch;
  }

  /**
   * Remembers `principal` for `keyHash`, unless the registry changed since `mark`. `lapses`: when
   * a credential that ends by itself does (an OAuth access token's expiry, ms), on the clock its
   * owner passes to {@link get}.
   */
  put(keyHash: string, principal: Principal, mark: number, lapses?: number): void {
    if (!this.live || mark < this.floor || this.endedSince(mark, keyHash, principal.workspace)) return;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    if (this.known.size >= this.maxEntries) this.known.clear();
    const frozen = frozenCopy(principal);
    const now = Date.now();
    this.entries.set(keyHash, { principal: frozen, until: now + this.ttlMs, ...(lapses !== undefined ? { lapses } : {}) });
    this.known.set(keyHash, { principal: frozen, seen: now, ...(lapses !== undefined ? { lapses } : {}) });
  }

  /**
   * What `keyHash` was last found to be, while the cache is not live (its connection lost): a
   * key seen active within {@link KNOWN_FOR_MS} and no registry change heard since. Only for
   * answers that show nothing of the data and run nothing (`/mcp`'s `tools/list` while Redis
   * does not answer): a change made while the connection was down is not heard, and a call
   * needs Redis anyway. `now` as for {@link get}.
   */
  lastKnown(keyHash: string, now?: number): Principal | undefined {
    if (this.live) return undefined;
    const hit = this.known.get(keyHash);
    if (!hit || hit.seen + KNOWN_FOR_MS <= Date.now() || (hit.lapses !== undefined && hit.lapses <= (now ?? Date.now()))) return undefined;
    return hit.principal;
  }

  /**
   * The cached principal of `keyHash`, else what `lookup` finds, remembered (with the `lapses` it
   * gives, see {@link put}) unless the registry changed while it looked. `now` as for {@link get}.
   */
  async through(keyHash: string, lookup: () => Promise<{ principal: Principal; lapses?: number } | undefined>, now?: number): Promise<Principal | undefined> {
    const cached = this.get(keyHash, now);
    if (cached) return cached;
    const mark = this.mark();
    const found = await lookup();
    if (found) this.put(keyHash, found.principal, mark, found.lapses);
    return found?.principal;
  }

  /** Stops listening and closes the subscriber connection. */
  close(): void {
    this.closed = true;
    this.live = false;
    this.drop(true);
    this.subscriber.disconnect();
  }

  /** Whether a partial change heard after `mark` ended the entry of `keyHash` in `workspace`. */
  private endedSince(mark: number, keyHash: string, workspace: string): boolean {
    for (const [what, at] of this.ended) {
      if (at <= mark) continue;
      if (what === `workspace ${workspace}` || (what.startsWith('key ') && keyHash.startsWith(what.slice(4)))) return true;
    }
    return false;
  }

  /**
   * Forgets the entries whose key begins with `prefix` (an OAuth access token that ended: {@link
   * forgetMessage}), and what lookups in flight would put for them.
   */
  private forget(prefix: string): void {
    this.forgetWhere(`key ${prefix}`, (key) => key.startsWith(prefix));
  }

  /** Forgets the entries of `workspace`'s principals ({@link workspaceChanged}), and what lookups in flight would put for them. */
  private forgetWorkspace(workspace: string): void {
    this.forgetWhere(`workspace ${workspace}`, (_, principal) => principal.workspace === workspace);
  }

  private forgetWhere(what: string, ends: (key: string, principal: Principal) => boolean): void {
    this.epoch++;
    // Bounded: past it, every lookup in flight is refused once, as a whole drop would.
    if (this.ended.size >= MAX_ENDED) {
      this.ended.clear();
      this.floor = this.epoch;
    }
    this.ended.delete(what);
    this.ended.set(what, this.epoch);
    for (const map of [this.entries, this.known]) for (const [key, hit] of map) if (ends(key, hit.principal)) map.delete(key);
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }

  /** Forgets every cached entry; `changed`: a change was (or may have been) missed, so {@link lastKnown}'s too. */
  private drop(changed = true): void {
    this.epoch++;
    this.floor = this.epoch;
    this.ended.clear();
    this.entries.clear();
    if (changed) this.known.clear();
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }

  private async subscribe(): Promise<void> {
    if (this.closed) return;
    try {
      await this.subscriber.subscribe(this.channel);
      // A change announced before the subscription took hold was not heard: start empty.
      this.drop();
      this.live = !this.closed && this.subscriber.status === 'ready';
    } catch {
      // Not subscribed: the cache stays unused; the next 'ready' tries again.
    }
  }
}

/** How a registry change that ends only some entries begins; the rest of the message is their keys' prefix. */
const FORGET = 'forget ';

/**
 * The registry change that ends only the entries whose key begins with `prefix`. Every other
 * message drops the whole cache, in every process: an OAuth client refreshing its token (60 a
 * minute per address), or revoking one, made every tenant's keys and tokens be looked up in Redis
 * again on their next requests (hostile review T18, session 37). An older server, which drops
 * everything on any message, still drops these.
 */
export function forgetMessage(prefix: string): string {
  return `${FORGET}${prefix}`;
}

/** How a registry change that ends only one workspace's entries begins; the rest of the message is its name. */
const WORKSPACE = 'workspace ';

/**
 * The registry change that ends only the entries of `workspace`'s principals (a key revoked, a
 * member added, revoked or given another role, an agent set or removed, the workspace set or
 * removed): each ends or narrows principals of that workspace only. Every one of these dropped
 * the whole cache in every process, so one workspace's admin changing its own members in a loop
 * made every tenant's keys be looked up in Redis again (hostile review T19, session 37). An older
 * server drops everything on it, as on any message it does not know.
 */
export function workspaceChanged(workspace: string): string {
  return `${WORKSPACE}${workspace}`;
}

/** The most partial changes remembered for lookups in flight (see `PrincipalCache.ended`). */
const MAX_ENDED = 1_000;

/**
 * How long {@link PrincipalCache.lastKnown} vouches for a key after it was last found active: an
 * MCP client keeps its key for hours, but a key unused for this long may have been revoked by
 * now through another Redis connection this process did not hear from.
 */
export const KNOWN_FOR_MS = 15 * 60_000;

/** A deep copy of `principal`, frozen: what every request with its key is given while it is cached. */
function frozenCopy(principal: Principal): Principal {
  const freeze = <T>(value: T): T => {
    if (value && typeof value === 'object') {
      for (const v of Object.values(value)) freeze(v);
      Object.freeze(value);
    }
    return value;
  };
  return freeze(structuredClone(principal));
}
