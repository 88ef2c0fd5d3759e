/*
 * breakdown.c - CPU-only / GPU-only / overlap / idle per step, per phase
 * and per stream (see breakdown.h for the rules).
 *
 * One sweep over the start and end points of every busy interval keeps a
 * count of what runs; each stretch between two points is classified once
 * and credited to the windows it overlaps.  The stretches tile the windows,
 * so the parts add up to each step's time exactly.  The per-stream uses
 * come from one smaller sweep per stream.
 */
#include "reverie/breakdown.h"
#include "reverie/report.h"
#include "reverie/job.h"
#include <stdlib.h>

static const char *const split_names[RV_SPLIT_COUNT] = { "cpu_only", "gpu_only", "overlap", "idle" };
static const char *const use_names[RV_USE_COUNT] = { "compute", "communication", "copy", "idle" };

const char *rv_split_name(rv_split split) { return split < RV_SPLIT_COUNT ? split_names[split] : "?"; }
const char *rv_stream_use_name(rv_stream_use use) { return use < RV_USE_COUNT ? use_names[use] : "?"; }

/* What a busy interval is: CPU work, or device work of a use. */
enum { WORK_CPU, WORK_COMPUTE, WORK_COMM, WORK_COPY, WORK_COUNT, WORK_NONE = -1 };
#define LABELS (WORK_COUNT * RV_PHASE_COUNT)

typedef struct {
    int64_t at;
    int32_t label;
    int32_t delta;
} point;

typedef void (*visit_fn)(guint window, int64_t length, const int32_t *counts, void *user);

static int compare_points(const void *left, const void *right)
{
    const point *a = left, *b = right;
    return a->at < b->at ? -1 : a->at > b->at;
}

static void add_interval(GArray *points, int64_t begin, int64_t end, int32_t label)
{
    if (end <= begin) return;
    point open = { begin, label, 1 }, close = { end, label, -1 };
    g_array_append_val(points, open);
    g_array_append_val(points, close);
}

/* Credit [from, to) to every window it overlaps (windows ascending). */
static void credit(const GArray *windows, guint *first, int64_t from, int64_t to, const int32_t *counts,
                   visit_fn visit, void *user)
{
    while (*first < windows->len && g_array_index(windows, rv_window, *first).end_ns <= from) (*first)++;
    for (guint w = *first; w < windows->len; w++) {
        const rv_window *window = &g_array_index(windows, rv_window, w);
        if (window->begin_ns >= to) break;
        int64_t length = MIN(to, window->end_ns) - MAX(from, window->begin_ns);
        if (length > 0) visit(w, length, counts, user);
    }
}

static void sweep(GArray *points, int labels, const GArray *windows, visit_fn visit, void *user)
{
    if (windows->len == 0) return;
    /* qsort's array may not be NULL, even empty: no interval left, no sort */
    if (points->len > 1) qsort(points->data, points->len, sizeof(point), compare_points);
    int32_t *counts = g_new0(int32_t, labels);
    guint first = 0;
    int64_t cursor = g_array_index(windows, rv_window, 0).begin_ns;
    for (guint i = 0; i < points->len;) {
        int64_t at = g_array_index(points, point, i).at;
        if (at > cursor) {
            credit(windows, &first, cursor, at, counts, visit, user);
            cursor = at;
        }
        for (; i < points->len && g_array_index(points, point, i).at == at; i++)
            counts[g_array_index(points, point, i).label] += g_array_index(points, point, i).delta;
    }
    int64_t last = g_array_index(windows, rv_window, windows->len - 1).end_ns;
    if (last > cursor) credit(windows, &first, cursor, last, counts, visit, user);
    g_free(counts);
}

gboolean rv_breakdown_has_uses(const rv_graph *graph, int32_t resource)
{
    return g_array_index(graph->resources, rv_resource, resource).kind != RV_RES_CPU_THREAD;
}

static int work_of(const rv_graph *graph, const rv_task *task)
{
    if (!rv_breakdown_has_uses(graph, task->resource))
        return task->kind == RV_TASK_CPU || task->kind == RV_TASK_SYNC || task->kind == RV_TASK_DATALOAD ? WORK_CPU
                                                                                                          : WORK_NONE;
    switch (task->kind) {
    case RV_TASK_KERNEL: return WORK_COMPUTE;
    case RV_TASK_COMM: return WORK_COMM;
    case RV_TASK_MEMCPY: case RV_TASK_MEMSET: return WORK_COPY;
    default: return WORK_NONE;
    }
}

