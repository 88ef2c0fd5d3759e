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

static rv_step_time whole_trace(const rv_graph *graph, const rv_sim_result *sim)
{
    int64_t recorded_begin = G_MAXINT64, recorded_end = G_MININT64;
    int64_t simulated_begin = G_MAXINT64, simulated_end = G_MININT64;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!counts(task) || task->kind == RV_TASK_MARKER) continue;
        /* Inserted tasks have no recording; they count only in the simulation. */
        if (!(task->flags & RV_TASK_FLAG_INSERTED)) {
            recorded_begin = MIN(recorded_begin, task->recorded_start_ns);
            recorded_end = MAX(recorded_end, task->recorded_start_ns + task->duration_ns);
        }
        if (sim != NULL && sim->start_ns[id] >= 0) {
            simulated_begin = MIN(simulated_begin, sim->start_ns[id]);
            simulated_end = MAX(simulated_end, sim->end_ns[id]);
        }
    }
    rv_step_time time = { "(whole trace)", 0, 0 };
    if (recorded_end > recorded_begin) time.recorded_ns = recorded_end - recorded_begin;
    if (simulated_end > simulated_begin) time.simulated_ns = simulated_end - simulated_begin;
    return time;
}

/* The simulated end of each step: its end marker, or the last GPU task
 * launched inside it, whichever is later. */
static int64_t *simulated_step_ends(const rv_graph *graph, const rv_sim_result *sim)
{
    guint count = graph->steps->len;
    int64_t *ends = g_new(int64_t, count);
    for (guint s = 0; s < count; s++)
        ends[s] = sim->end_ns[g_array_index(graph->steps, rv_step, s).end_marker];
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!counts(task) || !(task->flags & RV_TASK_FLAG_GPU) || task->step < 0) continue;
        if (sim->end_ns[id] > ends[task->step]) ends[task->step] = sim->end_ns[id];
    }
    return ends;
}

GArray *rv_step_times(const rv_graph *graph, const rv_sim_result *sim)
{
    GArray *times = g_array_new(FALSE, FALSE, sizeof(rv_step_time));
    if (graph->steps->len == 0) {
        rv_step_time time = whole_trace(graph, sim);
        g_array_append_val(times, time);
        return times;
    }
    int64_t *simulated_ends = sim ? simulated_step_ends(graph, sim) : NULL;
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        rv_step_time time = { rv_strings_get(graph->strings, step->name), 0, 0 };
        int64_t recorded_from = s == 0 ? step->recorded_begin_ns
                                       : g_array_index(graph->steps, rv_step, s - 1).recorded_end_ns;
        time.recorded_ns = step->recorded_end_ns - recorded_from;
        if (sim != NULL) {
            int64_t simulated_from = s == 0 ? sim->start_ns[step->begin_marker] : simulated_ends[s - 1];
            time.simulated_ns = simulated_ends[s] - simulated_from;
        }
        g_array_append_val(times, time);
    }
    g_free(simulated_ends);
    return times;
}
