/*
 * seqpoint.c - SeqPoint (seqpoint.h): input lengths of a trace's steps
 * from their shapes or a file, bins of an epoch's lengths by exact
 * one-dimensional k-means, one representative step per bin, and the
 * epoch projected from them.
 */
#include "reverie/seqpoint.h"
#include "reverie/checked.h"
#include "reverie/error.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shaped forward calls read per step: a sequence model's input enters in
 * its first few operators. */
#define CALLS_PER_STEP 256
/* Distinct lengths the k-means splits exactly; more are first merged into
 * this many runs of equal iteration counts (bins split between runs). */
#define MAX_GROUPS 4096

/* ---- lengths from shapes -------------------------------------------------- */

typedef struct {
    int32_t op, dims;
} shaped_call;

/* A live forward kernel with shapes, in a step: list 0 (rv_step_lists). */
static int shaped_forward_kernel(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)graph;
    (void)id;
    (void)data;
    return (task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_KERNEL || task->step < 0 ||
                   task->phase != RV_PHASE_FORWARD || task->input_dims < 0
               ? -1
               : 0;
}

/* Each step's shaped forward kernels, in recorded order (at most CALLS_PER_STEP). */
static GPtrArray *shaped_calls_by_step(const rv_graph *graph)
{
    rv_step_lists by_step = rv_step_lists_new(graph, 1, shaped_forward_kernel, NULL);
    GPtrArray *steps = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint s = 0; s < graph->steps->len; s++) {
        GArray *calls = g_array_new(FALSE, FALSE, sizeof(shaped_call));
        GArray *ids = rv_step_lists_get(&by_step, (int32_t)s, 0);
        g_array_sort_with_data(ids, rv_task_compare_recorded, (gpointer)graph);
        for (guint i = 0; i < ids->len && calls->len < CALLS_PER_STEP; i++) {
            const rv_task *task = &g_array_index(graph->tasks, rv_task, g_array_index(ids, int32_t, i));
            shaped_call call = { task->op, task->input_dims };
            g_array_append_val(calls, call);
        }
        g_ptr_array_add(steps, calls);
    }
    rv_step_lists_free(&by_step);
    return steps;
}

/* The call at `at` in every step: the same operator, and shapes that
 * differ somewhere? */
static gboolean varies_at(const GPtrArray *steps, guint at)
{
    const shaped_call *first = &g_array_index((GArray *)g_ptr_array_index(steps, 0), shaped_call, at);
    gboolean differs = FALSE;
    for (guint s = 1; s < steps->len; s++) {
        const shaped_call *call = &g_array_index((GArray *)g_ptr_array_index(steps, s), shaped_call, at);
        if (call->op != first->op) return FALSE;
        differs = differs || call->dims != first->dims;
    }
    return differs;
}

/* The first input whose extents differ between steps, with those axes
 * (bits); FALSE when ranks differ or no input differs. */
static gboolean varying_axes(const rv_graph *graph, const GPtrArray *steps, guint at, guint *input, uint64_t *axes)
{
    guint count = steps->len;
    rv_shapes *shapes = g_new0(rv_shapes, count);
    gboolean parsed = TRUE;
    for (guint s = 0; s < count && parsed; s++) {
        int32_t dims = g_array_index((GArray *)g_ptr_array_index(steps, s), shaped_call, at).dims;
        parsed = rv_shapes_parse(rv_strings_get(graph->strings, dims), &shapes[s]);
    }
    gboolean found = FALSE;
    for (guint i = 0; parsed && !found && i < rv_shapes_count(&shapes[0]); i++) {
        guint rank = rv_shapes_rank(&shapes[0], i);
        gboolean same_rank = rank > 0 && rank <= 64;
        for (guint s = 1; s < count && same_rank; s++)
            same_rank = rv_shapes_count(&shapes[s]) > i && rv_shapes_rank(&shapes[s], i) == rank;
        if (!same_rank) continue;
        uint64_t bits = 0;
        for (guint d = 0; d < rank; d++)
            for (guint s = 1; s < count; s++)
                if (rv_shapes_extent(&shapes[s], i, d) != rv_shapes_extent(&shapes[0], i, d)) bits |= (uint64_t)1 << d;
        if (bits) {
            *input = i;
            *axes = bits;
            found = TRUE;
        }
    }
    for (guint s = 0; s < count; s++) rv_shapes_clear(&shapes[s]);
    g_free(shapes);
    return found;
}