/* When the CPU began on a task: a call's host overhead counts only inside
 * an operator.  Outside one it is a thread that slept (a watchdog polling
 * cudaEventQuery every 100 ms has 100 ms of "host overhead"), not work. */
static int64_t busy_from(const rv_graph *graph, const rv_sim_result *sim, int32_t id)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    return task->op != 0 || task->kind == RV_TASK_DATALOAD ? rv_busy_from(graph, sim, id) : sim->start_ns[id];
}

/* ---- the whole-step sweep ------------------------------------------- */

/* Which tasks and windows one sweep reads: in a graph of several ranks,
 * each rank's steps over that rank's own tasks (one rank's CPU does not
 * overlap another's GPU), its windows mapped back to the steps' indices. */
typedef struct {
    int32_t rank;           /* -1: every task */
    const guint *index;     /* the sweep's window w is breakdown step index[w]; NULL: w */
} scope;

static guint step_index(const scope *scope, guint window) { return scope->index ? scope->index[window] : window; }

static gboolean in_scope(const rv_graph *graph, const scope *scope, const rv_task *task)
{
    return scope->rank < 0 || rv_task_rank_index(graph, task) == scope->rank;
}

typedef struct {
    rv_breakdown *breakdown;
    const scope *scope;
    int last_phase;
} step_sweep;

static gboolean any_of(const int32_t *counts, int work, int *phase)
{
    for (int p = 0; p < RV_PHASE_COUNT; p++)
        if (counts[work * RV_PHASE_COUNT + p] > 0) {
            if (phase) *phase = p;
            return TRUE;
        }
    return FALSE;
}

static void visit_step(guint window, int64_t length, const int32_t *counts, void *user)
{
    step_sweep *state = user;
    rv_step_breakdown *step = &g_array_index(state->breakdown->steps, rv_step_breakdown, step_index(state->scope, window));
    int device_phase = RV_PHASE_OTHER, phase = RV_PHASE_OTHER, cpu_phase = RV_PHASE_OTHER;
    gboolean compute = FALSE, device = FALSE;
    for (int work = WORK_COMPUTE; work < WORK_COUNT; work++) {
        int p;
        if (!any_of(counts, work, &p)) continue;
        device_phase = device ? MIN(device_phase, p) : p;
        device = TRUE;
        compute |= work == WORK_COMPUTE;
    }
    gboolean cpu = any_of(counts, WORK_CPU, &cpu_phase);
    rv_split split = cpu && device ? RV_SPLIT_OVERLAP : cpu ? RV_SPLIT_CPU_ONLY : device ? RV_SPLIT_GPU_ONLY : RV_SPLIT_IDLE;
    phase = device ? device_phase : cpu ? cpu_phase : state->last_phase;
    state->last_phase = phase;
    step->split_ns[split] += length;
    step->phase_split_ns[phase][split] += length;
    if (any_of(counts, WORK_COMM, NULL)) {
        step->comm_ns += length;
        if (!compute) {
            step->exposed_comm_ns += length;
            step->phase_exposed_comm_ns[phase] += length;
        }
    }
}

static void sweep_steps(rv_breakdown *breakdown, const rv_graph *graph, const rv_sim_result *sim, const GArray *windows,
                        const scope *scope)
{
    GArray *points = g_array_new(FALSE, FALSE, sizeof(point));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        int work = work_of(graph, task);
        if (sim->start_ns[id] < 0 || (task->flags & RV_TASK_FLAG_REMOVED) || work == WORK_NONE ||
            !in_scope(graph, scope, task))
            continue;
        int phase = task->phase < RV_PHASE_COUNT ? task->phase : RV_PHASE_OTHER;
        add_interval(points, busy_from(graph, sim, id), sim->end_ns[id], work * RV_PHASE_COUNT + phase);
    }
    step_sweep state = { breakdown, scope, RV_PHASE_OTHER };
    sweep(points, LABELS, windows, visit_step, &state);
    g_array_unref(points);
}

/* ---- per stream ----------------------------------------------------- */

typedef struct {
    rv_breakdown *breakdown;
    const scope *scope;
    int32_t resource;
} stream_sweep;

