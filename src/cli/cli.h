/*
 * cli.h - what the subcommands (one file each) share: loading an input,
 * option parsing with GOptionContext, and reporting errors.
 */
#ifndef REVERIE_CLI_H
#define REVERIE_CLI_H

#include <glib.h>
#include <stdio.h>
#include "reverie/error.h"
#include "reverie/explain.h"
#include "reverie/alike.h"
#include "reverie/graph.h"
#include "reverie/memory.h"
#include "reverie/sim.h"
#include "reverie/optimize.h"
#include "reverie/plugin.h"
#include "reverie/report.h"

/* What a command does with the options every command shares (main.c's table). */
typedef enum {
    RV_CLI_REPORT_TO_O = 1 << 0,  /* -o FILE takes the report; without it, -o is a file the command writes */
    RV_CLI_OPTIMIZES = 1 << 1,    /* takes --opt: --isolate runs it supervised, with --time-limit */
    RV_CLI_VARIANTS = 1 << 2,     /* sweep: isolates each variant itself (--no-isolate, --time-limit) */
} rv_cli_traits;

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    unsigned traits;              /* rv_cli_traits */
    const char *output_help;      /* -o's help when it is not the report */
} rv_command;

/* The command being run, for the options every command shares; main.c
 * sets it before running the command. */
void rv_cli_begin_command(const rv_command *command);

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
int rv_cmd_sweep(int argc, char **argv);
int rv_cmd_comm_fraction(int argc, char **argv);
int rv_cmd_kernels(int argc, char **argv);
int rv_cmd_memory(int argc, char **argv);
int rv_cmd_calibrate(int argc, char **argv);
int rv_cmd_seqpoint(int argc, char **argv);
int rv_cmd_plan(int argc, char **argv);

/* Load a trace or a saved graph ("-": standard input) as load.h does,
 * within the limits of the input options.  Progress goes to stderr only
 * when it is a terminal. */
rv_graph *rv_cli_load(const char *path, GError **error);

/* The inputs of simulate, whatif, info, import and validate: one trace or
 * graph as rv_cli_load does; several, or a folder of them, as the ranks of
 * one job (load.h's rv_load_job).  With notes, what the timing model
 * assumed about each input goes to stderr once the inputs loaded. */
rv_graph *rv_cli_load_job(char **paths, int count, gboolean notes, GError **error);

/* ---- several ranks of one job (job.c) ---- */

/* Does the graph hold several ranks? */
gboolean rv_cli_is_job(const rv_graph *graph);
/* rv_replay_run (report.h), with the command line's note when the replay
 * had to drop the launch-queue rule. */
gboolean rv_cli_replay_job(const rv_graph *graph, const rv_policy *policy, rv_replay *out, GError **error);
/* Per rank and step: recorded, simulated, error, and the time waited in
 * collectives and for whom; then the job's steps (the slowest rank). */
void rv_cli_print_rank_table(const rv_graph *graph, const rv_replay *replay);
/* The same for a what-if: recorded, baseline, predicted, speedup, and the
 * predicted waits. */
void rv_cli_print_rank_whatif(const rv_graph *graph, const rv_replay *baseline, const rv_replay *predicted);
/* info: the ranks, their clock offsets, and the collectives matched by each rule. */
void rv_cli_print_job_summary(const rv_graph *graph);
/* How a job's ranks are held (alike.h): the classes of alike ranks (0:
 * rank by rank) with `verdict` (clear it with rv_alike_verdict_clear), and
 * the first difference between rank index 0 and another rank (*why,
 * g_free; NULL when every rank is alike). */
guint rv_cli_rank_classes(const rv_graph *graph, rv_alike_verdict *verdict, char **why);
/* One phrase of it, for import and info (g_free). */
char *rv_cli_rank_classes_text(const rv_graph *graph);
void *rv_cli_json_job_summary(const rv_graph *graph);

/* "reverie: note: ..." on stderr; from an isolated child, sent to the
 * parent, which prints each text once. */
void rv_cli_note(const char *format, ...) G_GNUC_PRINTF(1, 2);

/* Print, one line each on stderr, what the timing model had to assume about
 * the graph (explain.h's rv_timing_notes); nothing when there is nothing. */
void rv_cli_print_notes(const rv_graph *graph);

/* One stderr note when a replay had to drop the launch-queue rule (sim.h),
 * once per run. */
void rv_cli_note_replay(const rv_graph *graph, const rv_sim_result *sim);
void rv_cli_note_launch_queue(const rv_graph *graph, gboolean launch_queue_ignored);

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
/* The same with more digits, for absolute trace timestamps (16 digits:
 * microseconds since the epoch to the microsecond). */
void rv_cli_print_json_digits(void *root, int digits);

/* A layer or operator name for a table column: the autograd engine's
 * "autograd::engine::evaluate_function: " prefix dropped (the rest,
 * "ConvolutionBackward0", says what it is), escaped as rv_cli_shown does. */
