-- Lets go of a resend's join entry (PendingCallJoins) for a send whose call was refused before
-- it was taken: only while the entry still names that call id, no call was taken under the id
-- (its call-id claim absent), and no other send under the id is still on its way (the count
-- join-claim.lua keeps comes to 0 with this one).
-- A send joining the same id may be admitted after this send's refusal: deleting the entry
-- before that let a resend in between claim a new id, and the two sends made two calls with two
-- approvals (hostile review T2 for a joiner admitted first, session 27 G1 for one on its way).
-- KEYS: the join entry, its count of sends, the call-id claim of the call the id would key.
-- ARGV: the call id.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if redis.call('DECR', KEYS[2]) > 0 then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
