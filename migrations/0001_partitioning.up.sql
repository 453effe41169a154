-- Partition DDL helpers. These functions are the only place partition DDL
-- is built: identifiers go through format('%I'), values through format('%L')
-- or EXECUTE ... USING, so callers pass names and bounds as $n parameters
-- and nothing is ever concatenated into DDL.
--
-- Names are bare identifiers (e.g. 'WorkflowExecutions', not
-- '"WorkflowExecutions"'); the parent is resolved through search_path and a
-- child is created in the parent's own schema.
--
-- The DDL functions pin TimeZone/DateStyle for their own duration so that a
-- bound rendered with %L always reads back as the same instant, whatever the
-- calling session has set.

-- Naming convention, computed in UTC:
--   monthly  <parent>_p2026_11
--   hourly   <parent>_p2026_11_30_16
-- (hash partitions are <parent>_p0.., DEFAULT partitions <parent>_default.)
-- IMMUTABLE is honest: the conversion names its zone and extract() on a
-- timestamp without time zone does not read any setting.
CREATE FUNCTION "nf_partition_name"("parent" text, "lower" timestamptz, "period" text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    "t" timestamp := "lower" AT TIME ZONE 'UTC';
BEGIN
    CASE lower("period")
    WHEN 'month', 'monthly' THEN
        RETURN format('%s_p%s_%s', "parent",
                      lpad(extract(year  FROM "t")::int::text, 4, '0'),
                      lpad(extract(month FROM "t")::int::text, 2, '0'));
    WHEN 'hour', 'hourly' THEN
        RETURN format('%s_p%s_%s_%s_%s', "parent",
                      lpad(extract(year  FROM "t")::int::text, 4, '0'),
                      lpad(extract(month FROM "t")::int::text, 2, '0'),
                      lpad(extract(day   FROM "t")::int::text, 2, '0'),
                      lpad(extract(hour  FROM "t")::int::text, 2, '0'));
    ELSE
        RAISE EXCEPTION 'nf_partition_name: unknown period %', "period"
            USING ERRCODE = 'invalid_parameter_value';
    END CASE;
END;
$$;

-- Resolve a bare table name to its oid, or raise undefined_table (42P01).
CREATE FUNCTION "nf_partition_relid"("name" text)
RETURNS oid
LANGUAGE plpgsql
STABLE STRICT
AS $$
DECLARE
    "rel" oid := to_regclass(format('%I', "name"));
BEGIN
    IF "rel" IS NULL THEN
        RAISE EXCEPTION 'relation "%" does not exist', "name"
            USING ERRCODE = 'undefined_table';
    END IF;
    RETURN "rel";
END;
$$;

-- CREATE TABLE <child> PARTITION OF <parent> FOR VALUES FROM (lower) TO (upper).
-- Deliberately no IF NOT EXISTS: concurrent creation is the normal case
-- (every replica runs the partition manager), and the losing side must see
-- 42P07 duplicate_table, 42P17 overlapping partition, or 23505 from the
-- pg_class unique index, so exactly one caller claims each creation.
-- If the parent's DEFAULT partition already holds rows in the range,
-- Postgres raises 23514; the caller then uses nf_recover_default_partition.
CREATE FUNCTION "nf_create_range_partition"("parent" text, "child" text,
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

-- Recovery for a parent whose DEFAULT partition already holds rows in
-- [lower, upper): Postgres refuses to create a partition that would orphan
-- them. Detach DEFAULT, create the child, move only the in-range rows,
-- re-attach DEFAULT; returns the number of rows moved.
-- Runs entirely in the caller's transaction: a crash while DEFAULT is
-- detached would otherwise fail every out-of-range insert.
-- The parent is locked ACCESS EXCLUSIVE first, so a concurrent recovery
-- waits, then fails with 42P07 on the create and rolls back cleanly.
CREATE FUNCTION "nf_recover_default_partition"("parent" text, "child" text,
                                               "lower" timestamptz, "upper" timestamptz)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE STRICT
SET "TimeZone" = 'UTC'
SET "DateStyle" = 'ISO, YMD'
AS $$
DECLARE
    "parentRel" oid := "nf_partition_relid"("parent");
    "schema" name;
    "strategy" "char";
    "nKeys" int2;
    "keyAttnum" int2;
    "keyColumn" name;
    "defaultRel" oid;
    "defaultSchema" name;
    "defaultName" name;
    "columns" text;
    "moved" bigint := 0;
BEGIN
    SELECT n."nspname" INTO "schema"
      FROM pg_class c JOIN pg_namespace n ON n."oid" = c."relnamespace"
     WHERE c."oid" = "parentRel";

    EXECUTE format('LOCK TABLE %I.%I IN ACCESS EXCLUSIVE MODE', "schema", "parent");

    -- Read the catalog only after the lock, so it cannot change under us.
    SELECT pt."partstrat", pt."partnatts", pt."partattrs"[0], pt."partdefid"
      INTO "strategy", "nKeys", "keyAttnum", "defaultRel"
      FROM pg_partitioned_table pt
     WHERE pt."partrelid" = "parentRel";
    IF NOT FOUND THEN
        RAISE EXCEPTION '"%" is not a partitioned table', "parent"
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF "strategy" <> 'r' OR "nKeys" <> 1 OR "keyAttnum" = 0 THEN
        RAISE EXCEPTION '"%" is not range-partitioned on a single column (%)',
                        "parent", pg_get_partkeydef("parentRel")
            USING ERRCODE = 'wrong_object_type';
    END IF;

    SELECT a."attname" INTO "keyColumn"
      FROM pg_attribute a
     WHERE a."attrelid" = "parentRel" AND a."attnum" = "keyAttnum";

    -- No DEFAULT partition: nothing to recover, just create.
    IF "defaultRel" IS NULL OR "defaultRel" = 0 THEN
        PERFORM "nf_create_range_partition"("parent", "child", "lower", "upper");
        RETURN 0;
    END IF;

    SELECT n."nspname", c."relname" INTO "defaultSchema", "defaultName"
      FROM pg_class c JOIN pg_namespace n ON n."oid" = c."relnamespace"
     WHERE c."oid" = "defaultRel";

    -- Explicit column list in the parent's order: SELECT * would depend on
    -- each table's physical layout. Generated columns are recomputed.
    SELECT string_agg(format('%I', a."attname"), ', ' ORDER BY a."attnum")
      INTO "columns"
      FROM pg_attribute a
     WHERE a."attrelid" = "parentRel" AND a."attnum" > 0
       AND NOT a."attisdropped" AND a."attgenerated" = '';

    EXECUTE format('ALTER TABLE %I.%I DETACH PARTITION %I.%I',
                   "schema", "parent", "defaultSchema", "defaultName");

    PERFORM "nf_create_range_partition"("parent", "child", "lower", "upper");

    -- INSERT ... SELECT of the rows a DELETE removes: one pass over the
    -- detached default, only rows in [lower, upper).
    EXECUTE format('WITH "moved" AS (DELETE FROM %I.%I WHERE %I >= $1 AND %I < $2 RETURNING %s) '
                   'INSERT INTO %I.%I (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM "moved"',
                   "defaultSchema", "defaultName", "keyColumn", "keyColumn", "columns",
                   "schema", "child", "columns", "columns")
        USING "lower", "upper";
    GET DIAGNOSTICS "moved" = ROW_COUNT;

    -- Re-attaching scans DEFAULT once to prove no remaining row belongs to
    -- any real partition; out-of-range rows stay where they were.
    EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I DEFAULT',
                   "schema", "parent", "defaultSchema", "defaultName");

    RETURN "moved";
END;
$$;

-- DROP TABLE <child>. Retention drops a partition at a time, which is
-- near-instant, instead of a DELETE that then has to be vacuumed.
-- Refuses anything but a bounded range partition, so a bad name can never
-- drop a parent, a hash partition or a DEFAULT partition.
-- Concurrent drops are the normal case (every replica runs retention), so
-- the parent is locked first -- the order DROP TABLE itself locks a
-- partition's parent and the partition, so this cannot deadlock with a
-- query -- and the child is looked up again under that lock: a concurrent
-- drop has then either committed, and the loser sees 42P01
-- undefined_table, or it waits for us. Checked before the lock, a drop
-- committing in between made the loser fail with 42809 or an internal
-- error instead.
CREATE FUNCTION "nf_drop_partition"("child" text)
RETURNS void
LANGUAGE plpgsql
VOLATILE STRICT
AS $$
DECLARE
    "childRel" oid := "nf_partition_relid"("child");
    "parentSchema" name;
    "parentName" name;
    "schema" name;
    "ok" boolean;
BEGIN
    SELECT pn."nspname", pc."relname" INTO "parentSchema", "parentName"
      FROM pg_inherits i
      JOIN pg_class pc ON pc."oid" = i."inhparent"
      JOIN pg_namespace pn ON pn."oid" = pc."relnamespace"
     WHERE i."inhrelid" = "childRel";
    IF FOUND THEN
        EXECUTE format('LOCK TABLE %I.%I IN ACCESS EXCLUSIVE MODE',
                       "parentSchema", "parentName");
        "childRel" := "nf_partition_relid"("child");
    END IF;
    SELECT n."nspname",
           c."relispartition"
           AND pt."partstrat" = 'r'
           AND pt."partdefid" IS DISTINCT FROM c."oid"
      INTO "schema", "ok"
      FROM pg_class c
      JOIN pg_namespace n ON n."oid" = c."relnamespace"
      LEFT JOIN pg_inherits i ON i."inhrelid" = c."oid"
      LEFT JOIN pg_partitioned_table pt ON pt."partrelid" = i."inhparent"
     WHERE c."oid" = "childRel";
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation "%" does not exist', "child"
            USING ERRCODE = 'undefined_table';
    END IF;
    IF NOT coalesce("ok", false) THEN
        RAISE EXCEPTION '"%" is not a bounded range partition', "child"
            USING ERRCODE = 'wrong_object_type';
    END IF;
    EXECUTE format('DROP TABLE %I.%I', "schema", "child");
END;
$$;
