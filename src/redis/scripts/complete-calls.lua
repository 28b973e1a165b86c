-- One script per batch of completions: for each, publish `call.completed` and, when the call is
-- metered, add its credits and count under its workspace, agent, tool and day.
-- KEYS: the event stream, the usage index, then one usage hash per completion.
-- ARGV: the stream's length, then four per completion (event, `agent|tool` or '' when not
-- metered, credits, `workspace|day`).
local n = (#ARGV - 1) / 4
for i = 1, n do
  local a = 1 + (i - 1) * 4
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'type', 'call.completed', 'data', ARGV[a + 1])
  if ARGV[a + 2] ~= '' then
    redis.call('HINCRBY', KEYS[2 + i], ARGV[a + 2] .. '|credits', ARGV[a + 3])
    redis.call('HINCRBY', KEYS[2 + i], ARGV[a + 2] .. '|calls', 1)
    redis.call('SADD', KEYS[2], ARGV[a + 4])
  end
end
return n
