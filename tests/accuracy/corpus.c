/*
 * corpus.c - one trace of the accuracy corpus: its replay error and how the
 * replay moves when the recording is perturbed (accuracy.c says which
 * perturbations and why).
 */
#include "accuracy.h"
#include "reverie/explain.h"
#include "reverie/graph.h"
#include "reverie/memory.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/trace.h"
#include "reverie/transform.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MS(x) ((int64_t)(x) * 1000000)

static void collect(GPtrArray *out, const char *dir, const char *relative)
{
    char *folder = relative ? g_build_filename(dir, relative, NULL) : g_strdup(dir);
    GDir *handle = g_dir_open(folder, 0, NULL);
    const char *entry;
    while (handle && (entry = g_dir_read_name(handle)) != NULL) {
        char *name = relative ? g_build_filename(relative, entry, NULL) : g_strdup(entry);
        char *path = g_build_filename(dir, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_DIR)) collect(out, dir, name);
        else if (g_str_has_suffix(entry, ".json.gz")) g_ptr_array_add(out, g_strdup(name));
        g_free(path);
        g_free(name);
    }
    if (handle) g_dir_close(handle);
    g_free(folder);
}

gint accuracy_compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

GPtrArray *accuracy_trace_paths(const char *dir)
{
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    collect(paths, dir, NULL);
    g_ptr_array_sort(paths, accuracy_compare_names);
    return paths;
}

static gboolean is_gpu_event(const rv_event *event)
{
    return event->kind == RV_EV_KERNEL || event->kind == RV_EV_MEMCPY || event->kind == RV_EV_MEMSET;
}

/* The GPU events' time range; FALSE when the trace has none. */
static gboolean gpu_range(const rv_trace *trace, int64_t *low, int64_t *high)
{
    *low = G_MAXINT64;
    *high = G_MININT64;
    for (guint i = 0; i < trace->events->len; i++) {
        const rv_event *event = &g_array_index(trace->events, rv_event, i);
        if (!is_gpu_event(event)) continue;
        *low = MIN(*low, event->ts_ns);
        *high = MAX(*high, event->ts_ns);
    }
    return *low <= *high;
}

/* A copy of the trace sharing everything but its events, in which every
 * GPU event at or after from_ns starts shift_ns later. */
static rv_trace shifted_copy(const rv_trace *trace, int64_t from_ns, int64_t shift_ns)
{
    rv_trace copy = *trace;
    copy.events = g_array_copy(trace->events);
    for (guint i = 0; i < copy.events->len; i++) {
        rv_event *event = &g_array_index(copy.events, rv_event, i);
        if (is_gpu_event(event) && event->ts_ns >= from_ns) event->ts_ns += shift_ns;
    }
    return copy;
}

/* What one build and replay of a trace gives. */
typedef struct {
    GArray *steps;        /* rv_step_time */
    int64_t total_ns;     /* simulated */
    double speedup;       /* every kernel at half its time */
    rv_graph *graph;
} replayed;

static int64_t simulated_total(const rv_graph *graph, GArray **steps_out, GError **error)
{
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, NULL, &sim, error)) return -1;
    GArray *steps = rv_step_times(graph, &sim);
    int64_t total = 0;
    for (guint s = 0; s < steps->len; s++) total += g_array_index(steps, rv_step_time, s).simulated_ns;
    rv_sim_result_clear(&sim);
    if (steps_out) *steps_out = steps;
    else g_array_unref(steps);
    return total;
}

/* A GPU what-if: every kernel twice as fast (what scale:select=kind=kernel,factor=0.5 does). */
static double kernel_speedup(const rv_graph *graph, int64_t baseline_ns, GError **error)
{
    rv_graph *copy = rv_graph_copy(graph);
    GArray *kernels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < rv_graph_task_count(copy); t++)
        if (rv_graph_task(copy, t)->kind == RV_TASK_KERNEL) g_array_append_val(kernels, t);
    rv_transform_scale(copy, kernels, 0.5);
    int64_t predicted = simulated_total(copy, NULL, error);
    g_array_unref(kernels);
    rv_graph_free(copy);
    return predicted > 0 ? (double)baseline_ns / (double)predicted : -1;
}

static gboolean replay_trace(const rv_trace *trace, replayed *out, GError **error)
{
    memset(out, 0, sizeof *out);
    out->graph = rv_graph_build(trace, error);
    if (out->graph == NULL) return FALSE;
    out->total_ns = simulated_total(out->graph, &out->steps, error);
    if (out->total_ns < 0) return FALSE;
    out->speedup = kernel_speedup(out->graph, out->total_ns, error);
    return out->speedup > 0;
}

