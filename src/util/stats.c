/*
 * stats.c - medians of measured values (see stats.h).
 */
#include "reverie/stats.h"

static gint compare_int64(gconstpointer left, gconstpointer right)
{
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return a < b ? -1 : a > b;
}

int64_t rv_median_int64(GArray *values, int64_t fallback)
{
    if (values->len == 0) return fallback;
    g_array_sort(values, compare_int64);
    return g_array_index(values, int64_t, values->len / 2);
}
