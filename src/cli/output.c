/*
 * output.c - where the commands' output goes, with the library's one
 * writer (reverie/output.h) doing the writing.
 *
 * Every command takes the same output options: -o FILE (the report, or
 * for import and export-graph the graph they write), --force to replace
 * an existing file, and --max-output SIZE.  Before any slow work:
 *   - every input named on the command line (a file, each file of a
 *     folder, the file standard input comes from) is remembered, so that
 *     no output - -o, --timeline, --plot - can replace it;
 *   - -o is checked and, for a report, opened: standard output is pointed
 *     at the writer's stream, so the report is written to a temporary file
 *     and put in place only when the command succeeded (rv_cli_finish);
 *     a failed command leaves the old file as it was.
 * At the end every write is checked: standard output (a full disk, a
 * closed pipe, /dev/full) and standard error are flushed, and a failure is
 * one line and exit status 2.  The files a command writes besides its
 * report (--timeline, --plot) are written before it prints its report.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "isolate.h"
#include "reverie/output.h"
#include "reverie/units.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    char *path;            /* -o */
    gboolean force;        /* --force */
    rv_output *report;     /* -o of a report, while it is written */
    FILE *real_stdout;     /* standard output while stdout points at the report */
    gboolean finished;     /* rv_cli_finish ran */
} output;

static gboolean parse_max_output(const char *option, const char *value, gpointer data, GError **error)
{
    int64_t bytes = 0;
    if (!rv_parse_bytes(value, &bytes, NULL) || bytes < 0) {
        char *shown = g_strdup(rv_cli_shown(value));
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "%s %s: expected a size such as 16GiB or 500MB (0: no limit)", option, shown);
        g_free(shown);
        return FALSE;
    }
    rv_output_set_max_bytes((uint64_t)bytes);
    return TRUE;
}

void rv_cli_add_output_entries(GOptionContext *context, const char *output_help)
{
    const GOptionEntry entries[] = {
        { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output.path,
          output_help ? output_help : "write the report to FILE instead of standard output (written whole, or not at all)",
          "FILE" },
        { "force", 0, 0, G_OPTION_ARG_NONE, &output.force,
          "replace output files that exist (never an input of the run)", NULL },
        { "max-output", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, (gpointer)parse_max_output,
          "refuse to write an output file larger than SIZE (default 16GiB; 0: no limit)", "SIZE" },
        { NULL }
    };
    g_option_context_add_main_entries(context, entries, NULL);
}

const char *rv_cli_output_path(void) { return output.path; }
gboolean rv_cli_force(void) { return output.force; }

int rv_cli_output_flags(void)
{
    return output.force ? RV_OUTPUT_REPLACE : 0;
}

/* Where a path leads, as one name: its real path, or its folder's real
 * path and its name when it does not exist yet (g_free). */
static char *where(const char *path)
{
    char *real = realpath(path, NULL);
    if (real == NULL) {
        char *folder = g_path_get_dirname(path), *base = g_path_get_basename(path);
        char *real_folder = realpath(folder, NULL);
        real = real_folder ? g_build_filename(real_folder, base, NULL) : g_strdup(path);
        free(real_folder);
        g_free(folder);
        g_free(base);
        return real;
    }
    char *copy = g_strdup(real);
    free(real);
    return copy;
}

/* Two options of one run may not name one file: the second would replace
 * the first. */
static gboolean claim(const char *path, GError **error)
{
    static GPtrArray *claimed;
    if (strcmp(path, "-") == 0) return TRUE;
    if (claimed == NULL) claimed = g_ptr_array_new_with_free_func(g_free);
    char *name = where(path);
    for (guint i = 0; i < claimed->len; i++) {
        if (strcmp(g_ptr_array_index(claimed, i), name) != 0) continue;
        g_free(name);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: given as two outputs of this run; give each its own name", path);
        return FALSE;
    }
    g_ptr_array_add(claimed, name);
    return TRUE;
}

gboolean rv_cli_check_output(const char *path, GError **error)
{
    return path == NULL || (rv_output_check(path, rv_cli_output_flags(), error) && claim(path, error));
}

