-- The scope rule (forensics/notify/scope.py): a read at `ts` is in the period [lo, hi) (NULL:
-- open on that side), and with accounts given (`ids`; an empty list: any account) one of the
-- two accounts is among them.
CREATE OR REPLACE TEMP MACRO kvf_in_scope(ts, one, other, lo, hi, ids) AS
    (lo IS NULL OR ts >= lo) AND (hi IS NULL OR ts < hi)
    AND (len(ids) = 0 OR list_contains(ids, one) OR list_contains(ids, other));
