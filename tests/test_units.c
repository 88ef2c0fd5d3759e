/*
** test_units.c — Check tests for parsing and formatting quantities with
** units (src/util/units.c): every accepted unit, the errors for bad input
** and the report formatting.
*/
#include "reverie/units.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Asserts that parsing failed with the given code and that the message
** contains want (typically the offending text and the expectation). */
static void assert_error(GError *error, int code, const char *want)
{
  ck_assert_ptr_nonnull(error);
  ck_assert(error->domain == RV_UNITS_ERROR);
  ck_assert_msg(error->code == code, "code %d, expected %d: %s",
                error->code, code, error->message);
  ck_assert_msg(strstr(error->message, want) != NULL,
                "message \"%s\" lacks \"%s\"", error->message, want);
  g_error_free(error);
}

static int64_t duration_ok(const char *text)
{
  int64_t ns = -1;
  GError *error = NULL;
  ck_assert_msg(rv_parse_duration_ns(text, &ns, &error), "\"%s\": %s", text,
                error ? error->message : "");
  return ns;
}

static void duration_fails(const char *text, int code, const char *want)
{
  int64_t ns = 42;
  GError *error = NULL;
  ck_assert(!rv_parse_duration_ns(text, &ns, &error));
  ck_assert_int_eq(ns, 42); /* output untouched on failure */
  assert_error(error, code, want);
}

static int64_t bytes_ok(const char *text)
{
  int64_t bytes = -1;
  GError *error = NULL;
  ck_assert_msg(rv_parse_bytes(text, &bytes, &error), "\"%s\": %s", text,
                error ? error->message : "");
  return bytes;
}

static void bytes_fails(const char *text, int code, const char *want)
{
  int64_t bytes;
  GError *error = NULL;
  ck_assert(!rv_parse_bytes(text, &bytes, &error));
  assert_error(error, code, want);
}

static double bandwidth_ok(const char *text)
{
  double rate = -1;
  GError *error = NULL;
  ck_assert_msg(rv_parse_bandwidth(text, &rate, &error), "\"%s\": %s", text,
                error ? error->message : "");
  return rate;
}

static void bandwidth_fails(const char *text, int code, const char *want)
{
  double rate;
  GError *error = NULL;
  ck_assert(!rv_parse_bandwidth(text, &rate, &error));
  assert_error(error, code, want);
}

static double number_ok(const char *text)
{
  double v = -1;
  GError *error = NULL;
  ck_assert_msg(rv_parse_number(text, &v, &error), "\"%s\": %s", text,
                error ? error->message : "");
  return v;
}

static void number_fails(const char *text, int code, const char *want)
{
  double v;
  GError *error = NULL;
  ck_assert(!rv_parse_number(text, &v, &error));
  assert_error(error, code, want);
}

/* Compares a formatted string and frees it. */
static void assert_format(char *got, const char *want)
{
  ck_assert_str_eq(got, want);
  g_free(got);
}

/* ---- numbers ---- */

START_TEST(number_accepts_decimals)
{
  ck_assert_double_eq(number_ok("1.5"), 1.5);
  ck_assert_double_eq(number_ok("3"), 3.0);
  ck_assert_double_eq(number_ok("-2"), -2.0);
  ck_assert_double_eq(number_ok("+4"), 4.0);
  ck_assert_double_eq(number_ok(".25"), 0.25);
  ck_assert_double_eq(number_ok("5."), 5.0);
  ck_assert_double_eq(number_ok("1e-3"), 1e-3);
  ck_assert_double_eq(number_ok("2.5E2"), 250.0);
  ck_assert_double_eq(number_ok("  7 "), 7.0);
}
END_TEST