const char *rv_cli_short_name(const char *name);

/* ---- optimizations (opts.c), shared by whatif and sweep ---- */

/* rv_opts_apply (optimize.h), with a note on stderr for each opt that
 * changed nothing, so that no prediction silently repeats the baseline. */
gboolean rv_cli_apply_opts(rv_graph *graph, GPtrArray *opts, gboolean count_changes, rv_plugin_output *last_policy,
                           GError **error);
/* That note, for opts applied elsewhere (optimize.h's rv_opts_unchanged). */
void rv_cli_note_unchanged(const GPtrArray *opts);
/* A trace or graph with the optimizations applied, for the commands that
 * look at the graph rather than replay it (query, export-graph): the
 * plugins stay loaded until the graph is cleared. */
typedef struct {
    rv_graph *graph;
    GHashTable *plugins;
} rv_cli_optimized;
gboolean rv_cli_load_optimized(const char *path, char **specs, rv_cli_optimized *out, GError **error);
void rv_cli_optimized_clear(rv_cli_optimized *optimized);
/* Replay and measure the steps (report.h's rv_step_time; g_array_unref; a
 * job's are its slowest rank's, report.h's rv_job_step_times);
 * `structure` (sim.h) may be NULL.  A replay that had to drop the
 * launch-queue rule says so once per run on stderr. */
GArray *rv_cli_replay_steps(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                            GError **error);
/* Text from a trace for a terminal: bounded (rv_cli_bounded), then itself when clean, else escaped
 * (escape.h) into one of RV_CLI_SHOWN_SLOTS buffers that the following
 * calls reuse, so that one printf can show a few names without a free.
 * Not thread-safe: the command line prints from one thread. */
#define RV_CLI_SHOWN_SLOTS 8
const char *rv_cli_shown(const char *text);
/* A name for an output that copies it per task or event: itself, or cut
 * to escape.h's RV_NAME_BOUND with its full length said and bytes that are
 * not UTF-8 escaped (each text cut once, kept for the process). */
const char *rv_cli_bounded(const char *text);

/* ---- output files (output.c; the writer is reverie/output.h) ---- */

/* The shared -o, --force and --max-output; rv_cli_parse adds them. */
void rv_cli_add_output_entries(GOptionContext *context, const char *output_help);
/* -o as given (NULL without it) and --force. */
const char *rv_cli_output_path(void);
gboolean rv_cli_force(void);
/* The writer's flags for a file the command writes: replace it with --force. */
int rv_cli_output_flags(void);
/* Check an output option's file (NULL: none given) before any slow work:
 * an input of the run, a directory, or an existing file without --force
 * is refused (RV_ERROR_USAGE). */
gboolean rv_cli_check_output(const char *path, GError **error);
/* Remember the inputs named on the command line (files, each file of a
 * folder, "-": the file standard input comes from) so that no output
 * replaces them; rv_cli_parse does it for every argument. */
void rv_cli_note_inputs(char **paths, int count);
/* After parsing: -o checked, and for a report opened with standard output
 * pointed at it.  FALSE with an error when -o may not be written. */
gboolean rv_cli_output_begin(gboolean report, GError **error);
/* At the end of every command (main.c): the report put in place if the
 * command succeeded (else the old file kept), standard output and error
 * flushed and checked.  Returns the final exit status: 2 and one line
 * when a write failed. */
int rv_cli_finish(int status);
/* Once, first thing in main: standard output becomes a checked stream,
 * and exit() from elsewhere (GLib's --help) still checks it. */
void rv_cli_output_init(void);
void rv_cli_output_clear(void);

/* Text options: like g_option_context_add_main_entries, but values are
 * taken as bytes and checked to be UTF-8 (not converted from the locale's
 * character set); callbacks get the bytes as given. */
void rv_cli_add_entries(GOptionContext *context, const GOptionEntry *entries);

/* --isolate, --no-isolate and --time-limit (isolate.h): does a sweep run
 * its variants in child processes, and for how long each may run. */
gboolean rv_cli_isolate_variants(void);
double rv_cli_time_limit_s(void);

/* "12.345 ms" style formatting with units, for tables. */
void rv_cli_format_ms(char *buffer, gsize size, int64_t ns);
/* Bytes in MiB, for the memory figures reports print with "%.1f MiB". */
double rv_cli_mib(int64_t bytes);

/* One CSV row on stdout: fields quoted where they hold a comma, a quote or
 * a line break (RFC 4180). */
void rv_cli_csv_row(const char *const *fields, int count);
/* A JSON report (a json_t *, consumed) as CSV: a "field,value" header, then
 * one row per scalar, the field its path (tasks_by_kind.cpu, steps[0].name). */
void rv_cli_print_json_as_csv(void *root);
/* A number for a CSV or JSON field: microseconds with 3 decimals. */
char *rv_cli_us_text(int64_t ns);

#endif
