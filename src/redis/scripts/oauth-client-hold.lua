-- A grant holds its registered client (src/oauth/oauth-grants.ts, OAuthGrants): the client is
-- kept at least as long as the grant may still issue tokens, and notes the grant, so that when
-- the grant is dropped the client can go back to an unconsented client's lifetime.
-- KEYS: the client's record, the set of grant ids holding it, the grant's record.
-- ARGV: the grant's id, the lifetime (s) the client is kept at least (never shortened here).
-- Answers 1 when held, 0 for no such client (a metadata document's, or lapsed) or a grant gone
-- (revoked since its tokens were issued: it must not keep its client).
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
local ttl = tonumber(ARGV[2])
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  local left = redis.call('TTL', key)
  if left >= 0 and left < ttl then redis.call('EXPIRE', key, ttl) end
end
return 1
