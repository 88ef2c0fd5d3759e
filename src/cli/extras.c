/*
 * extras.c - what simulate and whatif add to their own tables: a timeline
 * of the replay (--timeline), a plot (--plot), what changed (--diff) and
 * CSV (--csv).  Kept apart so those commands only call in.
 */
#include "runs.h"
#include "reverie/explain.h"
#include <jansson.h>
#include <stdlib.h>

gboolean rv_cli_extras_need_baseline(const rv_cli_extras *extras)
{
    return extras->timeline || extras->plot || extras->diff;
}

gboolean rv_cli_extras_check(const rv_cli_extras *extras, GError **error)
{
    return rv_cli_check_output(extras->timeline, error) && rv_cli_check_output(extras->plot, error);
}

void rv_cli_extras_clear(rv_cli_extras *extras)
{
    g_free(extras->timeline);
    g_free(extras->plot);
    extras->timeline = extras->plot = NULL;
}

/* Write what was asked for about these runs; the plot shows all of them,
 * the timeline those that were replayed. */
static int write_files(const rv_cli_extras *extras, const rv_graph *graph, const rv_run *runs, guint count)
{
    GError *error = NULL;
    guint replayed = 0;
    rv_run timeline[3];
    for (guint i = 0; i < count; i++)
        if (!runs[i].recorded) timeline[replayed++] = runs[i];
    if (extras->timeline && !rv_runs_write_timeline(extras->timeline, timeline, replayed, &error))
        return rv_cli_fail(error);
    if (extras->plot == NULL) return RV_EXIT_OK;
    rv_breakdown *breakdowns[3];
    for (guint i = 0; i < count; i++) breakdowns[i] = rv_run_breakdown(&runs[i]);
    gboolean ok = rv_runs_plot(extras->plot, graph, runs, breakdowns, count, &error);
    for (guint i = 0; i < count; i++) rv_breakdown_free(breakdowns[i]);
    return ok ? RV_EXIT_OK : rv_cli_fail(error);
}

int rv_cli_simulate_extras(const rv_graph *graph, const rv_cli_extras *extras)
{
    if (!extras->timeline && !extras->plot) return RV_EXIT_OK;
    GError *error = NULL;
    rv_sim_result recorded = { 0 }, replay = { 0 };
    if (!rv_simulate(graph, NULL, &replay, &error)) return rv_cli_fail(error);
    rv_recorded_result(graph, &recorded);
    rv_run runs[2] = { { "recorded", graph, &recorded, TRUE }, { "baseline", graph, &replay, FALSE } };
    int status = write_files(extras, graph, runs, 2);
    rv_sim_result_clear(&recorded);
    rv_sim_result_clear(&replay);
    return status;
}

static char *number(const char *format, double value)
{
    return g_strdup_printf(format, value);
}

void rv_cli_print_simulate_csv(const rv_graph *graph, const GArray *steps, const rv_explanation *x)
{
    const char *header[] = { "step", "recorded_us", "simulated_us", "error", "unexplained_us" };
    rv_cli_csv_row(header, G_N_ELEMENTS(header));
    for (guint i = 0; i < steps->len; i++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, i);
        char *fields[4] = {
            number("%.3f", step->recorded_ns / 1e3), number("%.3f", step->simulated_ns / 1e3),
            number("%.6f", rv_relative_error(step->recorded_ns, step->simulated_ns)),
            number("%.3f", rv_step_unexplained(graph, x, i) / 1e3),
        };
        const char *row[] = { step->name, fields[0], fields[1], fields[2], fields[3] };
        rv_cli_csv_row(row, G_N_ELEMENTS(row));
        for (int k = 0; k < 4; k++) g_free(fields[k]);
    }
}

