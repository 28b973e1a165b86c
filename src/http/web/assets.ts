import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { STYLES } from './styles.ts';

/**
 * The page's script: `browser/app.ts`, compiled by `npm run build` (tsc) next to this module as
 * `browser/app.js`, which is what a built package serves. Run from source (tsx, tests) only the
 * .ts exists; it is then compiled once in memory with the TypeScript compiler, a dev
 * dependency, so there is still nothing to build by hand.
 */
async function loadScript(): Promise<string> {
  const built = new URL('./browser/app.js', import.meta.url);
  try {
    return await readFile(built, 'utf8');
  } catch {
    const source = await readFile(new URL('./browser/app.ts', import.meta.url), 'utf8');
    const ts = (await import('typescript')).default;
    return ts.transpileModule(source, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
  }
}

/** `GET /assets/app.js` and `/assets/app.css`, cached by the browser for a short while. */
export function registerAssets(app: FastifyInstance): void {
  let script: Promise<string> | undefined;
  app.get('/assets/app.js', { config: { public: true } }, async (_req, reply) => {
    script ??= loadScript();
    return reply
      .type('text/javascript; charset=utf-8')
      .header('cache-control', 'public, max-age=300')
      .send(await script);
  });
  // Browsers ask for it on every site; an empty answer keeps a 404 out of their console.
  app.get('/favicon.ico', { config: { public: true } }, async (_req, reply) => reply.code(204).send());
  app.get('/assets/app.css', { config: { public: true } }, async (_req, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(STYLES),
  );
}
