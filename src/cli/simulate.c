/*
 * simulate.c - `reverie simulate`: replay a trace or saved graph by the
 * timing rules and compare each step's simulated time with the recorded
 * one, beside the recorded time the rules do not explain (explain.h).
 */
#include "cli.h"
#include "runs.h"
#include "reverie/explain.h"
#include "reverie/job.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include <jansson.h>
#include <string.h>

typedef struct {
    double mean_error, max_error;
    int64_t recorded_total, simulated_total;
} replay_summary;

static replay_summary summarize(const GArray *steps)
{
    replay_summary summary = { 0 };
    for (guint i = 0; i < steps->len; i++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, i);
        double error = rv_relative_error(step->recorded_ns, step->simulated_ns);
        summary.mean_error += error / steps->len;
        summary.max_error = MAX(summary.max_error, error);
        summary.recorded_total += step->recorded_ns;
        summary.simulated_total += step->simulated_ns;
    }
    return summary;
}

/* A step's unexplained time; a graph without steps has it all in one. */
static int64_t step_unexplained(const rv_graph *graph, const rv_explanation *x, guint step)
{
    return rv_cli_step_unexplained(graph, x, step);
}

static void print_table(const rv_graph *graph, const GArray *steps, const replay_summary *summary,
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
        rv_cli_format_ms(unexplained, sizeof unexplained, step_unexplained(graph, x, i));
        printf("  %-20s %14s %14s %8.2f%% %14s\n", rv_cli_shown(step->name), recorded, simulated,
               100.0 * rv_relative_error(step->recorded_ns, step->simulated_ns), unexplained);
    }
    rv_cli_format_ms(recorded, sizeof recorded, summary->recorded_total);
    rv_cli_format_ms(simulated, sizeof simulated, summary->simulated_total);
    printf("  %-20s %14s %14s\n", "total", recorded, simulated);
    printf("  per-step error: mean %.2f%%, max %.2f%%\n", 100 * summary->mean_error, 100 * summary->max_error);
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

static json_t *json_explanation(const rv_graph *graph, const rv_explanation *x)
{
    json_t *resources = json_object(), *top = json_array();
    for (guint r = 0; r < graph->resources->len; r++)
        if (x->by_resource[r])
            json_object_set_new(resources, resource_label(graph, (int32_t)r), json_real(x->by_resource[r] / 1e3));
    for (guint i = 0; i < x->top->len; i++) {
        const rv_unexplained_task *item = &g_array_index(x->top, rv_unexplained_task, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, item->task);
        json_t *entry = json_pack("{s:s,s:s,s:s,s:f,s:f}", "name", task_name(graph, item->task), "resource",
                                  resource_label(graph, task->resource), "step", step_label(graph, task->step),
                                  "recorded_start_us", task->recorded_start_ns / 1e3, "unexplained_us",
                                  item->unexplained_ns / 1e3);
        if (item->binding >= 0) json_object_set_new(entry, "after", json_string(task_name(graph, item->binding)));
        json_array_append_new(top, entry);
    }
    return json_pack("{s:f,s:I,s:I,s:I,s:f,s:I,s:f,s:f,s:o,s:o}", "total_us", x->total_ns / 1e3, "late_tasks",
                     (json_int_t)x->late_tasks, "gpu_tasks", (json_int_t)x->gpu_tasks, "early_tasks",
                     (json_int_t)x->early_tasks, "early_us", x->early_ns / 1e3, "suspect_host_gaps",
                     (json_int_t)x->suspect_host_gaps, "suspect_host_us", x->suspect_host_ns / 1e3,
                     "suspect_by_chance", x->suspect_by_chance,
                     "by_resource_us", resources, "largest", top);
}

