/*
 * simulate.c - `reverie simulate`: replay a trace or saved graph by the
 * timing rules and compare each step's simulated time with the recorded
 * one, beside the recorded time the rules do not explain (explain.h).
 */
#include "cli.h"
#include "runs.h"
#include "reverie/documents.h"
#include "reverie/explain.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/store.h"
#include <string.h>

/* The recorded time the replay keeps but no what-if on the GPU can move:
 * blocking calls' unexplained waits, and a rank alone's waits for its
 * peers. */
static void print_cpu_and_peer_waits(const rv_graph *graph, const rv_explanation *x)
{
    if (x->cpu_total_ns > 0)
        printf("  unexplained CPU wait: %.3f ms in %" G_GUINT64_FORMAT " blocking calls that returned later than what "
               "they waited for (kept as the calls' own time: a faster GPU does not shrink it; --explain lists where)\n",
               x->cpu_total_ns / 1e6, x->cpu_calls);
    int64_t peers = rv_peer_wait_total(graph);
    if (peers > 0)
        printf("  waits for peers: %.3f ms, recorded and kept (a rank alone: what-ifs on the network or the world size "
               "move the transfers, not these)\n", peers / 1e6);
}

static void print_table(const rv_graph *graph, const GArray *steps, const rv_steps_summary *summary,
                        const rv_explanation *x)
{
    char recorded[32], simulated[32], unexplained[32];
    printf("%s: %d tasks, %u edges, %u steps%s\n", graph->source, rv_graph_live_task_count(graph),
           graph->edges->len, steps->len, graph->whole_trace_step ? " (no ProfilerStep: whole trace)" : "");
    printf("  %-20s %14s %14s %9s %14s\n", "step", "recorded", "simulated", "error", "unexplained");
    for (guint i = 0; i < steps->len; i++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, i);
        rv_cli_format_ms(recorded, sizeof recorded, step->recorded_ns);
        rv_cli_format_ms(simulated, sizeof simulated, step->simulated_ns);
        rv_cli_format_ms(unexplained, sizeof unexplained, rv_step_unexplained(graph, x, i));
        printf("  %-20s %14s %14s %8.2f%% %14s\n", rv_cli_shown(step->name), recorded, simulated,
               100.0 * rv_relative_error(step->recorded_ns, step->simulated_ns), unexplained);
    }
    rv_cli_format_ms(recorded, sizeof recorded, summary->recorded_total_ns);
    rv_cli_format_ms(simulated, sizeof simulated, summary->simulated_total_ns);
    printf("  %-20s %14s %14s\n", "total", recorded, simulated);
    printf("  per-step error: mean %.2f%%, max %.2f%%\n", 100 * summary->mean_error, 100 * summary->max_error);
    print_cpu_and_peer_waits(graph, x);
}

static const char *step_label(const rv_graph *graph, int32_t step)
{
    return step >= 0 ? rv_strings_get(graph->strings, g_array_index(graph->steps, rv_step, step).name) : "-";
}

static const char *task_name(const rv_graph *graph, int32_t task)
{
    return rv_strings_get(graph->strings, g_array_index(graph->tasks, rv_task, task).name);
}

static const char *resource_label(const rv_graph *graph, int32_t resource)
{
    return rv_strings_get(graph->strings, g_array_index(graph->resources, rv_resource, resource).name);
}

static void print_cpu_sites(const rv_graph *graph, const rv_explanation *x)
{
    if (x->cpu_sites->len == 0) return;
    printf("unexplained CPU wait: %.3f ms; by call site (the runtime call, under its operator):\n", x->cpu_total_ns / 1e6);
    for (guint i = 0; i < MIN(x->cpu_sites->len, 10u); i++) {
        const rv_unexplained_site *site = &g_array_index(x->cpu_sites, rv_unexplained_site, i);
        printf("    %9.3f ms in %6" G_GUINT64_FORMAT " calls  %s%s%s\n", site->total_ns / 1e6, site->calls,
               rv_cli_shown(rv_strings_get(graph->strings, site->name)), site->op > 0 ? " under " : "",
               site->op > 0 ? rv_cli_shown(rv_strings_get(graph->strings, site->op)) : "");
    }
}

/* A job with one recorded step: what its entry moments decide
 * (together_ns: rv_job_step_entering_together's figure). */
static void print_entering_together(const GArray *steps, int64_t together_ns)
{
    if (together_ns < 0) return;
    const rv_step_time *step = &g_array_index(steps, rv_step_time, 0);
    printf("  one recorded step: each rank enters it at its recorded lag behind the first (an initial condition read "
           "from the recording); if all entered together the job step would be %.3f ms (%+.2f%% against the "
           "recording): the entry moments decide %.3f ms of it\n", together_ns / 1e6,
           100.0 * (double)(together_ns - step->recorded_ns) / (double)MAX(step->recorded_ns, 1),
           (step->simulated_ns - together_ns) / 1e6);
}

