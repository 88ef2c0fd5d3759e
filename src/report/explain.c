/*
 * explain.c - unexplained time per GPU task (see explain.h for the rule).
 *
 * One pass over the edges gives each GPU task its latest recorded
 * readiness and the predecessor behind it; stream order comes from the
 * order edges.  Then each task's recorded start is compared with the
 * earliest start the rules allow.
 *
 * Recorded times are only bounded one by one (a task's start, its
 * duration), so every sum and difference of them here saturates
 * (checked.h): a forged or absurd trace gives an absurd figure, never
 * undefined behaviour or a wrapped negative one.
 */
#include "reverie/explain.h"
#include "reverie/checked.h"
#include "reverie/job.h"
#include <math.h>

typedef struct {
    int64_t ready_ns;     /* the rules' earliest start so far */
    int32_t binding;      /* who set it, or -1 */
} readiness;

static gboolean counts(const rv_task *task)
{
    return (task->flags & (RV_TASK_FLAG_GPU | RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED)) == RV_TASK_FLAG_GPU;
}

static int64_t recorded_end(const rv_task *task)
{
    return rv_saturating_add(task->recorded_start_ns, task->duration_ns);
}

static void raise_to(readiness *ready, int64_t at, int32_t by)
{
    if (at > ready->ready_ns) {
        ready->ready_ns = at;
        ready->binding = by;
    }
}

/* The earliest start of each GPU task by the rules, on the recorded clock. */
static readiness *rule_starts(const rv_graph *graph)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_task *tasks = (const rv_task *)graph->tasks->data;
    const rv_resource *resources = (const rv_resource *)graph->resources->data;
    readiness *ready = g_new(readiness, n);
    for (int32_t t = 0; t < n; t++) ready[t] = (readiness){ G_MININT64, -1 };
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        const rv_task *from = &tasks[edge->from], *to = &tasks[edge->to];
        if (!counts(to) || (from->flags & RV_TASK_FLAG_REMOVED)) continue;
        const rv_resource *stream = &resources[to->resource];
        if (from->resource == to->resource) {
            /* stream order: the previous task's end plus the idle gap */
            raise_to(&ready[edge->to], rv_saturating_add(recorded_end(from), stream->idle_gap_ns), -1);
        } else if (edge->kind == RV_EDGE_LAUNCH && !edge->from_start) {
            raise_to(&ready[edge->to], rv_saturating_add(recorded_end(from), stream->launch_latency_ns), edge->from);
        } else {
            raise_to(&ready[edge->to], edge->from_start ? from->recorded_start_ns : recorded_end(from), edge->from);
        }
    }
    return ready;
}

/* A host overhead this long that ends this soon after a GPU task ended
 * looks like a wait for the GPU that no edge explains. */
#define SUSPECT_GAP_MIN_NS 50000
#define SUSPECT_RELEASE_NS 20000

static gint compare_int64(gconstpointer left, gconstpointer right)
{
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return a < b ? -1 : a > b;
}

/* Host overheads that end within SUSPECT_RELEASE_NS after some GPU task's
 * recorded end, that task having ended inside the overhead. */
static void count_suspect_host_gaps(const rv_graph *graph, rv_explanation *x)
{
    GArray *ends = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (counts(task)) {
            int64_t end = recorded_end(task);
            g_array_append_val(ends, end);
        }
    }
    g_array_sort(ends, compare_int64);
    /* GPU ends per ns over the span they cover: the chance that one falls in
     * a window of w ns is 1 - exp(-rate w). */
    double rate = ends->len > 1 ? (double)(ends->len - 1) /
                                      (double)MAX(1, g_array_index(ends, int64_t, ends->len - 1) - g_array_index(ends, int64_t, 0))
                                : 0.0;
    for (int32_t t = 0; t < rv_graph_task_count(graph) && ends->len; t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->host_overhead_ns < SUSPECT_GAP_MIN_NS || (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED)))
            continue;
        int64_t start = task->recorded_start_ns, gap_begin = rv_saturating_sub(start, task->host_overhead_ns);
        guint low = 0, high = ends->len; /* the last GPU end at or before the call's start */
        while (low < high) {
            guint middle = (low + high) / 2;
            if (g_array_index(ends, int64_t, middle) <= start) low = middle + 1;
            else high = middle;
        }
        x->suspect_by_chance += 1.0 - exp(-rate * (double)MIN(SUSPECT_RELEASE_NS, task->host_overhead_ns));
        if (low == 0) continue;
        int64_t released = g_array_index(ends, int64_t, low - 1);
        if (released > gap_begin && rv_saturating_sub(start, released) <= SUSPECT_RELEASE_NS) {
            x->suspect_host_gaps++;
            x->suspect_host_ns = rv_saturating_add(x->suspect_host_ns, task->host_overhead_ns);
        }
    }
    g_array_unref(ends);
}

