import { describe, expect, it } from 'vitest';
import { repoText, tsFiles } from '../helpers/repo-files.ts';

// DESIGN.md "Layout" and STYLE.md: configuration comes only through the zod schema (config.ts),
// read once at the entry point and passed down. A module that reads process.env on its own has
// a setting no schema checks, no docs/settings table lists and no test can pass in. Kept by
// this check: only the files below read the environment, each with why.

/** The modules of src/ that may read `process.env`, each with why. */
const READERS: Record<string, string> = {
  'src/config.ts': "the schema itself: loadConfig's environment, process.env unless its caller passes one",
  'src/cli/main.ts': 'the entry point, handing the environment to loadConfig',
  'src/executor/executor-spawn.ts': "a child's environment is its worker's, passed on whole (with the compile cache named)",
  'src/history/uncommitted-tail.ts': 'a fault-test hook (AGENTDB_TEST_KILL_BEFORE_TAIL_CUT), unset in production and in no schema on purpose',
};

/** Whether `source` reads the environment in code (a comment naming it does not count). */
const readsEnv = (source: string) => /\bprocess\s*\.\s*env\b|\bprocess\s*\[\s*['"]env['"]\s*\]/.test(source.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, ''));

/** The entry points: the only files that make the Config (loadConfig) and pass it down. */
const isEntryPoint = (file: string) => file === 'src/cli/main.ts' || /^(workers|bin)\//.test(file);

/** Whether `source` calls loadConfig in code (its import, or a comment naming it, does not). */
const loadsConfig = (source: string) => /\bloadConfig\s*\(/.test(source.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, ''));

describe('the environment is read where the config is made', () => {
  it('reads process.env only in the files named, each of which still does', () => {
    const readers = [...tsFiles('src'), ...tsFiles('workers'), ...tsFiles('bin')].filter((f) => readsEnv(repoText(f)));
    expect(readers.sort()).toEqual(Object.keys(READERS).sort());
  });

  it('makes the Config (loadConfig) only at an entry point: a module handed its settings can be tested with others', () => {
    expect(loadsConfig('const config = loadConfig(process.env);')).toBe(true);
    expect(loadsConfig("import { loadConfig } from '../config.ts'; // loadConfig(env) is the entry point's")).toBe(false);
    const makers = [...tsFiles('src'), ...tsFiles('workers'), ...tsFiles('bin')].filter((f) => f !== 'src/config.ts' && loadsConfig(repoText(f)));
    expect(makers.length).toBeGreaterThan(0);
    expect(makers.filter((f) => !isEntryPoint(f))).toEqual([]);
  });
});
