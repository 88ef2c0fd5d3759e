/*
 * plugins.c - how each bundled optimization's cost grows with the graph
 * (a benchmark, not a timed test).
 *
 *   reverie-bench-plugins SMALL_TRACE LARGE_TRACE
 *
 * Both traces come from reverie-gentrace --mixed-layers --single-gpu (about
 * 100k and 1M tasks; plugins.sh makes them; a saved graph of either does
 * as well): Linear, Conv2d and attention layers of different widths, so
 * that every plugin - vdnn's convolutions, tp-allreduce's blocks, p3's and
 * ddp's gradients - has work to do.  For each plugin and graph it times,
 * best of a few runs on a fresh copy:
 *   apply   what applying the plugin costs a user (rv_plugin_apply): the
 *           composition check, the rewrite and the check of the graph it
 *           left (validate.h, and for cycles the whole graph: the copy
 *           remembers no order, as in a single what-if);
 *   replay  the replay of the rewritten graph with the plugin's policy.
 * Each plugin is applied as the last optimization of a what-if (plugin.h:
 * last), and, when nothing is applied before it, lent the plain replay and
 * the memory estimate of the graph it receives (the what-if's baseline,
 * untimed: a what-if makes them anyway); what it leaves for after the
 * replay (after_replay) is timed as part of its apply, handed the replay
 * and the estimate of the graph it left (untimed, likewise).
 * It prints both at both sizes, the exponent k of time ~ tasks^k between
 * them, and the rewrite's time over a plain replay of the large graph (the
 * bounds: k <= 1.1 and 3x).  A replay itself grows faster than the tasks
 * (the heap's log V, and memory: a 1M-task replay no longer fits in the
 * last-level cache), so a policy replay is judged by how much faster than
 * a plain replay it grows (the "excess", bound 0.1).  network re-costs communication, which a single-GPU
 * trace lacks, so it is measured on the graph ddp made.
 *
 * REVERIE_BENCH_ONLY=NAME,NAME... measures only those plugins (and the
 * plain replay they are judged against), for a plugin's author.
 *
 * Times are the thread's CPU time, best of the runs: on a shared machine
 * the wall clock counts other processes' turns on the core as well.
 * Every timed run starts with cold caches (64 MiB written elsewhere first):
 * otherwise the 100k-task graph, just copied, sits in the last-level cache
 * and the 1M-task one cannot, and the exponents would measure the cache.
 */
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/load.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/sim.h"
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
    const char *spec;     /* NAME:k=v; NULL: no plugin, the plain replay */
    const char *prepare;  /* applied first, untimed; NULL: none */
} cases[] = {
    { NULL, NULL },
    { "scale:factor=0.5", NULL },
    { "amp", NULL },
    { "fused-adam", NULL },
    { "dataloader:remaining=10us", NULL },
    { "ddp:world=16", NULL },
    { "network:bandwidth_factor=2", "ddp:world=16" },
    { "tp-allreduce:degree=4", NULL },
    /* 4MB slices: the default 160KB cuts this model's 850 MB of weights per
     * step into 5,600 slices, ten times the graph's own tasks */
    { "p3:slice_size=4MB", NULL },
    { "p3:slice_size=4MB,priority=off", NULL },
    /* the default slices: p3 inserts about 8 tasks per task of this graph,
     * so only its growth, not the 3x bound, can hold */
    { "p3", NULL },
    { "vdnn", NULL },
    { "vdnn:policy=all", NULL },
    /* the cost-model plugins: the generator names no catalogue GPU */
    { "hardware:gpu=H100,source_gpu=V100-SXM2", NULL },
    { "precision:dtype=bf16,source_gpu=V100-SXM2", NULL },
    { "model-scale:hidden=2,source_gpu=V100-SXM2", NULL },
    { "batch-size:factor=2,source_gpu=V100-SXM2", NULL },
    { "grad-accumulation:steps=2", NULL },
    { "checkpoint:segments=4", NULL },
    { "metaflow:rules=conv-relu,source_gpu=A100-40GB", NULL },
    { "gist", NULL },
    /* the forward pass's launch calls become graph launches: long removed
     * chains.  Not region=step: this model's backward thread then keeps no
     * live call, and removal's bypass, joining each live task to every
     * live task it reached through removed ones, must join every earlier
     * graph launch to each later step's kernels: edges quadratic in the
     * steps (150k -> 1.8M at 100k tasks, about 170M at 1M; README) */
    { "cuda-graphs:static=assume,region=forward", NULL },
    /* region=step: every call of the backward thread is captured, so runs
     * of removed calls span every step */
    { "cuda-graphs:static=assume", NULL },
    { "pipeline:stages=4,microbatches=4", NULL },
    { "straggler:rank=0,factor=2", NULL },
    { "world-size:world=64", "ddp:world=16" },
    { "zero:stage=3", "ddp:world=16" },
    { "blueconnect", "ddp:world=16" },
    { "dgc:source_gpu=V100-SXM2", "ddp:world=16" },
    { "t3", "tp-allreduce:degree=4" },
    { "contention", "tp-allreduce:degree=4" },
    /* Both refuse the generated graphs, and the benchmark prints why:
     * fused-collective fuses none of tensor parallelism's GEMM +
     * all-reduce pairs (t3's), and the generator writes no batch norm.
     * They stay listed so that the table says so rather than omit them. */
    { "fused-collective", "tp-allreduce:degree=4" },
    { "batchnorm-restructure", NULL },
    { "unprofiled", NULL },
    { "concurrent-kernels:source_gpu=V100-SXM2", NULL },
    { "nmc-optimizer:source_gpu=V100-SXM2", NULL },
    { "expert-parallel:experts=8,gpus=8,batch=8,seq=512,hidden=1024,source_gpu=V100-SXM2", NULL },
    { "decode:tokens=64,source_gpu=V100-SXM2", NULL },
};
enum { CASES = G_N_ELEMENTS(cases) };

