/*
 * plugin_harness.h - shared helpers for the plugin test suites.
 *
 * Plugins are loaded by path from REVERIE_TEST_PLUGIN_DIR exactly as
 * `reverie whatif --opt` loads them; real traces come from
 * REVERIE_SHARED_TRACES and the tests that need one skip when it is absent.
 * Hand-built graphs have one CPU thread and one GPU stream; tiny_task chains
 * each new task after the previous one on its resource, as the builder does.
 */
#ifndef REVERIE_TESTS_PLUGIN_HARNESS_H
#define REVERIE_TESTS_PLUGIN_HARNESS_H

#include <check.h>
#include <glib.h>
#include "project_traces.h"
#include <stdint.h>
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/plugin.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/trace.h"
#include "reverie/transform.h"

#define US(x) ((int64_t)(x) * 1000)

char *plugin_path(const char *name);
/* Apply one plugin with parameter text; returns the apply() verdict and
 * leaves the error (if any) in *error.  Notes go to stderr for the log.
 * A replacement priority the plugin returns is dropped: use
 * apply_and_simulate for plugins that set one (p3, vdnn). */
gboolean apply_plugin(rv_graph *graph, const char *name, const char *text, GError **error);
/* apply_plugin must fail with one line of RV_ERROR code `code` containing `words`. */
void assert_apply_fails(rv_graph *graph, const char *name, const char *text, int code, const char *words);
/* apply_plugin, asserting success; returns the plugin's notes (g_free). */
char *apply_notes(rv_graph *graph, const char *name, const char *text);
/* apply_plugin, asserting success and that the graph stays acyclic. */
void apply_ok(rv_graph *graph, const char *name, const char *text);
/* apply_ok, then replay into *sim with the plugin's own priority (per-task
 * times kept; the caller clears sim).  With ranks not NULL the plugin must
 * set a priority, and *ranks gets each task's rank under it (g_free). */
void apply_and_replay(rv_graph *graph, const char *name, const char *text, rv_sim_result *sim, int64_t **ranks);
/* apply_ok, then replay with the plugin's own priority (if it sets one);
 * either output may be NULL. */
void apply_and_simulate(rv_graph *graph, const char *name, const char *text, int64_t *makespan_ns,
                        int64_t *step_total_ns);
/* Apply one plugin in a what-if: with `last`, as its last optimization
 * (plugin.h), lent a plain replay and the memory estimate of the graph it
 * receives, and the estimate of the graph it leaves after the replay;
 * else told nothing, as a sweep applies it.  Replay what it leaves with
 * its priority, else `earlier` (one an earlier optimization left; may be
 * NULL), into *sim (the caller clears it), and hand that replay to its
 * after_replay.  Returns its notes (g_free). */
char *apply_whatif(rv_graph *graph, const char *name, const char *text, gboolean last, const rv_policy *earlier,
                   rv_sim_result *sim);
/* A plugin that writes a note from a replay of its result (vdnn's stalls,
 * batch-size's steps): applied as a what-if's last optimization it must
 * leave the line containing `deferred` to after_replay, and write the
 * same notes as applied alone (replaying itself) - whether the host's
 * replay used the plugin's policy or another (then it replays itself). */
void assert_notes_from_host_replays(const rv_graph *graph, const char *name, const char *text, const char *deferred);
int64_t makespan(const rv_graph *graph);
/* Live tasks whose name contains `words`. */
guint count_tasks_named(const rv_graph *graph, const char *words);
/* Is there an edge from -> to (any kind)? */
gboolean has_edge(const rv_graph *graph, int32_t from, int32_t to);
/* Sum of the simulated step times (the what-if "total" line). */
int64_t step_total(const rv_graph *graph);
/* The graph of a shipped trace (traces/); main() must have listed it in
 * require_project_traces(). */
rv_graph *load_trace(const char *name);
/* The graph of any trace file (asserting that it builds). */
rv_graph *load_trace_file(const char *path);
/* The 8 ranks of traces/param_dlrm_v100_8ranks, each alone (rank order),
 * and the job they make joined (asserting that it joins and validates). */
#define DLRM_RANKS 8
/* Their files, for a test's require_project_traces() list. */
#define DLRM_RANK_TRACES                                                                  \
    "param_dlrm_v100_8ranks/rank0.json.gz", "param_dlrm_v100_8ranks/rank1.json.gz",       \
        "param_dlrm_v100_8ranks/rank2.json.gz", "param_dlrm_v100_8ranks/rank3.json.gz",   \
        "param_dlrm_v100_8ranks/rank4.json.gz", "param_dlrm_v100_8ranks/rank5.json.gz",   \
        "param_dlrm_v100_8ranks/rank6.json.gz", "param_dlrm_v100_8ranks/rank7.json.gz"
GPtrArray *load_dlrm_ranks(void);
/* Ranks joined as one job (asserting that it joins and validates). */
rv_graph *join_ranks_ok(GPtrArray *graphs);
rv_graph *load_dlrm_job(void);
/* reverie-gentrace --ranks RANKS (REVERIE_GENTRACE): each rank with its
 * own jitter, its clock SKEW_US ahead per rank, entering up to SPREAD_US
 * apart; joined (asserting that it joins and validates). */
rv_graph *generated_job(int ranks, int steps, const char *skew_us, const char *spread_us);
/* Predicted step total after one plugin, and the baseline, on a real trace.
 * The plugin's replacement priority, if any, is used for the prediction. */
void predict_trace(const char *trace, const char *plugin, const char *text, int64_t *baseline,
                        int64_t *predicted);
/* Neutral parameters: the prediction equals the baseline, to the ns. */
void check_neutral(const char *trace, const char *plugin, const char *text);

typedef struct {
    rv_graph *graph;
    int32_t cpu, gpu;
} tiny;

tiny tiny_new(void);
int32_t tiny_task(tiny *t, int32_t resource, rv_task_kind kind, const char *name, int64_t duration_ns,
                  rv_phase phase);
/* Hand-built graphs tag tasks with step 0 for the plugins that group by
 * step; validate.h (run after every plugin) wants that step to exist.  This
 * adds it, with the first and the last task as its markers. */
void tiny_close_step(tiny *t);
/* Every task of the graph in step 0, then tiny_close_step: a hand-built
 * graph that is one step. */
void tiny_close_one_step(tiny *t);
/* A launch call on the CPU and its kernel on the stream. */
int32_t tiny_launch(tiny *t, const char *kernel, int64_t launch_ns, int64_t kernel_ns, rv_phase phase,
                    rv_task_kind kind);
/* Give every task of a hand-built graph its replayed start as its
 * "recorded" start, as a real trace would have: plugins that order tasks
 * by recorded time (vdnn's layers, cuda-graphs' segments) read it. */
void tiny_record(rv_graph *graph);

#endif
