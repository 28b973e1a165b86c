-- Drops the expired, sums the rest, and adds the new result only when the sum stays within the
-- cap: one script, so concurrent calls of a workspace cannot each see room for themselves.
-- KEYS: the workspace's ledger. ARGV: now, id, bytes, expiresAt, cap.
-- Returns {1, held, ''} when reserved, {0, held, first expiry or ''} when over the cap.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local held = 0
local members = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local first = nil
for i = 1, #members, 2 do
  held = held + tonumber(string.match(members[i], ':(%d+)$'))
  if first == nil then first = members[i + 1] end
end
if held + tonumber(ARGV[3]) > tonumber(ARGV[5]) then return {0, tostring(held), first or ''} end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2] .. ':' .. ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return {1, tostring(held + tonumber(ARGV[3])), ''}
