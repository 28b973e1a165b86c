/**
 * A key's stem: up to and including its second space (`oauth <hash> ` of `oauth <hash> <resource>`,
 * what `accessEnded` names), or undefined for a key with fewer (an API key's hash).
 */
export function stemOf(key: string): string | undefined {
  const first = key.indexOf(' ');
  const second = first < 0 ? -1 : key.indexOf(' ', first + 1);
  return second < 0 ? undefined : key.slice(0, second + 1);
}

/**
 * The keys a `PrincipalCache` holds, by their principal's workspace and by their stem, so that a
 * workspace's change or an ended access token forgets its entries without a walk over every
 * tenant's: at 10,000 entries a walk cost each process ~0.3 ms a change (T19, T20).
 */
export class CachedKeyIndex {
  private readonly byWorkspace = new Map<string, Set<string>>();
  private readonly byStem = new Map<string, Set<string>>();

  add(key: string, workspace: string): void {
    added(this.byWorkspace, workspace, key);
    const stem = stemOf(key);
    if (stem !== undefined) added(this.byStem, stem, key);
  }

  /** Takes `key` out (its workspace's set only when `workspace` is known). */
  remove(key: string, workspace: string | undefined): void {
    if (workspace !== undefined) removed(this.byWorkspace, workspace, key);
    const stem = stemOf(key);
    if (stem !== undefined) removed(this.byStem, stem, key);
  }

  /** The keys of `workspace`'s principals, a copy (the caller may remove them meanwhile). */
  ofWorkspace(workspace: string): string[] {
    return [...(this.byWorkspace.get(workspace) ?? [])];
  }

  /** The keys whose stem is `stem`, a copy. */
  underStem(stem: string): string[] {
    return [...(this.byStem.get(stem) ?? [])];
  }

  /** Forgets `workspace`'s set, whatever is left in it. */
  dropWorkspace(workspace: string): void {
    this.byWorkspace.delete(workspace);
  }

  clear(): void {
    this.byWorkspace.clear();
    this.byStem.clear();
  }

  /** Keys held by workspace and by stem (tests, figures). */
  counts(): { byWorkspace: number; byStem: number } {
    let byWorkspace = 0;
    let byStem = 0;
    for (const keys of this.byWorkspace.values()) byWorkspace += keys.size;
    for (const keys of this.byStem.values()) byStem += keys.size;
    return { byWorkspace, byStem };
  }
}

function added(index: Map<string, Set<string>>, under: string, key: string): void {
  let keys = index.get(under);
  if (!keys) index.set(under, (keys = new Set()));
  keys.add(key);
}

function removed(index: Map<string, Set<string>>, under: string, key: string): void {
  const keys = index.get(under);
  if (!keys?.delete(key)) return;
  if (keys.size === 0) index.delete(under);
}
