/*
 * runs.c - what the reports compare (runs.h): the recording, the baseline
 * replay and, with optimizations, the prediction.
 *
 * The baseline graph is the caller's, as built; the optimizations
 * transform a copy, so each run's timeline can be read against its own
 * graph.
 */
#include "reverie/runs.h"
#include "reverie/critical_path.h"
#include "reverie/optimize.h"
#include "reverie/plot.h"
#include "reverie/plugin.h"
#include "reverie/report.h"
#include "reverie/timeline.h"
#include <string.h>

static gboolean predict(rv_runs *runs, GPtrArray *opts, GError **error)
{
    rv_plugin_output policy = { 0 };
    runs->predicted = rv_graph_copy(runs->baseline);
    gboolean ok = rv_opts_apply(runs->predicted, opts, TRUE, &policy, error) &&
                  rv_simulate(runs->predicted, policy.policy.priority ? &policy.policy : NULL, &runs->predicted_sim, error);
    for (guint i = 0; i < opts->len; i++) {
        const rv_opt *opt = g_ptr_array_index(opts, i);
        if (opt->notes) g_string_append(runs->notes, opt->notes->str);
    }
    rv_opts_policy_clear(&policy);
    return ok;
}

gboolean rv_runs_replay(rv_runs *runs, const rv_graph *baseline, GPtrArray *opts, GError **error)
{
    memset(runs, 0, sizeof *runs);
    runs->baseline = baseline;
    runs->notes = g_string_new(NULL);
    rv_recorded_result(baseline, &runs->recorded_sim);
    if (!rv_simulate(baseline, NULL, &runs->baseline_sim, error)) return FALSE;
    return opts == NULL || opts->len == 0 || predict(runs, opts, error);
}

void rv_runs_clear(rv_runs *runs)
{
    rv_sim_result_clear(&runs->recorded_sim);
    rv_sim_result_clear(&runs->baseline_sim);
    rv_sim_result_clear(&runs->predicted_sim);
    rv_graph_free(runs->predicted);
    if (runs->notes) g_string_free(runs->notes, TRUE);
    memset(runs, 0, sizeof *runs);
}

guint rv_runs_list(const rv_runs *runs, gboolean with_recording, rv_run *list)
{
    guint count = 0;
    if (with_recording) list[count++] = (rv_run){ "recorded", runs->baseline, &runs->recorded_sim, TRUE };
    list[count++] = (rv_run){ "baseline", runs->baseline, &runs->baseline_sim, FALSE };
    if (runs->predicted) list[count++] = (rv_run){ "predicted", runs->predicted, &runs->predicted_sim, FALSE };
    return count;
}

rv_breakdown *rv_run_breakdown(const rv_run *run)
{
    GArray *windows = rv_step_windows(run->graph, run->recorded ? NULL : run->sim);
    rv_breakdown *breakdown = rv_breakdown_compute(run->graph, run->sim, windows);
    g_array_unref(windows);
    return breakdown;
}

gboolean rv_runs_plot(const char *path, const rv_graph *graph, const rv_run *runs, rv_breakdown *const *breakdowns,
                     guint count, GError **error)
{
    rv_plot_run plotted[3];
    for (guint i = 0; i < count && i < 3; i++) plotted[i] = (rv_plot_run){ runs[i].label, breakdowns[i] };
    char *name = g_path_get_basename(graph->source);
    gboolean ok = rv_plot_write_svg(path, name, graph, plotted, MIN(count, 3), error);
    g_free(name);
    return ok;
}

gboolean rv_runs_write_timeline(const char *path, const rv_run *runs, guint count, GError **error)
{
    rv_timeline_run timeline[3] = { { 0 } };
    rv_critical_path *paths[3] = { NULL, NULL, NULL };
    count = MIN(count, 3);
    for (guint i = 0; i < count; i++) {
        paths[i] = rv_critical_path_find(runs[i].graph, runs[i].sim);
        timeline[i] = (rv_timeline_run){ runs[i].label, runs[i].graph, runs[i].sim, NULL, paths[i], NULL };
        if (count == 2) {
            timeline[i].other = runs[1 - i].graph;
            timeline[i].other_label = runs[1 - i].label;
        }
    }
    gboolean ok = rv_timeline_write(path, timeline, count, error);
    for (guint i = 0; i < count; i++) rv_critical_path_free(paths[i]);
    return ok;
}
