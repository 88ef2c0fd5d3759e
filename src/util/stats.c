/*
 * stats.c - medians and quantiles of measured values (see stats.h).
 */
#include "reverie/stats.h"

static gint compare_int64(gconstpointer left, gconstpointer right)
{
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return a < b ? -1 : a > b;
}

void rv_sort_int64(GArray *values)
{
    g_array_sort(values, compare_int64);
}

int64_t rv_median_int64(GArray *values, int64_t fallback)
{
    if (values->len == 0) return fallback;
    g_array_sort(values, compare_int64);
    return g_array_index(values, int64_t, values->len / 2);
}

/* Hoare's selection: afterwards values[k] is what sorting would put there. */
static void select_kth(int64_t *values, gsize count, gsize k)
{
    gsize low = 0, high = count - 1;
    while (low < high) {
        int64_t pivot = values[low + (high - low) / 2];
        gsize i = low, j = high;
        while (i <= j) {
            while (values[i] < pivot) i++;
            while (values[j] > pivot) j--;
            if (i <= j) {
                int64_t swap = values[i];
                values[i] = values[j];
                values[j] = swap;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        /* now [low, j] <= pivot <= [i, high], and j < i */
        if (k <= j) high = j;
        else if (k >= i) low = i;
        else return;
    }
}

int64_t rv_median_int64_select(GArray *values, int64_t fallback)
{
    if (values->len == 0) return fallback;
    select_kth((int64_t *)values->data, values->len, values->len / 2);
    return g_array_index(values, int64_t, values->len / 2);
}

int64_t rv_quantile_int64(GArray *values, double q, int64_t fallback)
{
    if (values->len == 0) return fallback;
    double clamped = q < 0 ? 0 : q > 1 ? 1 : q;
    guint k = (guint)(clamped * (values->len - 1));
    select_kth((int64_t *)values->data, values->len, k);
    return g_array_index(values, int64_t, k);
}
