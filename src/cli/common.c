/*
 * common.c - helpers every subcommand uses: input loading with progress and
 * limits, option parsing and error reporting.  Only the command line prints.
 *
 * The input limits (--max-bytes, --max-events, --read-timeout) are one
 * GOptionGroup that rv_cli_parse adds to every command that reads a trace,
 * so each command accepts them without code of its own; their values live
 * here until rv_cli_load uses them.
 */
#include "cli.h"
#include "reverie/documents.h"
#include "reverie/escape.h"
#include "reverie/explain.h"
#include "reverie/input.h"
#include "reverie/load.h"
#include "reverie/units.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static rv_import_options input_limits = {
    .max_bytes = RV_IMPORT_DEFAULT_MAX_BYTES,
    .max_events = RV_IMPORT_DEFAULT_MAX_EVENTS,
    .read_timeout_ms = RV_INPUT_DEFAULT_TIMEOUT_MS,
};

/* The last input opened, for the out-of-memory line (a copy: the hook may
 * run after the input is closed, while a plugin or the replay works on it). */
static char *current_input;

/* ---- the input options -------------------------------------------------- */

static gboolean bad_option_value(GError **error, const char *option, const char *value, const char *expected)
{
    char *shown = rv_escape_text(value);
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "%s %s: expected %s", option, shown, expected);
    g_free(shown);
    return FALSE;
}

static gboolean parse_max_bytes(const char *option, const char *value, gpointer data, GError **error)
{
    int64_t bytes = 0;
    if (!rv_parse_bytes(value, &bytes, NULL) || bytes < 1)
        return bad_option_value(error, option, value, "a size of at least 1 byte, such as 8GiB or 500MB");
    input_limits.max_bytes = (uint64_t)bytes;
    return TRUE;
}

static gboolean parse_max_events(const char *option, const char *value, gpointer data, GError **error)
{
    guint64 events = 0;
    if (!g_ascii_string_to_unsigned(value, 10, 1, G_MAXUINT32, &events, NULL))
        return bad_option_value(error, option, value, "a whole number of events from 1 to 4294967295");
    input_limits.max_events = events;
    return TRUE;
}

/* Seconds ("30", "0.5") or a duration with its unit ("30s", "500ms"). */
static gboolean parse_read_timeout(const char *option, const char *value, gpointer data, GError **error)
{
    double seconds = -1;
    int64_t ns = 0;
    if (!rv_parse_number(value, &seconds, NULL) && rv_parse_duration_ns(value, &ns, NULL)) seconds = ns / 1e9;
    if (!(seconds >= 0 && seconds <= 1e6))
        return bad_option_value(error, option, value, "seconds from 0 (wait forever) to 1000000, such as 30 or 500ms");
    input_limits.read_timeout_ms = seconds == 0 ? -1 : MAX(1, (int)(seconds * 1000));
    return TRUE;
}

static GOptionGroup *input_option_group(void)
{
    static const GOptionEntry entries[] = {
        { "max-bytes", 0, 0, G_OPTION_ARG_CALLBACK, (gpointer)parse_max_bytes,
          "refuse a trace of more than SIZE bytes of JSON, counted after decompression (default 4GiB)", "SIZE" },
        { "max-events", 0, 0, G_OPTION_ARG_CALLBACK, (gpointer)parse_max_events,
          "refuse a trace of more than N events (default 10000000)", "N" },
        { "read-timeout", 0, 0, G_OPTION_ARG_CALLBACK, (gpointer)parse_read_timeout,
          "give up on a pipe or FIFO that sends nothing for SECONDS (default 60; 0 waits forever)", "SECONDS" },
        { NULL }
    };
    GOptionGroup *group = g_option_group_new("input", "Limits on what is read (a trace or graph; - is standard input):",
                                             "Show the limits on input size, events and waiting", NULL, NULL);
    g_option_group_add_entries(group, entries);
    return group;
}

/* ---- loading ------------------------------------------------------------ */

/* The import's progress on a terminal: the input opened last, and how far. */
static gboolean progress_shown;

static void show_progress(uint64_t bytes, uint64_t events, void *data)
{
    char *path = rv_escape_text(current_input);
    fprintf(stderr, "\rimporting %s: %.0f MB, %" G_GUINT64_FORMAT " events", path, bytes / 1e6, events);
    fflush(stderr);
    g_free(path);
    progress_shown = TRUE;
}

