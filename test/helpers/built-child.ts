import { fileURLToPath } from 'node:url';
import type { ChildModule } from '../../src/executor/child-module.ts';

/**
 * The executor child as built (dist/), for the pools tests start from the sources: the global
 * setup has made the build current before any test runs, and a child forked from it starts in
 * about 350 ms of CPU where one under tsx took 870 (tests start hundreds: every pool, every kill).
 */
export const builtExecutorChild: ChildModule = {
  file: fileURLToPath(new URL('../../dist/src/executor/executor-child.js', import.meta.url)),
  execArgv: [],
};
