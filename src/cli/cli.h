/*
 * cli.h - what the subcommands (one file each) share: loading an input,
 * option parsing with GOptionContext, and reporting errors.
 */
#ifndef REVERIE_CLI_H
#define REVERIE_CLI_H

#include <glib.h>
#include <stdio.h>
#include "reverie/error.h"
#include "reverie/graph.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} rv_command;

int rv_cmd_info(int argc, char **argv);
int rv_cmd_simulate(int argc, char **argv);
int rv_cmd_import(int argc, char **argv);
int rv_cmd_query(int argc, char **argv);
int rv_cmd_export_graph(int argc, char **argv);
int rv_cmd_whatif(int argc, char **argv);
int rv_cmd_plugins(int argc, char **argv);

/* Load a trace or a saved graph ("-": standard input), told apart by
 * content, within the limits of the input options, and check that it is
 * safe to simulate (validate.h).  Progress goes to stderr only when it is a
 * terminal. */
rv_graph *rv_cli_load(const char *path, GError **error);

/* Parse options, with the input limits (--max-bytes, --max-events,
 * --read-timeout) added; on failure prints one line and returns FALSE with
 * *status set. */
gboolean rv_cli_parse(GOptionContext *context, int *argc, char ***argv, int *status);
/* The same for a command that reads no trace. */
gboolean rv_cli_parse_without_input(GOptionContext *context, int *argc, char ***argv, int *status);

/* Turn GLib's fatal errors (an allocation that failed) into one line and
 * exit status 2 instead of a crash.  Called once, first thing in main. */
void rv_cli_catch_fatal_errors(void);
/* Print "reverie: message" and return the exit status for the error. */
int rv_cli_fail(GError *error);
/* Print a usage error and return exit status 1. */
int rv_cli_usage(const char *command, const char *message);

/* Print a JSON document to stdout (indented, 12 significant digits) and
 * release it.  Takes jansson's json_t as void so this header needs no jansson. */
void rv_cli_print_json(void *root);
/* A json_t string of text, escaped (escape.h) if it is not valid UTF-8,
 * which jansson would refuse.  Never NULL. */
void *rv_cli_json_text(const char *text);

/* ---- output files (output.c) ---- */

typedef struct {
    const char *path;    /* as given, for messages */
    char *target;        /* the file written: path, or where its symbolic link points */
    gboolean to_stdout;  /* path is "-" */
    gboolean direct;     /* an existing device or FIFO: written in place */
} rv_cli_output;

/* Decide where an output goes, before anything slow: refuses the input
 * itself (input: its path, "-" for standard input, or NULL), a directory,
 * and an existing regular file unless force (RV_ERROR_USAGE, exit 1). */
gboolean rv_cli_output_prepare(rv_cli_output *out, const char *path, const char *input, gboolean force,
                               GError **error);
void rv_cli_output_clear(rv_cli_output *out);

/* Fills an output file; FALSE with *error, or with errno set by stdio. */
typedef gboolean (*rv_cli_write_fn)(FILE *file, gpointer data, GError **error);
/* Write the output atomically (a temporary file renamed over the target),
 * or in place for standard output, a device or a FIFO.  A failure leaves an
 * existing file unchanged and says which file and why. */
gboolean rv_cli_output_write(const rv_cli_output *out, rv_cli_write_fn write_fn, gpointer data, GError **error);

/* "12.345 ms" style formatting with units, for tables. */
void rv_cli_format_ms(char *buffer, gsize size, int64_t ns);

#endif
