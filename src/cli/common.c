/*
 * common.c - helpers every subcommand uses: input loading with progress,
 * option parsing and error reporting.  Only the command line prints.
 */
#include "cli.h"
#include "reverie/explain.h"
#include "reverie/store.h"
#include "reverie/trace.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void show_progress(uint64_t bytes, uint64_t events, void *data)
{
    const char *path = data;
    fprintf(stderr, "\rimporting %s: %.0f MB, %" G_GUINT64_FORMAT " events", path, bytes / 1e6, events);
    fflush(stderr);
}

static rv_graph *load_trace(const char *path, GError **error)
{
    rv_import_options options = { 0 };
    gboolean terminal = isatty(STDERR_FILENO);
    if (terminal) {
        options.progress = show_progress;
        options.progress_data = (void *)path;
    }
    rv_trace *trace = rv_trace_load(path, NULL, &options, error);
    if (terminal) fprintf(stderr, "\r\033[K");
    if (trace == NULL) return NULL;
    rv_graph *graph = rv_graph_build(trace, error);
    rv_trace_free(trace);
    return graph;
}

rv_graph *rv_cli_load(const char *path, GError **error)
{
    if (rv_store_is_graph_file(path))
        return rv_store_load(path, error);
    /* A .rvg name promises a graph: say so rather than fail as a bad trace.
     * A missing file goes on to the loader, which names the real problem. */
    if (g_str_has_suffix(path, ".rvg") && g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: named .rvg but is not a reverie graph (it does not start with the graph magic number)", path);
        return NULL;
    }
    return load_trace(path, error);
}

gboolean rv_cli_parse(GOptionContext *context, int *argc, char ***argv, int *status)
{
    GError *error = NULL;
    if (g_option_context_parse(context, argc, argv, &error)) return TRUE;
    fprintf(stderr, "reverie: %s (see --help)\n", error->message);
    g_error_free(error);
    *status = RV_EXIT_USAGE;
    return FALSE;
}

int rv_cli_fail(GError *error)
{
    int status = rv_error_exit_status(error);
    fprintf(stderr, "reverie: %s\n", error ? error->message : "unknown error");
    g_clear_error(&error);
    return status;
}

int rv_cli_usage(const char *command, const char *message)
{
    fprintf(stderr, "reverie %s: %s (see reverie %s --help)\n", command, message, command);
    return RV_EXIT_USAGE;
}

void rv_cli_print_json(void *root)
{
    rv_cli_print_json_digits(root, 12);
}

void rv_cli_print_json_digits(void *root, int digits)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(digits));
    printf("%s\n", text);
    free(text);
    json_decref(root);
}

void rv_cli_format_ms(char *buffer, gsize size, int64_t ns)
{
    g_snprintf(buffer, size, "%.3f ms", ns / 1e6);
}

void rv_cli_print_notes(const rv_graph *graph)
{
    GPtrArray *notes = rv_timing_notes(graph);
    for (guint i = 0; i < notes->len; i++)
        fprintf(stderr, "reverie: note: %s: %s\n", graph->source, (const char *)g_ptr_array_index(notes, i));
    g_ptr_array_unref(notes);
}

void rv_cli_note_replay(const rv_graph *graph, const rv_sim_result *sim)
{
    /* once per run: a sweep replays thousands of variants of one graph */
    static gint noted = 0;
    if (sim->launch_queue_ignored && g_atomic_int_compare_and_exchange(&noted, 0, 1))
        fprintf(stderr, "reverie: note: %s: the launch-queue rule would have deadlocked this graph (its queue "
                        "order contradicts its edges, e.g. after a plugin's rewrite): replayed without it\n",
                graph->source);
}

void rv_cli_csv_row(const char *const *fields, int count)
{
    GString *line = g_string_new(NULL);
    for (int i = 0; i < count; i++) {
        const char *field = fields[i] ? fields[i] : "";
        if (i) g_string_append_c(line, ',');
        if (strpbrk(field, ",\"\r\n") == NULL) {
            g_string_append(line, field);
            continue;
        }
        g_string_append_c(line, '"');
        for (const char *c = field; *c; c++) {
            if (*c == '"') g_string_append_c(line, '"');
            g_string_append_c(line, *c);
        }
        g_string_append_c(line, '"');
    }
    printf("%s\n", line->str);
    g_string_free(line, TRUE);
}

char *rv_cli_us_text(int64_t ns)
{
    return g_strdup_printf("%.3f", ns / 1e3);
}

const char *rv_cli_short_name(const char *name)
{
    static const char prefix[] = "autograd::engine::evaluate_function: ";
    return g_str_has_prefix(name, prefix) ? name + sizeof prefix - 1 : name;
}