void rv_cli_note_inputs(char **paths, int count)
{
    for (int i = 0; i < count; i++) {
        if (strcmp(paths[i], "-") == 0) rv_output_note_input_fd(STDIN_FILENO);
        else rv_output_note_input(paths[i]);
    }
}

gboolean rv_cli_output_begin(gboolean report, GError **error)
{
    /* `reverie info t.json >> t.json` would append the report to the trace */
    if (rv_output_fd_is_input(STDOUT_FILENO)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "standard output is an input of this run: writing to it would "
                    "damage the input - send the output elsewhere");
        return FALSE;
    }
    if (output.path == NULL) return TRUE;
    if (!report) return rv_cli_check_output(output.path, error);
    if (strcmp(output.path, "-") == 0) return TRUE; /* standard output already */
    if (!claim(output.path, error)) return FALSE;
    output.report = rv_output_open(output.path, rv_cli_output_flags(), error);
    if (output.report == NULL) return FALSE;
    fflush(stdout);
    output.real_stdout = stdout;
    stdout = rv_output_stream(output.report);
    return TRUE;
}

/* Put standard output back; commit the report when the command succeeded. */
static int finish_report(int status)
{
    if (output.report == NULL) return status;
    rv_output *report = output.report;
    output.report = NULL;
    stdout = output.real_stdout;
    if (status != RV_EXIT_OK) {
        rv_output_abort(report);
        return status;
    }
    GError *error = NULL;
    return rv_output_commit(report, &error) ? status : rv_cli_fail(error);
}

/* Standard output is a stream of our own over descriptor 1, so that the
 * cause of the first failed write is kept until it is reported. */
static int stdout_failure;

static ssize_t write_stdout(void *cookie, const char *buffer, size_t size)
{
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(STDOUT_FILENO, buffer + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (stdout_failure == 0) stdout_failure = n < 0 ? errno : EIO;
            errno = stdout_failure;
            return -1;
        }
        done += (size_t)n;
    }
    return (ssize_t)size;
}

static void wrap_stdout(void)
{
    cookie_io_functions_t functions = { NULL, write_stdout, NULL, NULL };
    FILE *stream = fopencookie(NULL, "w", functions);
    if (stream == NULL) return; /* keep libc's: failures are still caught, their cause may be lost */
    setvbuf(stream, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, 1 << 16);
    fflush(stdout);
    stdout = stream;
}

/* Standard output and error flushed: exit status 2 and one line when a
 * write failed and nothing else had (a failed command already said why). */
static int check_standard_streams(int status)
{
    gboolean failed = fflush(stdout) != 0 || ferror(stdout);
    int failure = stdout_failure ? stdout_failure : errno;
    if (failed && status == RV_EXIT_OK) {
        const char *why = failure ? g_strerror(failure) : "a write failed";
        fprintf(stderr, "reverie: cannot write standard output: %s\n", why);
        status = RV_EXIT_INPUT;
    }
    if ((fflush(stderr) != 0 || ferror(stderr)) && status == RV_EXIT_OK) status = RV_EXIT_INPUT;
    return status;
}

int rv_cli_finish(int status)
{
    output.finished = TRUE;
    if (rv_cli_isolated()) {
        /* a supervised command's child: the parent owns the report file */
        errno = 0;
        status = check_standard_streams(status);
        rv_cli_isolation_done(status);
        _exit(status);
    }
    status = finish_report(status);
    errno = 0;
    return check_standard_streams(status);
}

/* exit() from elsewhere - GLib's --help ends the process itself - must not
 * hide a failed write either. */
static void check_at_exit(void)
{
    if (output.finished) return;
    output.finished = TRUE;
    if (output.report) {
        rv_output_abort(output.report);
        output.report = NULL;
        stdout = output.real_stdout;
    }
    errno = 0;
    if (check_standard_streams(RV_EXIT_OK) != RV_EXIT_OK) _exit(RV_EXIT_INPUT);
}

void rv_cli_output_init(void)
{
    wrap_stdout();
    atexit(check_at_exit);
}

void rv_cli_output_clear(void)
{
    g_clear_pointer(&output.path, g_free);
}