/* Each step's length: the product of the varying axes of that input. */
static void read_lengths(const rv_graph *graph, const GPtrArray *steps, guint at, guint input, uint64_t axes,
                         GArray *lengths)
{
    for (guint s = 0; s < steps->len; s++) {
        rv_shapes shapes;
        int32_t dims = g_array_index((GArray *)g_ptr_array_index(steps, s), shaped_call, at).dims;
        int64_t length = 1;
        if (rv_shapes_parse(rv_strings_get(graph->strings, dims), &shapes))
            for (guint d = 0; d < 64; d++)
                if ((axes >> d) & 1) {
                    int64_t extent = rv_shapes_extent(&shapes, input, d);
                    if (!rv_checked_mul(length, MAX(extent, 1), &length)) length = RV_MAX_BYTES;
                }
        rv_shapes_clear(&shapes);
        length = MIN(length, RV_MAX_BYTES);
        g_array_append_val(lengths, length);
    }
}

static void describe_axes(GString *how, uint64_t axes)
{
    gboolean first = TRUE;
    for (guint d = 0; d < 64; d++)
        if ((axes >> d) & 1) {
            g_string_append_printf(how, "%s%u", first ? "" : " x ", d);
            first = FALSE;
        }
}

gboolean rv_seqpoint_lengths_from_shapes(const rv_graph *graph, GArray *lengths, GString *how, GError **error)
{
    if (graph->steps->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: no ProfilerStep annotations: no iterations to tell apart",
                    graph->source);
        return FALSE;
    }
    GPtrArray *steps = shaped_calls_by_step(graph);
    guint common = CALLS_PER_STEP;
    for (guint s = 0; s < steps->len; s++) common = MIN(common, ((GArray *)g_ptr_array_index(steps, s))->len);
    if (common == 0) {
        g_ptr_array_unref(steps);
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: a step has no forward kernel with Input Dims (record with record_shapes=True, or give the "
                    "lengths in a file)", graph->source);
        return FALSE;
    }
    guint input = 0;
    uint64_t axes = 0;
    for (guint at = 0; at < common && steps->len > 1; at++) {
        if (!varies_at(steps, at) || !varying_axes(graph, steps, at, &input, &axes)) continue;
        read_lengths(graph, steps, at, input, axes, lengths);
        int32_t op = g_array_index((GArray *)g_ptr_array_index(steps, 0), shaped_call, at).op;
        g_string_append_printf(how, "the shapes: %s (shaped forward call %u of each step), input %u, axis ",
                               op > 0 ? rv_strings_get(graph->strings, op) : "an operator", at + 1, input);
        describe_axes(how, axes);
        g_ptr_array_unref(steps);
        return TRUE;
    }
    g_ptr_array_unref(steps);
    for (guint s = 0; s < graph->steps->len; s++) {
        int64_t one = 1;
        g_array_append_val(lengths, one);
    }
    g_string_append_printf(how, "the shapes: the first %u shaped forward calls of every step have the same shapes, "
                           "so every step counts as one length", common);
    return TRUE;
}

/* ---- lengths from a file ---------------------------------------------------- */

gboolean rv_seqpoint_lengths_read(const char *path, GArray *lengths, GError **error)
{
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: cannot read: %s", path, g_strerror(errno));
        return FALSE;
    }
    char *line = NULL;
    size_t capacity = 0;
    gboolean ok = TRUE;
    for (uint64_t number = 1; ok && getline(&line, &capacity, file) >= 0; number++) {
        char *comment = strchr(line, '#');
        if (comment) *comment = '\0';
        char *saveptr = NULL;
        for (char *word = strtok_r(line, " \t\r\n,", &saveptr); ok && word; word = strtok_r(NULL, " \t\r\n,", &saveptr)) {
            char *end = NULL;
            errno = 0;
            long long value = strtoll(word, &end, 10);
            if (errno != 0 || *end != '\0' || value < 1 || value > RV_MAX_BYTES) {
                g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                            "%s:%" G_GUINT64_FORMAT ": '%.40s' is not a length (a whole number from 1 to 2^53)", path,
                            number, word);
                ok = FALSE;
            } else {
                int64_t length = value;
                g_array_append_val(lengths, length);
            }
        }
    }
    if (ok && ferror(file)) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: read failed: %s", path, g_strerror(errno));
        ok = FALSE;
    }
    free(line);
    fclose(file);
    if (ok && lengths->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: no lengths in the file", path);
        ok = FALSE;
    }
    return ok;
}

