/*
 * whatif.c - `reverie whatif`: apply optimizations in order and compare the
 * predicted step times with the baseline replay and the recording.
 */
#include "cli.h"
#include "runs.h"
#include "reverie/escape.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include <jansson.h>
#include <string.h>

static void print_peak(const rv_cli_peak *peak)
{
    if (peak->estimated)
        printf("  %-20s %14s %10.1f MiB %10.1f MiB %8.3fx\n", "peak memory", "", peak->baseline.peak / 1048576.0,
               peak->predicted.peak / 1048576.0,
               peak->predicted.peak ? (double)peak->baseline.peak / peak->predicted.peak : 0.0);
    else
        printf("  peak memory: not estimated (%s)\n", peak->missing);
    if (peak->recorded)
        printf("  peak memory recorded in the trace ([memory] events): %.1f MiB allocated\n",
               peak->recorded_bytes / 1048576.0);
}

static void json_peak(json_t *root, const rv_cli_peak *peak)
{
    json_object_set_new(root, "baseline_peak_bytes", peak->estimated ? json_integer(peak->baseline.peak) : json_null());
    json_object_set_new(root, "predicted_peak_bytes", peak->estimated ? json_integer(peak->predicted.peak) : json_null());
    json_object_set_new(root, "predicted_peak_phase",
                        peak->estimated ? json_string(rv_phase_name((rv_phase)peak->predicted.peak_phase)) : json_null());
    json_object_set_new(root, "recorded_peak_bytes", peak->recorded ? json_integer(peak->recorded_bytes) : json_null());
}

/* Notes are lines of text that may quote names from the trace. */
static void print_notes(const GString *notes)
{
    if (notes == NULL || notes->len == 0) return;
    char **lines = g_strsplit(notes->str, "\n", -1);
    for (char **line = lines; *line; line++) {
        if (**line == '\0' && line[1] == NULL) break;
        char *shown = rv_escape_text(*line);
        printf("%s\n", shown);
        g_free(shown);
    }
    g_strfreev(lines);
}

static void print_table(const rv_graph *graph, GPtrArray *opts, const rv_cli_replay *base_replay,
                        const rv_cli_replay *predicted_replay, int64_t baseline_gpu_ns, int64_t predicted_gpu_ns,
                        const rv_cli_peak *peak)
{
    const GArray *baseline = base_replay->steps, *predicted = predicted_replay->steps;
    char recorded[32], base[32], pred[32], *escaped = NULL;
    printf("%s", rv_escape_if_needed(graph->source, &escaped));
    if (rv_cli_is_job(graph)) printf(" (%u ranks)", graph->ranks->len);
    printf("\n");
    for (guint i = 0; i < opts->len; i++) {
        rv_cli_opt *opt = g_ptr_array_index(opts, i);
        printf("  optimization %u: %s\n", i + 1, rv_escape_if_needed(opt->spec, &escaped));
        print_notes(opt->notes);
    }
    if (rv_cli_is_job(graph)) {
        rv_cli_print_rank_whatif(graph, base_replay, predicted_replay);
        print_peak(peak);
        g_free(escaped);
        return;
    }
    printf("  %-20s %14s %14s %14s %9s\n", "step", "recorded", "baseline", "predicted", "speedup");
    int64_t base_total = 0, pred_total = 0, rec_total = 0;
    for (guint s = 0; s < baseline->len; s++) {
        const rv_step_time *b = &g_array_index(baseline, rv_step_time, s);
        const rv_step_time *p = &g_array_index(predicted, rv_step_time, s);
        rv_cli_format_ms(recorded, sizeof recorded, b->recorded_ns);
        rv_cli_format_ms(base, sizeof base, b->simulated_ns);
        rv_cli_format_ms(pred, sizeof pred, p->simulated_ns);
        printf("  %-20s %14s %14s %14s %8.3fx\n", rv_escape_if_needed(b->name, &escaped), recorded, base, pred,
               p->simulated_ns ? (double)b->simulated_ns / p->simulated_ns : 0.0);
        base_total += b->simulated_ns; pred_total += p->simulated_ns; rec_total += b->recorded_ns;
    }
    rv_cli_format_ms(recorded, sizeof recorded, rec_total);
    rv_cli_format_ms(base, sizeof base, base_total);
    rv_cli_format_ms(pred, sizeof pred, pred_total);
    printf("  %-20s %14s %14s %14s %8.3fx\n", "total", recorded, base, pred,
           pred_total ? (double)base_total / pred_total : 0.0);
    rv_cli_format_ms(base, sizeof base, baseline_gpu_ns);
    rv_cli_format_ms(pred, sizeof pred, predicted_gpu_ns);
    printf("  %-20s %14s %14s %14s %8.3fx\n", "GPU kernels", "", base, pred,
           predicted_gpu_ns ? (double)baseline_gpu_ns / predicted_gpu_ns : 0.0);
    print_peak(peak);
    g_free(escaped);
}

