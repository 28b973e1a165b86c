/**
 * Parses a shard list such as `0-7` or `0,3,8-11` against the shard count.
 * @throws Error with a message fit for the command line.
 */
export function parseShardRange(spec: string, shardCount: number): number[] {
  const shards = new Set<number>();
  for (const part of spec.split(',')) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (!m) throw new Error(`--shards: "${part}" is not a shard number or range like 0-7`);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (from > to || to >= shardCount) {
      throw new Error(`--shards: ${part} is outside 0-${shardCount - 1} (SHARD_COUNT is ${shardCount})`);
    }
    for (let s = from; s <= to; s++) shards.add(s);
  }
  return [...shards].sort((a, b) => a - b);
}
