/**
 * Where a build keeps the tool contracts as JSON, written from the zod schemas by
 * `scripts/write-tool-contracts.ts` (`npm run build`). `agentdb tools` reads this file instead
 * of computing them: loading zod alone takes as long as starting Node. Running from the
 * sources, there is no such file and the contracts are computed.
 */
export const TOOL_CONTRACTS_FILE = new URL('./tool-contracts.json', import.meta.url);
