DO $$
BEGIN
    FOR "n" IN 0..7 LOOP
        PERFORM pg_clear_attribute_stats(current_schema()::text,
                                         format('TaskQueues_p%s', "n"),
                                         'queueName', false);
    END LOOP;
END;
$$;
