DO $$
DECLARE
    "part" regclass;
BEGIN
    FOR "part" IN
        SELECT i."inhrelid"::regclass FROM pg_inherits i
         WHERE i."inhparent" = '"WorkflowExecutions"'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s RESET (fillfactor)', "part");
    END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION "nf_create_range_partition"("parent" text, "child" text,
                                            "lower" timestamptz, "upper" timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE STRICT
SET "TimeZone" = 'UTC'
SET "DateStyle" = 'ISO, YMD'
AS $$
DECLARE
    "parentRel" oid := "nf_partition_relid"("parent");
    "schema" name;
BEGIN
    -- Postgres would silently truncate a longer name, and two truncated
    -- names could then collide.
    IF octet_length("child") > 63 THEN
        RAISE EXCEPTION 'partition name "%" is longer than 63 bytes', "child"
            USING ERRCODE = 'name_too_long';
    END IF;
    SELECT n."nspname" INTO "schema"
      FROM pg_class c JOIN pg_namespace n ON n."oid" = c."relnamespace"
     WHERE c."oid" = "parentRel";
    EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.%I FOR VALUES FROM (%L) TO (%L)',
                   "schema", "child", "schema", "parent", "lower", "upper");
END;
$$;
