/*
 * bench.c - import, replay and saved-graph benchmark (not a timed test).
 *
 *   reverie-bench TRACE
 *
 * Prints import throughput (MB/s of uncompressed JSON), peak memory during
 * import (ru_maxrss, and its ratio to the JSON size), graph build time,
 * replay speed (tasks per second, best of several runs), and the time to
 * load the saved graph and replay it against the time to import the trace.
 */
#include "reverie/graph.h"
#include "reverie/sim.h"
#include "reverie/store.h"
#include "reverie/trace.h"
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

static double now_s(void) { return g_get_monotonic_time() / 1e6; }

static double peak_rss_mb(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

static double best_replay_s(const rv_graph *graph, int runs)
{
    double best = 1e30;
    for (int i = 0; i < runs; i++) {
        rv_sim_result sim = { 0 };
        double started = now_s();
        if (!rv_simulate(graph, NULL, &sim, NULL)) return -1;
        best = MIN(best, now_s() - started);
        rv_sim_result_clear(&sim);
    }
    return best;
}

static void saved_graph_figures(const rv_graph *graph, double import_s)
{
    char *path = g_strdup_printf("%s/reverie-bench-%d.rvg", g_get_tmp_dir(), (int)getpid());
    GError *error = NULL;
    if (!rv_store_save(graph, path, &error)) {
        printf("saved graph: not measured (%s)\n", error->message);
        g_error_free(error);
        g_free(path);
        return;
    }
    double started = now_s();
    rv_graph *loaded = rv_store_load(path, &error);
    double load_s = now_s() - started;
    if (loaded == NULL) {
        printf("saved graph: load failed (%s)\n", error->message);
        g_error_free(error);
    } else {
        double replay_s = best_replay_s(loaded, 1);
        printf("saved graph: load %.3f s + replay %.3f s = %.3f s; import+build %.3f s; ratio %.3f (target < 0.1)\n",
               load_s, replay_s, load_s + replay_s, import_s, (load_s + replay_s) / import_s);
        rv_graph_free(loaded);
    }
    unlink(path);
    g_free(path);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: reverie-bench TRACE\n");
        return 1;
    }
    GError *error = NULL;
    double rss_before = peak_rss_mb();
    double started = now_s();
    rv_trace *trace = rv_trace_load(argv[1], NULL, NULL, &error);
    if (trace == NULL) { fprintf(stderr, "reverie-bench: %s\n", error->message); return 2; }
    double parse_s = now_s() - started;
    double json_mb = trace->stats.bytes_uncompressed / 1e6;
    double rss_import = peak_rss_mb();
    printf("trace: %s, %" G_GUINT64_FORMAT " events, %.1f MB of JSON, %u parser threads\n", argv[1],
           trace->stats.events_total, json_mb, g_get_num_processors());
    printf("import: %.3f s, %.1f MB/s (target >= 60)\n", parse_s, json_mb / parse_s);
    printf("peak memory during import: %.1f MB (%.2f x the JSON; %.1f MB before; target <= 1.5 x)\n",
           rss_import, rss_import / json_mb, rss_before);
    started = now_s();
    rv_graph *graph = rv_graph_build(trace, &error);
    double build_s = now_s() - started;
    if (graph == NULL) { fprintf(stderr, "reverie-bench: %s\n", error->message); return 2; }
    rv_trace_free(trace);
    printf("graph build: %.3f s, %d tasks, %u edges; peak memory so far %.1f MB\n", build_s,
           rv_graph_task_count(graph), graph->edges->len, peak_rss_mb());
    double replay_s = best_replay_s(graph, 5);
    printf("replay: %.4f s, %.2f million tasks/s (target >= 5)\n", replay_s,
           rv_graph_task_count(graph) / replay_s / 1e6);
    saved_graph_figures(graph, parse_s + build_s);
    rv_graph_free(graph);
    return 0;
}
