-- Gives a call id up to the call that holds it elsewhere (yieldClaim, src/calls/call-id-claim.ts).
-- KEYS: the claim. ARGV: the fingerprint of the call giving the id up, the new claim, its TTL (s).
-- Only a claim that is that call's (or none: Redis lost it again) is replaced: a claim another
-- call took meanwhile is its own. Returns 1 when the claim was replaced, else 0.
local held = redis.call('GET', KEYS[1])
if held then
  local ok, claim = pcall(cjson.decode, held)
  if not ok or type(claim) ~= 'table' or claim.fingerprint ~= ARGV[1] then return 0 end
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
