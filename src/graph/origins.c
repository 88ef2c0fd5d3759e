/*
 * origins.c - what starts each CPU thread, and which threads are in the
 * background.
 *
 * A thread's first call has no earlier call on its thread to count its host
 * time from.  It starts from its cause, in this order:
 *   - an edge from another resource that the earlier passes found (a
 *     synchronization, an inter-thread wake-up): its host overhead counts
 *     from there (timing.c);
 *   - else the step it was recorded in: an edge from that step's begin
 *     marker (the training loop's thread opening the step), its host
 *     overhead the time from the step's start;
 *   - else (before every step, or a trace without steps) the host's
 *     start: the trace's earliest CPU call.  Several processes in one
 *     trace (data-loader workers) keep their recorded start relative to it:
 *     nothing in the trace says what started them.
 * Never an offset from the trace's first event of any kind: GPU work
 * recorded before the first CPU call (launched before the profiler
 * started) would otherwise set every thread's origin.
 *
 * A thread whose calls only ask (event and stream queries, pointer
 * attributes, the current device: a polling or profiler thread) is in the
 * background: nothing in the training loop waits for it, so it is the
 * source of no inferred inter-thread wait (edges.c) and cannot decide when
 * a step ends.  Launches, copies, allocations, blocking calls, step
 * annotations and data loading put a thread in the foreground.
 */
#include "build.h"
#include <string.h>

/* A call that only asks (an event or stream query, a pointer's
 * attributes, the current device): what polling and profiler threads do. */
static gboolean only_asks(const char *name)
{
    return strstr(name, "Query") || strstr(name, "Get") || strstr(name, "Peek") || strstr(name, "IsCapturing");
}

static void mark_foreground(builder *b, gboolean *foreground)
{
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        const rv_task *task = rv_graph_task(b->graph, id);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        if (task->kind != RV_TASK_CPU || !only_asks(rv_strings_get(b->graph->strings, task->name)))
            foreground[task->resource] = TRUE;
    }
}

gboolean *rv_build_foreground_threads(builder *b)
{
    gboolean *foreground = g_new0(gboolean, b->graph->resources->len + 1);
    mark_foreground(b, foreground);
    return foreground;
}

/* The step whose recorded window holds t on process pid, or -1. */
static int32_t step_at(const builder *b, int64_t pid, int64_t t)
{
    for (guint s = 0; s < b->graph->steps->len; s++) {
        const rv_step *step = &g_array_index(b->graph->steps, rv_step, s);
        if (g_array_index(b->step_pids, int64_t, s) == pid && step->recorded_begin_ns <= t && t < step->recorded_end_ns)
            return (int32_t)s;
    }
    return -1;
}

static gboolean *has_other_predecessor(const builder *b)
{
    gboolean *led = g_new0(gboolean, rv_graph_task_count(b->graph) + 1);
    for (guint e = 0; e < b->graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(b->graph->edges, rv_edge, e);
        if (rv_graph_task(b->graph, edge->from)->resource != rv_graph_task(b->graph, edge->to)->resource)
            led[edge->to] = TRUE;
    }
    return led;
}

void rv_build_thread_origins(builder *b)
{
    gboolean *led = has_other_predecessor(b);
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        if (resource->kind != RV_RES_CPU_THREAD || tasks->len == 0) continue;
        int32_t first = g_array_index(tasks, int32_t, 0);
        const rv_task *task = rv_graph_task(b->graph, first);
        if (led[first] || task->kind == RV_TASK_MARKER) continue;
        int32_t step = step_at(b, resource->process, task->recorded_start_ns);
        if (step < 0) continue;
        int32_t marker = g_array_index(b->graph->steps, rv_step, step).begin_marker;
        if (rv_graph_task(b->graph, marker)->resource == (int32_t)r) continue;
        rv_graph_add_edge(b->graph, marker, first, RV_EDGE_INTER_THREAD, FALSE);
        b->graph->build_stats.threads_started_by_step++;
    }
    g_free(led);
}

int64_t rv_build_process_start(const builder *b, int64_t pid)
{
    (void)pid; /* processes of one trace share its host's start: see the header */
    int64_t start = G_MAXINT64;
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        if (resource->kind != RV_RES_CPU_THREAD || tasks->len == 0) continue;
        start = MIN(start, rv_graph_task(b->graph, g_array_index(tasks, int32_t, 0))->recorded_start_ns);
    }
    return start == G_MAXINT64 ? b->origin_ns : start;
}
