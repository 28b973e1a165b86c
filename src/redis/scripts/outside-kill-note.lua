-- Notes one SIGKILL from outside of an agent's statement (its digest, ARGV[1]) in its workspace's
-- hash KEYS[1]: field = digest, value = "count:lastMs" (Redis's clock, so workers' clocks need not
-- agree). A kill ARGV[2] ms or more after the statement's last starts its count again. The hash
-- keeps at most ARGV[3] statements (the one killed longest ago goes) and lives ARGV[2] ms after
-- the workspace's last kill. Returns the statement's count, this kill included.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window, cap = tonumber(ARGV[2]), tonumber(ARGV[3])
local count = 1
local seen = redis.call('HGET', KEYS[1], ARGV[1])
if seen then
  local c, last = string.match(seen, '^(%d+):(%d+)$')
  if c and now - tonumber(last) < window then count = tonumber(c) + 1 end
elseif redis.call('HLEN', KEYS[1]) >= cap then
  local all = redis.call('HGETALL', KEYS[1])
  local oldest, at = nil, nil
  for i = 1, #all, 2 do
    local last = tonumber(string.match(all[i + 1], ':(%d+)$') or '0')
    if at == nil or last < at then oldest, at = all[i], last end
  end
  if oldest then redis.call('HDEL', KEYS[1], oldest) end
end
redis.call('HSET', KEYS[1], ARGV[1], count .. ':' .. now)
redis.call('PEXPIRE', KEYS[1], window)
return count