START_TEST(number_rejects_junk)
{
  number_fails("1.5x", RV_UNITS_ERROR_SYNTAX, "\"1.5x\"");
  number_fails("1 2", RV_UNITS_ERROR_SYNTAX, "\"2\"");
  number_fails("nan", RV_UNITS_ERROR_SYNTAX, "\"nan\"");
  number_fails("NaN", RV_UNITS_ERROR_SYNTAX, "expected a decimal number");
  number_fails("inf", RV_UNITS_ERROR_SYNTAX, "\"inf\"");
  number_fails("-infinity", RV_UNITS_ERROR_SYNTAX, "\"-infinity\"");
  number_fails("0x1p3", RV_UNITS_ERROR_SYNTAX, "\"0x1p3\"");
  number_fails(".", RV_UNITS_ERROR_SYNTAX, "\".\"");
  number_fails("1e999", RV_UNITS_ERROR_RANGE, "too large");
  number_fails("", RV_UNITS_ERROR_EMPTY, "empty number");
  number_fails("   ", RV_UNITS_ERROR_EMPTY, "empty number");
  number_fails(NULL, RV_UNITS_ERROR_EMPTY, "empty number");
}
END_TEST

/* ---- durations ---- */

START_TEST(duration_units)
{
  ck_assert_int_eq(duration_ok("300ns"), 300);
  ck_assert_int_eq(duration_ok("5us"), 5000);
  ck_assert_int_eq(duration_ok("7\xc2\xb5s"), 7000);   /* micro sign */
  ck_assert_int_eq(duration_ok("7\xce\xbcs"), 7000);   /* greek mu */
  ck_assert_int_eq(duration_ok("2ms"), 2000000);
  ck_assert_int_eq(duration_ok("1.5s"), 1500000000);
  ck_assert_int_eq(duration_ok("2 ms"), 2000000);
  ck_assert_int_eq(duration_ok(" 5us "), 5000);
  ck_assert_int_eq(duration_ok("0s"), 0);
  ck_assert_int_eq(duration_ok("-0us"), 0);
  ck_assert_int_eq(duration_ok("1e3ns"), 1000);
  ck_assert_int_eq(duration_ok("0.25us"), 250);
  /* Sub-nanosecond values round to the nearest ns, halves away from 0. */
  ck_assert_int_eq(duration_ok("0.5ns"), 1);
  ck_assert_int_eq(duration_ok("1.4ns"), 1);
  ck_assert_int_eq(duration_ok("9000000000s"), INT64_C(9000000000000000000));
}
END_TEST

START_TEST(duration_errors)
{
  /* A bare number is ambiguous, so a unit is required. */
  duration_fails("5", RV_UNITS_ERROR_UNIT,
                 "\"5\": missing duration unit (expected one of ns, us");
  duration_fails("5xs", RV_UNITS_ERROR_UNIT,
                 "\"5xs\": unknown duration unit \"xs\" (expected one of");
  duration_fails("5 us extra", RV_UNITS_ERROR_UNIT, "\"us extra\"");
  duration_fails("5US", RV_UNITS_ERROR_UNIT, "\"US\"");
  duration_fails("0x10us", RV_UNITS_ERROR_UNIT, "\"x10us\"");
  duration_fails("-5us", RV_UNITS_ERROR_RANGE,
                 "\"-5us\": duration must not be negative");
  duration_fails("9300000000s", RV_UNITS_ERROR_RANGE, "too large");
  /* 2^63 ns is one past INT64_MAX. */
  duration_fails("9223372036854775808ns", RV_UNITS_ERROR_RANGE, "too large");
  duration_fails("1e999s", RV_UNITS_ERROR_RANGE, "too large");
  duration_fails("nan s", RV_UNITS_ERROR_SYNTAX, "\"nan s\"");
  duration_fails("inf s", RV_UNITS_ERROR_SYNTAX, "not a valid duration");
  duration_fails("us", RV_UNITS_ERROR_SYNTAX, "\"us\"");
  duration_fails("", RV_UNITS_ERROR_EMPTY, "empty duration");
  duration_fails(NULL, RV_UNITS_ERROR_EMPTY, "empty duration");
}
END_TEST

/* ---- sizes ---- */

