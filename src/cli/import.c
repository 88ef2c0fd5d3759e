/*
 * import.c - `reverie import TRACE [-o GRAPH.rvg]`: build the dependency
 * graph of a trace once and save it, so later queries skip the JSON.
 *
 * The output follows output.c's rules: never the input itself, an existing
 * file only with --force, and a device or "-" written in place.
 */
#include "cli.h"
#include "reverie/escape.h"
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

static gint64 file_size(const char *path)
{
    GStatBuf info;
    return g_stat(path, &info) == 0 ? (gint64)info.st_size : 0;
}

static void print_summary(const rv_graph *graph, const rv_cli_output *out, gint64 bytes, double seconds)
{
    char *shown = rv_escape_text(out->path);
    /* With "-o -" standard output carries the graph itself. */
    FILE *report = out->to_stdout ? stderr : stdout;
    /* Count live tasks, as info does: runtime calls nested in another call are
     * merged into it but stay in the file (marked removed) so ids are stable. */
    int32_t live = rv_graph_live_task_count(graph), merged = rv_graph_task_count(graph) - live;
    fprintf(report, "wrote %s: %d tasks", shown, live);
    if (merged) fprintf(report, " (plus %d nested runtime calls merged into their callers)", merged);
    fprintf(report, ", %u edges, %u steps, %.1f MB in %.2f s\n", graph->edges->len, graph->steps->len, bytes / 1e6,
            seconds);
    g_free(shown);
}

static gboolean copy_file(FILE *out, gpointer path, GError **error)
{
    gchar *contents = NULL;
    gsize length = 0;
    if (!g_file_get_contents(path, &contents, &length, error)) return FALSE;
    gboolean ok = fwrite(contents, 1, length, out) == length;
    g_free(contents);
    return ok;
}

/* store.c replaces its target with a new file, which must never happen to
 * a device (as root it would replace /dev/null): those get a copy. */
static gboolean save_graph(const rv_graph *graph, const rv_cli_output *out, gint64 *bytes, GError **error)
{
    if (!out->to_stdout && !out->direct) {
        gboolean ok = rv_store_save(graph, out->target, error);
        *bytes = ok ? file_size(out->target) : 0;
        return ok;
    }
    char *temporary = NULL;
    int fd = g_file_open_tmp("reverie-import-XXXXXX.rvg", &temporary, error);
    if (fd < 0) return FALSE;
    close(fd);
    gboolean ok = rv_store_save(graph, temporary, error) && rv_cli_output_write(out, copy_file, temporary, error);
    *bytes = ok ? file_size(temporary) : 0;
    g_unlink(temporary);
    g_free(temporary);
    return ok;
}

/* Load (a trace, a graph to copy, or the ranks of a job), save, and report. */
static int import_inputs(char **paths, int count, const rv_cli_output *out, gboolean quiet)
{
    gint64 started = g_get_monotonic_time(), bytes = 0;
    GError *error = NULL;
    rv_graph *graph = rv_cli_load_job(paths, count, FALSE, &error);
    if (graph == NULL) return rv_cli_fail(error);
    int status = RV_EXIT_OK;
    if (!save_graph(graph, out, &bytes, &error))
        status = rv_cli_fail(error);
    else if (!quiet)
        print_summary(graph, out, bytes, (g_get_monotonic_time() - started) / 1e6);
    rv_graph_free(graph);
    return status;
}

static int run_import(char **paths, int count, const char *output, gboolean force, gboolean quiet)
{
    const char *trace = paths[0];
    if (output == NULL && strcmp(trace, "-") == 0)
        return rv_cli_usage("import", "give the output with -o GRAPH.rvg when the trace is on standard input");
    if (output == NULL && count > 1)
        return rv_cli_usage("import", "give the output with -o GRAPH.rvg when importing several ranks");
    /* a folder of ranks: FOLDER.rvg beside it */
    char *folder = count == 1 && g_file_test(trace, G_FILE_TEST_IS_DIR) ? g_strdup(trace) : NULL;
    if (folder != NULL) while (strlen(folder) > 1 && g_str_has_suffix(folder, "/")) folder[strlen(folder) - 1] = '\0';
    char *target = output ? g_strdup(output) : folder ? g_strconcat(folder, ".rvg", NULL) : default_output(trace);
    rv_cli_output out;
    GError *error = NULL;
    gboolean ready = rv_cli_output_prepare(&out, target, folder ? NULL : trace, force, &error);
    for (int i = 1; ready && i < count; i++) {
        /* the output must not be any of the inputs */
        rv_cli_output check;
        ready = rv_cli_output_prepare(&check, target, paths[i], TRUE, &error);
        rv_cli_output_clear(&check);
    }
    int status = ready ? import_inputs(paths, count, &out, quiet) : rv_cli_fail(error);
    g_free(folder);
    rv_cli_output_clear(&out);
    g_free(target);
    return status;
}

int rv_cmd_import(int argc, char **argv)
{
    char *output = NULL;
    gboolean quiet = FALSE, force = FALSE;
    GOptionEntry entries[] = {
        { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "where to write the graph (default: the trace's "
          "path with .json or .json.gz replaced by .rvg; - for standard output)", "GRAPH.rvg" },
        { "force", 'f', 0, G_OPTION_ARG_NONE, &force, "replace the output if it exists", NULL },
        { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "print nothing on success", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|FOLDER... - build the dependency graph and save it (.rvg)");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "TRACE may be - to read standard input (then give -o). Every other command accepts\n"
        "the saved graph in place of the trace and loads it without parsing JSON again.\n"
        "Several traces (give -o), or a folder of them (FOLDER.rvg by default), are the ranks of\n"
        "one job: one graph holds them all, their collectives matched.\n"
        "The format is described in src/store/store.c.\n\n"
        "The graph is written to a temporary file beside the output and renamed over it\n"
        "when complete, so a failure leaves an existing file as it was. The output is never\n"
        "the trace itself (compared as files, not names), and an existing file is replaced\n"
        "only with --force.\n\n"
        "Example:\n  reverie import traces/small_ddp.json.gz -o small.rvg && reverie simulate small.rvg\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc < 2) { status = rv_cli_usage("import", "give the trace to import"); goto out; }
    status = run_import(argv + 1, argc - 1, output, force, quiet);
out:
    g_free(output);
    g_option_context_free(context);
    return status;
}
