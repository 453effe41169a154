/*
 * Unit tests of src/engine without a database: the partition manager's
 * period arithmetic (UTC month and hour boundaries, year roll-over, leap
 * Februaries, negative steps), the mapping of the configuration onto the
 * partitioned tables, and the listener's "workflowId:seq" payload parser.
 */
#include "engine/listener.h"
#include "engine/partitions.h"
#include "runtime/config.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/*
 * Epoch seconds of a UTC civil time, computed independently of the libc
 * calls the code under test uses (days from civil, proleptic Gregorian).
 */
static int64_t
utc(int y, int m, int d, int hh, int mm, int ss)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	int64_t days = era * 146097 + doe - 719468;
	return days * 86400 + hh * 3600 + mm * 60 + ss;
}

enum { DAY = 86400 };

Test(periods, reference_epochs_are_right)
{
	/* Guards the helper itself against a few well-known values. */
	cr_assert_eq(utc(1970, 1, 1, 0, 0, 0), 0);
	cr_assert_eq(utc(2000, 3, 1, 0, 0, 0), 951868800);
	cr_assert_eq(utc(2024, 2, 29, 12, 0, 0), 1709208000);
}

Test(periods, month_start_truncates_to_the_first_at_midnight_utc)
{
	int64_t first = utc(2026, 5, 1, 0, 0, 0);
	cr_assert_eq(partition_period_start(PERIOD_MONTH, first), first);
	cr_assert_eq(partition_period_start(PERIOD_MONTH, first + 1), first);
	cr_assert_eq(partition_period_start(PERIOD_MONTH,
					    utc(2026, 5, 17, 13, 45, 10)),
		     first);
	/* The last second of the month still belongs to it. */
	cr_assert_eq(partition_period_start(PERIOD_MONTH,
					    utc(2026, 5, 31, 23, 59, 59)),
		     first);
	cr_assert_eq(
		partition_period_start(PERIOD_MONTH, utc(2026, 6, 1, 0, 0, 0)),
		utc(2026, 6, 1, 0, 0, 0));
	/* 31 December, late: still December. */
	cr_assert_eq(partition_period_start(PERIOD_MONTH,
					    utc(2025, 12, 31, 23, 59, 59)),
		     utc(2025, 12, 1, 0, 0, 0));
	/* 29 February of a leap year. */
	cr_assert_eq(partition_period_start(PERIOD_MONTH,
					    utc(2024, 2, 29, 23, 0, 0)),
		     utc(2024, 2, 1, 0, 0, 0));
	cr_assert_eq(partition_period_start(PERIOD_MONTH, 0), 0);
}

Test(periods, month_add_crosses_years_and_leap_februaries)
{
	int64_t dec = utc(2025, 12, 1, 0, 0, 0);
	cr_assert_eq(partition_period_add(PERIOD_MONTH, dec, 0), dec);
	cr_assert_eq(partition_period_add(PERIOD_MONTH, dec, 1),
		     utc(2026, 1, 1, 0, 0, 0));
	cr_assert_eq(partition_period_add(PERIOD_MONTH, dec, 2),
		     utc(2026, 2, 1, 0, 0, 0));
	cr_assert_eq(partition_period_add(PERIOD_MONTH, dec, 25),
		     utc(2028, 1, 1, 0, 0, 0));
	cr_assert_eq(partition_period_add(PERIOD_MONTH, dec, 120),
		     utc(2035, 12, 1, 0, 0, 0));

	/* February's length: leap, common, and the century rules. */
	struct {
		int year;
		int days;
	} feb[] = {{2024, 29}, {2025, 28}, {2000, 29}, {2100, 28}, {2028, 29}};
	for (size_t i = 0; i < sizeof(feb) / sizeof(feb[0]); i++) {
		int64_t lo = utc(feb[i].year, 2, 1, 0, 0, 0);
		int64_t hi = partition_period_add(PERIOD_MONTH, lo, 1);
		cr_assert_eq(hi, utc(feb[i].year, 3, 1, 0, 0, 0), "year %d",
			     feb[i].year);
		cr_assert_eq(hi - lo, (int64_t)feb[i].days * DAY, "year %d",
			     feb[i].year);
	}
	/* 30- and 31-day months. */
	int64_t apr = utc(2026, 4, 1, 0, 0, 0);
	cr_assert_eq(partition_period_add(PERIOD_MONTH, apr, 1) - apr,
		     30 * DAY);
	int64_t jan = utc(2026, 1, 1, 0, 0, 0);
	cr_assert_eq(partition_period_add(PERIOD_MONTH, jan, 1) - jan,
		     31 * DAY);
}

