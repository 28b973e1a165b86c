import { isToolName, TOOL_TIERS } from '../contracts/tools.ts';

/**
 * The order a `--batch` keeps within a workspace, so a file reads as a script: a call starts
 * only after every earlier write or drop of its workspace has answered, and a write or drop
 * only after every earlier call of its workspace. Reads between two writes run together, and
 * different workspaces never wait on each other. The workspace, not the database, is the unit
 * because its shared tables are every agent's: an agent's read may depend on another agent's
 * write. The service would not keep this order by itself: it runs one database's calls in the
 * order a worker takes them, and calls that are all in flight at once reach it in any order.
 */
export class BatchOrder {
  // Per workspace: the last write or drop to answer (reads wait for it), and every call so far
  // (a write waits for them all): one promise each, so a long file of reads holds no list.
  readonly #lanes = new Map<string, { barrier: Promise<void>; since: Promise<void> }>();

  /** Runs `call` once what it must follow has answered; a failed call still opens the way. */
  run<T>(workspace: unknown, tool: unknown, call: () => Promise<T>): Promise<T> {
    const key = typeof workspace === 'string' ? workspace : JSON.stringify(workspace ?? null);
    const lane = this.#lanes.get(key) ?? { barrier: Promise.resolve(), since: Promise.resolve() };
    const reads = isToolName(tool) && TOOL_TIERS[tool] === 'read';
    const answered = (reads ? lane.barrier : lane.since).then(call);
    const settled = answered.then(
      () => undefined,
      () => undefined,
    );
    if (reads) lane.since = Promise.all([lane.since, settled]).then(() => undefined);
    else {
      lane.barrier = settled;
      lane.since = settled;
    }
    this.#lanes.set(key, lane);
    return answered;
  }
}
