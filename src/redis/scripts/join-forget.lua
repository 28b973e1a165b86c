-- Ends a resend's join window (PendingCallJoins.forget): the entry and its count of sends go,
-- only while the entry still names the call id given, never one a new call took after it.
-- KEYS: the join entry, its count of sends. ARGV: the call id.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1], KEYS[2]) end
return 0
