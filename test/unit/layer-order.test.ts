import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// `npm run depcheck` enforces the folder order of .dependency-cruiser.cjs (LAYERS). That order must
// be the one ARCHITECTURE.md states, and keep DESIGN.md's ("Layout": dependencies point one way),
// or the tool checks an order nobody wrote down.
const CONFIG = readFileSync(new URL('../../.dependency-cruiser.cjs', import.meta.url), 'utf8');
const DOC = readFileSync(new URL('../../ARCHITECTURE.md', import.meta.url), 'utf8');

/** LAYERS' names, bottom first, as the config lists them. */
const layers = [...CONFIG.matchAll(/\{ name: '([a-z]+)', path: '/g)].map((m) => m[1]!);

/**
 * DESIGN.md's order (the design document lives outside this repository): each group may use the
 * groups before it; within a group, DESIGN.md sets no order. `base` is errors.ts and the root
 * files beside it, `entry` the package's and the processes' entry points (workers/, bin/).
 */
const DESIGN_ORDER = [
  ['contracts', 'base', 'redis'],
  ['registry'],
  ['guard', 'policy'],
  ['sqlite'],
  ['blobs'],
  ['history'],
  ['executor'],
  ['approvals'],
  ['calls', 'shards', 'schedule'],
  ['mcp', 'http', 'cli', 'entry'],
];

/** ARCHITECTURE.md's order: the arrows of "The order of folders", its first and last steps named as LAYERS names them. */
function statedOrder(text: string): string[] {
  const section = /## The order of folders\n([\s\S]*?)\n## /.exec(text)?.[1] ?? '';
  const chain = /any cycle:\n([\s\S]*?)\. It is the order/.exec(section)?.[1] ?? '';
  const steps = chain.split('→').map((s) => s.replace(/\s+/g, ' ').trim());
  return steps.map((s, i) => (i === 0 && s.startsWith('errors.ts') ? 'base' : i === steps.length - 1 && s.startsWith('index.ts') ? 'entry' : s));
}

describe("depcheck's folder order", () => {
  it('reads the layers and the stated order (so the checks below check something)', () => {
    expect(layers.length).toBeGreaterThan(15);
    expect(layers[0]).toBe('base');
    expect(statedOrder(DOC)[0]).toBe('base');
  });

  it('is the order ARCHITECTURE.md states, step for step', () => {
    expect(statedOrder(DOC)).toEqual(layers);
  });

  it("keeps DESIGN.md's order: every folder DESIGN.md places comes after those of the groups before it", () => {
    const at = (name: string) => layers.indexOf(name);
    const against: string[] = [];
    DESIGN_ORDER.forEach((group, g) => {
      for (const name of group) {
        expect(at(name), name).toBeGreaterThanOrEqual(0);
        for (const earlier of DESIGN_ORDER.slice(0, g).flat()) if (at(earlier) > at(name)) against.push(`${earlier} after ${name}`);
      }
    });
    expect(against).toEqual([]);
  });
});