static void visit_stream(guint window, int64_t length, const int32_t *counts, void *user)
{
    stream_sweep *state = user;
    rv_step_breakdown *step = &g_array_index(state->breakdown->steps, rv_step_breakdown, step_index(state->scope, window));
    rv_stream_use use = counts[WORK_COMPUTE] > 0 ? RV_USE_COMPUTE
                      : counts[WORK_COMM] > 0    ? RV_USE_COMMUNICATION
                      : counts[WORK_COPY] > 0    ? RV_USE_COPY
                                                 : RV_USE_IDLE;
    step->use_ns[state->resource * RV_USE_COUNT + use] += length;
}

static void sweep_streams(rv_breakdown *breakdown, const rv_graph *graph, const rv_sim_result *sim, const GArray *windows,
                          const scope *scope)
{
    GPtrArray *by_resource = rv_tasks_by_resource(graph, sim);
    GArray *points = g_array_new(FALSE, FALSE, sizeof(point));
    for (guint r = 0; r < by_resource->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        if (!rv_breakdown_has_uses(graph, (int32_t)r) || (scope->rank >= 0 && resource->rank_index != scope->rank))
            continue;
        GArray *order = g_ptr_array_index(by_resource, r);
        g_array_set_size(points, 0);
        for (guint k = 0; k < order->len; k++) {
            int32_t id = g_array_index(order, int32_t, k);
            int work = work_of(graph, &g_array_index(graph->tasks, rv_task, id));
            if (work != WORK_NONE) add_interval(points, sim->start_ns[id], sim->end_ns[id], work);
        }
        stream_sweep state = { breakdown, scope, (int32_t)r };
        sweep(points, WORK_COUNT, windows, visit_stream, &state);
    }
    g_array_unref(points);
    g_ptr_array_unref(by_resource);
}

/* A graph of several ranks holds each rank's steps one after the other
 * (report.h's windows overlap across ranks): each rank's windows, in their
 * own ascending order, are swept over that rank's tasks alone. */
static void sweep_each_rank(rv_breakdown *breakdown, const rv_graph *graph, const rv_sim_result *sim,
                            const GArray *windows)
{
    guint ranks = rv_graph_rank_count(graph);
    GArray *mine = g_array_new(FALSE, FALSE, sizeof(rv_window));
    guint *index = g_new(guint, windows->len);
    for (guint r = 0; r < ranks; r++) {
        g_array_set_size(mine, 0);
        for (guint s = 0; s < graph->steps->len; s++) {
            const rv_step *step = &g_array_index(graph->steps, rv_step, s);
            if (rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task, step->begin_marker)) != (int32_t)r) continue;
            index[mine->len] = s;
            g_array_append_val(mine, g_array_index(windows, rv_window, s));
        }
        scope rank = { (int32_t)r, index };
        sweep_steps(breakdown, graph, sim, mine, &rank);
        sweep_streams(breakdown, graph, sim, mine, &rank);
    }
    g_free(index);
    g_array_unref(mine);
}

rv_breakdown *rv_breakdown_compute(const rv_graph *graph, const rv_sim_result *sim, const GArray *windows)
{
    rv_breakdown *breakdown = g_new0(rv_breakdown, 1);
    breakdown->resource_count = graph->resources->len;
    breakdown->steps = g_array_new(FALSE, TRUE, sizeof(rv_step_breakdown));
    g_array_set_size(breakdown->steps, windows->len);
    for (guint w = 0; w < windows->len; w++) {
        rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, w);
        step->begin_ns = g_array_index(windows, rv_window, w).begin_ns;
        step->end_ns = g_array_index(windows, rv_window, w).end_ns;
        step->use_ns = g_new0(int64_t, (gsize)breakdown->resource_count * RV_USE_COUNT);
    }
    if (rv_graph_rank_count(graph) > 1 && windows->len == graph->steps->len) {
        sweep_each_rank(breakdown, graph, sim, windows);
    } else {
        scope everything = { -1, NULL };
        sweep_steps(breakdown, graph, sim, windows, &everything);
        sweep_streams(breakdown, graph, sim, windows, &everything);
    }
    return breakdown;
}

void rv_breakdown_free(rv_breakdown *breakdown)
{
    if (breakdown == NULL) return;
    for (guint w = 0; w < breakdown->steps->len; w++) g_free(g_array_index(breakdown->steps, rv_step_breakdown, w).use_ns);
    g_array_unref(breakdown->steps);
    g_free(breakdown);
}
