/*
 * simulate.c - `reverie simulate`: replay a trace or saved graph and compare
 * each step's simulated time with the recorded one.
 */
#include "cli.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include <jansson.h>

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

static void print_table(const rv_graph *graph, const GArray *steps, const replay_summary *summary)
{
    char recorded[32], simulated[32];
    printf("%s: %d tasks, %u edges, %u steps%s\n", graph->source, rv_graph_task_count(graph),
           graph->edges->len, steps->len, graph->whole_trace_step ? " (no ProfilerStep: whole trace)" : "");
    printf("  %-20s %14s %14s %9s\n", "step", "recorded", "simulated", "error");
    for (guint i = 0; i < steps->len; i++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, i);
        rv_cli_format_ms(recorded, sizeof recorded, step->recorded_ns);
        rv_cli_format_ms(simulated, sizeof simulated, step->simulated_ns);
        printf("  %-20s %14s %14s %8.2f%%\n", step->name, recorded, simulated,
               100.0 * rv_relative_error(step->recorded_ns, step->simulated_ns));
    }
    rv_cli_format_ms(recorded, sizeof recorded, summary->recorded_total);
    rv_cli_format_ms(simulated, sizeof simulated, summary->simulated_total);
    printf("  %-20s %14s %14s\n", "total", recorded, simulated);
    printf("  per-step error: mean %.2f%%, max %.2f%%\n", 100 * summary->mean_error, 100 * summary->max_error);
}

static void print_json(const rv_graph *graph, const GArray *steps, const replay_summary *summary)
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
        json_array_append_new(list, item);
    }
    json_object_set_new(root, "steps", list);
    json_object_set_new(root, "recorded_us", json_real(summary->recorded_total / 1e3));
    json_object_set_new(root, "simulated_us", json_real(summary->simulated_total / 1e3));
    json_object_set_new(root, "mean_error", json_real(summary->mean_error));
    json_object_set_new(root, "max_error", json_real(summary->max_error));
    json_object_set_new(root, "whole_trace", json_boolean(graph->whole_trace_step));
    json_object_set_new(root, "tasks", json_integer(rv_graph_task_count(graph)));
    json_object_set_new(root, "edges", json_integer(graph->edges->len));
    rv_cli_print_json(root);
}

int rv_cmd_simulate(int argc, char **argv)
{
    gboolean as_json = FALSE;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in README)", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH - replay and compare with the recording");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "For each step: the recorded time (the ProfilerStep annotation, extended to the end\n"
        "of the GPU work it launched), the simulated time, and the error. A trace without\n"
        "ProfilerStep annotations is one step from its first to its last task.\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc != 2) { status = rv_cli_usage("simulate", "give exactly one trace or graph"); goto out; }
    GError *error = NULL;
    rv_graph *graph = rv_cli_load(argv[1], &error);
    if (graph == NULL) { status = rv_cli_fail(error); goto out; }
    rv_sim_result sim = { 0 };
    if (!rv_simulate(graph, NULL, &sim, &error)) {
        status = rv_cli_fail(error);
        rv_graph_free(graph);
        goto out;
    }
    GArray *steps = rv_step_times(graph, &sim);
    replay_summary summary = summarize(steps);
    if (as_json) print_json(graph, steps, &summary);
    else print_table(graph, steps, &summary);
    g_array_unref(steps);
    rv_sim_result_clear(&sim);
    rv_graph_free(graph);
out:
    g_option_context_free(context);
    return status;
}
