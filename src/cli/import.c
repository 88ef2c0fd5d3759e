/*
 * import.c - `reverie import TRACE [-o GRAPH.rvg]`: build the dependency
 * graph of a trace once and save it, so later queries skip the JSON.
 *
 * The output follows the one writer's rules (reverie/output.h): never an
 * input of the run, an existing file only with --force, atomic, and a
 * device or "-" written in place.
 */
#include "cli.h"
#include "reverie/escape.h"
#include "reverie/output.h"
#include "reverie/store.h"
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

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

static void print_summary(const rv_graph *graph, const char *path, guint64 bytes, double seconds)
{
    char *shown = rv_escape_text(path);
    /* With "-o -" standard output carries the graph itself. */
    FILE *report = strcmp(path, "-") == 0 ? stderr : stdout;
    /* Count live tasks, as info does: runtime calls nested in another call are
     * merged into it but stay in the file (marked removed) so ids are stable. */
    int32_t live = rv_graph_live_task_count(graph), merged = rv_graph_task_count(graph) - live;
    fprintf(report, "wrote %s: %d tasks", shown, live);
    if (merged) fprintf(report, " (plus %d nested runtime calls merged into their callers)", merged);
    fprintf(report, ", %u edges, %u steps, %.1f MB in %.2f s\n", graph->edges->len, graph->steps->len, bytes / 1e6,
            seconds);
    if (rv_cli_is_job(graph)) { /* how the file holds the job (store.h) */
        char *text = rv_cli_rank_classes_text(graph);
        fprintf(report, "  ranks alike: %s\n", text);
        g_free(text);
    }
    g_free(shown);
}

typedef struct {
    const rv_graph *graph;
    guint64 bytes;
} saved_graph;

static gboolean fill_graph(FILE *file, gpointer data, GError **error)
{
    saved_graph *saved = data;
    return rv_store_write(saved->graph, file, &saved->bytes, error);
}

/* Load (a trace, a graph to copy, or the ranks of a job), save through the
 * one output writer (output.h), and report once the file is in place. */
static int import_inputs(char **paths, int count, const char *target, gboolean quiet)
{
    gint64 started = g_get_monotonic_time();
    GError *error = NULL;
    rv_graph *graph = rv_cli_load_job(paths, count, FALSE, &error);
    if (graph == NULL) return rv_cli_fail(error);
    int status = RV_EXIT_OK;
    saved_graph saved = { graph, 0 };
    if (!rv_output_write(target, rv_cli_output_flags(), fill_graph, &saved, &error))
        status = rv_cli_fail(error);
    else if (!quiet)
        print_summary(graph, target, saved.bytes, (g_get_monotonic_time() - started) / 1e6);
    rv_graph_free(graph);
    return status;
}

static int run_import(char **paths, int count, gboolean quiet)
{
    const char *trace = paths[0], *output = rv_cli_output_path();
    if (output == NULL && strcmp(trace, "-") == 0)
        return rv_cli_usage("import", "give the output with -o GRAPH.rvg when the trace is on standard input");
    if (output == NULL && count > 1)
        return rv_cli_usage("import", "give the output with -o GRAPH.rvg when importing several ranks");
    /* a folder of ranks: FOLDER.rvg beside it */
    char *folder = count == 1 && g_file_test(trace, G_FILE_TEST_IS_DIR) ? g_strdup(trace) : NULL;
    if (folder != NULL) while (strlen(folder) > 1 && g_str_has_suffix(folder, "/")) folder[strlen(folder) - 1] = '\0';
    char *target = output ? g_strdup(output) : folder ? g_strconcat(folder, ".rvg", NULL) : default_output(trace);
    GError *error = NULL;
    /* -o was checked with the options; the default name is checked here,
     * before the (slow) load, as every input of the run is known by now */
    int status = output != NULL || rv_cli_check_output(target, &error) ? import_inputs(paths, count, target, quiet)
                                                                        : rv_cli_fail(error);
    g_free(folder);
    g_free(target);
    return status;
}

int rv_cmd_import(int argc, char **argv)
{
    gboolean quiet = FALSE;
    GOptionEntry entries[] = {
        { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "print nothing on success", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|FOLDER... - build the dependency graph and save it (.rvg)");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "TRACE may be - to read standard input (then give -o). Every other command accepts\n"
        "the saved graph in place of the trace and loads it without parsing JSON again.\n"
        "Several traces (give -o), or a folder of them (FOLDER.rvg by default), are the ranks of\n"
        "one job: one graph holds them all, their collectives matched.\n"
        "The format is described in src/store/store.c.\n\n"
        "The graph is written to a temporary file beside the output and renamed over it\n"
        "when complete, so a failure or a signal leaves an existing file as it was. The output\n"
        "is never an input (compared as files, not names: links and the ranks of a folder\n"
        "too), and an existing file is replaced only with --force.\n\n"
        "Example:\n  reverie import traces/small_ddp.json.gz -o small.rvg && reverie simulate small.rvg\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc < 2) { status = rv_cli_usage("import", "give the trace to import"); goto out; }
    status = run_import(argv + 1, argc - 1, quiet);
out:
    g_option_context_free(context);
    return status;
}
