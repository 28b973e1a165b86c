-- Ends a grant with every record issued under it (src/oauth/oauth-grant-store.ts, OAuthGrantStore.dropGrant):
-- its access token, its code and refresh tokens' records, spent or not. Left to lapse by their
-- own TTL, a grant ended by its member's next sign-in past the bound left a refresh token's
-- record for 30 days each time (hostile review T14). In one step with oauth-issue.lua's, which
-- issues nothing for a grant gone, so no record is added after the drop.
-- KEYS: the grant, its code and refresh tokens' records by when each was issued.
-- ARGV: the access tokens' key prefix (a token's key is it and the token's hash), the
-- registry-changes channel (src/registry/principal-cache.ts), and what goes before and after the
-- access token's hash in the change that ends it (accessEnded in oauth-grants.ts).
-- Answers 1 when the grant was there.
local raw = redis.call('GET', KEYS[1])
local message = nil
if raw then
  local ok, grant = pcall(cjson.decode, raw)
  if ok and type(grant) == 'table' and type(grant.accessHash) == 'string' then
    redis.call('DEL', ARGV[1] .. grant.accessHash)
    message = ARGV[3] .. grant.accessHash .. ARGV[4]
  end
end
for _, key in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do redis.call('DEL', key) end
redis.call('DEL', KEYS[1], KEYS[2])
-- Announced with the deletion: a server that cached its access token (the one a grant has)
-- forgets it at once; naming it, so not every tenant's cached keys. A grant without one (its
-- code not yet exchanged, or already gone) has nothing any server could have cached (tokens are
-- cached by their own hash, and oauth-issue.lua issues none for a grant gone): not announced,
-- where it dropped every process's whole cache (hostile review T19).
if message then redis.call('PUBLISH', ARGV[2], message) end
if raw then return 1 end
return 0
