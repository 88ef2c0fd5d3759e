/*
 * steps.c - per-step recorded and simulated times (see report.h for the rule).
 */
#include "reverie/report.h"
#include <math.h>

double rv_relative_error(int64_t recorded_ns, int64_t simulated_ns)
{
    if (recorded_ns == 0) return 0.0;
    return fabs((double)(simulated_ns - recorded_ns)) / (double)recorded_ns;
}

static gboolean counts(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_REMOVED) == 0;
}

/* One window from the first live task's start to the last one's end, of one
 * rank or of all (rank -1); on the recorded clock (sim NULL) plugins'
 * inserted tasks have no times and do not count. */
static rv_window tasks_window(const rv_graph *graph, const rv_sim_result *sim, int32_t rank)
{
    int64_t begin = G_MAXINT64, end = G_MININT64;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!counts(task) || task->kind == RV_TASK_MARKER) continue;
        if (rank >= 0 && rv_task_rank_index(graph, task) != rank) continue;
        int64_t start_ns = task->recorded_start_ns, end_ns = task->recorded_start_ns + task->duration_ns;
        if (sim != NULL) {
            start_ns = sim->start_ns[id];
            end_ns = sim->end_ns[id];
        } else if (task->flags & RV_TASK_FLAG_INSERTED) {
            continue;
        }
        if (start_ns < 0) continue;
        begin = MIN(begin, start_ns);
        end = MAX(end, end_ns);
    }
    rv_window window = { 0, 0 };
    if (end > begin) window = (rv_window){ begin, end };
    return window;
}

static rv_window whole_trace(const rv_graph *graph, const rv_sim_result *sim)
{
    return tasks_window(graph, sim, -1);
}

/* The simulated end of each step: its end marker, or the last GPU task
 * launched inside it, whichever is later.  The replay notes the latter as
 * it ends (sim.h); a result of this graph's replay that has them spares a
 * pass over every task. */
static int64_t *simulated_step_ends(const rv_graph *graph, const rv_sim_result *sim)
{
    guint count = graph->steps->len;
    int64_t *ends = g_new(int64_t, count);
    for (guint s = 0; s < count; s++)
        ends[s] = sim->end_ns[g_array_index(graph->steps, rv_step, s).end_marker];
    if (sim->step_gpu_end_ns != NULL && sim->step_count == count && sim->task_count == rv_graph_task_count(graph)) {
        for (guint s = 0; s < count; s++) ends[s] = MAX(ends[s], sim->step_gpu_end_ns[s]);
        return ends;
    }
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!counts(task) || !(task->flags & RV_TASK_FLAG_GPU) || task->step < 0) continue;
        if (sim->end_ns[id] > ends[task->step]) ends[task->step] = sim->end_ns[id];
    }
    return ends;
}

/* Per step: the step before it on the same rank (a graph of several ranks
 * holds each rank's steps one after the other), or -1 for a rank's first. */
static int32_t *previous_steps(const rv_graph *graph)
{
    guint count = graph->steps->len, ranks = MAX(graph->ranks->len, 1);
    int32_t *previous = g_new(int32_t, count + 1), *last = g_new(int32_t, ranks + 1);
    for (guint r = 0; r <= ranks; r++) last[r] = -1;
    for (guint s = 0; s < count; s++) {
        const rv_task *marker = &g_array_index(graph->tasks, rv_task, g_array_index(graph->steps, rv_step, s).begin_marker);
        int32_t rank = rv_task_rank_index(graph, marker);
        guint slot = rank >= 0 && (guint)rank < ranks ? (guint)rank : ranks;
        previous[s] = last[slot];
        last[slot] = (int32_t)s;
    }
    g_free(last);
    return previous;
}

GArray *rv_step_windows(const rv_graph *graph, const rv_sim_result *sim)
{
    GArray *windows = g_array_new(FALSE, FALSE, sizeof(rv_window));
    if (graph->steps->len == 0) {
        rv_window window = whole_trace(graph, sim);
        g_array_append_val(windows, window);
        return windows;
    }
    int64_t *simulated_ends = sim ? simulated_step_ends(graph, sim) : NULL;
    int32_t *previous = previous_steps(graph);
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        int32_t before = previous[s];
        rv_window window;
        if (sim == NULL) {
            window.begin_ns = before < 0 ? step->recorded_begin_ns
                                         : g_array_index(graph->steps, rv_step, before).recorded_end_ns;
            window.end_ns = step->recorded_end_ns;
        } else {
            window.begin_ns = before < 0 ? sim->start_ns[step->begin_marker] : simulated_ends[before];
            window.end_ns = simulated_ends[s];
        }
        /* A step ends no earlier than the one before it: when the previous
         * step's GPU work outlasts this whole step, this step takes no time
         * of its own (never a negative time). */
        window.end_ns = MAX(window.end_ns, window.begin_ns);
        g_array_append_val(windows, window);
    }
    g_free(previous);
    g_free(simulated_ends);
    return windows;
}

GArray *rv_step_times(const rv_graph *graph, const rv_sim_result *sim)
{
    GArray *times = g_array_new(FALSE, FALSE, sizeof(rv_step_time));
    GArray *recorded = rv_step_windows(graph, NULL);
    GArray *simulated = sim ? rv_step_windows(graph, sim) : NULL;
    for (guint s = 0; s < recorded->len; s++) {
        rv_step_time time = { "(whole trace)", 0, 0 };
        if (graph->steps->len > 0)
            time.name = rv_strings_get(graph->strings, g_array_index(graph->steps, rv_step, s).name);
        const rv_window *window = &g_array_index(recorded, rv_window, s);
        time.recorded_ns = window->end_ns - window->begin_ns;
        if (simulated != NULL) {
            window = &g_array_index(simulated, rv_window, s);
            time.simulated_ns = window->end_ns - window->begin_ns;
        }
        g_array_append_val(times, time);
    }
    g_array_unref(recorded);
    if (simulated) g_array_unref(simulated);
    return times;
}