typedef struct {
    int32_t tasks;
    double apply_s[CASES];
    double policy_replay_s[CASES]; /* [0]: the plain replay, measured like the rest */
    char *refused[CASES];          /* why the plugin refused the graph, or NULL */
} measured;

/* CPU time of this thread: on a shared machine the wall clock also counts
 * the time other processes held the core. */
static double now_s(void)
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* Push the graph out of the caches (larger than any last-level cache here). */
static void cool_caches(void)
{
    enum { SIZE = 64 << 20 };
    static volatile char *buffer;
    if (buffer == NULL) buffer = g_malloc(SIZE);
    for (gsize i = 0; i < SIZE; i += 64) buffer[i] = (char)i;
}

static void die(const char *what, GError *error)
{
    fprintf(stderr, "reverie-bench-plugins: %s: %s\n", what, error ? error->message : "failed");
    exit(2);
}

static rv_graph *load(const char *path)
{
    GError *error = NULL;
    rv_graph *graph = rv_load(path, NULL, &error);
    if (graph == NULL) die(path, error);
    return graph;
}

/* The replay's time; its result is left in *sim (the caller clears it). */
static double replay_s(const rv_graph *graph, const rv_policy *policy, rv_sim_result *sim)
{
    GError *error = NULL;
    cool_caches();
    double started = now_s();
    if (!rv_simulate(graph, policy, sim, &error)) die("replay", error);
    return now_s() - started;
}

/* Plugins stay loaded to the end: a policy's code lives in its module. */
static GHashTable *loaded_plugins;

static const rv_loaded_plugin *plugin_named(const char *name)
{
    rv_loaded_plugin *plugin = g_hash_table_lookup(loaded_plugins, name);
    if (plugin == NULL) {
        GError *error = NULL;
        if ((plugin = rv_plugin_load(name, &error)) == NULL) die(name, error);
        g_hash_table_insert(loaded_plugins, g_strdup(name), plugin);
    }
    return plugin;
}

static const rv_loaded_plugin *plugin_of_spec(const char *spec)
{
    char *name = g_strndup(spec, strcspn(spec, ":"));
    const rv_loaded_plugin *plugin = plugin_named(name);
    g_free(name);
    return plugin;
}

/* Apply "NAME:k=v" to graph; returns the seconds it took, or -1 when the
 * plugin refused this graph (*refused says why).  output's `in` fields
 * are the caller's; its notes are made here and freed with its
 * after_replay (finish). */
