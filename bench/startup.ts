import { spawn } from 'node:child_process';
import { quantile, round } from './stats.ts';

/** Start-up of the built CLI next to Node's own, as medians of interleaved runs. */
export interface StartupStats {
  runs: number;
  /** `node -e 0`: what any Node command costs at least. */
  nodeMs: number;
  /** `node dist/bin/agentdb.js tools --json`, run to completion. */
  toolsJsonMs: number;
  /** toolsJsonMs / nodeMs. */
  ratio: number;
  goal: { ratioAtMost: number };
}

function timed(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(process.execPath, args, { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(performance.now() - t) : reject(new Error(`${args.join(' ')} exited with ${code}`))));
  });
}

/**
 * How long `agentdb tools --json` takes against `node -e 0`, run alternately so that the
 * noise of a shared machine hits both alike; a ratio, as absolute times mean little there.
 * The goal: within 2x of Node's own start-up (each command loads only what it uses).
 */
export async function benchStartup(bin: string, runs: number): Promise<StartupStats> {
  const node: number[] = [];
  const tools: number[] = [];
  // One of each first, unmeasured: the first run reads the files from disk.
  await timed(['-e', '0']);
  await timed([bin, 'tools', '--json']);
  for (let i = 0; i < runs; i++) {
    node.push(await timed(['-e', '0']));
    tools.push(await timed([bin, 'tools', '--json']));
  }
  const median = (xs: number[]) =>
    quantile(
      [...xs].sort((a, b) => a - b),
      0.5,
    );
  const nodeMs = round(median(node), 1);
  const toolsJsonMs = round(median(tools), 1);
  return { runs, nodeMs, toolsJsonMs, ratio: round(toolsJsonMs / nodeMs, 2), goal: { ratioAtMost: 2 } };
}