static void print_json(const rv_graph *graph, GPtrArray *opts, const rv_cli_replay *base_replay,
                       const rv_cli_replay *predicted_replay, const rv_diff *diff,
                       int64_t baseline_gpu_ns, int64_t predicted_gpu_ns, const rv_cli_peak *peak)
{
    const GArray *baseline = base_replay->steps, *predicted = predicted_replay->steps;
    json_t *root = json_object(), *list = json_array(), *steps = json_array();
    json_object_set_new(root, "source", rv_cli_json_text(graph->source));
    uint64_t changed = 0;
    for (guint i = 0; i < opts->len; i++) {
        rv_cli_opt *opt = g_ptr_array_index(opts, i);
        json_t *params = json_object();
        GPtrArray *described = rv_params_describe(opt->params);
        for (guint k = 0; k < described->len; k++) {
            char **pair = g_strsplit(g_ptr_array_index(described, k), "=", 2);
            json_object_set_new(params, pair[0], rv_cli_json_text(pair[1] ? pair[1] : ""));
            g_strfreev(pair);
        }
        g_ptr_array_free(described, TRUE);
        json_array_append_new(list, json_pack("{s:o,s:o,s:o,s:I}", "name", rv_cli_json_text(opt->plugin->name),
                                              "params", params, "notes", rv_cli_json_text(opt->notes ? opt->notes->str : ""),
                                              "changed_tasks", (json_int_t)opt->changed_tasks));
        changed += opt->changed_tasks;
    }
    json_object_set_new(root, "optimizations", list);
    json_object_set_new(root, "changed_tasks", json_integer((json_int_t)changed));
    int64_t base_total = 0, pred_total = 0, rec_total = 0;
    for (guint s = 0; s < baseline->len; s++) {
        const rv_step_time *b = &g_array_index(baseline, rv_step_time, s);
        const rv_step_time *p = &g_array_index(predicted, rv_step_time, s);
        json_array_append_new(steps, json_pack("{s:o,s:f,s:f,s:f}", "name", rv_cli_json_text(b->name), "recorded_us", b->recorded_ns / 1e3,
                                               "baseline_us", b->simulated_ns / 1e3, "predicted_us", p->simulated_ns / 1e3));
        base_total += b->simulated_ns; pred_total += p->simulated_ns; rec_total += b->recorded_ns;
    }
    json_object_set_new(root, "steps", steps);
    json_object_set_new(root, "recorded_us", json_real(rec_total / 1e3));
    json_object_set_new(root, "baseline_us", json_real(base_total / 1e3));
    json_object_set_new(root, "predicted_us", json_real(pred_total / 1e3));
    json_object_set_new(root, "speedup", json_real(pred_total ? (double)base_total / pred_total : 0.0));
    json_object_set_new(root, "baseline_gpu_us", json_real(baseline_gpu_ns / 1e3));
    json_object_set_new(root, "predicted_gpu_us", json_real(predicted_gpu_ns / 1e3));
    json_peak(root, peak);
    if (diff) json_object_set_new(root, "diff", rv_cli_diff_json(diff));
    if (rv_cli_is_job(graph)) json_object_set_new(root, "ranks", rv_cli_json_ranks(graph, base_replay, predicted_replay));
    rv_cli_print_json(root);
}