static double apply(rv_graph *graph, const char *spec, rv_plugin_output *output, char **refused)
{
    GError *error = NULL;
    const char *colon = strchr(spec, ':');
    const rv_loaded_plugin *plugin = plugin_of_spec(spec);
    rv_params *params = rv_params_parse(rv_plugin_descriptor_of(plugin), colon ? colon + 1 : "", &error);
    if (params == NULL) die(spec, error);
    output->notes = g_string_new(NULL);
    cool_caches();
    double started = now_s(), took;
    if (!rv_plugin_apply(plugin, graph, params, output, &error)) {
        if (error == NULL || error->code != RV_ERROR_PLUGIN) die(spec, error);
        g_free(*refused);
        *refused = g_strdup(error->message);
        g_error_free(error);
        took = -1;
    } else {
        took = now_s() - started;
    }
    rv_params_free(params);
    return took;
}

/* What a what-if makes anyway and lends the plugins (plugin.h): the
 * graph's plain replay and memory estimate, made once per graph. */
typedef struct {
    rv_sim_result sim;
    rv_memory_estimate memory;
    gboolean estimated;
} lent;

/* Hand the host's replay (sim) and, when the plugin left something for it,
 * the memory estimate (untimed: a what-if makes it anyway) to the plugin's
 * after_replay, timed; then free the plugin's notes and policy. */
static double finish(const char *spec, rv_plugin_output *output, const rv_graph *graph, const rv_sim_result *sim)
{
    rv_memory_estimate memory;
    gboolean estimated = output->after_replay && rv_memory_estimate_graph(graph, &memory, NULL);
    rv_host_replay replay = { output->policy.priority ? &output->policy : NULL, sim, estimated ? &memory : NULL };
    double started = now_s();
    rv_plugin_after_replay(plugin_of_spec(spec), output, graph, &replay);
    double took = now_s() - started;
    if (output->notes) g_string_free(output->notes, TRUE);
    if (output->free_policy_data) output->free_policy_data(output->policy.user_data);
    memset(output, 0, sizeof *output);
    return took;
}

/* The copy of graph for case c, its `prepare` applied (its policy dropped). */
static rv_graph *prepared_copy(const rv_graph *graph, int c, measured *m)
{
    rv_graph *copy = rv_graph_copy(graph);
    rv_plugin_output output = { 0 };
    if (cases[c].prepare) {
        if (apply(copy, cases[c].prepare, &output, &m->refused[c]) < 0) die(cases[c].prepare, NULL);
        rv_plugin_output_drop_after_replay(&output);
        finish(cases[c].prepare, &output, copy, NULL);
    }
    return copy;
}

static void measure_case(const rv_graph *graph, const lent *baseline, int c, int runs, measured *m)
{
    m->apply_s[c] = m->policy_replay_s[c] = 1e30;
    gboolean first = cases[c].prepare == NULL; /* the what-if's first optimization: lent the baseline's */
    for (int run = 0; run < runs && m->refused[c] == NULL; run++) {
        rv_sim_result sim = { 0 };
        rv_graph *copy = prepared_copy(graph, c, m);
        rv_plugin_output output = { .last = TRUE, .before = first ? &baseline->sim : NULL,
                                    .before_memory = first && baseline->estimated ? &baseline->memory : NULL };
        /* not inside MIN(), which would evaluate them twice */
        double applied = cases[c].spec ? apply(copy, cases[c].spec, &output, &m->refused[c]) : 0;
        if (applied < 0) {
            rv_plugin_output_drop_after_replay(&output);
            if (output.notes) g_string_free(output.notes, TRUE);
            rv_graph_free(copy);
            break;
        }
        double replayed = replay_s(copy, output.policy.priority ? &output.policy : NULL, &sim);
        if (cases[c].spec) applied += finish(cases[c].spec, &output, copy, &sim);
        rv_sim_result_clear(&sim);
        m->apply_s[c] = MIN(m->apply_s[c], applied);
        m->policy_replay_s[c] = MIN(m->policy_replay_s[c], replayed);
        rv_graph_free(copy);
    }
}

/* Is case c wanted (REVERIE_BENCH_ONLY, a comma-separated list of plugin names)? */
static gboolean wanted(int c)
{
    const char *only = g_getenv("REVERIE_BENCH_ONLY");
    if (only == NULL || *only == '\0' || cases[c].spec == NULL) return TRUE;
    char *name = g_strndup(cases[c].spec, strcspn(cases[c].spec, ":"));
    char **names = g_strsplit(only, ",", -1);
    gboolean found = g_strv_contains((const char *const *)names, name);
    g_strfreev(names);
    g_free(name);
    return found;
}

