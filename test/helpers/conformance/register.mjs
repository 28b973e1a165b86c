// `node --import` this before the MCP conformance CLI: it loads on Node 20, which lacks
// fs.globSync (Node 22), a name the CLI imports for its tier-check command only.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