START_TEST(bytes_units)
{
  ck_assert_int_eq(bytes_ok("512B"), 512);
  ck_assert_int_eq(bytes_ok("0B"), 0);
  ck_assert_int_eq(bytes_ok("4kB"), 4000);
  ck_assert_int_eq(bytes_ok("4KB"), 4000);
  ck_assert_int_eq(bytes_ok("25MB"), 25000000);
  ck_assert_int_eq(bytes_ok("1.5GB"), 1500000000);
  ck_assert_int_eq(bytes_ok("2TB"), INT64_C(2000000000000));
  ck_assert_int_eq(bytes_ok("1PB"), INT64_C(1000000000000000));
  ck_assert_int_eq(bytes_ok("4KiB"), 4096);
  ck_assert_int_eq(bytes_ok("0.5KiB"), 512);
  ck_assert_int_eq(bytes_ok("25MiB"), 25 * 1048576);
  ck_assert_int_eq(bytes_ok("1GiB"), INT64_C(1073741824));
  ck_assert_int_eq(bytes_ok("3TiB"), INT64_C(3) << 40);
  ck_assert_int_eq(bytes_ok("1PiB"), INT64_C(1) << 50);
  ck_assert_int_eq(bytes_ok("25 MiB"), 25 * 1048576);
}
END_TEST

START_TEST(bytes_errors)
{
  bytes_fails("25XB", RV_UNITS_ERROR_UNIT,
              "\"25XB\": unknown size unit \"XB\" (expected one of B, KB");
  bytes_fails("10Gb", RV_UNITS_ERROR_UNIT, "\"Gb\"");   /* bits are rates */
  bytes_fails("25", RV_UNITS_ERROR_UNIT, "\"25\": missing size unit (expected one of B, KB"); /* not 25 bytes */
  bytes_fails("0", RV_UNITS_ERROR_UNIT, "missing size unit");
  bytes_fails("1.5B", RV_UNITS_ERROR_RANGE, "not a whole number of bytes");
  bytes_fails("-1MB", RV_UNITS_ERROR_RANGE, "size must not be negative");
  bytes_fails("10000PB", RV_UNITS_ERROR_RANGE, "too large");
  bytes_fails("8EiB", RV_UNITS_ERROR_UNIT, "\"EiB\"");
  bytes_fails("8192PiB", RV_UNITS_ERROR_RANGE, "too large"); /* = 2^63 */
  bytes_fails("MiB", RV_UNITS_ERROR_SYNTAX, "\"MiB\"");
  bytes_fails("nan", RV_UNITS_ERROR_SYNTAX, "not a valid size");
  bytes_fails("", RV_UNITS_ERROR_EMPTY, "empty size");
}
END_TEST

/* ---- bandwidths ---- */

START_TEST(bandwidth_byte_units)
{
  ck_assert_double_eq(bandwidth_ok("512B/s"), 512.0);
  ck_assert_double_eq(bandwidth_ok("2KB/s"), 2e3);
  ck_assert_double_eq(bandwidth_ok("2kB/s"), 2e3);
  ck_assert_double_eq(bandwidth_ok("100 MB/s"), 100e6);
  ck_assert_double_eq(bandwidth_ok("25GB/s"), 25e9);
  ck_assert_double_eq(bandwidth_ok("1TB/s"), 1e12);
  ck_assert_double_eq(bandwidth_ok("1KiB/s"), 1024.0);
  ck_assert_double_eq(bandwidth_ok("1MiB/s"), 1048576.0);
  ck_assert_double_eq(bandwidth_ok("12.5GiB/s"), 12.5 * 1073741824.0);
  ck_assert_double_eq(bandwidth_ok("2TiB/s"), 2.0 * 1099511627776.0);
  ck_assert_double_eq(bandwidth_ok("25GBps"), 25e9);
}
END_TEST

