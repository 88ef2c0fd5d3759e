/*
 * runs.c - what the report commands (breakdown, critical-path) compare: the
 * recording, the baseline replay and, with --opt, the prediction.
 *
 * The baseline graph is kept as built; the optimizations transform a copy,
 * so each run's timeline can be read against its own graph.
 */
#include "runs.h"
#include "reverie/critical_path.h"
#include "reverie/plot.h"
#include "reverie/plugin.h"
#include "reverie/timeline.h"
#include <string.h>

static gboolean predict(rv_cli_runs *runs, GPtrArray *opts, GError **error)
{
    rv_plugin_output policy = { { NULL, NULL }, NULL, NULL };
    runs->predicted = rv_graph_copy(runs->baseline);
    gboolean ok = rv_cli_apply_opts(runs->predicted, opts, TRUE, &policy, error) &&
                  rv_simulate(runs->predicted, policy.policy.priority ? &policy.policy : NULL, &runs->predicted_sim, error);
    if (ok) rv_cli_note_replay(runs->predicted, &runs->predicted_sim);
    for (guint i = 0; i < opts->len; i++) {
        const rv_opt *opt = g_ptr_array_index(opts, i);
        if (opt->notes) g_string_append(runs->notes, opt->notes->str);
    }
    rv_opts_policy_clear(&policy);
    return ok;
}

static gboolean load_and_replay(const char *path, GPtrArray *opts, rv_cli_runs *runs, GError **error)
{
    runs->baseline = rv_cli_load(path, error);
    if (runs->baseline == NULL) return FALSE;
    rv_cli_print_notes(runs->baseline);
    rv_recorded_result(runs->baseline, &runs->recorded_sim);
    if (!rv_simulate(runs->baseline, NULL, &runs->baseline_sim, error)) return FALSE;
    return opts == NULL || predict(runs, opts, error);
}

gboolean rv_cli_runs_load(const char *path, char **specs, rv_cli_runs *runs, GError **error)
{
    memset(runs, 0, sizeof *runs);
    runs->notes = g_string_new(NULL);
    /* The --opt specs are checked before the (slow) load, as whatif does. */
    GHashTable *plugins = rv_plugin_table_new();
    GPtrArray *opts = specs && specs[0] ? rv_opts_prepare(plugins, specs, error) : NULL;
    gboolean ok = (opts != NULL || !(specs && specs[0])) && load_and_replay(path, opts, runs, error);
    if (opts) g_ptr_array_unref(opts);
    g_hash_table_destroy(plugins); /* after the policy: its code lives in the plugin */
    return ok;
}

void rv_cli_runs_clear(rv_cli_runs *runs)
{
    rv_sim_result_clear(&runs->recorded_sim);
    rv_sim_result_clear(&runs->baseline_sim);
    rv_sim_result_clear(&runs->predicted_sim);
    rv_graph_free(runs->baseline);
    rv_graph_free(runs->predicted);
    if (runs->notes) g_string_free(runs->notes, TRUE);
    memset(runs, 0, sizeof *runs);
}

int rv_cli_report_runs(const char *command, int argc, char **argv, char **specs, gboolean as_json, gboolean as_csv,
                       rv_cli_report_fn report, const void *options)
{
    if (argc != 2) return rv_cli_usage(command, "give exactly one trace or graph");
    if (as_json && as_csv) return rv_cli_usage(command, "give --json or --csv, not both");
    rv_cli_runs runs;
    GError *error = NULL;
    int status = rv_cli_runs_load(argv[1], specs, &runs, &error) ? report(&runs, options) : rv_cli_fail(error);
    rv_cli_runs_clear(&runs);
    return status;
}

guint rv_cli_runs_list(const rv_cli_runs *runs, gboolean with_recording, rv_cli_run *list)
{
    guint count = 0;
    if (with_recording) list[count++] = (rv_cli_run){ "recorded", runs->baseline, &runs->recorded_sim, TRUE };
    list[count++] = (rv_cli_run){ "baseline", runs->baseline, &runs->baseline_sim, FALSE };
    if (runs->predicted) list[count++] = (rv_cli_run){ "predicted", runs->predicted, &runs->predicted_sim, FALSE };
    return count;
}

rv_breakdown *rv_cli_breakdown_of(const rv_cli_run *run)
{
    GArray *windows = rv_step_windows(run->graph, run->recorded ? NULL : run->sim);
    rv_breakdown *breakdown = rv_breakdown_compute(run->graph, run->sim, windows);
    g_array_unref(windows);
    return breakdown;
}

gboolean rv_cli_plot(const char *path, const rv_graph *graph, const rv_cli_run *runs, rv_breakdown *const *breakdowns,
                     guint count, GError **error)
{
    rv_plot_run plotted[3];
    for (guint i = 0; i < count && i < 3; i++) plotted[i] = (rv_plot_run){ runs[i].label, breakdowns[i] };
    char *name = g_path_get_basename(graph->source);
    gboolean ok = rv_plot_write_svg(path, name, graph, plotted, MIN(count, 3), error);
    g_free(name);
    return ok;
}

gboolean rv_cli_write_timeline(const char *path, const rv_cli_run *runs, guint count, GError **error)
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
