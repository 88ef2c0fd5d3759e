/*
 * checked.c - arithmetic on times and sizes that reports overflow instead
 * of wrapping (see include/reverie/checked.h).
 */
#include "reverie/checked.h"
#include <math.h>

/* 2^63 as a double: the first value that does not fit in int64_t. */
#define INT64_LIMIT 9223372036854775808.0

gboolean rv_checked_add(int64_t a, int64_t b, int64_t *out)
{
    int64_t sum;
    if (__builtin_add_overflow(a, b, &sum)) return FALSE;
    *out = sum;
    return TRUE;
}

gboolean rv_checked_mul(int64_t a, int64_t b, int64_t *out)
{
    int64_t product;
    if (__builtin_mul_overflow(a, b, &product)) return FALSE;
    *out = product;
    return TRUE;
}

/* The external definitions of checked.h's inline functions. */
extern inline int64_t rv_saturating_add(int64_t a, int64_t b);
extern inline int64_t rv_saturating_sub(int64_t a, int64_t b);

gboolean rv_checked_round(double value, int64_t *out)
{
    if (!isfinite(value)) return FALSE;
    double rounded = round(value);
    /* -2^63 is exact in a double and fits; 2^63 does not. */
    if (rounded < -INT64_LIMIT || rounded >= INT64_LIMIT) return FALSE;
    *out = (int64_t)rounded;
    return TRUE;
}

gboolean rv_checked_duration(double ns, int64_t *out)
{
    int64_t rounded;
    if (!rv_checked_round(ns, &rounded) || rounded < 0 || rounded > RV_MAX_DURATION_NS) return FALSE;
    *out = rounded;
    return TRUE;
}

char *rv_describe_long_duration(double ns)
{
    double magnitude = fabs(ns);
    if (!isfinite(ns)) return g_strdup(ns > 0 ? "forever" : ns < 0 ? "minus forever" : "not a number");
    if (magnitude < 1e9) return g_strdup_printf("%.3g ns", ns);
    if (magnitude < 86400e9) return g_strdup_printf("%.3g s", ns / 1e9);
    if (magnitude < 365.25 * 86400e9) return g_strdup_printf("%.3g days", ns / 86400e9);
    return g_strdup_printf("%.3g years", ns / (365.25 * 86400e9));
}
