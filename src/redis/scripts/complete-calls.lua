-- One script per batch of completions: publish each one's `call.completed`, then add the
-- metered ones' credits and count under their workspace, agent, tool and day, summed per
-- usage field by the sender: at 64 calls in flight a batch holds tens of calls of the same
-- agent and tool, each of which cost three commands here (issue 31).
-- KEYS: the event stream, the usage index, then one usage hash per metered group.
-- ARGV: the stream's length, the number of events n, the n events, then four per metered group
-- (`agent|tool`, credits, calls, `workspace|day`).
local n = tonumber(ARGV[2])
for i = 1, n do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'type', 'call.completed', 'data', ARGV[2 + i])
end
local g = 0
for a = 3 + n, #ARGV, 4 do
  g = g + 1
  redis.call('HINCRBY', KEYS[2 + g], ARGV[a] .. '|credits', ARGV[a + 1])
  redis.call('HINCRBY', KEYS[2 + g], ARGV[a] .. '|calls', ARGV[a + 2])
  redis.call('SADD', KEYS[2], ARGV[a + 3])
end
return n
