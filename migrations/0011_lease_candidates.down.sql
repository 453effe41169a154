DROP FUNCTION "nf_lease_candidates"(TEXT, TEXT, INTEGER);