static measured measure(const char *path, int runs)
{
    measured m = { 0 };
    double started = now_s();
    rv_graph *graph = load(path);
    m.tasks = rv_graph_task_count(graph);
    fprintf(stderr, "%s: %d tasks, imported in %.1f s\n", path, m.tasks, now_s() - started);
    lent baseline = { 0 };
    GError *error = NULL;
    if (!rv_simulate(graph, NULL, &baseline.sim, &error)) die("baseline replay", error);
    baseline.estimated = rv_memory_estimate_graph(graph, &baseline.memory, NULL);
    for (int c = 0; c < CASES; c++) {
        if (!wanted(c)) continue;
        measure_case(graph, &baseline, c, runs, &m);
        if (m.refused[c]) {
            fprintf(stderr, "  %-32s refused: %s\n", cases[c].spec, m.refused[c]);
            continue;
        }
        fprintf(stderr, "  %-32s apply %8.1f ms  replay %8.1f ms\n", cases[c].spec ? cases[c].spec : "(none)",
                m.apply_s[c] * 1e3, m.policy_replay_s[c] * 1e3);
    }
    rv_sim_result_clear(&baseline.sim);
    rv_graph_free(graph);
    return m;
}

static double exponent(double small_s, double large_s, const measured *small, const measured *large)
{
    return log(large_s / small_s) / log((double)large->tasks / small->tasks);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: reverie-bench-plugins SMALL_TRACE LARGE_TRACE\n");
        return 1;
    }
    /* as the command line does (src/cli/main.c): large blocks reused from
     * the heap rather than mapped and zeroed afresh by every pass */
    (void)mallopt(M_MMAP_THRESHOLD, 1 << 30);
    (void)mallopt(M_TRIM_THRESHOLD, 1 << 30);
    double load[3] = { 0 };
    loaded_plugins = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)rv_plugin_unload);
    measured small = measure(argv[1], 9), large = measure(argv[2], 5);
    if (getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = -1;
    printf("plugin cost on generated graphs (--mixed-layers --single-gpu): %d and %d tasks, "
           "%u cores, load average %.2f %.2f %.2f\n", small.tasks, large.tasks, g_get_num_processors(), load[0],
           load[1], load[2]);
    double k_plain = exponent(small.policy_replay_s[0], large.policy_replay_s[0], &small, &large);
    printf("plain replay: %.1f ms and %.1f ms, exponent %.2f\n", small.policy_replay_s[0] * 1e3,
           large.policy_replay_s[0] * 1e3, k_plain);
    printf("%-32s %9s %9s %5s %7s   %9s %9s %5s %6s\n", "plugin", "apply", "apply", "exp", "apply/", "replay",
           "replay", "exp", "excess");
    printf("%-32s %9s %9s %5s %7s   %9s %9s %5s %6s\n", "", "small ms", "large ms", "", "replay", "small ms",
           "large ms", "", "");
    int over = 0;
    for (int c = 1; c < CASES; c++) {
        if (!wanted(c)) continue;
        if (small.refused[c] || large.refused[c]) {
            printf("%-32s refused: %s\n", cases[c].spec, small.refused[c] ? small.refused[c] : large.refused[c]);
            continue;
        }
        double k_apply = exponent(small.apply_s[c], large.apply_s[c], &small, &large);
        double k_replay = exponent(small.policy_replay_s[c], large.policy_replay_s[c], &small, &large);
        double ratio = large.apply_s[c] / large.policy_replay_s[0];
        gboolean out = k_apply > 1.1 || k_replay - k_plain > 0.1 || ratio > 3;
        printf("%-32s %9.1f %9.1f %5.2f %6.2fx   %9.1f %9.1f %5.2f %+6.2f%s\n", cases[c].spec, small.apply_s[c] * 1e3,
               large.apply_s[c] * 1e3, k_apply, ratio, small.policy_replay_s[c] * 1e3, large.policy_replay_s[c] * 1e3,
               k_replay, k_replay - k_plain, out ? "  <-- over" : "");
        over += out;
    }
    printf("bounds: apply exponent <= 1.1, apply <= 3x a plain replay of the large graph, replay excess <= 0.1: %s\n",
           over ? "some are over (marked)" : "all within");
    g_hash_table_destroy(loaded_plugins);
    return 0;
}
