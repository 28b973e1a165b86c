-- Takes an OAuth code's or refresh token's record once (src/oauth/oauth-grants.ts, OAuthGrants.spend).
-- KEYS[1]: the record's key. ARGV[1]: the mark of a spent record ("spent:").
-- Answers the record as it was (nil when unknown); a record not yet spent becomes ARGV[1] .. record
-- with the TTL it had, so a second use is seen as one (and revokes its grant) rather than unknown.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1]) == ARGV[1] then return v end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('SET', KEYS[1], ARGV[1] .. v, 'PX', ttl) else redis.call('DEL', KEYS[1]) end
return v