static gint larger_first(gconstpointer left, gconstpointer right)
{
    const rv_unexplained_task *a = left, *b = right;
    if (a->unexplained_ns != b->unexplained_ns) return a->unexplained_ns > b->unexplained_ns ? -1 : 1;
    return a->task < b->task ? -1 : a->task > b->task;
}

static gint larger_site_first(gconstpointer a, gconstpointer b)
{
    const rv_unexplained_site *left = a, *right = b;
    if (left->total_ns != right->total_ns) return left->total_ns > right->total_ns ? -1 : 1;
    return left->name != right->name ? left->name - right->name : left->op - right->op;
}

/* A blocking call's wait tail (sync.c splits a blocking call into its head
 * and the part after what it waited for ended) beyond the typical return:
 * per step and per call site. */
static void explain_cpu_waits(const rv_graph *graph, rv_explanation *x)
{
    GHashTable *sites = g_hash_table_new(g_int64_hash, g_int64_equal);
    int64_t typical = graph->timing.sync_return.value;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->kind != RV_TASK_SYNC || (task->flags & (RV_TASK_FLAG_GPU | RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED)))
            continue;
        int64_t excess = rv_saturating_sub(task->duration_ns, typical);
        if (excess <= RV_EXPLAIN_TOLERANCE_NS || rv_call_works_after_wait(rv_strings_get(graph->strings, task->name)))
            continue;
        x->cpu_total_ns = rv_saturating_add(x->cpu_total_ns, excess);
        x->cpu_calls++;
        int64_t *step = &x->cpu_by_step[task->step >= 0 ? (guint)task->step : graph->steps->len];
        *step = rv_saturating_add(*step, excess);
        int64_t key = ((int64_t)task->name << 32) | (uint32_t)task->op;
        gpointer slot = g_hash_table_lookup(sites, &key);
        if (slot == NULL) {
            rv_unexplained_site site = { task->name, task->op, 0, 0 };
            g_array_append_val(x->cpu_sites, site);
            slot = GUINT_TO_POINTER(x->cpu_sites->len);
            g_hash_table_insert(sites, g_memdup2(&key, sizeof key), slot);
        }
        rv_unexplained_site *site = &g_array_index(x->cpu_sites, rv_unexplained_site, GPOINTER_TO_UINT(slot) - 1);
        site->calls++;
        site->total_ns = rv_saturating_add(site->total_ns, excess);
    }
    GList *keys = g_hash_table_get_keys(sites);
    g_list_free_full(keys, g_free);
    g_hash_table_destroy(sites);
    g_array_sort(x->cpu_sites, larger_site_first);
}

rv_explanation *rv_explain(const rv_graph *graph, guint top)
{
    rv_explanation *x = g_new0(rv_explanation, 1);
    x->by_step = g_new0(int64_t, graph->steps->len + 1);
    x->cpu_by_step = g_new0(int64_t, graph->steps->len + 1);
    x->cpu_sites = g_array_new(FALSE, FALSE, sizeof(rv_unexplained_site));
    x->by_resource = g_new0(int64_t, graph->resources->len);
    x->top = g_array_new(FALSE, FALSE, sizeof(rv_unexplained_task));
    readiness *ready = rule_starts(graph);
    GArray *late = g_array_new(FALSE, FALSE, sizeof(rv_unexplained_task));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!counts(task)) continue;
        x->gpu_tasks++;
        if (ready[t].ready_ns == G_MININT64) continue; /* nothing before it: no rule to compare with */
        int64_t difference = rv_saturating_sub(task->recorded_start_ns, ready[t].ready_ns);
        if (difference < -RV_EXPLAIN_TOLERANCE_NS) {
            x->early_tasks++;
            x->early_ns = rv_saturating_sub(x->early_ns, difference);
        }
        if (difference <= 0) continue;
        rv_unexplained_task item = { t, difference, ready[t].ready_ns, ready[t].binding };
        if (top > 0) g_array_append_val(late, item); /* sorted below only to list the top ones */
        if (difference > RV_EXPLAIN_TOLERANCE_NS) x->late_tasks++;
        x->total_ns = rv_saturating_add(x->total_ns, difference);
        int64_t *step = &x->by_step[task->step >= 0 ? (guint)task->step : graph->steps->len];
        *step = rv_saturating_add(*step, difference);
        x->by_resource[task->resource] = rv_saturating_add(x->by_resource[task->resource], difference);
    }
    count_suspect_host_gaps(graph, x);
    explain_cpu_waits(graph, x);
    g_array_sort(late, larger_first);
    g_array_append_vals(x->top, late->data, MIN(top, late->len));
    g_array_unref(late);
    g_free(ready);
    return x;
}