Test(periods, month_add_with_negative_steps)
{
	int64_t jan = utc(2026, 1, 1, 0, 0, 0);
	cr_assert_eq(partition_period_add(PERIOD_MONTH, jan, -1),
		     utc(2025, 12, 1, 0, 0, 0));
	cr_assert_eq(partition_period_add(PERIOD_MONTH, jan, -12),
		     utc(2025, 1, 1, 0, 0, 0));
	cr_assert_eq(partition_period_add(PERIOD_MONTH, jan, -13),
		     utc(2024, 12, 1, 0, 0, 0));
	int64_t mar = utc(2024, 3, 1, 0, 0, 0);
	cr_assert_eq(partition_period_add(PERIOD_MONTH, mar, -1),
		     utc(2024, 2, 1, 0, 0, 0));
	cr_assert_eq(partition_period_add(PERIOD_MONTH, mar, -25),
		     utc(2022, 2, 1, 0, 0, 0));
	/* The retention cutoff is the inverse of adding ahead. */
	for (int k = -40; k <= 40; k++) {
		int64_t t = partition_period_add(PERIOD_MONTH, jan, k);
		cr_assert_eq(partition_period_start(PERIOD_MONTH, t), t, "k=%d",
			     k);
		cr_assert_eq(partition_period_add(PERIOD_MONTH, t, -k), jan,
			     "k=%d", k);
	}
}

Test(periods, hours)
{
	int64_t h = utc(2026, 11, 30, 16, 0, 0);
	cr_assert_eq(partition_period_start(PERIOD_HOUR, h), h);
	cr_assert_eq(partition_period_start(PERIOD_HOUR, h + 1), h);
	cr_assert_eq(partition_period_start(PERIOD_HOUR, h + 3599), h);
	cr_assert_eq(partition_period_start(PERIOD_HOUR, h + 3600), h + 3600);
	cr_assert_eq(partition_period_start(PERIOD_HOUR, 0), 0);

	/* The last hour of a year, onwards into the next. */
	int64_t last = utc(2025, 12, 31, 23, 0, 0);
	cr_assert_eq(partition_period_start(PERIOD_HOUR,
					    utc(2025, 12, 31, 23, 59, 59)),
		     last);
	cr_assert_eq(partition_period_add(PERIOD_HOUR, last, 1),
		     utc(2026, 1, 1, 0, 0, 0));
	/* Into 29 February, and across it. */
	int64_t feb28 = utc(2024, 2, 28, 23, 0, 0);
	cr_assert_eq(partition_period_add(PERIOD_HOUR, feb28, 1),
		     utc(2024, 2, 29, 0, 0, 0));
	cr_assert_eq(partition_period_add(PERIOD_HOUR, feb28, 25),
		     utc(2024, 3, 1, 0, 0, 0));
	/* Negative steps: the 48-hour retention cutoff. */
	cr_assert_eq(partition_period_add(PERIOD_HOUR, h, -48),
		     utc(2026, 11, 28, 16, 0, 0));
	cr_assert_eq(
		partition_period_add(PERIOD_HOUR, utc(2026, 1, 1, 0, 0, 0), -1),
		utc(2025, 12, 31, 23, 0, 0));
	cr_assert_eq(partition_period_add(PERIOD_HOUR, h, 0), h);
	cr_assert_eq(partition_period_add(PERIOD_HOUR, h, 8760),
		     h + (int64_t)8760 * 3600);
}

Test(tables, config_fields_map_onto_the_four_parents)
{
	struct config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.executions_months_ahead = 3;
	cfg.events_months_ahead = 5;
	cfg.timers_hours_ahead = 24;
	cfg.executions_retention_months = 12;
	cfg.events_retention_months = 7;
	cfg.timers_retention_hours = 48;
	cfg.task_logs_months_ahead = 2;
	cfg.task_logs_retention_months = 6;

	struct partition_table t[PARTITION_TABLES];
	memset(t, 0, sizeof(t));
	partitions_tables(&cfg, t);

	cr_assert_str_eq(t[0].parent, "WorkflowExecutions");
	cr_assert_eq(t[0].period, PERIOD_MONTH);
	cr_assert_eq(t[0].ahead, 3);
	cr_assert_eq(t[0].retention, 12);

	cr_assert_str_eq(t[1].parent, "WorkflowEvents");
	cr_assert_eq(t[1].period, PERIOD_MONTH);
	cr_assert_eq(t[1].ahead, 5);
	cr_assert_eq(t[1].retention, 7);

	cr_assert_str_eq(t[2].parent, "Timers");
	cr_assert_eq(t[2].period, PERIOD_HOUR);
	cr_assert_eq(t[2].ahead, 24);
	cr_assert_eq(t[2].retention, 48);

	cr_assert_str_eq(t[3].parent, "TaskLogs");
	cr_assert_eq(t[3].period, PERIOD_MONTH);
	cr_assert_eq(t[3].ahead, 2);
	cr_assert_eq(t[3].retention, 6);
}

/* listener_parse */

static const char UUID[] = "0192f0c4-7a3b-7c1d-8e2f-0123456789ab";

static bool
parse(const char *payload, struct workflow_event_ref *ev)
{
	memset(ev, 0x5a, sizeof(*ev));
	return listener_parse(payload, ev);
}

