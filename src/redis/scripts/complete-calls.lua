-- One script per batch of completions: publish each one's `call.completed`, then add the
-- metered ones' credits and count under their workspace, agent, tool and day, summed per
-- usage field by the sender: at 64 calls in flight a batch holds tens of calls of the same
-- agent and tool, each of which cost three commands here (issue 31).
-- A call metered once per job (a write's: each run of its job may announce it, the one that
-- committed it having died before it metered, review F1) marks its job's hash, and is taken
-- back out of its group's sum when the job was already marked. A job no longer in Redis (it
-- came back empty) is not made again by the mark: its call is metered.
-- KEYS: the event stream, the usage index, then one usage hash per metered group, then one
-- job hash per call metered once.
-- ARGV: the stream's length, the number of events n, the n events, the number of groups g,
-- four per metered group (`agent|tool`, credits, calls, `workspace|day`), then two per call
-- metered once (its group's number, its credits).
local n = tonumber(ARGV[2])
for i = 1, n do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'type', 'call.completed', 'data', ARGV[2 + i])
end
local groups = tonumber(ARGV[3 + n])
local at = 3 + n
local credits, calls = {}, {}
for g = 1, groups do
  credits[g] = tonumber(ARGV[at + (g - 1) * 4 + 2])
  calls[g] = tonumber(ARGV[at + (g - 1) * 4 + 3])
end
local m = 0
for a = at + groups * 4 + 1, #ARGV, 2 do
  m = m + 1
  local job = KEYS[2 + groups + m]
  if redis.call('EXISTS', job) == 1 and redis.call('HSETNX', job, 'agentdbMetered', 1) == 0 then
    local g = tonumber(ARGV[a])
    credits[g] = credits[g] - tonumber(ARGV[a + 1])
    calls[g] = calls[g] - 1
  end
end
for g = 1, groups do
  if calls[g] > 0 then
    local a = at + (g - 1) * 4 + 1
    redis.call('HINCRBY', KEYS[2 + g], ARGV[a] .. '|credits', credits[g])
    -- The index names a workspace's day from the first count of its usage hash: a count only
    -- grows, and pruning drops the hash and its name together, so a count that is what was just
    -- added is a new field, and any other means the name is there (issue 31: the SADD was one of
    -- a sequential read's ~73 commands, each ~3.5 us of Redis's CPU run from Lua).
    if redis.call('HINCRBY', KEYS[2 + g], ARGV[a] .. '|calls', calls[g]) == calls[g] then
      redis.call('SADD', KEYS[2], ARGV[a + 3])
    end
  end
end
return n