void rv_explanation_free(rv_explanation *explanation)
{
    if (explanation == NULL) return;
    g_free(explanation->by_step);
    g_free(explanation->cpu_by_step);
    g_array_unref(explanation->cpu_sites);
    g_free(explanation->by_resource);
    g_array_unref(explanation->top);
    g_free(explanation);
}

static uint64_t gpu_task_count(const rv_graph *graph)
{
    uint64_t count = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++)
        if (g_array_index(graph->tasks, rv_task, t).flags & RV_TASK_FLAG_GPU) count++;
    return count;
}

GPtrArray *rv_timing_notes(const rv_graph *graph)
{
    return rv_timing_notes_counted(graph, gpu_task_count(graph));
}

GPtrArray *rv_timing_notes_counted(const rv_graph *graph, uint64_t gpu)
{
    GPtrArray *notes = g_ptr_array_new_with_free_func(g_free);
    const rv_timing *timing = &graph->timing;
    uint64_t unmatched = graph->build_stats.unmatched_gpu_tasks;
    if (unmatched > 0)
        g_ptr_array_add(notes, g_strdup_printf(
            "%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " GPU tasks have no launch call in the trace (no matching "
            "correlation id): they are assumed to run as soon as their stream is free, so the replay cannot show "
            "the GPU waiting for the CPU there", unmatched, gpu));
    if (timing->clock_status == RV_CLOCK_CORRECTED)
        g_ptr_array_add(notes, g_strdup_printf(
            "the GPU clock is %+.3f ms off the CPU clock (the offset that every launch and blocking call agrees "
            "with); GPU times were corrected by that much before any dependency was inferred",
            timing->clock_offset.value / 1e6));
    if (timing->clock_status == RV_CLOCK_INCONSISTENT)
        g_ptr_array_add(notes, g_strdup_printf(
            "the CPU and GPU clocks disagree by more than one offset explains: %" G_GUINT64_FORMAT " of %"
            G_GUINT64_FORMAT " launch and blocking-call pairs contradict every offset; corrected by %+.3f ms, the one "
            "the fewest contradict (a stretch of GPU time shifted against the host, or a wait the rules misread)",
            timing->offset_contradicted, timing->offset_launch_pairs + timing->offset_sync_pairs,
            timing->clock_offset.value / 1e6));
    uint64_t foreign = graph->trace_stats.unmodelled_backend;
    if (foreign > 0)
        g_ptr_array_add(notes, g_strdup_printf(
            "%" G_GUINT64_FORMAT " events of a device backend reverie does not model (" RV_UNMODELLED_BACKENDS
            ") were ignored: %s", foreign,
            gpu == 0 ? "the graph holds only the host side, so its replay and every prediction leave that device's "
                       "work out"
                     : "that device's work is missing from the graph"));
    return notes;
}

int64_t rv_step_unexplained(const rv_graph *graph, const rv_explanation *x, guint step)
{
    if (graph->steps->len == 0) return x->total_ns;
    if (rv_graph_rank_count(graph) <= 1) return step < graph->steps->len ? x->by_step[step] : 0;
    /* the job's k-th step: every rank's k-th */
    guint ranks = graph->ranks->len;
    guint *seen = g_new0(guint, ranks + 1);
    int64_t total = 0;
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *entry = &g_array_index(graph->steps, rv_step, s);
        int32_t rank = rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task, entry->begin_marker));
        guint slot = rank >= 0 && (guint)rank < ranks ? (guint)rank : ranks;
        if (seen[slot]++ == step) total += x->by_step[s];
    }
    g_free(seen);
    return total;
}