static void print_explanation(const rv_graph *graph, const rv_explanation *x, int64_t origin_ns)
{
    printf("\nunexplained GPU wait: %.3f ms (%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
           " GPU tasks more than 2 us later than the timing rules allow; replayed by the rules, not copied)\n",
           x->total_ns / 1e6, x->late_tasks, x->gpu_tasks);
    if (x->early_tasks)
        printf("early: %" G_GUINT64_FORMAT " GPU tasks recorded %.3f ms in all before the rules allow\n",
               x->early_tasks, x->early_ns / 1e6);
    if (x->suspect_host_gaps)
        printf("suspect host time: %" G_GUINT64_FORMAT " host overheads over 50 us (%.3f ms) end within 20 us of a "
               "GPU task's end, against %.0f by chance at this trace's rate of GPU ends; more than chance points at "
               "waits the graph has no edge for (kept as host time)\n",
               x->suspect_host_gaps, x->suspect_host_ns / 1e6, x->suspect_by_chance);
    print_cpu_sites(graph, x);
    printf("  by resource:\n");
    for (guint r = 0; r < graph->resources->len; r++)
        if (x->by_resource[r]) printf("    %-32s %12.3f ms\n", rv_cli_shown(resource_label(graph, (int32_t)r)), x->by_resource[r] / 1e6);
    if (x->top->len == 0) return;
    printf("  largest (time from the trace's start, ms; 'after' is the dependency the rules waited for):\n");
    printf("    %12s %12s  %-18s %-22s %s\n", "unexplained", "recorded at", "step", "resource", "task");
    for (guint i = 0; i < x->top->len; i++) {
        const rv_unexplained_task *item = &g_array_index(x->top, rv_unexplained_task, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, item->task);
        printf("    %9.3f ms %12.3f  %-18s %-22s %.60s\n", item->unexplained_ns / 1e6,
               (task->recorded_start_ns - origin_ns) / 1e6, rv_cli_shown(step_label(graph, task->step)),
               rv_cli_shown(resource_label(graph, task->resource)), rv_cli_shown(task_name(graph, item->task)));
        if (item->binding >= 0) printf("    %27s after %.70s\n", "", rv_cli_shown(task_name(graph, item->binding)));
    }
}

/* The trace's time zero, for readable "recorded at" columns. */
static int64_t recorded_origin(const rv_graph *graph)
{
    int64_t origin = G_MAXINT64;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED)))
            origin = MIN(origin, task->recorded_start_ns);
    }
    return origin == G_MAXINT64 ? 0 : origin;
}

static void print_job_table(const rv_graph *graph, const rv_replay *job, const rv_job_figures *figures)
{
    printf("%s: %u ranks, %d tasks, %u edges\n", rv_cli_shown(graph->source), graph->ranks->len, figures->live_tasks,
           figures->edges);
    rv_cli_print_rank_table(graph, job);
    print_entering_together(job->steps, figures->entering_together_ns);
}

static int report(rv_graph *graph, gboolean as_json, int explain_top, const rv_cli_extras *extras)
{
    /* the files first: the report reaches stdout only once they are safe */
    int status = rv_cli_simulate_extras(graph, extras);
    if (status != RV_EXIT_OK) return status;
    GError *error = NULL;
    rv_replay job;
    if (!rv_cli_replay_job(graph, NULL, &job, &error)) {
        rv_replay_clear(&job);
        return rv_cli_fail(error);
    }
    const GArray *steps = job.steps;
    rv_steps_summary summary = rv_steps_summarize(steps);
    rv_explanation *x = rv_explain(graph, explain_top > 0 ? (guint)explain_top : 0);
    if (as_json) {
        rv_cli_print_json(rv_simulate_document(graph, &job, x, explain_top > 0));
    } else if (extras->csv) {
        rv_cli_print_simulate_csv(graph, steps, x);
    } else if (rv_cli_is_job(graph)) {
        rv_job_figures figures = rv_job_figures_of(graph, steps);
        print_job_table(graph, &job, &figures);
        if (explain_top > 0) print_explanation(graph, x, recorded_origin(graph));
    } else {
        print_table(graph, steps, &summary, x);
        if (explain_top > 0) print_explanation(graph, x, recorded_origin(graph));
    }
    rv_explanation_free(x);
    rv_replay_clear(&job);
    return RV_EXIT_OK;
}

/* ---- a saved job held once (alike.h) ----------------------------------------- */

/* What rv_cli_load_job says of a saved job, said of the job held once. */
static void print_alike_notes(const rv_alike_job *alike)
{
    GPtrArray *notes = rv_timing_notes_counted(alike->structure, rv_alike_gpu_task_count(alike));
    for (guint i = 0; i < notes->len; i++)
        fprintf(stderr, "reverie: note: %s: %s\n", alike->structure->source, (const char *)g_ptr_array_index(notes, i));
    g_ptr_array_unref(notes);
}

/* report() for a job held once, from its lockstep replay: the same table,
 * CSV and JSON (without --explain's detail, --timeline or --plot, which
 * need every rank's tasks).  RV_EXIT_OK after printing; -1 when the
 * lockstep replay cannot run it (then replay the joint graph). */
