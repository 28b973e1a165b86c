/**
 * What the worker believes one executor child has open: the databases it sent that child
 * lately, least recently used dropped first, as many as the child's handle cache holds. It is
 * only a preference (the child's own cache is the truth, and a read of a database that does not
 * exist opens nothing), so the pool gives a database back to the child that probably has it
 * open, and never relies on it for correctness.
 */
export class HandleMirror {
  private readonly paths = new Map<string, number>();

  constructor(private readonly size: number) {}

  /** Whether `dbPath` was sent lately. */
  has(dbPath: string): boolean {
    return this.paths.has(dbPath);
  }

  /** `dbPath` (of `shard`) was just sent. */
  touch(dbPath: string, shard: number): void {
    this.paths.delete(dbPath);
    this.paths.set(dbPath, shard);
    if (this.paths.size > this.size) this.paths.delete(this.paths.keys().next().value!);
  }

  /** Forgets the databases of these shards (their handles are being closed). */
  forgetShards(shards: readonly number[]): void {
    for (const [p, shard] of this.paths) if (shards.includes(shard)) this.paths.delete(p);
  }

  /** Forgets everything (a new child has nothing open). */
  clear(): void {
    this.paths.clear();
  }
}