int rv_cli_whatif_extras(const rv_graph *baseline, const rv_graph *predicted, const rv_policy *policy,
                         const rv_cli_extras *extras, rv_diff **diff)
{
    *diff = NULL;
    if (!rv_cli_extras_need_baseline(extras)) return RV_EXIT_OK;
    GError *error = NULL;
    rv_sim_result before = { 0 }, after = { 0 };
    int status = RV_EXIT_OK;
    if (!rv_simulate(baseline, NULL, &before, &error) || !rv_simulate(predicted, policy, &after, &error)) {
        status = rv_cli_fail(error);
    } else {
        rv_run runs[2] = { { "baseline", baseline, &before, FALSE }, { "predicted", predicted, &after, FALSE } };
        status = write_files(extras, baseline, runs, 2);
        if (extras->diff) *diff = rv_diff_compute(baseline, &before, predicted, &after);
    }
    rv_sim_result_clear(&before);
    rv_sim_result_clear(&after);
    return status;
}

void rv_cli_print_whatif_csv(const GArray *baseline_steps, const GArray *predicted_steps)
{
    const char *header[] = { "step", "recorded_us", "baseline_us", "predicted_us", "speedup" };
    rv_cli_csv_row(header, G_N_ELEMENTS(header));
    for (guint s = 0; s < baseline_steps->len; s++) {
        const rv_step_time *b = &g_array_index(baseline_steps, rv_step_time, s);
        const rv_step_time *p = &g_array_index(predicted_steps, rv_step_time, s);
        char *fields[4] = {
            number("%.3f", b->recorded_ns / 1e3), number("%.3f", b->simulated_ns / 1e3),
            number("%.3f", p->simulated_ns / 1e3),
            number("%.6f", p->simulated_ns ? (double)b->simulated_ns / p->simulated_ns : 0.0),
        };
        const char *row[] = { b->name, fields[0], fields[1], fields[2], fields[3] };
        rv_cli_csv_row(row, G_N_ELEMENTS(row));
        for (int k = 0; k < 4; k++) g_free(fields[k]);
    }
}

static void print_changes(const char *title, const GArray *changes, guint limit)
{
    if (changes->len == 0) return;
    printf("  %s\n", title);
    for (guint i = 0; i < changes->len && i < limit; i++) {
        const rv_change *c = &g_array_index(changes, rv_change, i);
        int64_t delta = c->predicted_ns - c->baseline_ns;
        printf("    %-40.40s %11.3f ms -> %11.3f ms %+11.3f ms", rv_cli_short_name(c->name), c->baseline_ns / 1e6,
               c->predicted_ns / 1e6, delta / 1e6);
        if (c->baseline_ns) printf(" %+7.1f%%", 100.0 * delta / c->baseline_ns);
        printf("\n");
    }
}

void rv_cli_print_diff(const rv_diff *diff, int top)
{
    printf("\nwhat changed (baseline -> predicted, summed over the steps: %.3f ms -> %.3f ms)\n",
           diff->baseline_ns / 1e6, diff->predicted_ns / 1e6);
    print_changes("phases (wall time; breakdown's attribution):", diff->phases, G_MAXUINT);
    print_changes("kernel classes (GPU work, summed durations):", diff->classes, G_MAXUINT);
    print_changes("layers whose tasks changed most (CPU calls with host overhead, and GPU work):", diff->layers, (guint)top);
    print_changes("critical path by kind:", diff->path_parts, G_MAXUINT);
    print_changes("critical path: layers that moved most:", diff->path_layers, (guint)top);
}

static json_t *json_changes(const GArray *changes)
{
    json_t *list = json_array();
    for (guint i = 0; i < changes->len; i++) {
        const rv_change *c = &g_array_index(changes, rv_change, i);
        json_array_append_new(list, json_pack("{s:s,s:f,s:f,s:f}", "name", c->name, "baseline_us", c->baseline_ns / 1e3,
                                              "predicted_us", c->predicted_ns / 1e3, "change_us",
                                              (c->predicted_ns - c->baseline_ns) / 1e3));
    }
    return list;
}

void *rv_cli_diff_json(const rv_diff *diff)
{
    return json_pack("{s:f,s:f,s:o,s:o,s:o,s:o,s:o}", "baseline_us", diff->baseline_ns / 1e3, "predicted_us",
                     diff->predicted_ns / 1e3, "phases", json_changes(diff->phases), "kernel_classes",
                     json_changes(diff->classes), "layers", json_changes(diff->layers), "critical_path",
                     json_changes(diff->path_parts), "critical_path_layers", json_changes(diff->path_layers));
}
