// node:fs, with a globSync that says what it needs where Node has none (only `tier-check` uses it).
import fs from 'node:fs';

export * from 'node:fs';
export default fs;
export const globSync =
  fs.globSync ??
  (() => {
    throw new Error('globSync needs Node 22 (only the tier-check command uses it)');
  });