START_TEST(bandwidth_bit_units)
{
  /* Bits per second are divided by 8. */
  ck_assert_double_eq(bandwidth_ok("8bps"), 1.0);
  ck_assert_double_eq(bandwidth_ok("8b/s"), 1.0);
  ck_assert_double_eq(bandwidth_ok("8Kbps"), 1e3);
  ck_assert_double_eq(bandwidth_ok("8kbps"), 1e3);
  ck_assert_double_eq(bandwidth_ok("400Mbps"), 50e6);
  ck_assert_double_eq(bandwidth_ok("100Gbps"), 12.5e9);
  ck_assert_double_eq(bandwidth_ok("10Gb/s"), 1.25e9);
  ck_assert_double_eq(bandwidth_ok("1.6Tbps"), 200e9);
  ck_assert_double_eq(bandwidth_ok("8Tb/s"), 1e12);
  ck_assert_double_eq(bandwidth_ok("200Gbit/s"), 25e9);
}
END_TEST

START_TEST(bandwidth_errors)
{
  GError *error = NULL;
  double rate;
  ck_assert(!rv_parse_bandwidth("25XB/s", &rate, &error));
  ck_assert_int_eq(error->code, RV_UNITS_ERROR_UNIT);
  ck_assert_str_eq(error->message,
                   "\"25XB/s\": unknown bandwidth unit \"XB/s\" (expected "
                   "one of B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, "
                   "TiB/s, bps, Kbps, Mbps, Gbps, Tbps, Kb/s, Mb/s, Gb/s, "
                   "Tb/s)");
  g_error_free(error);

  bandwidth_fails("25", RV_UNITS_ERROR_UNIT,
                  "\"25\": missing bandwidth unit");
  bandwidth_fails("25 gb/s", RV_UNITS_ERROR_UNIT, "\"gb/s\"");
  bandwidth_fails("25GB", RV_UNITS_ERROR_UNIT, "\"GB\"");
  bandwidth_fails("0GB/s", RV_UNITS_ERROR_RANGE, "greater than zero");
  bandwidth_fails("-1GB/s", RV_UNITS_ERROR_RANGE, "greater than zero");
  bandwidth_fails("1e308TB/s", RV_UNITS_ERROR_RANGE, "too large");
  bandwidth_fails("Gbps", RV_UNITS_ERROR_SYNTAX, "\"Gbps\"");
  bandwidth_fails("inf GB/s", RV_UNITS_ERROR_SYNTAX, "\"inf GB/s\"");
  bandwidth_fails("", RV_UNITS_ERROR_EMPTY, "empty bandwidth");
}
END_TEST

/* ---- generic entry point ---- */

START_TEST(quantity_dispatches_on_kind)
{
  double v;
  ck_assert(rv_parse_quantity(RV_UNIT_NONE, "1.5", &v, NULL));
  ck_assert_double_eq(v, 1.5);
  ck_assert(rv_parse_quantity(RV_UNIT_TIME, "5us", &v, NULL));
  ck_assert_double_eq(v, 5000.0);
  ck_assert(rv_parse_quantity(RV_UNIT_BYTES, "4KiB", &v, NULL));
  ck_assert_double_eq(v, 4096.0);
  ck_assert(rv_parse_quantity(RV_UNIT_BANDWIDTH, "100Gbps", &v, NULL));
  ck_assert_double_eq(v, 12.5e9);
  GError *error = NULL;
  ck_assert(!rv_parse_quantity(RV_UNIT_TIME, "5", &v, &error));
  assert_error(error, RV_UNITS_ERROR_UNIT, "missing duration unit");
  ck_assert_str_eq(rv_unit_kind_name(RV_UNIT_NONE), "number");
  ck_assert_str_eq(rv_unit_kind_name(RV_UNIT_TIME), "duration");
  ck_assert_str_eq(rv_unit_kind_name(RV_UNIT_BYTES), "size");
  ck_assert_str_eq(rv_unit_kind_name(RV_UNIT_BANDWIDTH), "bandwidth");
}
END_TEST

/* ---- formatting ---- */

