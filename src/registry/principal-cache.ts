import type { Redis } from 'ioredis';
import type { Principal } from './principal.ts';
import { CachedKeyIndex, stemOf } from './cached-key-index.ts';
import { changeOf } from './registry-changes.ts';

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
 * the entries it ends: by their keys' prefix (`forgetMessage`: an OAuth access token that
 * ended) or by their workspace (`workspaceChanged`: a key, member, agent or the workspace
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
  /** The keys of {@link entries} and {@link known} by workspace and by stem: forgotten without a walk. */
  private readonly index = new CachedKeyIndex();
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
  /** Prefixes in {@link ended} that are no stem: while none, {@link endedSince} walks nothing. */
  private unstemmed = 0;
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
      const { prefix, workspace } = changeOf(message);
      if (prefix) this.forget(prefix);
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
    if (this.known.size >= this.maxEntries) {
      this.known.clear();
      this.index.clear();
      for (const [key, hit] of this.entries) this.index.add(key, hit.principal.workspace);
    }
    const frozen = frozenCopy(principal);
    const now = Date.now();
    this.entries.set(keyHash, { principal: frozen, until: now + this.ttlMs, ...(lapses !== undefined ? { lapses } : {}) });
    this.known.set(keyHash, { principal: frozen, seen: now, ...(lapses !== undefined ? { lapses } : {}) });
    this.index.add(keyHash, principal.workspace);
  }

  /** Keys held in the indexes by workspace and by stem (tests, figures). */
  indexed(): { byWorkspace: number; byStem: number } {
    return this.index.counts();
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
    if ((this.ended.get(`workspace ${workspace}`) ?? 0) > mark) return true;
    const stem = stemOf(keyHash);
    if (stem !== undefined && (this.ended.get(`key ${stem}`) ?? 0) > mark) return true;
    // A prefix that is no stem (no message of this build sends one) is looked for the long way.
    if (this.unstemmed === 0) return false;
    for (const [what, at] of this.ended) {
      if (at > mark && what.startsWith('key ') && stemOf(what.slice(4)) !== what.slice(4) && keyHash.startsWith(what.slice(4))) return true;
    }
    return false;
  }

  /**
   * Forgets the entries whose key begins with `prefix` (an OAuth access token that ended: `forgetMessage`), and what lookups in flight would put for them.
   */
  private forget(prefix: string): void {
    if (stemOf(prefix) === prefix) {
      this.forgetWhere(`key ${prefix}`, this.index.underStem(prefix));
      return;
    }
    const keys = new Set<string>();
    for (const map of [this.entries, this.known]) for (const key of map.keys()) if (key.startsWith(prefix)) keys.add(key);
    this.unstemmed++;
    this.forgetWhere(`key ${prefix}`, keys);
  }

  /** Forgets the entries of `workspace`'s principals (`workspaceChanged`), and what lookups in flight would put for them. */
  private forgetWorkspace(workspace: string): void {
    this.forgetWhere(`workspace ${workspace}`, this.index.ofWorkspace(workspace));
    this.index.dropWorkspace(workspace);
  }

  /** Forgets `keys`, and remembers (as `what`) that lookups in flight must not put theirs. */
  private forgetWhere(what: string, keys: Iterable<string>): void {
    this.epoch++;
    // Bounded: past it, every lookup in flight is refused once, as a whole drop would.
    if (this.ended.size >= MAX_ENDED) {
      this.ended.clear();
      this.unstemmed = 0;
      this.floor = this.epoch;
    }
    this.ended.delete(what);
    this.ended.set(what, this.epoch);
    // Out of the indexes too: left there, a member whose app refreshed its token once a second
    // grew its workspace's set by a key a refresh, in every process, until the workspace changed.
    for (const key of keys) {
      this.index.remove(key, (this.known.get(key) ?? this.entries.get(key))?.principal.workspace);
      this.entries.delete(key);
      this.known.delete(key);
    }
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }

  /** Forgets every cached entry; `changed`: a change was (or may have been) missed, so {@link lastKnown}'s too. */
  private drop(changed = true): void {
    this.epoch++;
    this.floor = this.epoch;
    this.ended.clear();
    this.unstemmed = 0;
    this.entries.clear();
    if (changed) {
      this.known.clear();
      this.index.clear();
    }
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