static void clear_progress(void)
{
    if (progress_shown) fprintf(stderr, "\r\033[K");
    progress_shown = FALSE;
}

static void input_opened(const char *name, void *data)
{
    clear_progress();
    g_free(current_input);
    current_input = g_strdup(name);
}

static rv_load_options load_options(GPtrArray *notes)
{
    rv_load_options options = { input_limits, input_opened, NULL, notes };
    if (isatty(STDERR_FILENO)) options.import.progress = show_progress;
    return options;
}

rv_graph *rv_cli_load(const char *path, GError **error)
{
    rv_load_options options = load_options(NULL);
    rv_graph *graph = rv_load(path, &options, error);
    clear_progress();
    return graph;
}

rv_graph *rv_cli_load_job(char **paths, int count, gboolean notes, GError **error)
{
    rv_load_options options = load_options(notes ? g_ptr_array_new_with_free_func(g_free) : NULL);
    rv_graph *graph = rv_load_job(paths, count, &options, error);
    clear_progress();
    for (guint i = 0; options.notes && i < options.notes->len; i++)
        fprintf(stderr, "reverie: note: %s\n", (const char *)g_ptr_array_index(options.notes, i));
    if (options.notes) g_ptr_array_unref(options.notes);
    return graph;
}

/* ---- fatal errors from GLib ---------------------------------------------- */

/*
 * GLib aborts the process when an allocation fails (g_error, SIGTRAP).  A
 * trace that needs more memory than there is must end like any other bad
 * input: one line and exit status 2.  The library never exits; this hook
 * belongs to the command line.  It runs at most once: it never returns.
 */
static G_GNUC_NORETURN void fatal_exit(const char *message)
{
    /* GLib's text is "FILE:LINE: failed to allocate N bytes". */
    const char *allocation = strstr(message, "failed to allocate");
    char *shown = rv_escape_text(allocation ? allocation + strlen("failed to ") : message);
    if (allocation != NULL)
        fprintf(stderr, "reverie: %s: out of memory (could not %s) - allow more memory, or read less with "
                "--max-events and --max-bytes\n", current_input ? current_input : "(no input)", shown);
    else
        fprintf(stderr, "reverie: fatal error: %s\n", shown);
    fflush(stderr);
    _exit(RV_EXIT_INPUT);
}

static GLogWriterOutput fatal_writer(GLogLevelFlags level, const GLogField *fields, gsize count, gpointer data)
{
    if (level & G_LOG_LEVEL_ERROR) {
        for (gsize i = 0; i < count; i++) {
            if (strcmp(fields[i].key, "MESSAGE") != 0) continue;
            if (fields[i].length < 0) fatal_exit(fields[i].value);
            fatal_exit(g_strndup(fields[i].value, (gsize)fields[i].length));
        }
        fatal_exit("an unspecified fatal error");
    }
    return g_log_writer_default(level, fields, count, data);
}

static void fatal_handler(const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
    if (level & G_LOG_LEVEL_ERROR) fatal_exit(message);
    g_log_default_handler(domain, level, message, data);
}

void rv_cli_catch_fatal_errors(void)
{
    g_log_set_writer_func(fatal_writer, NULL, NULL);
    g_log_set_handler(NULL, G_LOG_LEVEL_ERROR | G_LOG_FLAG_FATAL | G_LOG_FLAG_RECURSION, fatal_handler, NULL);
    g_log_set_handler("GLib", G_LOG_LEVEL_ERROR | G_LOG_FLAG_FATAL | G_LOG_FLAG_RECURSION, fatal_handler, NULL);
}

/* ---- options and errors --------------------------------------------------- */

static gboolean parse_options(GOptionContext *context, int *argc, char ***argv, int *status)
{
    GError *error = NULL;
    if (g_option_context_parse(context, argc, argv, &error)) return TRUE;
    char *message = rv_escape_text(error->message);
    fprintf(stderr, "reverie: %s (see --help)\n", message);
    g_free(message);
    g_error_free(error);
    *status = RV_EXIT_USAGE;
    return FALSE;
}

