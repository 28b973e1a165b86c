-- Claims a resend's join entry (PendingCallJoins.claim), or joins the call id it holds, and
-- counts the sends on their way under that id, so that a send refused before it was taken lets
-- go of the entry only as the last of them (join-let-go-unsent.lua).
-- KEYS: the join entry, its count of sends. ARGV: a new call id, the TTL (s).
-- Answers the id to send under, and 1 when it was another send's.
local held = redis.call('GET', KEYS[1])
if not held then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  redis.call('SET', KEYS[2], 1, 'EX', ARGV[2])
  return {ARGV[1], 0}
end
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return {held, 1}
