------------------------------------------------------------------------
-- 0012 execution fillfactor: room on each page of "WorkflowExecutions"
-- for the updates that change no indexed column, so that they are HOT.
--
-- An execution is written once and updated about four times in a short
-- life: its first evaluation ("version", "eventSeq"), its task's lease and
-- its result (event counters), and its end.  Only the end changes indexed
-- columns ("status", "output", "endedAt").  An update that changes no
-- indexed column can be HOT (heap-only: no new entry in any of the
-- table's twelve indexes) when the row's page has room for the new
-- version; at the default fillfactor (100) a page fills with fresh
-- executions and the update goes to another page, adding an entry to
-- every index.  Eighty leaves a fifth of each page for them.
--
-- A partition's storage parameters are its own (a partitioned table has
-- none), so they are set on every partition that exists, and
-- "nf_create_range_partition" now gives a new partition the storage
-- parameters of its parent's DEFAULT partition (or, while DEFAULT is
-- detached by "nf_recover_default_partition", of its newest sibling).  To
-- change them for the partitions to come, change them on the DEFAULT
-- partition.  Only tables whose DEFAULT has parameters are affected.
------------------------------------------------------------------------
DO $$
DECLARE
    "part" regclass;
BEGIN
    FOR "part" IN
        SELECT i."inhrelid"::regclass FROM pg_inherits i
         WHERE i."inhparent" = '"WorkflowExecutions"'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 80)', "part");
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
    "options" text[];
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
    -- The DEFAULT partition's storage parameters, else the newest sibling's.
    SELECT c."reloptions" INTO "options"
      FROM pg_inherits i JOIN pg_class c ON c."oid" = i."inhrelid"
     WHERE i."inhparent" = "parentRel"
     ORDER BY c."oid" = (SELECT pt."partdefid" FROM pg_partitioned_table pt
                          WHERE pt."partrelid" = "parentRel") DESC,
              c."oid" DESC
     LIMIT 1;
    EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.%I FOR VALUES FROM (%L) TO (%L)%s',
                   "schema", "child", "schema", "parent", "lower", "upper",
                   CASE WHEN "options" IS NULL THEN ''
                        ELSE format(' WITH (%s)', array_to_string("options", ', ')) END);
END;
$$;