/* One window over the live tasks of one rank (a rank without steps). */
static rv_window rank_window(const rv_graph *graph, const rv_sim_result *sim, int32_t rank)
{
    return tasks_window(graph, sim, rank);
}

GPtrArray *rv_step_times_by_rank(const rv_graph *graph, const rv_sim_result *sim)
{
    guint ranks = MAX(graph->ranks->len, 1);
    GPtrArray *by_rank = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < ranks; r++) g_ptr_array_add(by_rank, g_array_new(FALSE, FALSE, sizeof(rv_step_time)));
    if (graph->steps->len > 0) {
        GArray *all = rv_step_times(graph, sim);
        for (guint s = 0; s < all->len; s++) {
            const rv_step *step = &g_array_index(graph->steps, rv_step, s);
            int32_t rank = rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task, step->begin_marker));
            if (rank >= 0 && (guint)rank < ranks)
                g_array_append_val(g_ptr_array_index(by_rank, rank), g_array_index(all, rv_step_time, s));
        }
        g_array_unref(all);
    }
    for (guint r = 0; r < ranks; r++) {
        GArray *times = g_ptr_array_index(by_rank, r);
        if (times->len > 0) continue;
        rv_window recorded = rank_window(graph, NULL, (int32_t)r);
        rv_step_time time = { "(whole trace)", recorded.end_ns - recorded.begin_ns, 0 };
        if (sim != NULL) {
            rv_window simulated = rank_window(graph, sim, (int32_t)r);
            time.simulated_ns = simulated.end_ns - simulated.begin_ns;
        }
        g_array_append_val(times, time);
    }
    return by_rank;
}

GArray *rv_job_step_times(const GPtrArray *by_rank)
{
    GArray *job = g_array_new(FALSE, FALSE, sizeof(rv_step_time));
    for (guint r = 0; r < by_rank->len; r++) {
        const GArray *times = g_ptr_array_index(by_rank, r);
        for (guint s = 0; s < times->len; s++) {
            const rv_step_time *step = &g_array_index(times, rv_step_time, s);
            if (s >= job->len) g_array_append_val(job, *step);
            rv_step_time *slowest = &g_array_index(job, rv_step_time, s);
            slowest->recorded_ns = MAX(slowest->recorded_ns, step->recorded_ns);
            slowest->simulated_ns = MAX(slowest->simulated_ns, step->simulated_ns);
        }
    }
    return job;
}

void rv_recorded_result(const rv_graph *graph, rv_sim_result *result)
{
    int32_t n = rv_graph_task_count(graph);
    result->task_count = n;
    result->step_gpu_end_ns = NULL; /* the pass over the tasks finds them (simulated_step_ends) */
    result->step_count = 0;
    result->start_ns = g_new(int64_t, n);
    result->end_ns = g_new(int64_t, n);
    int64_t first = G_MAXINT64, last = G_MININT64;
    for (int32_t id = 0; id < n; id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        result->start_ns[id] = result->end_ns[id] = -1;
        if (!counts(task) || (task->flags & RV_TASK_FLAG_INSERTED)) continue;
        result->start_ns[id] = task->recorded_start_ns;
        result->end_ns[id] = task->recorded_start_ns + task->duration_ns;
        first = MIN(first, result->start_ns[id]);
        last = MAX(last, result->end_ns[id]);
    }
    result->makespan_ns = last > first ? last - first : 0;
}

static gint compare_on_timeline(gconstpointer left, gconstpointer right, gpointer data)
{
    const rv_sim_result *sim = data;
    int32_t a = *(const int32_t *)left, b = *(const int32_t *)right;
    if (sim->start_ns[a] != sim->start_ns[b]) return sim->start_ns[a] < sim->start_ns[b] ? -1 : 1;
    if (sim->end_ns[a] != sim->end_ns[b]) return sim->end_ns[a] < sim->end_ns[b] ? -1 : 1;
    return a - b;
}

GPtrArray *rv_tasks_by_resource(const rv_graph *graph, const rv_sim_result *sim)
{
    rv_sim_result recorded = { 0 };
    if (sim == NULL) {
        rv_recorded_result(graph, &recorded);
        sim = &recorded;
    }
    GPtrArray *per_resource = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < graph->resources->len; r++)
        g_ptr_array_add(per_resource, g_array_new(FALSE, FALSE, sizeof(int32_t)));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (sim->start_ns[id] < 0 || task->resource < 0 || (guint)task->resource >= graph->resources->len) continue;
        g_array_append_val(g_ptr_array_index(per_resource, task->resource), id);
    }
    for (guint r = 0; r < per_resource->len; r++)
        g_array_sort_with_data(g_ptr_array_index(per_resource, r), compare_on_timeline, (gpointer)sim);
    rv_sim_result_clear(&recorded);
    return per_resource;
}

rv_steps_summary rv_steps_summarize(const GArray *steps)
{
    rv_steps_summary summary = { 0 };
    for (guint i = 0; i < steps->len; i++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, i);
        double error = rv_relative_error(step->recorded_ns, step->simulated_ns);
        summary.mean_error += error / steps->len;
        summary.max_error = MAX(summary.max_error, error);
        summary.recorded_total_ns += step->recorded_ns;
        summary.simulated_total_ns += step->simulated_ns;
    }
    return summary;
}
