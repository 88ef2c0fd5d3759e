/*
 * main.c - `reverie COMMAND ...`: find the subcommand and run it.
 * Each subcommand lives in its own file (git style).
 */
#include "cli.h"
#include "isolate.h"
#include "version.h"
#include "reverie/escape.h"
#include "reverie/output.h"
#include "reverie/suggest.h"
#include <malloc.h>
#include <signal.h>
#include <string.h>

#define REPORT RV_CLI_REPORT_TO_O
#define OPTIMIZES (RV_CLI_REPORT_TO_O | RV_CLI_OPTIMIZES)

static const rv_command commands[] = {
    { "import", "build the dependency graph of a trace and save it (.rvg)", rv_cmd_import, 0,
      "where to write the graph (default: the trace's path with .json or .json.gz replaced by .rvg; - for standard output)" },
    { "info", "what a trace or saved graph holds: tasks, resources, edges, steps", rv_cmd_info, REPORT, NULL },
    { "simulate", "replay: per-step recorded vs simulated time", rv_cmd_simulate, REPORT, NULL },
    { "whatif", "predict step times after optimizations (--opt NAME[:k=v,...])", rv_cmd_whatif, OPTIMIZES, NULL },
    { "validate", "predict a recorded variant of the job from its baseline and compare", rv_cmd_validate, OPTIMIZES, NULL },
    { "breakdown", "per step: CPU only / GPU only / overlap / idle, per phase and per stream",
      rv_cmd_breakdown, OPTIMIZES, NULL },
    { "critical-path", "the chain of tasks that decides each step's end, with totals by kind, phase, layer",
      rv_cmd_critical_path, OPTIMIZES, NULL },
    { "comm-fraction", "communication's share of the step (exposed, overlapped), today and with compute N x faster",
      rv_cmd_comm_fraction, OPTIMIZES, NULL },
    { "kernels", "how the kernel cost model sees a trace: classes, dtypes, efficiencies, operator-model errors",
      rv_cmd_kernels, REPORT, NULL },
    { "calibrate", "measure per-GPU kernel efficiencies from recordings of a GPU, for hardware:gpu= (-o TABLE)",
      rv_cmd_calibrate, 0, "the efficiency table to write (required)" },
    { "memory", "a step's GPU memory at its peak: estimated from shapes, recorded, and whether it fits (--gpu)",
      rv_cmd_memory, OPTIMIZES, NULL },
    { "plan", "how to split the job over N GPUs: tensor x pipeline x data, ZeRO, micro-batches, checkpointing that fit",
      rv_cmd_plan, REPORT, NULL },
    { "seqpoint", "a sequence model's epoch from a few representative iterations (SeqPoint): which, and the projection",
      rv_cmd_seqpoint, OPTIMIZES, NULL },
    { "sweep", "many what-ifs in one run: --vary NAME.PARAM=LIST, CSV or JSON Lines", rv_cmd_sweep, RV_CLI_REPORT_TO_O | RV_CLI_VARIANTS, NULL },
    { "plugins", "list the optimizations and their parameters", rv_cmd_plugins, REPORT, NULL },
    { "query", "list the tasks matching a selection, with totals", rv_cmd_query, OPTIMIZES, NULL },
    { "export-graph", "write the dependency graph as GraphML or DOT", rv_cmd_export_graph, RV_CLI_OPTIMIZES,
      "write the graph to FILE (- for standard output)" },
};

static void print_usage(FILE *out)
{
    fprintf(out, "usage: reverie COMMAND [OPTIONS] ...\n\n"
                 "reverie predicts how long a PyTorch training step would take after an\n"
                 "optimization, from one profiler trace of the job as it runs today.\n\n"
                 "commands:\n");
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
        fprintf(out, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'reverie COMMAND --help' explains one command; a trace or graph may be\n"
                 "- (standard input), and --help-input lists the limits on what is read.\n"
                 "exit status: 0 success, 1 bad usage or parameters, 2 bad input (or an output\n"
                 "that cannot be written), 3 an optimization plugin failed\n");
}

/* SIGINT, SIGTERM and the like end reverie as they would have, but first
 * remove the temporary files of outputs being written (the old files stay
 * as they were) and pass the signal on to a supervised child. */
static void on_fatal_signal(int number)
{
    rv_output_remove_temporaries();
    rv_cli_isolation_forward(number);
    signal(number, SIG_DFL);
    raise(number);
}

static void catch_signals(void)
{
    static const int fatal[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };
    struct sigaction action = { 0 };
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    for (gsize i = 0; i < G_N_ELEMENTS(fatal); i++) sigaddset(&action.sa_mask, fatal[i]);
    for (gsize i = 0; i < G_N_ELEMENTS(fatal); i++) sigaction(fatal[i], &action, NULL);
    /* Past a file size limit (ulimit -f) a write must fail with EFBIG, which
     * the writer reports, rather than kill the process mid-file. */
    signal(SIGXFSZ, SIG_IGN);
}

static int run(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return RV_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        print_usage(stdout);
        return RV_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        /* the project's version, and the commit when built from a git checkout */
        if (strcmp(REVERIE_BUILD, REVERIE_VERSION) == 0) printf("reverie %s\n", REVERIE_VERSION);
        else printf("reverie %s (git %s)\n", REVERIE_VERSION, REVERIE_BUILD);
        return RV_EXIT_OK;
    }
    const char *names[G_N_ELEMENTS(commands)];
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (strcmp(commands[i].name, name) == 0) {
            rv_cli_begin_command(&commands[i]);
            return commands[i].run(argc - 1, argv + 1);
        }
        names[i] = commands[i].name;
    }
    char *shown = rv_escape_text(name);
    const char *near = rv_suggest(name, names, G_N_ELEMENTS(names));
    if (near) fprintf(stderr, "reverie: unknown command '%s': did you mean '%s'? (see reverie --help)\n", shown, near);
    else fprintf(stderr, "reverie: unknown command '%s' (see reverie --help)\n", shown);
    g_free(shown);
    return RV_EXIT_USAGE;
}

/* glibc hands every block above its mmap threshold (a sliding one, at most
 * 32 MiB) fresh from the kernel and unmaps it on free, and gives the top of
 * its heap back past 128 KiB: at a million tasks each replay, graph copy
 * and plugin pass then pays again for page faults and zeroed pages.  Blocks
 * up to 1 GiB come from the heap and stay there for the next pass: the
 * plain replay of a 1M-task graph 95-126 -> 74 ms, exponent from 100k tasks
 * 1.25-1.35 -> 1.13 (tests/bench/plugins.c, docs/performance.md), for a
 * few per cent more peak memory.  A command runs once and exits, so memory
 * kept until then is not lost to other processes for long. */
static void keep_large_blocks(void)
{
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    (void)mallopt(M_MMAP_THRESHOLD, 1 << 30);
    (void)mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

int main(int argc, char **argv)
{
    keep_large_blocks();
    rv_cli_catch_fatal_errors();
    catch_signals();
    rv_cli_output_init();
    int status = rv_cli_finish(run(argc, argv));
    rv_cli_output_clear();
    return status;
}