gboolean rv_cli_parse(GOptionContext *context, int *argc, char ***argv, int *status)
{
    g_option_context_add_group(context, input_option_group());
    return parse_options(context, argc, argv, status);
}

gboolean rv_cli_parse_without_input(GOptionContext *context, int *argc, char ***argv, int *status)
{
    return parse_options(context, argc, argv, status);
}

int rv_cli_fail(GError *error)
{
    if (error == NULL) {
        /* A bug: something failed without saying why.  Still a failure. */
        fprintf(stderr, "reverie: internal error: a step failed without an error message\n");
        return RV_EXIT_INPUT;
    }
    int status = rv_error_exit_status(error);
    char *message = rv_escape_text(error->message);
    fprintf(stderr, "reverie: %s\n", message);
    g_free(message);
    g_clear_error(&error);
    return status;
}

int rv_cli_usage(const char *command, const char *message)
{
    char *shown = rv_escape_text(message);
    fprintf(stderr, "reverie %s: %s (see reverie %s --help)\n", command, shown, command);
    g_free(shown);
    return RV_EXIT_USAGE;
}

void rv_cli_print_json(void *root)
{
    rv_cli_print_json_digits(root, RV_DOCUMENT_DIGITS);
}

void rv_cli_print_json_digits(void *root, int digits)
{
    char *text = root ? rv_document_text(root, digits) : NULL;
    printf("%s\n", text ? text : "null");
    free(text);
    json_decref(root);
}

const char *rv_cli_shown(const char *text)
{
    static char *ring[RV_CLI_SHOWN_SLOTS];
    static guint next;
    if (!rv_text_needs_escape(text)) return text ? text : "";
    guint slot = next++ % RV_CLI_SHOWN_SLOTS;
    g_free(ring[slot]);
    ring[slot] = rv_escape_text(text);
    return ring[slot];
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

void rv_cli_note_launch_queue(const rv_graph *graph, gboolean launch_queue_ignored)
{
    /* once per run: a sweep replays thousands of variants of one graph */
    static gint noted = 0;
    if (launch_queue_ignored && g_atomic_int_compare_and_exchange(&noted, 0, 1))
        fprintf(stderr, "reverie: note: %s: the launch-queue rule would have deadlocked this graph (its queue "
                        "order contradicts its edges, e.g. after a plugin's rewrite): replayed without it\n",
                graph->source);
}

void rv_cli_note_replay(const rv_graph *graph, const rv_sim_result *sim)
{
    rv_cli_note_launch_queue(graph, sim->launch_queue_ignored);
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
    return rv_cli_shown(g_str_has_prefix(name, prefix) ? name + sizeof prefix - 1 : name);
}

/* One "field,value" row per scalar of a JSON document, the field its path
 * (objects by key joined with '.', arrays by [index]): the reports whose
 * JSON is a record rather than a table (info, validate) get a CSV form that
 * holds exactly what the JSON holds, in the same order. */
static void json_csv_rows(json_t *value, GString *path)
{
    gsize length = path->len;
    if (json_is_object(value)) {
        const char *key;
        json_t *member;
        json_object_foreach(value, key, member) {
            if (length) g_string_append_c(path, '.');
            g_string_append(path, key);
            json_csv_rows(member, path);
            g_string_truncate(path, length);
        }
        return;
    }
    if (json_is_array(value)) {
        for (gsize i = 0; i < json_array_size(value); i++) {
            g_string_append_printf(path, "[%" G_GSIZE_FORMAT "]", i);
            json_csv_rows(json_array_get(value, i), path);
            g_string_truncate(path, length);
        }
        return;
    }
    char *text = json_is_string(value) ? g_strdup(json_string_value(value))
                 : json_is_null(value) ? g_strdup("")
                 : json_dumps(value, JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
    const char *row[] = { path->str, text };
    rv_cli_csv_row(row, 2);
    if (json_is_string(value) || json_is_null(value)) g_free(text);
    else free(text);
}

void rv_cli_print_json_as_csv(void *root)
{
    GString *path = g_string_new(NULL);
    const char *header[] = { "field", "value" };
    rv_cli_csv_row(header, 2);
    if (root) json_csv_rows(root, path);
    g_string_free(path, TRUE);
    json_decref(root);
}
