// Build step (`npm run build`, after tsc): writes the tool contracts the zod schemas define
// next to the built contracts, where `agentdb tools` reads them without loading zod.
import { writeFileSync } from 'node:fs';
import { TOOL_CONTRACTS_FILE } from '../src/contracts/tool-contracts-file.ts';
import { toolContracts } from '../src/contracts/tools.ts';

writeFileSync(TOOL_CONTRACTS_FILE, `${JSON.stringify(toolContracts())}\n`);
