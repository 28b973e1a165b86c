import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** A module of agentdb's own to fork as a child process: its file, and node's flags to run it. */
export interface ChildModule {
  file: string;
  execArgv: string[];
}

/**
 * The module `name` beside `callerUrl` (the caller's `import.meta.url`), as the caller itself
 * runs: built JavaScript forks `name.js` with plain node; the TypeScript sources (tests, tsx)
 * fork `name.ts` under tsx, which only a development install has. So a build never forks the
 * sources, and a test never forks a stale build.
 */
export function childModule(name: string, callerUrl: string): ChildModule {
  if (!callerUrl.endsWith('.ts')) return { file: fileURLToPath(new URL(`./${name}.js`, callerUrl)), execArgv: [] };
  const tsx = pathToFileURL(createRequire(callerUrl).resolve('tsx')).href;
  return { file: fileURLToPath(new URL(`./${name}.ts`, callerUrl)), execArgv: ['--import', tsx] };
}