/* ---- bins ------------------------------------------------------------------------ */

/* Distinct lengths (or runs of them) with their iteration counts, and
 * prefix sums for the cost of any contiguous bin. */
typedef struct {
    guint count;
    int64_t *low, *high;         /* each group's lengths */
    double *w, *s1, *s2;         /* prefix sums: iterations, length, length^2 (index 0: empty) */
} groups;

static gint compare_int64(gconstpointer a, gconstpointer b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static guint distinct_lengths(const int64_t *sorted, guint n)
{
    guint distinct = 0;
    for (guint i = 0; i < n; i++) distinct += i == 0 || sorted[i] != sorted[i - 1];
    return distinct;
}

/* Distinct lengths of the sorted epoch; past MAX_GROUPS, runs of about
 * equal iteration counts that never split a length. */
static void groups_make(groups *g, const int64_t *sorted, guint n)
{
    guint distinct = distinct_lengths(sorted, n);
    double per_group = distinct > MAX_GROUPS ? (double)n / MAX_GROUPS : 0;
    g->low = g_new(int64_t, MIN(distinct, MAX_GROUPS) + 1);
    g->high = g_new(int64_t, MIN(distinct, MAX_GROUPS) + 1);
    g->w = g_new0(double, MIN(distinct, MAX_GROUPS) + 2);
    g->s1 = g_new0(double, MIN(distinct, MAX_GROUPS) + 2);
    g->s2 = g_new0(double, MIN(distinct, MAX_GROUPS) + 2);
    g->count = 0;
    double w = 0, s1 = 0, s2 = 0;
    for (guint i = 0; i < n; i++) {
        gboolean new_length = i == 0 || sorted[i] != sorted[i - 1];
        gboolean full = g->count > 0 && (per_group == 0 || w - g->w[g->count - 1] >= per_group);
        if (i == 0 || (new_length && full && g->count < MAX_GROUPS)) {
            if (g->count > 0) { g->w[g->count] = w; g->s1[g->count] = s1; g->s2[g->count] = s2; }
            g->low[g->count++] = sorted[i];
        }
        g->high[g->count - 1] = sorted[i];
        double x = (double)sorted[i];
        w += 1;
        s1 += x;
        s2 += x * x;
    }
    g->w[g->count] = w; g->s1[g->count] = s1; g->s2[g->count] = s2;
}

static void groups_clear(groups *g)
{
    g_free(g->low); g_free(g->high); g_free(g->w); g_free(g->s1); g_free(g->s2);
}

/* Squared distance of groups [a, b] (inclusive) to their mean length. */
static double bin_cost(const groups *g, guint a, guint b)
{
    double w = g->w[b + 1] - g->w[a], s1 = g->s1[b + 1] - g->s1[a], s2 = g->s2[b + 1] - g->s2[a];
    return w > 0 ? MAX(0.0, s2 - s1 * s1 / w) : 0.0;
}

/* One layer of the k-means recurrence, by divide and conquer (the best
 * split point does not decrease with the end point):
 * cur[i] = min over j in [1, i] of prev[j - 1] + cost(j, i). */
static void layer_solve(const groups *g, const double *prev, double *cur, guint *arg, guint from, guint to,
                        guint lo, guint hi)
{
    if (from > to) return;
    guint mid = from + (to - from) / 2, best_j = lo;
    double best = INFINITY;
    for (guint j = MAX(lo, 1); j <= MIN(mid, hi); j++) {
        double value = prev[j - 1] + bin_cost(g, j, mid);
        if (value < best) { best = value; best_j = j; }
    }
    cur[mid] = best;
    arg[mid] = best_j;
    if (mid > from) layer_solve(g, prev, cur, arg, from, mid - 1, lo, best_j);
    layer_solve(g, prev, cur, arg, mid + 1, to, best_j, hi);
}

/* ---- representatives ------------------------------------------------------------- */

typedef struct {
    const int64_t *lengths;
    const int64_t *recorded;
    guint steps;
    int64_t *distinct;   /* the traced lengths, sorted */
    guint distinct_count;
} traced;

static gint compare_by_recorded(gconstpointer a, gconstpointer b, gpointer data)
{
    const int64_t *recorded = data;
    int64_t x = recorded[*(const int32_t *)a], y = recorded[*(const int32_t *)b];
    return x < y ? -1 : x > y ? 1 : *(const int32_t *)a - *(const int32_t *)b;
}

/* The traced length nearest `target` (ties: the smaller). */
static int64_t nearest_traced(const traced *t, double target)
{
    int64_t best = t->distinct[0];
    for (guint i = 1; i < t->distinct_count; i++)
        if (fabs((double)t->distinct[i] - target) < fabs((double)best - target)) best = t->distinct[i];
    return best;
}

/* Of the steps of that length, the one of median recorded time; the first
 * step (warm-up) only when no other has the length. */
static int32_t representative(const traced *t, int64_t length)
{
    GArray *steps = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint s = 0; s < t->steps; s++)
        if (t->lengths[s] == length) {
            int32_t id = (int32_t)s;
            g_array_append_val(steps, id);
        }
    if (steps->len > 1 && g_array_index(steps, int32_t, 0) == 0) g_array_remove_index(steps, 0);
    g_array_sort_with_data(steps, compare_by_recorded, (gpointer)t->recorded);
    int32_t chosen = g_array_index(steps, int32_t, (steps->len - 1) / 2);
    g_array_unref(steps);
    return chosen;
}

