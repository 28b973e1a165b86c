-- Lets go of a resend's join entry (PendingCallJoins) that a send claimed and whose call was
-- refused before it was taken: only while the entry still names that call id, and no call
-- was taken under the id since (its call-id claim absent). A send joining the same id may have
-- been admitted meanwhile and noted the same id again: the id is then a waiting call's, and
-- deleting it made the next resend a second call, with a second approval (hostile review T2).
-- KEYS: the join entry, the call-id claim of the call the id would key. ARGV: the call id.
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('EXISTS', KEYS[2]) == 0 then return redis.call('DEL', KEYS[1]) end
return 0