static int run_whatif(char **paths, int count, char **specs, gboolean as_json, const rv_cli_extras *extras)
{
    GError *error = NULL;
    GHashTable *plugins = rv_cli_plugins_new();
    rv_plugin_output policy = { { NULL, NULL }, NULL, NULL };
    rv_graph *graph = NULL;
    rv_graph *kept = NULL;  /* the baseline graph, for --timeline, --plot and --diff */
    rv_cli_replay base = { 0 }, after = { 0 };
    GArray *baseline = NULL, *predicted = NULL;
    rv_diff *diff = NULL;
    rv_cli_peak peak = { 0 };
    GPtrArray *opts = rv_cli_opts_prepare(plugins, specs, &error);
    if (opts != NULL) graph = rv_cli_load_job(paths, count, TRUE, &error);
    int64_t baseline_gpu_ns = graph ? rv_cli_gpu_kernel_ns(graph) : 0;
    if (graph != NULL && rv_cli_replay_job(graph, NULL, &base, &error)) baseline = base.steps;
    if (baseline != NULL && rv_cli_extras_need_baseline(extras)) kept = rv_graph_copy(graph);
    if (baseline != NULL) rv_cli_peak_before(&peak, graph);
    if (baseline != NULL && rv_cli_apply_opts(graph, opts, TRUE, &policy, &error) &&
        rv_cli_replay_job(graph, policy.policy.priority ? &policy.policy : NULL, &after, &error))
        predicted = after.steps;
    int status = RV_EXIT_OK;
    if (predicted != NULL)
        status = rv_cli_whatif_extras(kept, graph, policy.policy.priority ? &policy.policy : NULL, extras, &diff);
    if (predicted != NULL && status == RV_EXIT_OK) {
        int64_t predicted_gpu_ns = rv_cli_gpu_kernel_ns(graph);
        rv_cli_peak_after(&peak, graph);
        if (as_json) print_json(graph, opts, &base, &after, diff, baseline_gpu_ns, predicted_gpu_ns, &peak);
        else if (extras->csv) rv_cli_print_whatif_csv(baseline, predicted);
        else print_table(graph, opts, &base, &after, baseline_gpu_ns, predicted_gpu_ns, &peak);
        if (diff && !as_json && !extras->csv) rv_cli_print_diff(diff, 10);
    } else if (predicted == NULL) {
        status = rv_cli_fail(error);
    }
    rv_cli_peak_clear(&peak);
    rv_cli_policy_clear(&policy);
    rv_cli_replay_clear(&base);
    rv_cli_replay_clear(&after);
    rv_diff_free(diff);
    rv_graph_free(kept);
    rv_graph_free(graph);
    if (opts) g_ptr_array_unref(opts);
    g_hash_table_destroy(plugins); /* after the policy: its code lives in the plugin */
    return status;
}

int rv_cmd_whatif(int argc, char **argv)
{
    gboolean as_json = FALSE;
    char **specs = NULL;
    rv_cli_extras extras = { NULL, NULL, FALSE, FALSE };
    GOptionEntry entries[] = {
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &specs, "an optimization, applied in the order given", "NAME[:k=v,...]" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in docs/commands.md)", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &extras.csv, "print the per-step table as CSV", NULL },
        { "diff", 0, 0, G_OPTION_ARG_NONE, &extras.diff,
          "also list the phases, kernel classes and layers whose time changed most, and how the critical path moved", NULL },
        { "timeline", 0, 0, G_OPTION_ARG_FILENAME, &extras.timeline,
          "write baseline and prediction side by side as Chrome trace JSON for ui.perfetto.dev (.gz compresses)", "FILE" },
        { "plot", 0, 0, G_OPTION_ARG_FILENAME, &extras.plot, "draw baseline and predicted steps, broken down, to SVG",
          "FILE.svg" },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH|FOLDER... --opt NAME[:k=v,...]... - predict an optimization");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "Examples:\n"
        "  reverie whatif trace.json.gz --opt amp\n"
        "  reverie whatif trace.json.gz --opt ddp:world=8,bandwidth=100Gbps --opt fused-adam\n"
        "  reverie whatif trace.json.gz --opt amp --diff --plot amp.svg --timeline amp.json.gz\n"
        "  reverie whatif traces/param_dlrm_v100_8ranks --opt straggler:rank=3,factor=1.5\n"
        "Several traces, or a folder, are the ranks of one job: each rank's steps and waits, and the\n"
        "job's step (the slowest rank).\n"
        "Values take units: 25GB/s, 100Gbps, 5us, 2ms, 25MiB. 'reverie plugins' lists them.\n"
        "Exit 3 when an optimization fails or finds nothing to act on.\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc < 2) { status = rv_cli_usage("whatif", "give a trace or graph, or several (the ranks of one job)"); goto out; }
    if (specs == NULL || specs[0] == NULL) { status = rv_cli_usage("whatif", "give at least one --opt"); goto out; }
    if (as_json && extras.csv) { status = rv_cli_usage("whatif", "give --json or --csv, not both"); goto out; }
    GError *error = NULL;
    if (!rv_cli_extras_check(&extras, &error)) { status = rv_cli_fail(error); goto out; }
    status = run_whatif(argv + 1, argc - 1, specs, as_json, &extras);
out:
    rv_cli_extras_clear(&extras);
    g_strfreev(specs);
    g_option_context_free(context);
    return status;
}
