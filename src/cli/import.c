/*
 * import.c - `reverie import TRACE [-o GRAPH.rvg]`: build the dependency
 * graph of a trace once and save it, so later queries skip the JSON.
 */
#include "cli.h"
#include "reverie/store.h"
#include <glib/gstdio.h>
#include <string.h>

/* The trace's path with .json or .json.gz replaced by .rvg (or .rvg added),
 * so the graph lands next to the trace it came from. */
static char *default_output(const char *trace)
{
    static const char *const suffixes[] = { ".json.gz", ".json" };
    for (gsize i = 0; i < G_N_ELEMENTS(suffixes); i++) {
        if (!g_str_has_suffix(trace, suffixes[i])) continue;
        char *stem = g_strndup(trace, strlen(trace) - strlen(suffixes[i]));
        char *output = g_strconcat(stem, ".rvg", NULL);
        g_free(stem);
        return output;
    }
    return g_strconcat(trace, ".rvg", NULL);
}

static void print_summary(const rv_graph *graph, const char *output, double seconds)
{
    GStatBuf info;
    double megabytes = g_stat(output, &info) == 0 ? info.st_size / 1e6 : 0.0;
    /* Count live tasks, as info does: runtime calls nested in another call are
     * merged into it but stay in the file (marked removed) so ids are stable. */
    int32_t live = rv_graph_live_task_count(graph), merged = rv_graph_task_count(graph) - live;
    printf("wrote %s: %d tasks", output, live);
    if (merged) printf(" (plus %d nested runtime calls merged into their callers)", merged);
    printf(", %u edges, %u steps, %.1f MB in %.2f s\n", graph->edges->len, graph->steps->len, megabytes, seconds);
}

/* Load (a trace, or a graph to copy), save, and report. */
static int import_one(const char *trace, const char *output, gboolean quiet)
{
    gint64 started = g_get_monotonic_time();
    GError *error = NULL;
    rv_graph *graph = rv_cli_load(trace, &error);
    if (graph == NULL) return rv_cli_fail(error);
    int status = RV_EXIT_OK;
    if (!rv_store_save(graph, output, &error))
        status = rv_cli_fail(error);
    else if (!quiet)
        print_summary(graph, output, (g_get_monotonic_time() - started) / 1e6);
    rv_graph_free(graph);
    return status;
}

int rv_cmd_import(int argc, char **argv)
{
    char *output = NULL;
    gboolean quiet = FALSE;
    GOptionEntry entries[] = {
        { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "where to write the graph (default: the trace's "
          "path with .json or .json.gz replaced by .rvg)", "GRAPH.rvg" },
        { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "print nothing on success", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE - build the dependency graph and save it (.rvg)");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "Every other command accepts the saved graph in place of the trace and loads it\n"
        "without parsing JSON again. The format is described in src/store/store.c.\n\n"
        "Example:\n  reverie import traces/small_ddp.json.gz -o small.rvg && reverie simulate small.rvg\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc < 2) { status = rv_cli_usage("import", "give the trace to import"); goto out; }
    if (argc > 2) {
        status = rv_cli_usage("import", "several traces in one graph are not supported yet; import one trace at a time");
        goto out;
    }
    char *target = output ? g_strdup(output) : default_output(argv[1]);
    if (g_strcmp0(target, argv[1]) == 0)
        status = rv_cli_usage("import", "the output would overwrite the input; give another name with -o");
    else
        status = import_one(argv[1], target, quiet);
    g_free(target);
out:
    g_free(output);
    g_option_context_free(context);
    return status;
}
