-- Issues a grant's new tokens only while the grant exists (src/oauth/oauth-grants.ts, OAuthGrants.issue):
-- a token request reads the grant, then writes it back with its tokens, and a revoke between the
-- two must not be undone by that write (hostile review T1).
-- KEYS: the grant, the new access token, the new refresh token, the old access token (its grant's
-- last; the grant's own key again when it has none), the grant's code and refresh tokens' records
-- by when each was issued.
-- ARGV: the grant's record, the access token's record, the grant's id, the access and refresh TTLs (s),
-- the registry-changes channel (src/registry/principal-cache.ts), now (ms), how many records the
-- grant keeps, the change announcing the old access token's end (accessEnded in oauth-grants.ts).
-- Answers 1 when issued, 0 when the grant is gone (nothing written).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if KEYS[4] ~= KEYS[1] then
  redis.call('DEL', KEYS[4])
  -- The old access token ends here: a server that cached who it acts for forgets it now.
  -- Naming it (ARGV[9]), so only it is forgotten, not every tenant's cached keys.
  redis.call('PUBLISH', ARGV[6], ARGV[9])
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[5])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[4])
redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[5])
-- A spent refresh token's record stays (marked) so a copy shown again ends the grant; past the
-- grant's bound the oldest go, the new one never (hostile review T14: kept 30 days each, a grant
-- refreshed in a loop grew Redis by a key a refresh).
redis.call('ZADD', KEYS[5], ARGV[7], KEYS[3])
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[8])
if over > 0 then
  for _, key in ipairs(redis.call('ZRANGE', KEYS[5], 0, over)) do
    if over > 0 and key ~= KEYS[3] then
      redis.call('DEL', key)
      redis.call('ZREM', KEYS[5], key)
      over = over - 1
    end
  end
end
redis.call('EXPIRE', KEYS[5], ARGV[5])
return 1
