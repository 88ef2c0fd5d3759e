/*
 * batch.c - samples per step from shapes, and throughput lines (batch.h),
 * from the host's lent replays where a plugin has them (plugin.h).
 */
#include "reverie/batch.h"
#include "reverie/kernels.h"
#include "reverie/report.h"
#include "reverie/shapes.h"
#include "reverie/sim.h"
#include "reverie/transform.h"
#include "reverie/units.h"

/* Does the operator take a batch as its first input? GEMMs and convolutions do. */
static gboolean batch_operator(const rv_graph *graph, const rv_task *task)
{
    return task->op > 0 && rv_op_is_compute(rv_strings_get(graph->strings, task->op));
}

int64_t rv_graph_batch_size(const rv_graph *graph)
{
    GArray *candidates = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        if (task->phase != RV_PHASE_FORWARD || task->input_dims < 0 || !batch_operator(graph, task)) continue;
        g_array_append_val(candidates, id);
    }
    rv_tasks_sort_recorded(graph, candidates);
    int64_t batch = 0;
    for (guint i = 0; i < candidates->len && batch == 0; i++) {
        rv_shapes shapes;
        if (rv_shapes_of_task(graph, g_array_index(candidates, int32_t, i), &shapes) && rv_shapes_rank(&shapes, 0) >= 2)
            batch = rv_shapes_extent(&shapes, 0, 0);
        rv_shapes_clear(&shapes);
    }
    g_array_unref(candidates);
    return batch > 0 ? batch : 0;
}

int64_t rv_mean_step_ns_of(const rv_graph *graph, const rv_sim_result *sim)
{
    GArray *steps = rv_step_times(graph, sim);
    int64_t total = 0;
    for (guint i = 0; i < steps->len; i++) total += g_array_index(steps, rv_step_time, i).simulated_ns;
    int64_t mean = steps->len ? total / (int64_t)steps->len : 0;
    g_array_unref(steps);
    return mean;
}

int64_t rv_graph_mean_step_ns(const rv_graph *graph, GError **error)
{
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, NULL, &sim, error)) return -1;
    int64_t mean = rv_mean_step_ns_of(graph, &sim);
    rv_sim_result_clear(&sim);
    return mean;
}

void rv_throughput_describe(GString *out, int64_t before_ns, int64_t after_ns, double samples_before,
                            double samples_after)
{
    char *was = rv_format_duration(before_ns), *now = rv_format_duration(after_ns);
    g_string_append_printf(out, "    step %s -> %s", was, now);
    if (samples_before > 0 && before_ns > 0 && after_ns > 0)
        g_string_append_printf(out, "; %g -> %g samples a step: %.1f -> %.1f samples/s (%.3fx)", samples_before,
                               samples_after, samples_before / (before_ns * 1e-9), samples_after / (after_ns * 1e-9),
                               (samples_after / after_ns) / (samples_before / before_ns));
    else
        g_string_append(out, "; samples per step unknown (no GEMM or convolution shapes): give batch= for samples/s");
    g_string_append_c(out, '\n');
    g_free(was);
    g_free(now);
}

int64_t rv_mean_step_before(const rv_graph *graph, const rv_plugin_output *output, GError **error)
{
    return output->before ? rv_mean_step_ns_of(graph, output->before) : rv_graph_mean_step_ns(graph, error);
}

typedef struct {
    int64_t before_ns;
    double samples_before, samples_after;
} throughput;

/* After the host's replay: the very replay rv_throughput_note would run
 * when no policy was in force; with one (an earlier optimization's),
 * replay without it.  A replay that fails here is left out: the host's
 * own replay of this graph ran. */
static void throughput_after_replay(const rv_graph *graph, const rv_host_replay *replay, GString *notes, void *data)
{
    const throughput *t = data;
    int64_t after = replay->policy == NULL ? rv_mean_step_ns_of(graph, replay->sim) : rv_graph_mean_step_ns(graph, NULL);
    if (after >= 0) rv_throughput_describe(notes, t->before_ns, after, t->samples_before, t->samples_after);
}

gboolean rv_throughput_note(const rv_graph *graph, rv_plugin_output *output, int64_t before_ns, double samples_before,
                            double samples_after, GError **error)
{
    throughput t = { before_ns, samples_before, samples_after };
    if (output->last) {
        output->after_replay = throughput_after_replay;
        output->after_replay_data = g_memdup2(&t, sizeof t);
        output->free_after_replay_data = g_free;
        return TRUE;
    }
    int64_t after = rv_graph_mean_step_ns(graph, error);
    if (after >= 0) rv_throughput_describe(output->notes, before_ns, after, samples_before, samples_after);
    return after >= 0;
}