static void traced_init(traced *t, const GArray *step_lengths, const int64_t *recorded)
{
    t->lengths = (const int64_t *)step_lengths->data;
    t->recorded = recorded;
    t->steps = step_lengths->len;
    t->distinct = g_memdup2(step_lengths->data, sizeof(int64_t) * step_lengths->len);
    qsort(t->distinct, t->steps, sizeof(int64_t), (int (*)(const void *, const void *))compare_int64);
    t->distinct_count = 0;
    for (guint i = 0; i < t->steps; i++)
        if (i == 0 || t->distinct[i] != t->distinct[i - 1]) t->distinct[t->distinct_count++] = t->distinct[i];
}

/* The bins of a k-means solution (arg per layer, k layers) with their representatives. */
static GArray *bins_of(const groups *g, guint *const *arg, guint k, const traced *t)
{
    GArray *bins = g_array_sized_new(FALSE, TRUE, sizeof(rv_seqpoint_bin), k);
    g_array_set_size(bins, k);
    guint end = g->count - 1;
    for (guint layer = k; layer-- > 0;) {
        guint start = layer == 0 ? 0 : arg[layer][end];
        rv_seqpoint_bin *bin = &g_array_index(bins, rv_seqpoint_bin, layer);
        double w = g->w[end + 1] - g->w[start];
        bin->low = g->low[start];
        bin->high = g->high[end];
        bin->iterations = (uint64_t)llround(w);
        bin->mean_length = w > 0 ? (g->s1[end + 1] - g->s1[start]) / w : (double)bin->low;
        bin->step = representative(t, nearest_traced(t, bin->mean_length));
        if (start == 0) break;
        end = start - 1;
    }
    return bins;
}

int64_t rv_seqpoint_project(const rv_seqpoints *points, const int64_t *step_ns)
{
    double total = 0;
    for (guint b = 0; b < points->bins->len; b++) {
        const rv_seqpoint_bin *bin = &g_array_index(points->bins, rv_seqpoint_bin, b);
        total += (double)bin->iterations * (double)step_ns[bin->step];
    }
    return (int64_t)llround(MIN(total, (double)G_MAXINT64 / 2));
}

/* Pooled relative standard deviation of the recorded times of steps that
 * share a length (the first step, with its warm-up, left out). */
static double length_noise(const traced *t, guint *lengths_used)
{
    double squares = 0;
    guint freedom = 0;
    *lengths_used = 0;
    for (guint i = 0; i < t->distinct_count; i++) {
        double sum = 0;
        guint n = 0;
        for (guint s = 1; s < t->steps; s++)
            if (t->lengths[s] == t->distinct[i]) { sum += (double)t->recorded[s]; n++; }
        if (n < 2 || sum <= 0) continue;
        double mean = sum / n;
        for (guint s = 1; s < t->steps; s++)
            if (t->lengths[s] == t->distinct[i]) squares += pow(((double)t->recorded[s] - mean) / mean, 2);
        freedom += n - 1;
        (*lengths_used)++;
    }
    return freedom > 0 ? sqrt(squares / freedom) : -1;
}

/* The projection's relative standard deviation when each representative's
 * time carries `noise`. */
static double projection_spread(const rv_seqpoints *points, const int64_t *step_ns, double noise)
{
    if (noise < 0) return -1;
    double squares = 0, total = 0;
    for (guint b = 0; b < points->bins->len; b++) {
        const rv_seqpoint_bin *bin = &g_array_index(points->bins, rv_seqpoint_bin, b);
        double part = (double)bin->iterations * (double)step_ns[bin->step];
        squares += part * part;
        total += part;
    }
    return total > 0 ? noise * sqrt(squares) / total : -1;
}