static int report_alike(const rv_alike_job *alike, gboolean as_json, gboolean csv)
{
    rv_replay job;
    if (!rv_alike_replay_run(alike, &job, NULL)) {
        rv_replay_clear(&job);
        return -1;
    }
    print_alike_notes(alike);
    const rv_graph *structure = alike->structure;
    /* the job's table shows no unexplained time: only the JSON and CSV do */
    rv_explanation *x = as_json || csv ? rv_alike_explain(alike) : NULL;
    rv_job_figures figures = { rv_alike_live_task_count(alike), rv_alike_edge_count(alike),
                               rv_alike_peer_wait_total(alike), rv_alike_step_entering_together(alike, job.steps) };
    if (as_json) rv_cli_print_json(rv_simulate_document_with(structure, &job, x, FALSE, &figures));
    else if (csv) rv_cli_print_simulate_csv(structure, job.steps, x);
    else print_job_table(structure, &job, &figures);
    rv_explanation_free(x);
    rv_replay_clear(&job);
    return RV_EXIT_OK;
}

/* One saved graph of a job held once, and nothing asked that needs every
 * rank's tasks: replay it as it is held (memory and time in proportion to
 * one rank's structure and the ranks' columns).  -1: load it whole. */
static int simulate_held_once(const char *path, gboolean as_json, int explain_top, const rv_cli_extras *extras)
{
    /* a pipe or a device is read once, by the loader: never peeked at here */
    if (explain_top > 0 || extras->timeline || extras->plot || !g_file_test(path, G_FILE_TEST_IS_REGULAR) ||
        !rv_store_is_graph_file(path))
        return -1;
    gboolean held = FALSE;
    GError *error = NULL;
    rv_alike_job *alike = rv_store_load_alike(path, as_json || extras->csv, &held, &error);
    if (alike == NULL) {
        if (held && error != NULL) return rv_cli_fail(error);
        g_clear_error(&error);
        return -1;
    }
    int status = report_alike(alike, as_json, extras->csv);
    rv_alike_job_free(alike);
    return status;
}

int rv_cmd_simulate(int argc, char **argv)
{
    gboolean as_json = FALSE;
    int explain_top = 0;
    rv_cli_extras extras = { NULL, NULL, FALSE, FALSE };
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in docs/commands.md)", NULL },
        { "explain", 0, 0, G_OPTION_ARG_INT, &explain_top,
          "also show the unexplained time by resource and the N tasks carrying the most", "N" },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &extras.csv, "print the per-step table as CSV", NULL },
        { "timeline", 0, 0, G_OPTION_ARG_FILENAME, &extras.timeline,
          "write the replay as Chrome trace JSON for ui.perfetto.dev (.gz compresses)", "FILE" },
        { "plot", 0, 0, G_OPTION_ARG_FILENAME, &extras.plot, "draw recorded and simulated steps, broken down, to SVG",
          "FILE.svg" },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH|FOLDER... - replay by the timing rules and compare with the recording");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "For each step: the recorded time (the ProfilerStep annotation, extended to the end\n"
        "of the GPU work it launched), the simulated time, the error, and the unexplained\n"
        "time: how much later GPU tasks were recorded than the timing rules allow (a missing\n"
        "dependency, another rank, another process). The replay starts every task by the\n"
        "rules, so unexplained time shows up as error, never as a copied wait.\n"
        "A trace without ProfilerStep annotations is one step from its first to its last task.\n"
        "Several traces, or a folder of them, are the ranks of one job, replayed together: each\n"
        "rank's steps, the time it waited in collectives and for whom, and the job's step (the\n"
        "slowest rank).\n\n"
        "Examples:\n  reverie simulate traces/hta_resnet50_v100.json.gz --explain 10\n"
        "  reverie simulate traces/small_ddp.json.gz --timeline replay.json.gz --plot steps.svg\n"
        "  reverie simulate traces/param_dlrm_v100_8ranks\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc < 2) { status = rv_cli_usage("simulate", "give a trace or graph, or several (the ranks of one job)"); goto out; }
    if (as_json && extras.csv) { status = rv_cli_usage("simulate", "give --json or --csv, not both"); goto out; }
    if (explain_top < 0) { status = rv_cli_usage("simulate", "--explain takes a count of 0 or more"); goto out; }
    GError *error = NULL;
    if (!rv_cli_extras_check(&extras, &error)) { status = rv_cli_fail(error); goto out; }
    if (argc == 2 && (status = simulate_held_once(argv[1], as_json, explain_top, &extras)) >= 0) goto out;
    status = RV_EXIT_OK;
    rv_graph *graph = rv_cli_load_job(argv + 1, argc - 1, TRUE, &error);
    if (graph == NULL) { status = rv_cli_fail(error); goto out; }
    status = report(graph, as_json, explain_top, &extras);
    rv_graph_free(graph);
out:
    rv_cli_extras_clear(&extras);
    g_option_context_free(context);
    return status;
}
