/*
 * checked.h - the limits reverie puts on times and sizes, and arithmetic
 * that says when a result would leave them instead of wrapping.
 *
 * Trace values, plugin parameters and plugin results meet in sums and
 * products (a duration times a factor, bytes over a bandwidth, a total over
 * all tasks).  Signed overflow there is undefined behaviour in C and, in
 * practice, a negative duration that the simulator turns into a confident
 * wrong answer.  Every such step goes through these functions, which return
 * FALSE (and leave *out alone) when the result does not fit; the caller
 * turns that into one error line: exit 2 when the data is to blame, exit 1
 * when a parameter is.
 *
 * The limits are far beyond any real recording and far inside int64, so
 * that sums of a whole graph's durations cannot overflow:
 *   RV_MAX_DURATION_NS  one task: 10^15 ns (11.6 days), the importer's limit
 *                       on one event's "dur" (10^12 us);
 *   RV_MAX_WORK_NS      all the durations of one graph together: 2^61 ns
 *                       (73 years), the bound saved graphs already obey;
 *   RV_MAX_BYTES        one task's payload: 2^53 bytes (8 PiB), the largest
 *                       integer a double holds exactly.
 */
#ifndef REVERIE_CHECKED_H
#define REVERIE_CHECKED_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

#define RV_MAX_DURATION_NS ((int64_t)1000000000000000)
#define RV_MAX_WORK_NS ((int64_t)1 << 61)
#define RV_MAX_BYTES ((int64_t)1 << 53)
/* 2^53: every whole number below it in size is exact in a double, and the
 * text of 2^53 + 1 already reads as 2^53. */
#define RV_MAX_EXACT_INTEGER 9007199254740992.0

/* a + b and a * b, or FALSE if the exact result does not fit in int64. */
gboolean rv_checked_add(int64_t a, int64_t b, int64_t *out);
gboolean rv_checked_mul(int64_t a, int64_t b, int64_t *out);

/* a + b, clamped to [INT64_MIN, INT64_MAX]: for totals that are only shown.
 * Inline (C99: checked.c holds the one external definition), because the
 * reports call it per task and rank. */
inline int64_t rv_saturating_add(int64_t a, int64_t b)
{
    int64_t sum;
    if (!__builtin_add_overflow(a, b, &sum)) return sum;
    return b > 0 ? INT64_MAX : INT64_MIN;
}
/* a - b, clamped the same way. */
inline int64_t rv_saturating_sub(int64_t a, int64_t b)
{
    int64_t difference;
    if (!__builtin_sub_overflow(a, b, &difference)) return difference;
    return b < 0 ? INT64_MAX : INT64_MIN;
}

/* value rounded to the nearest integer, or FALSE if it is NaN, infinite or
 * outside int64 (a plain cast would be undefined behaviour). */
gboolean rv_checked_round(double value, int64_t *out);

/* A duration computed in floating point, rounded to whole nanoseconds:
 * FALSE unless 0 <= round(ns) <= RV_MAX_DURATION_NS. */
gboolean rv_checked_duration(double ns, int64_t *out);

/* "11.6 days"-style text for a number of nanoseconds far beyond a second,
 * for messages about the limits (g_free). */
char *rv_describe_long_duration(double ns);

G_END_DECLS

#endif