static void replayed_clear(replayed *r)
{
    if (r->steps) g_array_unref(r->steps);
    if (r->graph) rv_graph_free(r->graph);
}

/* The largest relative move of a step between two replays. */
static double worst_step_move(const GArray *base, const GArray *moved)
{
    if (base->len != moved->len) return INFINITY;
    double worst = 0;
    for (guint s = 0; s < base->len; s++)
        worst = MAX(worst, rv_relative_error(g_array_index(base, rv_step_time, s).simulated_ns,
                                             g_array_index(moved, rv_step_time, s).simulated_ns));
    return worst;
}

static void record_replay_error(trace_row *row, const replayed *base)
{
    row->steps = base->steps->len;
    for (guint s = 0; s < base->steps->len; s++) {
        const rv_step_time *step = &g_array_index(base->steps, rv_step_time, s);
        double error = rv_relative_error(step->recorded_ns, step->simulated_ns);
        row->mean_error += error / base->steps->len;
        row->worst_error = MAX(row->worst_error, error);
        row->recorded_total_ns += step->recorded_ns;
    }
    rv_explanation *explanation = rv_explain(base->graph, 0);
    row->unexplained_gpu_ns = explanation->total_ns;
    row->unexplained_cpu_ns = explanation->cpu_total_ns;
    rv_explanation_free(explanation);
}

/* Replay a perturbed copy; its result against the unperturbed one. */
static gboolean perturb(const rv_trace *trace, const replayed *base, int64_t from_ns, int64_t shift_ns,
                        double *step_move, int64_t *total_move, double *speedup_move, GError **error)
{
    rv_trace copy = shifted_copy(trace, from_ns, shift_ns);
    replayed moved;
    gboolean ok = replay_trace(&copy, &moved, error);
    if (ok) {
        if (step_move) *step_move = worst_step_move(base->steps, moved.steps);
        if (total_move) *total_move = moved.total_ns - base->total_ns;
        *speedup_move = MAX(*speedup_move, fabs(moved.speedup - base->speedup) / base->speedup);
    }
    replayed_clear(&moved);
    g_array_unref(copy.events);
    return ok;
}

static gboolean measure_perturbations(const rv_trace *trace, const replayed *base, trace_row *row, GError **error)
{
    int64_t low, high;
    row->shift_plus_worst = row->shift_minus_worst = -1;
    row->idle30_move_ns = row->idle70_move_ns = -1;
    row->speedup_move_worst = 0;
    if (!gpu_range(trace, &low, &high)) return TRUE;
    int64_t at30 = low + (high - low) * 3 / 10, at70 = low + (high - low) * 7 / 10;
    return perturb(trace, base, G_MININT64, MS(10), &row->shift_plus_worst, NULL, &row->speedup_move_worst, error) &&
           perturb(trace, base, G_MININT64, -MS(5), &row->shift_minus_worst, NULL, &row->speedup_move_worst, error) &&
           perturb(trace, base, at30, MS(20), NULL, &row->idle30_move_ns, &row->speedup_move_worst, error) &&
           perturb(trace, base, at70, MS(20), NULL, &row->idle70_move_ns, &row->speedup_move_worst, error);
}

/* The memory model's peak and the recorded one, where the trace gives them. */
static void measure_memory(trace_row *row, const rv_graph *graph)
{
    rv_memory_estimate estimate;
    int64_t reserved;
    int32_t device, rank_index;
    row->memory_estimate_bytes = rv_memory_estimate_graph(graph, &estimate, NULL) && estimate.peak > 0 ? estimate.peak : -1;
    if (!rv_memory_recorded_peak(graph, &row->memory_recorded_bytes, &reserved, &device, &rank_index))
        row->memory_recorded_bytes = -1;
}

trace_row accuracy_measure_trace(const char *dir, const char *name)
{
    trace_row row = { 0 };
    row.name = g_strdup(name);
    row.memory_estimate_bytes = row.memory_recorded_bytes = -1;
    char *path = g_build_filename(dir, name, NULL);
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, NULL, &error);
    replayed base = { 0 };
    if (trace != NULL) {
        row.one_rank = trace->world_size > 1;
        if (replay_trace(trace, &base, &error)) {
            record_replay_error(&row, &base);
            measure_memory(&row, base.graph);
            row.speedup = base.speedup;
            measure_perturbations(trace, &base, &row, &error);
        }
    }
    if (error != NULL) row.failure = g_strdup(error->message);
    fprintf(stderr, "accuracy: %s%s%s\n", name, row.failure ? ": " : "", row.failure ? row.failure : "");
    g_clear_error(&error);
    replayed_clear(&base);
    if (trace) rv_trace_free(trace);
    g_free(path);
    return row;
}
