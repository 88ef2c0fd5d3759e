/*
 * main.c - `reverie COMMAND ...`: find the subcommand and run it.
 * Each subcommand lives in its own file (git style).
 */
#include "cli.h"
#include "version.h"
#include "reverie/escape.h"
#include "reverie/suggest.h"
#include <signal.h>
#include <string.h>

static const rv_command commands[] = {
    { "import", "build the dependency graph of a trace and save it (.rvg)", rv_cmd_import },
    { "info", "what a trace or saved graph holds: tasks, resources, edges, steps", rv_cmd_info },
    { "simulate", "replay: per-step recorded vs simulated time", rv_cmd_simulate },
    { "whatif", "predict step times after optimizations (--opt NAME[:k=v,...])", rv_cmd_whatif },
    { "validate", "predict a recorded variant of the job from its baseline and compare", rv_cmd_validate },
    { "breakdown", "per step: CPU only / GPU only / overlap / idle, per phase and per stream",
      rv_cmd_breakdown },
    { "critical-path", "the chain of tasks that decides each step's end, with totals by kind, phase, layer",
      rv_cmd_critical_path },
    { "comm-fraction", "communication's share of the step (exposed, overlapped), today and with compute N x faster",
      rv_cmd_comm_fraction },
    { "kernels", "how the kernel cost model sees a trace: classes, dtypes, efficiencies, operator-model errors",
      rv_cmd_kernels },
    { "calibrate", "measure per-GPU kernel efficiencies from recordings of a GPU, for hardware:gpu= (-o TABLE)",
      rv_cmd_calibrate },
    { "memory", "a step's GPU memory at its peak: estimated from shapes, recorded, and whether it fits (--gpu)",
      rv_cmd_memory },
    { "plan", "how to split the job over N GPUs: tensor x pipeline x data, ZeRO, micro-batches, checkpointing that fit",
      rv_cmd_plan },
    { "seqpoint", "a sequence model's epoch from a few representative iterations (SeqPoint): which, and the projection",
      rv_cmd_seqpoint },
    { "sweep", "many what-ifs in one run: --vary NAME.PARAM=LIST, CSV or JSON Lines", rv_cmd_sweep },
    { "plugins", "list the optimizations and their parameters", rv_cmd_plugins },
    { "query", "list the tasks matching a selection, with totals", rv_cmd_query },
    { "export-graph", "write the dependency graph as GraphML or DOT", rv_cmd_export_graph },
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

int main(int argc, char **argv)
{
    rv_cli_catch_fatal_errors();
    /* Past a file size limit (ulimit -f) a write must fail with EFBIG, which
     * output.c reports, rather than kill the process mid-file. */
    signal(SIGXFSZ, SIG_IGN);
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
        if (strcmp(commands[i].name, name) == 0) return commands[i].run(argc - 1, argv + 1);
        names[i] = commands[i].name;
    }
    char *shown = rv_escape_text(name);
    const char *near = rv_suggest(name, names, G_N_ELEMENTS(names));
    if (near) fprintf(stderr, "reverie: unknown command '%s': did you mean '%s'? (see reverie --help)\n", shown, near);
    else fprintf(stderr, "reverie: unknown command '%s' (see reverie --help)\n", shown);
    g_free(shown);
    return RV_EXIT_USAGE;
}
