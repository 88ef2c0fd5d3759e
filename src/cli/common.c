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
#include "isolate.h"
#include "reverie/documents.h"
#include "reverie/output.h"
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

/* Seconds ("30", "0.5") or a duration with its unit ("30s", "500ms"),
 * from 0 to 10^6; `zero` says what 0 means, for the message. */
static gboolean parse_seconds(const char *option, const char *value, const char *zero, double *seconds,
                              GError **error)
{
    int64_t ns = 0;
    *seconds = -1;
    if (!rv_parse_number(value, seconds, NULL) && rv_parse_duration_ns(value, &ns, NULL)) *seconds = ns / 1e9;
    if (*seconds >= 0 && *seconds <= 1e6) return TRUE;
    char *expected = g_strdup_printf("seconds from 0 (%s) to 1000000, such as 30 or 500ms", zero);
    bad_option_value(error, option, value, expected);
    g_free(expected);
    return FALSE;
}

static gboolean parse_read_timeout(const char *option, const char *value, gpointer data, GError **error)
{
    double seconds;
    if (!parse_seconds(option, value, "wait forever", &seconds, error)) return FALSE;
    input_limits.read_timeout_ms = seconds == 0 ? -1 : MAX(1, (int)(seconds * 1000));
    return TRUE;
}

