DROP FUNCTION "nf_drop_partition"(text);
DROP FUNCTION "nf_recover_default_partition"(text, text, timestamptz, timestamptz);
DROP FUNCTION "nf_create_range_partition"(text, text, timestamptz, timestamptz);
DROP FUNCTION "nf_partition_relid"(text);
DROP FUNCTION "nf_partition_name"(text, timestamptz, text);
