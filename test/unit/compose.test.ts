import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// `docker compose up` must let the host reach Redis: calls go straight onto it, from
// `npx agentdb call` and from the client library.
const compose = readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');

/** The lines of one service in docker-compose.yml (two-space indented under `services:`). */
function service(name: string): string {
  const start = compose.indexOf(`\n  ${name}:\n`);
  expect(start, name).toBeGreaterThan(-1);
  const rest = compose.slice(start + 1);
  const end = rest.slice(1).search(/\n {2}\S|\n\S/);
  return end < 0 ? rest : rest.slice(0, end + 1);
}

/**
 * A service's `environment:` as the container gets it, with compose's `${NAME:-default}` read
 * from `shell` (the environment `docker compose` runs in), its default without it.
 */
function environmentOf(name: string, shell: Record<string, string> = {}): Record<string, string> {
  const env = /\n {4}environment:\n((?: {6}\S[^\n]*\n)+)/.exec(service(name))?.[1] ?? '';
  const pairs = [...env.matchAll(/^ {6}(\w+):\s*"?([^"\n]*)"?$/gm)].map((m) => [m[1]!, m[2]!]);
  const resolve = (value: string) => value.replace(/\$\{(\w+):-([^}]*)\}/g, (_, v: string, d: string) => shell[v] ?? d);
  return Object.fromEntries(pairs.map(([k, v]) => [k, resolve(v!)]));
}

describe('docker-compose.yml', () => {
  it('publishes Redis on the host loopback only, where the CLI and the client look by default', () => {
    const redis = service('redis');
    expect(redis).toMatch(/\n {4}ports:\n {6}- "127\.0\.0\.1:6379:6379"\n/);
  });

  it('says so in the operations docs the README links to', () => {
    const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
    expect(doc).toContain('`127.0.0.1:6379`: `npx agentdb call` and the client library on the host reach that deployment');
  });

  it("runs the app as a user that is not root, its data volume that user's, with a health check on /ready", () => {
    const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
    const run = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(run).toMatch(/\nRUN mkdir -p \/data && chown node:node \/data\nUSER node\nVOLUME \/data\n/);
    expect(run).toMatch(/\nHEALTHCHECK [^\n]*\\\n\s+CMD \["node", "-e", "fetch\('http:\/\/127\.0\.0\.1:' \+ \(process\.env\.PORT \|\| 7070\) \+ '\/ready'\)/);
  });

  it("pins every image to an exact tag, the Dockerfile's base images too", () => {
    const images = [...compose.matchAll(/^\s+image:\s*(\S+)/gm)].map((m) => m[1]!);
    expect(images.length).toBeGreaterThan(0);
    const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
    const bases = [...dockerfile.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]!);
    expect(bases.length).toBeGreaterThan(0);
    // name:MAJOR.MINOR.PATCH, optionally with a variant (-bookworm-slim); never latest or a bare major.
    for (const image of [...images, ...bases]) expect(image, image).toMatch(/^[\w./-]+:\d+\.\d+\.\d+(-[\w.-]+)?$/);
  });

  it('builds and runs the image on the Node the suite runs on (.node-version)', () => {
    const tested = readFileSync(new URL('../../.node-version', import.meta.url), 'utf8').trim();
    const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
    const nodes = [...dockerfile.matchAll(/^FROM\s+node:(\d+\.\d+\.\d+)/gm)].map((m) => m[1]!);
    expect(nodes).toEqual([tested, tested]);
  });

  it('gives the app longer to stop than its drain grace, and checks its readiness', async () => {
    const { loadConfig } = await import('../../src/config.ts');
    const app = service('agentdb');
    const drain = /DRAIN_GRACE_MS:\s*"?(\d+)"?/.exec(app)?.[1];
    const graceMs = drain ? Number(drain) : loadConfig({}).drainGraceMs;
    const stop = /stop_grace_period:\s*(\d+)s/.exec(app)?.[1];
    expect(stop).toBeDefined();
    expect(Number(stop) * 1000).toBeGreaterThan(graceMs);
    expect(app).toMatch(/healthcheck:[\s\S]*\/ready/);
  });

  it("sets only settings agentdb reads, and publishes and health-checks the app's PORT", async () => {
    const { ENV_NAMES, loadConfig } = await import('../../src/config.ts');
    const app = service('agentdb');
    const set = environmentOf('agentdb');
    expect(Object.keys(set).length).toBeGreaterThan(0);
    for (const name of Object.keys(set)) expect(ENV_NAMES, name).toContain(name);
    // The values pass the config schema as the container gets them.
    const port = loadConfig(set).port;
    expect(app).toContain(`- "127.0.0.1:${port}:${port}"`);
    // Whatever PORT says, not a copy of it that a changed PORT would leave behind.
    expect(app).toMatch(/healthcheck:\n {6}test: [^\n]*process\.env\.PORT[^\n]*\/ready/);
  });

  it('restarts Redis as it restarts the app: the app alone, back after a reboot, answers only UNAVAILABLE', () => {
    // Review N10: the app had `restart: unless-stopped` and Redis no policy, so a host's reboot
    // (or Redis crashing) left an app that Docker restarted waiting on a Redis nobody started.
    const policy = (name: string) => /\n {4}restart: (\S+)(?:\n|$)/.exec(service(name))?.[1];
    expect(policy('agentdb')).toBe('unless-stopped');
    expect(policy('redis')).toBe(policy('agentdb'));
  });

  it('splits HTTP from the shard workers with one variable: START_WORKERS=off and the split profile', async () => {
    // Session 38, N17: the split asked for an edit of this file (START_WORKERS: "on" written in
    // the app's service); forgotten, `--profile split up` ran shard workers in both services.
    const { loadConfig } = await import('../../src/config.ts');
    expect(loadConfig(environmentOf('agentdb')).startWorkers).toBe(true);
    expect(loadConfig(environmentOf('agentdb', { START_WORKERS: 'off' })).startWorkers).toBe(false);
    // The worker reads the app's Redis, prefix, shard count and data volume: else it owns shards
    // nobody sends calls to, or files the app's restores and history do not see.
    const worker = service('agentdb-worker');
    expect(worker).toMatch(/profiles: \["split"\]/);
    expect(worker).toContain('"worker"]');
    const [a, w] = [loadConfig(environmentOf('agentdb')), loadConfig(environmentOf('agentdb-worker'))];
    expect([w.redisUrl, w.prefix, w.shardCount, w.dataDir]).toEqual([a.redisUrl, a.prefix, a.shardCount, a.dataDir]);
    const volume = (text: string) => /\n {6}- (\S+):\/data\n/.exec(text)?.[1];
    expect(volume(worker)).toBe(volume(service('agentdb')));
  });

  it("bounds Redis's memory with noeviction, as agentdb doctor asks", () => {
    const redis = service('redis');
    expect(redis).toMatch(/"--maxmemory", "\d+[kmg]b"/);
    expect(redis).toMatch(/"--maxmemory-policy", "noeviction"/);
    expect(redis).toMatch(/"--appendonly", "yes"/);
  });
});
