/*
 * whatif.c - `reverie whatif`: apply optimizations in order and compare the
 * predicted step times with the baseline replay and the recording.
 */
#include "cli.h"
#include "runs.h"
#include "reverie/documents.h"
#include "reverie/escape.h"
#include "reverie/whatif.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include <jansson.h>
#include <string.h>

static void print_peak(const rv_memory_peak *peak)
{
    if (peak->estimated)
        printf("  %-20s %14s %10.1f MiB %10.1f MiB %8.3fx\n", "peak memory", "", rv_cli_mib(peak->baseline.peak),
               rv_cli_mib(peak->predicted.peak),
               peak->predicted.peak ? (double)peak->baseline.peak / peak->predicted.peak : 0.0);
    else
        printf("  peak memory: not estimated (%s)\n", peak->missing);
    if (peak->recorded)
        printf("  peak memory recorded in the trace ([memory] events): %.1f MiB allocated\n",
               rv_cli_mib(peak->recorded_bytes));
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

/* How much of the predicted steps is recorded host time: a GPU what-if
 * cannot go below it. */
static void print_host_share(const rv_replay *predicted)
{
    if (predicted->path_ns <= 0) return;
    double share = (double)predicted->host_path_ns / (double)predicted->path_ns;
    printf("  critical path: %.0f%% recorded host time (%.3f ms: CPU calls and the host time before them)%s\n",
           100 * share, predicted->host_path_ns / 1e6,
           share >= 0.5 ? "; the prediction is host-bound: a faster GPU cannot shrink that part, "
                          "hardware:host_scale= asks what a faster host gives" : "");
    if (predicted->profiler_path_ns > 0)
        printf("  of that host time, %.3f ms (%.0f%% of the path) is the profiler's callbacks between operators, as their "
               "gaps bound them (the profiler costs more, inside operators and calls): --opt unprofiled takes out the whole "
               "cost it estimates from that bound\n",
               predicted->profiler_path_ns / 1e6, 100.0 * predicted->profiler_path_ns / predicted->path_ns);
}

static int64_t steps_total(const GArray *steps)
{
    int64_t total = 0;
    for (guint s = 0; s < steps->len; s++) total += g_array_index(steps, rv_step_time, s).simulated_ns;
    return total;
}

static void print_range(const rv_prediction_range *range)
{
    if (!range->present) return;
    char low[32], high[32], gpu_low[32], gpu_high[32];
    rv_cli_format_ms(low, sizeof low, steps_total(range->low.steps));
    rv_cli_format_ms(high, sizeof high, steps_total(range->high.steps));
    rv_cli_format_ms(gpu_low, sizeof gpu_low, range->gpu_ns[0]);
    rv_cli_format_ms(gpu_high, sizeof gpu_high, range->gpu_ns[1]);
    printf("  predicted range (each estimate at its low, then its high end): total %s to %s, GPU kernels %s to %s\n",
           g_strstrip(low), g_strstrip(high), g_strstrip(gpu_low), g_strstrip(gpu_high));
}

static void print_table(const rv_graph *graph, GPtrArray *opts, const rv_replay *base_replay,
                        const rv_replay *predicted_replay, int64_t baseline_gpu_ns, int64_t predicted_gpu_ns,
                        const rv_memory_peak *peak, const rv_prediction_range *range)
{
    const GArray *baseline = base_replay->steps, *predicted = predicted_replay->steps;
    char recorded[32], base[32], pred[32], *escaped = NULL;
    printf("%s", rv_escape_if_needed(graph->source, &escaped));
    if (rv_cli_is_job(graph)) printf(" (%u ranks)", graph->ranks->len);
    printf("\n");
    for (guint i = 0; i < opts->len; i++) {
        rv_opt *opt = g_ptr_array_index(opts, i);
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
    print_range(range);
    print_peak(peak);
    print_host_share(predicted_replay);
    g_free(escaped);
}

static void print_json(const rv_graph *graph, GPtrArray *opts, const rv_whatif *whatif, const rv_diff *diff)
{
    json_t *root = rv_whatif_document(graph, opts, whatif);
    if (diff) json_object_set_new(root, "diff", rv_cli_diff_json(diff));
    rv_cli_print_json(root);
}

static void report(const rv_graph *graph, GPtrArray *opts, const rv_whatif *whatif, const rv_diff *diff,
                   gboolean as_json, const rv_cli_extras *extras)
{
    if (as_json) print_json(graph, opts, whatif, diff);
    else if (extras->csv) rv_cli_print_whatif_csv(whatif->baseline.steps, whatif->predicted.steps);
    else print_table(graph, opts, &whatif->baseline, &whatif->predicted, whatif->baseline_gpu_ns,
                     whatif->predicted_gpu_ns, &whatif->peak, &whatif->range);
    if (diff && !as_json && !extras->csv) rv_cli_print_diff(diff, 10);
}

/* What the command line says beside the report: optimizations that changed
 * nothing, a replay that dropped the launch-queue rule. */
static void note_whatif(const rv_graph *graph, GPtrArray *opts, const rv_whatif *whatif)
{
    rv_cli_note_unchanged(opts);
    rv_cli_note_launch_queue(graph, whatif->baseline.launch_queue_ignored || whatif->predicted.launch_queue_ignored);
}

static int run_whatif(char **paths, int count, char **specs, gboolean as_json, const rv_cli_extras *extras)
{
    GError *error = NULL;
    GHashTable *plugins = rv_plugin_table_new();
    rv_graph *graph = NULL;
    rv_graph *kept = NULL;  /* the baseline graph, for --timeline, --plot and --diff */
    rv_whatif whatif = { 0 };
    rv_diff *diff = NULL;
    GPtrArray *opts = rv_opts_prepare(plugins, specs, &error);
    if (opts != NULL) graph = rv_cli_load_job(paths, count, TRUE, &error);
    if (graph != NULL && rv_cli_extras_need_baseline(extras)) kept = rv_graph_copy(graph);
    gboolean ran = graph != NULL && rv_whatif_run(&whatif, graph, opts, &error);
    if (graph != NULL) note_whatif(graph, opts, &whatif);
    int status = RV_EXIT_OK;
    if (ran) {
        const rv_policy *policy = whatif.policy.policy.priority ? &whatif.policy.policy : NULL;
        status = rv_cli_whatif_extras(kept, graph, policy, extras, &diff);
        if (status == RV_EXIT_OK) report(graph, opts, &whatif, diff, as_json, extras);
    } else {
        status = rv_cli_fail(error);
    }
    rv_whatif_clear(&whatif);
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
