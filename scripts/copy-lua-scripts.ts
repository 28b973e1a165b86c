// Build step (`npm run build`, after tsc): tsc copies no `.lua` files, so the Lua scripts are
// copied beside the built loader (src/redis/lua-scripts.ts), where it reads them.
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LUA_SCRIPTS_DIR } from '../src/redis/lua-scripts.ts';

// This file runs built, from dist/scripts/: the sources are two folders up.
const from = new URL('../../src/redis/scripts/', import.meta.url);
const to = LUA_SCRIPTS_DIR;
if (fileURLToPath(from) !== fileURLToPath(to)) {
  mkdirSync(to, { recursive: true });
  for (const name of readdirSync(from)) if (name.endsWith('.lua')) copyFileSync(new URL(name, from), new URL(name, to));
}
