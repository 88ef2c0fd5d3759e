/*
 * critical_path.c - `reverie critical-path`: the chain of tasks and waits
 * that decides each step's end in the baseline replay (and, with --opt, in
 * the prediction), with totals by kind, phase and layer
 * (include/reverie/critical_path.h).
 */
#include "runs.h"
#include "reverie/critical_path.h"
#include "reverie/documents.h"

typedef struct {
    gboolean as_json, as_csv;
    int top;
    char *timeline;
} path_options;

/* Names go into a row per link: bounded (cli.h). */
static const char *text_of(const rv_graph *graph, int32_t id) { return rv_cli_bounded(rv_strings_get(graph->strings, id)); }

static const char *layer_label(const rv_graph *graph, int32_t layer)
{
    return layer ? text_of(graph, layer) : "(no layer)";
}

static const char *step_label(const rv_graph *graph, guint step)
{
    return graph->steps->len ? text_of(graph, g_array_index(graph->steps, rv_step, step).name) : "(whole trace)";
}

static double share(int64_t part, int64_t whole) { return whole ? 100.0 * part / whole : 0.0; }

static void print_totals(const rv_graph *graph, const rv_path_totals *totals, int top)
{
    printf("  by kind:  ");
    for (int k = 0; k < RV_TASK_KIND_COUNT; k++)
        if (totals->by_kind_ns[k])
            printf(" %s %.3f ms (%.1f%%)", rv_task_kind_name(k), totals->by_kind_ns[k] / 1e6,
                   share(totals->by_kind_ns[k], totals->total_ns));
    for (int w = 0; w < RV_WAIT_KIND_COUNT; w++)
        if (totals->by_wait_ns[w])
            printf(" %s %.3f ms (%.1f%%)", rv_wait_kind_name(w), totals->by_wait_ns[w] / 1e6,
                   share(totals->by_wait_ns[w], totals->total_ns));
    printf("\n  by phase: ");
    for (int p = 0; p < RV_PHASE_COUNT; p++)
        if (totals->by_phase_ns[p])
            printf(" %s %.3f ms (%.1f%%)", rv_phase_name(p), totals->by_phase_ns[p] / 1e6,
                   share(totals->by_phase_ns[p], totals->total_ns));
    printf("\n  layers with the most time on the path:\n");
    GArray *layers = rv_path_totals_layers(totals);
    for (guint i = 0; i < layers->len && i < (guint)top; i++) {
        int32_t layer = g_array_index(layers, int32_t, i);
        int64_t ns = rv_path_totals_layer_ns(totals, layer);
        printf("    %12.3f ms %5.1f%%  %.70s\n", ns / 1e6, share(ns, totals->total_ns),
               rv_cli_short_name(layer_label(graph, layer)));
    }
    g_array_unref(layers);
}

static gint longer_link_first(gconstpointer left, gconstpointer right)
{
    int64_t a = rv_path_link_ns(*(rv_path_link *const *)left), b = rv_path_link_ns(*(rv_path_link *const *)right);
    return a == b ? 0 : a > b ? -1 : 1;
}

static void print_longest(const rv_graph *graph, const rv_critical_path *path, int top)
{
    GPtrArray *all = g_ptr_array_new();
    for (guint s = 0; s < path->steps->len; s++) {
        GArray *links = g_array_index(path->steps, rv_step_path, s).links;
        for (guint i = 0; i < links->len; i++) g_ptr_array_add(all, &g_array_index(links, rv_path_link, i));
    }
    g_ptr_array_sort(all, longer_link_first);
    printf("  longest links (run + host overhead + wait; 'after' is what it waited for):\n");
    for (guint i = 0; i < all->len && i < (guint)top; i++) {
        const rv_path_link *link = g_ptr_array_index(all, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, link->task);
        printf("    %12.3f ms  %-8s %-9s %.60s\n", rv_path_link_ns(link) / 1e6, rv_task_kind_name(task->kind),
               rv_phase_name(task->phase), rv_cli_shown(text_of(graph, task->name)));
        if (link->predecessor >= 0)
            printf("    %27s after %s%s%s: %.50s\n", "", rv_via_name(link->via), link->via == RV_VIA_EDGE ? " " : "",
                   link->via == RV_VIA_EDGE ? rv_edge_kind_name(link->edge_kind) : "",
                   rv_cli_shown(text_of(graph, g_array_index(graph->tasks, rv_task, link->predecessor).name)));
    }
    g_ptr_array_free(all, TRUE);
}

