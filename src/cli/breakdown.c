/*
 * breakdown.c - `reverie breakdown`: per step, for the recording, the
 * baseline replay and (with --opt) the prediction, Daydream's CPU-only /
 * GPU-only / overlap / idle split, the same per phase, each stream's
 * compute / communication / copy / idle, and the exposed communication
 * (include/reverie/breakdown.h).
 */
#include "runs.h"
#include "reverie/breakdown.h"
#include "reverie/documents.h"

typedef struct {
    gboolean as_json, as_csv;
    char *plot;
} breakdown_options;

static const char *step_label(const rv_graph *graph, guint step)
{
    return graph->steps->len ? rv_strings_get(graph->strings, g_array_index(graph->steps, rv_step, step).name)
                             : "(whole trace)";
}

static const char *resource_label(const rv_graph *graph, guint resource)
{
    return rv_strings_get(graph->strings, g_array_index(graph->resources, rv_resource, resource).name);
}

static double share(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

static void print_part(int64_t ns, int64_t whole)
{
    printf(" %10.3f %5.1f%%", ns / 1e6, share(ns, whole));
}

static void print_header(const char *first)
{
    printf("  %-20s %12s", first, "time (ms)");
    for (int k = 0; k < RV_SPLIT_COUNT; k++) printf(" %17s", rv_split_name(k));
    printf(" %17s\n", "exposed comm");
}

/* Sums over the steps, so that one line tells the whole run. */
static rv_step_breakdown sum_steps(const rv_breakdown *breakdown)
{
    rv_step_breakdown sum = { 0 };
    sum.use_ns = g_new0(int64_t, (gsize)breakdown->resource_count * RV_USE_COUNT);
    for (guint s = 0; s < breakdown->steps->len; s++) {
        const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, s);
        sum.end_ns += step->end_ns - step->begin_ns;
        sum.comm_ns += step->comm_ns;
        sum.exposed_comm_ns += step->exposed_comm_ns;
        for (int k = 0; k < RV_SPLIT_COUNT; k++) sum.split_ns[k] += step->split_ns[k];
        for (int p = 0; p < RV_PHASE_COUNT; p++) {
            sum.phase_exposed_comm_ns[p] += step->phase_exposed_comm_ns[p];
            for (int k = 0; k < RV_SPLIT_COUNT; k++) sum.phase_split_ns[p][k] += step->phase_split_ns[p][k];
        }
        for (guint i = 0; i < breakdown->resource_count * RV_USE_COUNT; i++) sum.use_ns[i] += step->use_ns[i];
    }
    return sum;
}

static void print_split_row(const char *label, int64_t total, const int64_t *split, int64_t exposed)
{
    printf("  %-20s %12.3f", rv_cli_shown(label), total / 1e6);
    for (int k = 0; k < RV_SPLIT_COUNT; k++) print_part(split[k], total);
    print_part(exposed, total);
    printf("\n");
}

static void print_run(const rv_run *run, const rv_breakdown *breakdown)
{
    const rv_graph *graph = run->graph;
    printf("%s:\n", run->label);
    print_header("step");
    for (guint s = 0; s < breakdown->steps->len; s++) {
        const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, s);
        print_split_row(step_label(graph, s), step->end_ns - step->begin_ns, step->split_ns, step->exposed_comm_ns);
    }
    rv_step_breakdown sum = sum_steps(breakdown);
    print_split_row("all steps", sum.end_ns, sum.split_ns, sum.exposed_comm_ns);
    print_header("phase (all steps)");
    for (int p = 0; p < RV_PHASE_COUNT; p++) {
        int64_t total = 0;
        for (int k = 0; k < RV_SPLIT_COUNT; k++) total += sum.phase_split_ns[p][k];
        if (total) print_split_row(rv_phase_name(p), total, sum.phase_split_ns[p], sum.phase_exposed_comm_ns[p]);
    }
    printf("  %-32s", "stream (all steps)");
    for (int u = 0; u < RV_USE_COUNT; u++) printf(" %17s", rv_stream_use_name(u));
    printf("\n");
    for (guint r = 0; r < breakdown->resource_count; r++) {
        if (!rv_breakdown_has_uses(graph, (int32_t)r)) continue;
        printf("  %-32s", rv_cli_shown(resource_label(graph, r)));
        for (int u = 0; u < RV_USE_COUNT; u++) print_part(sum.use_ns[r * RV_USE_COUNT + u], sum.end_ns);
        printf("\n");
    }
    g_free(sum.use_ns);
}

static void csv_part(const char *run, const char *step, const char *section, const char *name, const char *part,
                     int64_t ns, int64_t whole)
{
    char us[32], fraction[32];
    g_snprintf(us, sizeof us, "%.3f", ns / 1e3);
    g_snprintf(fraction, sizeof fraction, "%.6f", whole > 0 ? (double)ns / whole : 0.0);
    const char *row[] = { run, step, section, name, part, us, fraction };
    rv_cli_csv_row(row, G_N_ELEMENTS(row));
}