static void print_json(const rv_graph *graph, const GArray *steps, const replay_summary *summary,
                       const rv_explanation *x, gboolean detail, const rv_cli_replay *job)
{
    json_t *root = json_object(), *list = json_array();
    json_object_set_new(root, "source", json_string(graph->source));
    for (guint i = 0; i < steps->len; i++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, i);
        json_t *item = json_object();
        json_object_set_new(item, "name", json_string(step->name));
        json_object_set_new(item, "recorded_us", json_real(step->recorded_ns / 1e3));
        json_object_set_new(item, "simulated_us", json_real(step->simulated_ns / 1e3));
        json_object_set_new(item, "error", json_real(rv_relative_error(step->recorded_ns, step->simulated_ns)));
        json_object_set_new(item, "unexplained_us", json_real(step_unexplained(graph, x, i) / 1e3));
        json_array_append_new(list, item);
    }
    json_object_set_new(root, "steps", list);
    json_object_set_new(root, "recorded_us", json_real(summary->recorded_total / 1e3));
    json_object_set_new(root, "simulated_us", json_real(summary->simulated_total / 1e3));
    json_object_set_new(root, "mean_error", json_real(summary->mean_error));
    json_object_set_new(root, "max_error", json_real(summary->max_error));
    json_object_set_new(root, "unexplained_us", json_real(x->total_ns / 1e3));
    if (detail) json_object_set_new(root, "unexplained", json_explanation(graph, x));
    json_object_set_new(root, "whole_trace", json_boolean(graph->whole_trace_step));
    json_object_set_new(root, "tasks", json_integer(rv_graph_live_task_count(graph)));
    json_object_set_new(root, "edges", json_integer(graph->edges->len));
    if (rv_cli_is_job(graph)) json_object_set_new(root, "ranks", rv_cli_json_ranks(graph, job, NULL));
    rv_cli_print_json(root);
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

/* A job's steps are the slowest rank's (job.h); a trace's are its own. */
static GArray *steps_of(const rv_graph *graph, const rv_sim_result *sim, rv_cli_replay *job)
{
    memset(job, 0, sizeof *job);
    if (!rv_cli_is_job(graph)) return rv_step_times(graph, sim);
    job->by_rank = rv_step_times_by_rank(graph, sim);
    job->steps = rv_job_step_times(job->by_rank);
    job->waits = rv_rank_waits(graph, sim);
    return g_array_ref(job->steps);
}

static void print_job_table(const rv_graph *graph, const rv_cli_replay *job)
{
    printf("%s: %u ranks, %d tasks, %u edges\n", rv_cli_shown(graph->source), graph->ranks->len,
           rv_graph_live_task_count(graph), graph->edges->len);
    rv_cli_print_rank_table(graph, job);
}

static int report(rv_graph *graph, gboolean as_json, int explain_top, const rv_cli_extras *extras)
{
    /* the files first: the report reaches stdout only once they are safe */
    int status = rv_cli_simulate_extras(graph, extras);
    if (status != RV_EXIT_OK) return status;
    GError *error = NULL;
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, NULL, &sim, &error)) return rv_cli_fail(error);
    rv_cli_note_replay(graph, &sim);
    rv_cli_replay job;
    GArray *steps = steps_of(graph, &sim, &job);
    replay_summary summary = summarize(steps);
    rv_explanation *x = rv_explain(graph, explain_top > 0 ? (guint)explain_top : 0);
    if (as_json) {
        print_json(graph, steps, &summary, x, explain_top > 0, &job);
    } else if (extras->csv) {
        rv_cli_print_simulate_csv(graph, steps);
    } else if (rv_cli_is_job(graph)) {
        print_job_table(graph, &job);
        if (explain_top > 0) print_explanation(graph, x, recorded_origin(graph));
    } else {
        print_table(graph, steps, &summary, x);
        if (explain_top > 0) print_explanation(graph, x, recorded_origin(graph));
    }
    rv_explanation_free(x);
    g_array_unref(steps);
    rv_cli_replay_clear(&job);
    rv_sim_result_clear(&sim);
    return RV_EXIT_OK;
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
    rv_graph *graph = rv_cli_load_job(argv + 1, argc - 1, TRUE, &error);
    if (graph == NULL) { status = rv_cli_fail(error); goto out; }
    status = report(graph, as_json, explain_top, &extras);
    rv_graph_free(graph);
out:
    rv_cli_extras_clear(&extras);
    g_option_context_free(context);
    return status;
}
