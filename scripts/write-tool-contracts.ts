// Build step (`npm run build`, after tsc): writes the tool contracts the zod schemas define
// next to the built contracts, where `agentdb tools` reads them without loading zod.
import { renameSync, writeFileSync } from 'node:fs';
import { TOOL_CONTRACTS_FILE } from '../src/contracts/tool-contracts-file.ts';
import { toolContracts } from '../src/contracts/tools.ts';

// Through a temporary name: a CLI started meanwhile (a test beside `npm pack`) reads the old file or the new one, never half.
const tmp = new URL(`${TOOL_CONTRACTS_FILE.href}.${process.pid}.tmp`);
writeFileSync(tmp, `${JSON.stringify(toolContracts())}\n`);
renameSync(tmp, TOOL_CONTRACTS_FILE);