int64_t rv_seqpoint_reference(const GArray *epoch, const GArray *step_lengths, const int64_t *step_ns)
{
    traced t;
    traced_init(&t, step_lengths, step_ns);
    /* mean time per traced length */
    double *sum = g_new0(double, t.distinct_count);
    guint *count = g_new0(guint, t.distinct_count);
    for (guint s = 0; s < t.steps; s++) {
        int64_t *at = bsearch(&t.lengths[s], t.distinct, t.distinct_count, sizeof(int64_t),
                              (int (*)(const void *, const void *))compare_int64);
        sum[at - t.distinct] += (double)step_ns[s];
        count[at - t.distinct]++;
    }
    double total = 0;
    for (guint i = 0; i < epoch->len; i++) {
        int64_t length = nearest_traced(&t, (double)g_array_index(epoch, int64_t, i));
        int64_t *at = bsearch(&length, t.distinct, t.distinct_count, sizeof(int64_t),
                              (int (*)(const void *, const void *))compare_int64);
        total += sum[at - t.distinct] / count[at - t.distinct];
    }
    g_free(sum);
    g_free(count);
    g_free(t.distinct);
    return (int64_t)llround(MIN(total, (double)G_MAXINT64 / 2));
}

gboolean rv_seqpoint_choose(const GArray *epoch, const GArray *step_lengths, const int64_t *step_recorded_ns,
                            guint points, double tolerance, rv_seqpoints *out, GError **error)
{
    memset(out, 0, sizeof *out);
    if (epoch->len == 0 || step_lengths->len == 0 || points > RV_SEQPOINT_MAX_POINTS || !(tolerance >= 0)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "seqpoint: need an epoch of at least one iteration, traced steps, at most %d points and a "
                    "tolerance >= 0", RV_SEQPOINT_MAX_POINTS);
        return FALSE;
    }
    int64_t *sorted = g_memdup2(epoch->data, sizeof(int64_t) * epoch->len);
    qsort(sorted, epoch->len, sizeof(int64_t), (int (*)(const void *, const void *))compare_int64);
    groups g;
    groups_make(&g, sorted, epoch->len);
    out->distinct = distinct_lengths(sorted, epoch->len);
    g_free(sorted);
    out->iterations = epoch->len;
    out->reference_ns = rv_seqpoint_reference(epoch, step_lengths, step_recorded_ns);
    traced t;
    traced_init(&t, step_lengths, step_recorded_ns);
    out->noise = length_noise(&t, &out->noise_lengths);

    guint most = MIN(points ? points : RV_SEQPOINT_MAX_POINTS, g.count);
    guint **arg = g_new0(guint *, most);
    double *prev = g_new(double, g.count), *cur = g_new(double, g.count);
    for (guint i = 0; i < g.count; i++) prev[i] = bin_cost(&g, 0, i);
    arg[0] = g_new0(guint, g.count);
    for (guint k = 1; k <= most; k++) {
        if (k > 1) {
            arg[k - 1] = g_new0(guint, g.count);
            for (guint i = 0; i < k - 1; i++) cur[i] = INFINITY;
            layer_solve(&g, prev, cur, arg[k - 1], k - 1, g.count - 1, k - 1, g.count - 1);
            double *swap = prev; prev = cur; cur = swap;
        }
        if (points && k < points && k < most) continue;
        if (out->bins) g_array_unref(out->bins);
        out->bins = bins_of(&g, arg, k, &t);
        out->points = k;
        int64_t projected = rv_seqpoint_project(out, step_recorded_ns);
        out->spread = projection_spread(out, step_recorded_ns, out->noise);
        out->met = points > 0 || (llabs(projected - out->reference_ns) <= tolerance * (double)out->reference_ns &&
                                  out->spread <= tolerance);
        if (out->met) break;
    }
    out->chosen = points == 0;
    for (guint k = 0; k < most; k++) g_free(arg[k]);
    g_free(arg);
    g_free(prev);
    g_free(cur);
    g_free(t.distinct);
    groups_clear(&g);
    return TRUE;
}

void rv_seqpoints_clear(rv_seqpoints *points)
{
    if (points->bins) g_array_unref(points->bins);
    points->bins = NULL;
}
