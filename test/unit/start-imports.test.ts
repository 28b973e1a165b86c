import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// What a process start loads is paid on every start: each executor child a worker forks (the
// spare, a restart), each `agentdb` command a person or a script runs. The packages a start
// loads are read here from the static imports of the sources (a dynamic `import()` loads only
// when its code runs), so a new import that drags zod or BullMQ into a start fails here rather
// than going unseen (docs/benchmarks.md, session 29 S2: zod is 95 modules and ~0.05 s of CPU,
// BullMQ 144 modules and ~0.07 s more than ioredis).
const REPO = fileURLToPath(new URL('../../', import.meta.url));

// `import … from 'x'`, `export … from 'x'`, `import 'x'`; `import type` and `export type` are
// erased. (Under verbatimModuleSyntax `import { type A } from 'x'` stays as `import {} from 'x'`,
// and so counts here.)
const STATIC = /^(import|export)\s+(type\s)?[^;]*?from\s+'([^']+)'|^import\s+'([^']+)'/gm;

/** The packages (not node: built-ins, not agentdb's own files) that loading `entry` loads. */
function packagesLoadedBy(entry: string): Set<string> {
  const seen = new Set([entry]);
  const queue = [entry];
  const packages = new Set<string>();
  for (let file = queue.shift(); file; file = queue.shift()) {
    for (const m of readFileSync(path.join(REPO, file), 'utf8').matchAll(STATIC)) {
      if (m[2]) continue;
      const spec = (m[3] ?? m[4])!;
      if (spec.startsWith('.')) {
        const next = path.normalize(path.join(path.dirname(file), spec));
        if (!seen.has(next)) seen.add(next) && queue.push(next);
      } else if (!spec.startsWith('node:')) {
        packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
      }
    }
  }
  return packages;
}

describe('what a process start loads', () => {
  it('an executor child loads better-sqlite3 and nothing else of node_modules', () => {
    expect([...packagesLoadedBy('src/executor/executor-child.ts')]).toEqual(['better-sqlite3']);
  });

  it('agentdb approvals and agents load no BullMQ (only deciding wakes a job, and loads it then)', () => {
    for (const command of ['src/cli/approvals.ts', 'src/cli/agents.ts']) {
      expect(packagesLoadedBy(command), command).not.toContain('bullmq');
    }
  });

  it('the command table loads commander alone: each command is imported when it runs', () => {
    expect([...packagesLoadedBy('src/cli/main.ts')]).toEqual(['commander']);
  });
});