START_TEST(format_duration)
{
  assert_format(rv_format_duration(0), "0 ns");
  assert_format(rv_format_duration(512), "512 ns");
  assert_format(rv_format_duration(999), "999 ns");
  assert_format(rv_format_duration(1000), "1.0 us");
  assert_format(rv_format_duration(87000), "87.0 us");
  assert_format(rv_format_duration(1234000), "1.234 ms");
  assert_format(rv_format_duration(2500000000), "2.500 s");
  assert_format(rv_format_duration(-1500), "-1.5 us");
  /* 999.96 us would print as "1000.0 us"; it moves up a unit instead. */
  assert_format(rv_format_duration(999960), "1.000 ms");
  assert_format(rv_format_duration(INT64_C(120000000000)), "120.000 s");
}
END_TEST

START_TEST(format_bytes)
{
  assert_format(rv_format_bytes(0), "0 B");
  assert_format(rv_format_bytes(512), "512 B");
  assert_format(rv_format_bytes(1023), "1023 B");
  assert_format(rv_format_bytes(1024), "1.00 KiB");
  assert_format(rv_format_bytes(1536), "1.50 KiB");
  assert_format(rv_format_bytes(25 * 1048576), "25.00 MiB");
  assert_format(rv_format_bytes(INT64_C(1073741824)), "1.00 GiB");
  assert_format(rv_format_bytes(1048575), "1.00 MiB");
  assert_format(rv_format_bytes(-2048), "-2.00 KiB");
  assert_format(rv_format_bytes(INT64_MAX), "8.00 EiB");
}
END_TEST

START_TEST(format_bandwidth)
{
  assert_format(rv_format_bandwidth(0.0), "0 B/s");
  assert_format(rv_format_bandwidth(512.0), "512 B/s");
  assert_format(rv_format_bandwidth(999.6), "1.00 KB/s");
  assert_format(rv_format_bandwidth(12.5e9), "12.50 GB/s");
  assert_format(rv_format_bandwidth(450e9), "450.00 GB/s");
  assert_format(rv_format_bandwidth(1e15), "1.00 PB/s");
  assert_format(rv_format_bandwidth(-3e6), "-3.00 MB/s");
  assert_format(rv_format_bandwidth(INFINITY), "inf B/s");
  assert_format(rv_format_bandwidth(NAN), "nan B/s");
}
END_TEST

START_TEST(format_parses_back)
{
  /* Report strings ("25.00 GB/s") use units the parser accepts, so a
  ** value copied from a report back into a parameter means the same. */
  char *text = rv_format_bandwidth(25e9);
  ck_assert_double_eq(bandwidth_ok(text), 25e9);
  g_free(text);
  text = rv_format_bytes(25 * 1048576);
  ck_assert_int_eq(bytes_ok(text), 25 * 1048576);
  g_free(text);
  text = rv_format_duration(1234000);
  ck_assert_int_eq(duration_ok(text), 1234000);
  g_free(text);
}
END_TEST

static Suite *units_suite(void)
{
  Suite *s = suite_create("units");
  TCase *parse = tcase_create("parse");
  tcase_add_test(parse, number_accepts_decimals);
  tcase_add_test(parse, number_rejects_junk);
  tcase_add_test(parse, duration_units);
  tcase_add_test(parse, duration_errors);
  tcase_add_test(parse, bytes_units);
  tcase_add_test(parse, bytes_errors);
  tcase_add_test(parse, bandwidth_byte_units);
  tcase_add_test(parse, bandwidth_bit_units);
  tcase_add_test(parse, bandwidth_errors);
  tcase_add_test(parse, quantity_dispatches_on_kind);
  suite_add_tcase(s, parse);
  TCase *format = tcase_create("format");
  tcase_add_test(format, format_duration);
  tcase_add_test(format, format_bytes);
  tcase_add_test(format, format_bandwidth);
  tcase_add_test(format, format_parses_back);
  suite_add_tcase(s, format);
  return s;
}

int main(void)
{
  SRunner *runner = srunner_create(units_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