static void print_csv(const rv_run *run, const rv_breakdown *breakdown)
{
    for (guint s = 0; s < breakdown->steps->len; s++) {
        const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, s);
        const char *name = step_label(run->graph, s);
        int64_t total = step->end_ns - step->begin_ns;
        csv_part(run->label, name, "step", "", "time", total, total);
        for (int k = 0; k < RV_SPLIT_COUNT; k++) csv_part(run->label, name, "split", "", rv_split_name(k), step->split_ns[k], total);
        csv_part(run->label, name, "communication", "", "all", step->comm_ns, total);
        csv_part(run->label, name, "communication", "", "exposed", step->exposed_comm_ns, total);
        for (int p = 0; p < RV_PHASE_COUNT; p++) {
            for (int k = 0; k < RV_SPLIT_COUNT; k++)
                csv_part(run->label, name, "phase", rv_phase_name(p), rv_split_name(k), step->phase_split_ns[p][k], total);
            csv_part(run->label, name, "phase", rv_phase_name(p), "exposed_communication", step->phase_exposed_comm_ns[p], total);
        }
        for (guint r = 0; r < breakdown->resource_count; r++)
            if (rv_breakdown_has_uses(run->graph, (int32_t)r))
                for (int u = 0; u < RV_USE_COUNT; u++)
                    csv_part(run->label, name, "stream", resource_label(run->graph, r), rv_stream_use_name(u),
                             step->use_ns[r * RV_USE_COUNT + u], total);
    }
}

static int report(const rv_runs *runs, const void *data)
{
    const breakdown_options *options = data;
    rv_run list[3];
    guint count = rv_runs_list(runs, TRUE, list);
    rv_breakdown *breakdowns[3];
    /* --json's document holds its own; the plot and the tables need them */
    for (guint i = 0; i < count; i++)
        breakdowns[i] = options->as_json && !options->plot ? NULL : rv_run_breakdown(&list[i]);
    /* the plot first: the report reaches stdout only once it is safe */
    GError *error = NULL;
    if (options->plot && !rv_runs_plot(options->plot, runs->baseline, list, breakdowns, count, &error)) {
        for (guint i = 0; i < count; i++) rv_breakdown_free(breakdowns[i]);
        return rv_cli_fail(error);
    }
    if (options->as_json) rv_cli_print_json(rv_breakdown_document(runs));
    if (options->as_csv) {
        const char *header[] = { "run", "step", "section", "name", "part", "us", "share_of_step" };
        rv_cli_csv_row(header, G_N_ELEMENTS(header));
    } else if (!options->as_json) {
        printf("%s: where each step's time went (ms, and %% of the step)\n", runs->baseline->source);
        if (runs->notes->len) printf("%s", runs->notes->str);
    }
    for (guint i = 0; i < count; i++) {
        if (options->as_csv) {
            print_csv(&list[i], breakdowns[i]);
        } else if (!options->as_json) {
            print_run(&list[i], breakdowns[i]);
        }
    }
    for (guint i = 0; i < count; i++) rv_breakdown_free(breakdowns[i]);
    return RV_EXIT_OK;
}

int rv_cmd_breakdown(int argc, char **argv)
{
    breakdown_options options = { FALSE, FALSE, NULL };
    char **specs = NULL;
    GOptionEntry entries[] = {
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &specs, "also the prediction after this optimization (repeat to chain)",
          "NAME[:k=v,...]" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &options.as_json, "print JSON (schema in docs/commands.md)", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &options.as_csv, "print CSV, one row per part", NULL },
        { "plot", 0, 0, G_OPTION_ARG_FILENAME, &options.plot, "draw step times and breakdowns to an SVG file", "FILE.svg" },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH - where each step's time went");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "For the recording, the baseline replay and (with --opt) the prediction, each step split\n"
        "into CPU only, GPU only, CPU+GPU overlap and idle (Daydream's breakdown; CPU busy\n"
        "includes the host overhead before each call), the same per phase, each stream's\n"
        "compute / communication / copy / idle, and exposed communication (collectives\n"
        "running while no compute kernel does). The parts add up to the step time.\n\n"
        "Examples:\n"
        "  reverie breakdown traces/small_ddp.json.gz\n"
        "  reverie breakdown trace.json.gz --opt amp --plot amp.svg\n"
        "  reverie breakdown trace.json.gz --csv > breakdown.csv\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    GError *error = NULL;
    if (!rv_cli_check_output(options.plot, &error)) { status = rv_cli_fail(error); goto out; }
    status = rv_cli_report_runs("breakdown", argc, argv, specs, options.as_json, options.as_csv, report, &options);
out:
    g_strfreev(specs);
    g_free(options.plot);
    g_option_context_free(context);
    return status;
}