static void print_run(const rv_run *run, const rv_critical_path *path, int top)
{
    printf("%s run:\n  %-20s %14s %8s %8s %8s %8s\n", run->label, "step", "path", "GPU", "CPU", "waits", "links");
    rv_path_totals all;
    rv_path_totals_init(&all);
    for (guint s = 0; s < path->steps->len; s++) {
        const rv_step_path *step = &g_array_index(path->steps, rv_step_path, s);
        rv_path_totals totals;
        rv_path_totals_init(&totals);
        rv_path_totals_add(&totals, run->graph, step);
        rv_path_totals_add(&all, run->graph, step);
        int64_t gpu = totals.by_kind_ns[RV_TASK_KERNEL] + totals.by_kind_ns[RV_TASK_MEMCPY] +
                      totals.by_kind_ns[RV_TASK_MEMSET] + totals.by_kind_ns[RV_TASK_COMM];
        int64_t waits = totals.by_wait_ns[RV_WAIT_LAUNCH_LATENCY] + totals.by_wait_ns[RV_WAIT_IDLE_GAP];
        int64_t cpu = totals.total_ns - gpu - waits;
        printf("  %-20s %11.3f ms %7.1f%% %7.1f%% %7.1f%% %8" G_GUINT64_FORMAT "\n", rv_cli_shown(step_label(run->graph, s)),
               totals.total_ns / 1e6, share(gpu, totals.total_ns), share(cpu, totals.total_ns),
               share(waits, totals.total_ns), totals.links);
        rv_path_totals_clear(&totals);
    }
    printf("  total %.3f ms on the path over %u steps\n", all.total_ns / 1e6, path->steps->len);
    print_totals(run->graph, &all, top);
    print_longest(run->graph, path, top);
    rv_path_totals_clear(&all);
}


static void print_csv(const rv_run *run, const rv_critical_path *path)
{
    for (guint s = 0; s < path->steps->len; s++) {
        GArray *links = g_array_index(path->steps, rv_step_path, s).links;
        for (guint i = 0; i < links->len; i++) {
            const rv_path_link *link = &g_array_index(links, rv_path_link, i);
            const rv_task *task = &g_array_index(run->graph->tasks, rv_task, link->task);
            char *numbers[6] = {
                rv_cli_us_text(run->sim->start_ns[link->task]),
                (task->flags & RV_TASK_FLAG_INSERTED) ? g_strdup("") : rv_cli_us_text(task->recorded_start_ns),
                rv_cli_us_text(run->sim->end_ns[link->task] - run->sim->start_ns[link->task]),
                rv_cli_us_text(link->run_ns), rv_cli_us_text(link->host_overhead_ns), rv_cli_us_text(link->wait_ns),
            };
            const char *row[] = {
                run->label, step_label(run->graph, s), text_of(run->graph, task->name), rv_task_kind_name(task->kind),
                text_of(run->graph, g_array_index(run->graph->resources, rv_resource, task->resource).name),
                text_of(run->graph, task->layer), rv_phase_name(task->phase), numbers[0], numbers[1], numbers[2],
                numbers[3], numbers[4], numbers[5], link->wait_ns ? rv_wait_kind_name(link->wait_kind) : "",
                rv_via_name(link->via),
                link->via == RV_VIA_EDGE ? rv_edge_kind_name(link->edge_kind) : "",
            };
            rv_cli_csv_row(row, G_N_ELEMENTS(row));
            for (int k = 0; k < 6; k++) g_free(numbers[k]);
        }
    }
}

