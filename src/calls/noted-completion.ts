import { budgetNoteLua, luaSource } from '../redis/lua-scripts.ts';

/**
 * A workspace's budget note and a batch of completions in one script (issue 31): `budget-note.lua`
 * (`budgetNoteLua`) with the note's keys and arguments, then `complete-calls.lua` with the
 * completions'. Sent one after the other they were two scripts per call on the worker's
 * connection, each an EVALSHA Redis parses and runs; the note still goes first, so whoever hears
 * of a call hears of it after its count. The note runs in `pcall`: a note that fails (a budget key
 * of the wrong type, a sum that is not an integer) is reported to the budget as it was alone, and
 * the completions still go out.
 * KEYS: the note's, then the completions'. ARGV: how many of the keys are the note's, how many
 * of the arguments after these two are the note's, the note's arguments, then the completions'.
 * Returns {completions announced, budget-note's held sum (or ''), the note's error (or '')}.
 *
 * The keys are in two hash tags (`{budget-<workspace>}` and `{calls}`): fine on one Redis, which
 * is what agentdb runs on, as the caller's `ADMITTED_ADDS_LUA`; a Redis Cluster would need the
 * two scripts.
 */
export const NOTED_COMPLETE_LUA = (): string => `local nk, na = tonumber(ARGV[1]), tonumber(ARGV[2])
local noteKeys, noteArgs, doneKeys, doneArgs = {}, {}, {}, {}
for i = 1, #KEYS do
  if i <= nk then noteKeys[#noteKeys + 1] = KEYS[i] else doneKeys[#doneKeys + 1] = KEYS[i] end
end
for i = 3, #ARGV do
  if i <= 2 + na then noteArgs[#noteArgs + 1] = ARGV[i] else doneArgs[#doneArgs + 1] = ARGV[i] end
end
local ok, noted = pcall(function(KEYS, ARGV)
${budgetNoteLua()}
end, noteKeys, noteArgs)
local n = (function(KEYS, ARGV)
${luaSource('complete-calls.lua')}
end)(doneKeys, doneArgs)
if not ok or noted.err then
  return {n, '', type(noted) == 'table' and tostring(noted.err) or tostring(noted)}
end
return {n, noted[1], ''}
`;
