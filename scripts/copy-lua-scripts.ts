// Build step (`npm run build`, after tsc): tsc copies no `.lua` files, so the Lua scripts are
// copied beside the built loader (src/redis/lua-scripts.ts), where it reads them. A script
// removed from the sources is removed from there too: tsc never cleans dist/, and a stale
// script would ship in the package (`npm pack` packs dist/ as the last build left it).
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LUA_SCRIPTS_DIR } from '../src/redis/lua-scripts.ts';

// This file runs built, from dist/scripts/: the sources are two folders up.
const from = new URL('../../src/redis/scripts/', import.meta.url);
const to = LUA_SCRIPTS_DIR;
if (fileURLToPath(from) !== fileURLToPath(to)) {
  mkdirSync(to, { recursive: true });
  const sources = new Set(readdirSync(from).filter((name) => name.endsWith('.lua')));
  for (const name of readdirSync(to)) if (name.endsWith('.lua') && !sources.has(name)) rmSync(new URL(name, to));
  for (const name of sources) copyFileSync(new URL(name, from), new URL(name, to));
}