static GOptionGroup *input_option_group(void)
{
    static const GOptionEntry entries[] = {
        { "max-bytes", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, (gpointer)parse_max_bytes,
          "refuse a trace of more than SIZE bytes of JSON, counted after decompression (default 4GiB)", "SIZE" },
        { "max-events", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, (gpointer)parse_max_events,
          "refuse a trace of more than N events (default 10000000)", "N" },
        { "read-timeout", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, (gpointer)parse_read_timeout,
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

static const rv_command *current_command;

void rv_cli_begin_command(const rv_command *command)
{
    current_command = command;
}

/* The options whose values are text: GLib would convert them from the
 * locale's character set, which in the C locale (no setlocale: numbers
 * must print with a '.') refuses every byte above 127, so a selection
 * could never name a non-ASCII kernel.  They are taken as bytes instead
 * (G_OPTION_ARG_FILENAME) and checked to be UTF-8 after parsing. */
typedef struct {
    const char *long_name;
    GOptionArg arg;
    gpointer data;
} text_option;

static GArray *text_options;

void rv_cli_add_entries(GOptionContext *context, const GOptionEntry *entries)
{
    gsize count = 0;
    while (entries[count].long_name != NULL) count++;
    GOptionEntry *copy = g_memdup2(entries, (count + 1) * sizeof *entries);
    if (text_options == NULL) text_options = g_array_new(FALSE, FALSE, sizeof(text_option));
    for (gsize i = 0; i < count; i++) {
        GOptionEntry *entry = &copy[i];
        if (entry->arg == G_OPTION_ARG_STRING) entry->arg = G_OPTION_ARG_FILENAME;
        else if (entry->arg == G_OPTION_ARG_STRING_ARRAY) entry->arg = G_OPTION_ARG_FILENAME_ARRAY;
        else if (entry->arg == G_OPTION_ARG_CALLBACK) entry->flags |= G_OPTION_FLAG_FILENAME;
        else continue;
        if (entries[i].arg == G_OPTION_ARG_CALLBACK) continue; /* the callback checks its own value */
        text_option text = { entry->long_name, entry->arg, entry->arg_data };
        g_array_append_val(text_options, text);
    }
    g_option_context_add_main_entries(context, copy, NULL);
    g_free(copy);
}

static gboolean check_utf8(const char *name, const char *value, GError **error)
{
    const char *end = NULL;
    if (value == NULL || g_utf8_validate(value, -1, &end)) return TRUE;
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--%s: the value is not UTF-8 text (byte %d is \\x%02x)",
                name, (int)(end - value) + 1, (guint8)*end);
    return FALSE;
}

static gboolean check_text_options(GError **error)
{
    for (guint i = 0; text_options && i < text_options->len; i++) {
        const text_option *option = &g_array_index(text_options, text_option, i);
        if (option->arg == G_OPTION_ARG_FILENAME) {
            if (!check_utf8(option->long_name, *(char **)option->data, error)) return FALSE;
            continue;
        }
        for (char **value = *(char ***)option->data; value && *value; value++)
            if (!check_utf8(option->long_name, *value, error)) return FALSE;
    }
    return TRUE;
}

/* GLib takes a short option's value from the next argument only: -j4 or
 * -ofile is read as -j or -o followed by whatever comes next, and fails
 * on it.  The first argument written that way (a short option that takes
 * a value in some command, more letters after it), for the hint; NULL if
 * none.  GLib leaves argv as it was when parsing fails. */
static const char *value_attached_to_short_option(int argc, char **argv)
{
    static const char with_values[] = "fgjnos";
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (g_strcmp0(arg, "--") == 0) break;
        if (arg[0] == '-' && arg[1] != '\0' && arg[1] != '-' && strchr(with_values, arg[1]) && arg[2] != '\0')
            return arg;
    }
    return NULL;
}

static void print_option_error(GError *error, int argc, char **argv, int *status)
{
    char *message = rv_escape_text(error->message);
    const char *attached = value_attached_to_short_option(argc, argv);
    if (attached) {
        char *shown = rv_escape_text(attached + 2);
        fprintf(stderr, "reverie: %s (a short option takes its value as the next argument: -%c %s, not %.2s%s; see --help)\n",
                message, attached[1], shown, attached, shown);
        g_free(shown);
    } else {
        fprintf(stderr, "reverie: %s (see --help)\n", message);
    }
    g_free(message);
    g_error_free(error);
    *status = RV_EXIT_USAGE;
}

/* ---- plugin isolation (isolate.c) ----------------------------------------- */

static struct {
    gboolean isolate, no_isolate;
    double time_limit_s;
} isolation = { FALSE, FALSE, RV_CLI_DEFAULT_TIME_LIMIT_S };

static gboolean parse_time_limit(const char *option, const char *value, gpointer data, GError **error)
{
    return parse_seconds(option, value, "no limit", &isolation.time_limit_s, error);
}

static void add_isolation_entries(GOptionContext *context, gboolean variants)
{
    const GOptionEntry entries[] = {
        { "isolate", 0, 0, G_OPTION_ARG_NONE, &isolation.isolate,
          variants ? "run each variant's plugins in a child process of its own (the default)"
                   : "run the optimizations in a child process, so that one that crashes, hangs or calls exit() "
                     "is an error (exit 3), not the end of reverie", NULL },
        { "time-limit", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, (gpointer)parse_time_limit,
          variants ? "stop an isolated variant that takes longer than SECONDS (default 300; 0: no limit)"
                   : "with --isolate: stop the optimizations (and what follows them) after SECONDS (default 300; "
                     "0: no limit)", "SECONDS" },
        { NULL }
    };
    g_option_context_add_main_entries(context, entries, NULL);
    if (!variants) return;
    const GOptionEntry trusted[] = {
        { "no-isolate", 0, 0, G_OPTION_ARG_NONE, &isolation.no_isolate,
          "run the variants in threads of this process: faster, for plugins you trust", NULL },
        { NULL }
    };
    g_option_context_add_main_entries(context, trusted, NULL);
}

gboolean rv_cli_isolate_variants(void) { return !isolation.no_isolate; }
double rv_cli_time_limit_s(void) { return isolation.time_limit_s; }

/* ---- parsing ------------------------------------------------------------------ */

static gboolean parse_options(GOptionContext *context, int *argc, char ***argv, int *status)
{
    GError *error = NULL;
    if (!g_option_context_parse(context, argc, argv, &error) || !check_text_options(&error)) {
        print_option_error(error, *argc, *argv, status);
        return FALSE;
    }
    return TRUE;
}

/* After the options: the inputs remembered and -o opened before any slow
 * work, then, with --isolate, the rest of the command in a child process
 * (this process only waits for it and returns its status). */
static gboolean prepare_run(int argc, char **argv, unsigned traits, int *status)
{
    GError *error = NULL;
    rv_cli_note_inputs(argv + 1, argc - 1);
    /* the GPU catalogue and the efficiency table are read by the run too
     * (their loaders note them as well, but only once they are read) */
    if (g_getenv("REVERIE_GPU_CATALOGUE")) rv_output_note_input(g_getenv("REVERIE_GPU_CATALOGUE"));
    if (g_getenv("REVERIE_EFFICIENCY")) rv_output_note_input(g_getenv("REVERIE_EFFICIENCY"));
    if (isolation.isolate && isolation.no_isolate) {
        *status = rv_cli_usage(current_command->name, "give --isolate or --no-isolate, not both");
        return FALSE;
    }
    if (!rv_cli_output_begin((traits & RV_CLI_REPORT_TO_O) != 0, &error)) {
        *status = rv_cli_fail(error);
        return FALSE;
    }
    if (!(traits & RV_CLI_OPTIMIZES) || !isolation.isolate) return TRUE;
    gboolean in_child = FALSE;
    *status = rv_cli_supervise(isolation.time_limit_s, &in_child);
    return in_child;
}

static gboolean parse_command(GOptionContext *context, int *argc, char ***argv, int *status, gboolean reads_input)
{
    unsigned traits = current_command ? current_command->traits : RV_CLI_REPORT_TO_O;
    if (reads_input) g_option_context_add_group(context, input_option_group());
    rv_cli_add_output_entries(context, current_command ? current_command->output_help : NULL);
    if (traits & (RV_CLI_OPTIMIZES | RV_CLI_VARIANTS)) add_isolation_entries(context, (traits & RV_CLI_VARIANTS) != 0);
    return parse_options(context, argc, argv, status) && prepare_run(*argc, *argv, traits, status);
}

gboolean rv_cli_parse(GOptionContext *context, int *argc, char ***argv, int *status)
{
    return parse_command(context, argc, argv, status, TRUE);
}

gboolean rv_cli_parse_without_input(GOptionContext *context, int *argc, char ***argv, int *status)
{
    return parse_command(context, argc, argv, status, FALSE);
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

const char *rv_cli_bounded(const char *text)
{
    /* names repeat (one per task): each long one is cut once */
    static GHashTable *cut;
    if (text == NULL) return "";
    const char *known = cut ? g_hash_table_lookup(cut, text) : NULL;
    if (known) return known;
    char *copy = NULL;
    const char *bounded = rv_bounded_name(text, &copy);
    if (copy == NULL) return bounded;
    if (cut == NULL) cut = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    g_hash_table_insert(cut, (gpointer)text, copy);
    return copy;
}

const char *rv_cli_shown(const char *text)
{
    static char *ring[RV_CLI_SHOWN_SLOTS];
    static guint next;
    text = rv_cli_bounded(text);
    if (!rv_text_needs_escape(text)) return text;
    guint slot = next++ % RV_CLI_SHOWN_SLOTS;
    g_free(ring[slot]);
    ring[slot] = rv_escape_text(text);
    return ring[slot];
}

void rv_cli_format_ms(char *buffer, gsize size, int64_t ns)
{
    g_snprintf(buffer, size, "%.3f ms", ns / 1e6);
}

double rv_cli_mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

void rv_cli_note(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = g_strdup_vprintf(format, args);
    va_end(args);
    char *line = g_strdup_printf("reverie: note: %s", rv_cli_shown(text));
    if (!rv_cli_isolation_note(line)) fprintf(stderr, "%s\n", line);
    g_free(line);
    g_free(text);
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
        rv_cli_note("%s: the launch-queue rule would have deadlocked this graph (its queue order contradicts its "
                    "edges, e.g. after a plugin's rewrite): replayed without it", graph->source);
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
