-- A dropped grant lets go of its registered client (src/oauth/oauth-grants.ts, OAuthGrants): once no
-- live grant holds it, the client is kept no longer than one nobody signed in through, rather than
-- the refresh lifetime its last grant gave it (hostile review T3: consented clients outlived their
-- grants by 90 days, uncapped), and takes a place among the clients nobody signs in through again
-- (hostile review T14: a consent took it out of OAUTH_UNCONSENTED_CLIENTS_MAX for good, so a member
-- consenting to registrations from many addresses kept any number past the cap). Grants that lapsed
-- by their own TTL leave their ids behind; they are swept here.
-- KEYS: the client's record, the set of grant ids holding it, the unconsented clients (by lapse, ms).
-- ARGV: the dropped grant's id, the grants' key prefix (a grant's key is it and the id), the
-- unconsented lifetime (s), the client's id, now (ms).
-- Answers how many live grants still hold the client.
redis.call('SREM', KEYS[2], ARGV[1])
local live = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', ARGV[2] .. id) == 1 then live = live + 1 else redis.call('SREM', KEYS[2], id) end
end
if live > 0 then return live end
redis.call('DEL', KEYS[2])
local ttl = tonumber(ARGV[3])
local left = redis.call('TTL', KEYS[1])
if left < 0 and left ~= -1 then return 0 end
if left == -1 or left > ttl then
  redis.call('EXPIRE', KEYS[1], ttl)
  left = ttl
end
-- Its place lapses with its record; the set lives as long as its last place.
local lapses = tonumber(ARGV[5]) + left * 1000
redis.call('ZADD', KEYS[3], lapses, ARGV[4])
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[3], last[2])
return 0