static const char *const csv_header[] = {
    "run", "step", "name", "kind", "resource", "layer", "phase", "start_us", "recorded_start_us", "duration_us",
    "on_path_us", "host_overhead_us", "wait_us", "wait_kind", "via", "edge",
};

static int report(const rv_runs *runs, const void *data)
{
    const path_options *options = data;
    rv_run list[3];
    guint count = rv_runs_list(runs, FALSE, list);
    rv_critical_path *paths[3] = { NULL, NULL, NULL };
    for (guint i = 0; i < count; i++) paths[i] = rv_critical_path_find(list[i].graph, list[i].sim);
    /* the timeline first: the report reaches stdout only once it is safe */
    GError *error = NULL;
    if (options->timeline && !rv_runs_write_timeline(options->timeline, list, count, &error)) {
        for (guint i = 0; i < count; i++) rv_critical_path_free(paths[i]);
        return rv_cli_fail(error);
    }
    if (options->as_json) rv_cli_print_json_digits(rv_critical_path_document(runs), RV_DOCUMENT_TIMESTAMP_DIGITS);
    if (options->as_csv) rv_cli_csv_row(csv_header, G_N_ELEMENTS(csv_header));
    for (guint i = 0; i < count && !options->as_json; i++) {
        if (options->as_csv) {
            print_csv(&list[i], paths[i]);
        } else {
            if (i == 0) printf("%s: critical path of each step\n", runs->baseline->source);
            if (i == 1 && runs->notes->len) printf("%s", runs->notes->str);
            print_run(&list[i], paths[i], options->top);
        }
    }
    for (guint i = 0; i < count; i++) rv_critical_path_free(paths[i]);
    return RV_EXIT_OK;
}

int rv_cmd_critical_path(int argc, char **argv)
{
    path_options options = { FALSE, FALSE, 10, NULL };
    char **specs = NULL;
    GOptionEntry entries[] = {
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &specs, "also the prediction after this optimization (repeat to chain)",
          "NAME[:k=v,...]" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &options.as_json, "print JSON: every task on the path (schema in docs/commands.md)", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &options.as_csv, "print every task on the path as CSV", NULL },
        { "top", 0, 0, G_OPTION_ARG_INT, &options.top, "layers and links to list in the table (default 10)", "N" },
        { "timeline", 0, 0, G_OPTION_ARG_FILENAME, &options.timeline,
          "write the replay as Chrome trace JSON with the path marked (args.critical = 1; .gz compresses)", "FILE" },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH - the chain of tasks that decides each step's end");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "Walks back from the task that ends each step through the constraint that set each\n"
        "start: the previous task on its thread or stream, a dependency (launch, sync,\n"
        "cross-stream, inter-thread, communication), or a full launch queue. The links tile\n"
        "the step: each task's run on the path, its host overhead (CPU time before a call)\n"
        "and the wait before it (launch latency, a stream's idle gap) add up to the step time.\n\n"
        "Examples:\n"
        "  reverie critical-path traces/small_ddp.json.gz\n"
        "  reverie critical-path trace.json.gz --opt amp --json > path.json\n"
        "  reverie critical-path trace.json.gz --timeline path.json.gz   # open in ui.perfetto.dev\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (options.top < 0) { status = rv_cli_usage("critical-path", "--top takes a count of 0 or more"); goto out; }
    GError *error = NULL;
    if (!rv_cli_check_output(options.timeline, &error)) { status = rv_cli_fail(error); goto out; }
    status = rv_cli_report_runs("critical-path", argc, argv, specs, options.as_json, options.as_csv, report, &options);
out:
    g_strfreev(specs);
    g_free(options.timeline);
    g_option_context_free(context);
    return status;
}
