-- Issues a grant's new tokens only while the grant exists (src/oauth/oauth-grants.ts, OAuthGrants.issue):
-- a token request reads the grant, then writes it back with its tokens, and a revoke between the
-- two must not be undone by that write (hostile review T1).
-- KEYS: the grant, the new access token, the new refresh token, the old access token (its grant's
-- last; the grant's own key again when it has none).
-- ARGV: the grant's record, the access token's record, the grant's id, the access and refresh TTLs (s),
-- the registry-changes channel (src/registry/principal-cache.ts).
-- Answers 1 when issued, 0 when the grant is gone (nothing written).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if KEYS[4] ~= KEYS[1] then
  redis.call('DEL', KEYS[4])
  -- The old access token ends here: a server that cached who it acts for forgets it now.
  redis.call('PUBLISH', ARGV[6], 'oauth access token replaced')
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[5])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[4])
redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[5])
return 1