Test(listener_parse, accepts_uuid_colon_seq)
{
	struct workflow_event_ref ev;
	char p[96];
	snprintf(p, sizeof(p), "%s:42", UUID);
	cr_assert(parse(p, &ev));
	cr_assert_str_eq(ev.workflow_id, UUID);
	cr_assert_eq(ev.seq, 42);

	snprintf(p, sizeof(p), "%s:1", UUID);
	cr_assert(parse(p, &ev));
	cr_assert_eq(ev.seq, 1);
	snprintf(p, sizeof(p), "%s:0", UUID);
	cr_assert(parse(p, &ev));
	cr_assert_eq(ev.seq, 0);
}

Test(listener_parse, accepts_upper_case_hex)
{
	struct workflow_event_ref ev;
	char p[96];
	snprintf(p, sizeof(p), "%s:7", "0192F0C4-7A3B-7C1D-8E2F-0123456789AB");
	cr_assert(parse(p, &ev));
	cr_assert_eq(strcasecmp(ev.workflow_id, UUID), 0, "got %s",
		     ev.workflow_id);
	cr_assert_eq(strlen(ev.workflow_id), 36);
	cr_assert_eq(ev.seq, 7);
}

Test(listener_parse, rejects_empty_and_null)
{
	struct workflow_event_ref ev;
	cr_assert_not(parse("", &ev));
	cr_assert_not(parse(NULL, &ev));
	cr_assert_not(parse(":", &ev));
}

Test(listener_parse, rejects_a_missing_colon_or_seq)
{
	struct workflow_event_ref ev;
	char p[96];
	cr_assert_not(parse(UUID, &ev));
	snprintf(p, sizeof(p), "%s:", UUID);
	cr_assert_not(parse(p, &ev));
	snprintf(p, sizeof(p), "%s42", UUID);
	cr_assert_not(parse(p, &ev));
	snprintf(p, sizeof(p), "%s;42", UUID);
	cr_assert_not(parse(p, &ev));
	/* The colon one place too early or too late. */
	cr_assert_not(parse("0192f0c4-7a3b-7c1d-8e2f-0123456789a:42", &ev));
	cr_assert_not(parse("0192f0c4-7a3b-7c1d-8e2f-0123456789abc:42", &ev));
}

Test(listener_parse, rejects_bad_hex_and_misplaced_dashes)
{
	struct workflow_event_ref ev;
	cr_assert_not(parse("0192f0c4-7a3b-7c1d-8e2f-0123456789ag:1", &ev));
	cr_assert_not(parse("x192f0c4-7a3b-7c1d-8e2f-0123456789ab:1", &ev));
	cr_assert_not(parse("0192f0c4 7a3b-7c1d-8e2f-0123456789ab:1", &ev));
	cr_assert_not(parse("0192f0c47a3b-7c1d-8e2f-0123456789ab-:1", &ev));
	cr_assert_not(parse("0192f0c4-7a3b-7c1d-8e2f0-123456789ab:1", &ev));
	cr_assert_not(parse("{192f0c4-7a3b-7c1d-8e2f-0123456789ab:1", &ev));
	cr_assert_not(parse("not-a-uuid:x", &ev));
}

Test(listener_parse, rejects_trailing_garbage_and_signs)
{
	struct workflow_event_ref ev;
	const char *tails[] = {"12x", "12 ", " 12",  "-1",  "+1",
			       "1:2", "1.0", "0x1f", "12\n"};
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		char p[96];
		snprintf(p, sizeof(p), "%s:%s", UUID, tails[i]);
		cr_assert_not(parse(p, &ev), "accepted \"%s\"", p);
	}
}

Test(listener_parse, seq_range_is_exactly_int64)
{
	struct workflow_event_ref ev;
	char p[96];
	snprintf(p, sizeof(p), "%s:9223372036854775807", UUID);
	cr_assert(parse(p, &ev), "INT64_MAX is a valid bigint seq");
	cr_assert_eq(ev.seq, INT64_MAX);
	snprintf(p, sizeof(p), "%s:9223372036854775800", UUID);
	cr_assert(parse(p, &ev));
	cr_assert_eq(ev.seq, INT64_MAX - 7);
	snprintf(p, sizeof(p), "%s:922337203685477580", UUID);
	cr_assert(parse(p, &ev));
	cr_assert_eq(ev.seq, INT64_MAX / 10);

	snprintf(p, sizeof(p), "%s:9223372036854775808", UUID);
	cr_assert_not(parse(p, &ev), "INT64_MAX + 1 overflows");
	snprintf(p, sizeof(p), "%s:9223372036854775810", UUID);
	cr_assert_not(parse(p, &ev));
	snprintf(p, sizeof(p), "%s:99999999999999999999", UUID);
	cr_assert_not(parse(p, &ev));
	snprintf(p, sizeof(p), "%s:18446744073709551617", UUID);
	cr_assert_not(parse(p, &ev), "wraps around uint64");
}
