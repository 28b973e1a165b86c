import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AgentDbError } from '../errors.ts';

/** A framework an adapter is written against: its package, the module loaded, the majors it was tested on. */
export interface FrameworkPackage {
  /** The adapter's own subpath, for the message (`agentdb/ai-sdk`). */
  adapter: string;
  /** The npm package (`ai`, `@langchain/core`). */
  name: string;
  /** The module the adapter imports (`ai`, `@langchain/core/tools`): resolved to find the package. */
  module: string;
  /** The major versions the adapter supports; 0 stands for 0.x minors, listed in `minors`. */
  majors: readonly number[];
  /** For a 0.x package, whose minors break as majors do: the 0.x minors supported. */
  minors?: readonly number[];
}

/**
 * Checks that `pkg` is installed at a supported version and imports its module. Each adapter
 * runs it when it is imported, on purpose: the frameworks are optional peer dependencies, and an
 * app that imports an adapter without its framework (or with a major it was not written for)
 * must be told at once which package and which versions, not fail later inside a run on a
 * missing export.
 * @throws AgentDbError UNSUPPORTED_FRAMEWORK naming the package, the version found and the ones supported.
 */
export async function loadFramework<T>(pkg: FrameworkPackage): Promise<T> {
  const wanted = pkg.minors ? pkg.minors.map((m) => `0.${m}`).join(' or ') : pkg.majors.map((m) => `${m}.x`).join(' or ');
  const install = `npm install ${pkg.name}@${pkg.minors ? `0.${pkg.minors.at(-1)}` : pkg.majors.at(-1)}`;
  let entry: string;
  try {
    entry = fileURLToPath(import.meta.resolve(pkg.module));
  } catch {
    throw new AgentDbError('UNSUPPORTED_FRAMEWORK', `${pkg.adapter} needs the package ${pkg.name} (${wanted}), which is not installed: ${install}.`);
  }
  const version = versionAbove(entry, pkg.name);
  const [major, minor] = (version ?? '').split('.').map(Number);
  const supported = pkg.minors ? major === 0 && pkg.minors.includes(minor ?? -1) : pkg.majors.includes(major ?? -1);
  if (!supported) {
    throw new AgentDbError(
      'UNSUPPORTED_FRAMEWORK',
      `${pkg.adapter} supports ${pkg.name} ${wanted}; ${version ?? 'an unknown version'} is installed: ${install}.`,
    );
  }
  return (await import(pkg.module)) as T;
}

/** The version in the package.json of `name` at or above `file`, found by walking up. */
function versionAbove(file: string, name: string): string | undefined {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    try {
      const json = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (json.name === name) return json.version;
    } catch {
      // No package.json here (or not JSON): keep walking up.
    }
    if (path.dirname(dir) === dir) return undefined;
  }
}
