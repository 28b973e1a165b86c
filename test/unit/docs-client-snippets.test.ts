import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// The README tells a new user on a shared Redis to export their own AGENTDB_PREFIX (and
// REDIS_URL) in every terminal. A snippet that hard-codes `prefix: 'agentdb'` (docs/calls.md's
// db() example, docs/approvals.md's) then sends its calls where no worker listens, and the user
// waits 30 s for NO_WORKER (review N10). Every snippet's client takes the server's two settings.
const REPO = new URL('../../', import.meta.url);
const pages = [
  'README.md',
  ...readdirSync(new URL('docs/', REPO))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

describe("the docs' TypeScript snippets", () => {
  it("make their AgentDbClient with the server's REDIS_URL and AGENTDB_PREFIX", () => {
    const clients = pages.flatMap((page) =>
      [...readFileSync(new URL(page, REPO), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].flatMap((m) =>
        [...m[1]!.matchAll(/new AgentDbClient\(([^)]*)\)/g)].map((c) => ({ page, options: c[1]! })),
      ),
    );
    expect(clients.length).toBeGreaterThanOrEqual(3);
    for (const { page, options } of clients) {
      expect(options, page).toContain('redisUrl: process.env.REDIS_URL');
      expect(options, page).toContain('prefix: process.env.AGENTDB_PREFIX');
    }
  });
});
