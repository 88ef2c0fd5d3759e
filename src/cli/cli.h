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
#include "reverie/sim.h"

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
int rv_cmd_validate(int argc, char **argv);
int rv_cmd_breakdown(int argc, char **argv);
int rv_cmd_critical_path(int argc, char **argv);

/* Load a trace or a saved graph, told apart by content.  Progress goes to
 * stderr only when it is a terminal. */
rv_graph *rv_cli_load(const char *path, GError **error);

/* Print, one line each on stderr, what the timing model had to assume about
 * the graph (explain.h's rv_timing_notes); nothing when there is nothing. */
void rv_cli_print_notes(const rv_graph *graph);

/* One stderr note when a replay had to drop the launch-queue rule (sim.h). */
void rv_cli_note_replay(const rv_graph *graph, const rv_sim_result *sim);

/* Parse options; on failure prints one line and returns FALSE with *status set. */
gboolean rv_cli_parse(GOptionContext *context, int *argc, char ***argv, int *status);
/* Print "reverie: message" and return the exit status for the error. */
int rv_cli_fail(GError *error);
/* Print a usage error and return exit status 1. */
int rv_cli_usage(const char *command, const char *message);

/* Print a JSON document to stdout (indented, 12 significant digits) and
 * release it.  Takes jansson's json_t as void so this header needs no jansson. */
void rv_cli_print_json(void *root);
/* The same with more digits, for absolute trace timestamps (16 digits:
 * microseconds since the epoch to the microsecond). */
void rv_cli_print_json_digits(void *root, int digits);

/* A layer or operator name for a table column: the autograd engine's
 * "autograd::engine::evaluate_function: " prefix dropped (the rest,
 * "ConvolutionBackward0", says what it is). */
const char *rv_cli_short_name(const char *name);

/* "12.345 ms" style formatting with units, for tables. */
void rv_cli_format_ms(char *buffer, gsize size, int64_t ns);

/* One CSV row on stdout: fields quoted where they hold a comma, a quote or
 * a line break (RFC 4180). */
void rv_cli_csv_row(const char *const *fields, int count);
/* A number for a CSV or JSON field: microseconds with 3 decimals. */
char *rv_cli_us_text(int64_t ns);

#endif
