/*
 * tiny_trace.h - small hand-made Kineto traces for the Check suites.
 *
 * A test lists the events of a trace one call at a time (times in
 * microseconds, relative to the trace's base timestamp), writes the JSON to
 * a temporary file, and loads and builds it through the public API exactly
 * as the command line does.  Query helpers find tasks by name and kind,
 * look for typed edges, and replay the graph.
 *
 * CPU events go to process TT_PID; GPU events to device 0 (pid 0) with the
 * stream as tid, like the profiler writes them.
 */
#ifndef REVERIE_TESTS_TINY_TRACE_H
#define REVERIE_TESTS_TINY_TRACE_H

#include <glib.h>
#include <stdint.h>
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/trace.h"

#define TT_PID 4242
/* Microseconds to the integer nanoseconds the graph and simulator use. */
#define US(x) ((int64_t)(x) * 1000)

typedef struct tt_trace tt_trace;

/* A new trace whose times are offsets from base_us (an epoch-sized base
 * exercises the importer's integer conversion). */
tt_trace *tt_new(double base_us);
void tt_free(tt_trace *trace);

/* Any event, as JSON object text, with absolute times (see tt_base). */
void tt_event(tt_trace *trace, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* Modern-schema events.  corr < 0 leaves out args.correlation. */
void tt_runtime(tt_trace *trace, int tid, const char *name, double ts, double dur, int corr);
void tt_kernel(tt_trace *trace, int stream, const char *name, double ts, double dur, int corr);
void tt_memcpy(tt_trace *trace, int stream, const char *name, double ts, double dur, int corr,
               int64_t bytes);
void tt_cpu_op(tt_trace *trace, int tid, const char *name, double ts, double dur);
void tt_annotation(tt_trace *trace, int tid, const char *name, double ts, double dur);
void tt_python(tt_trace *trace, int tid, const char *name, double ts, double dur);
/* A cuda_sync record ("Stream Sync", "Context Sync", "Event Sync",
 * "Stream Wait Event"); negative wait_* arguments are left out. */
void tt_cuda_sync(tt_trace *trace, const char *kind, int stream, double ts, double dur, int corr,
                  int wait_on_stream, int wait_record_corr);
/* A launch flow pair (ac2g) between a call and its GPU task. */
void tt_flow(tt_trace *trace, int tid, double call_ts, int stream, double gpu_ts, int corr);

double tt_base(const tt_trace *trace);
/* The whole JSON document; g_free it. */
char *tt_text(const tt_trace *trace);

/* Write bytes to a new temporary file named *suffix; returns its path (g_free,
 * and unlink when done). */
char *tt_write_temp(const void *data, gsize length, const char *suffix);

/* Load the trace (asserting success) / load and build (asserting success). */
rv_trace *tt_load(tt_trace *trace);
rv_graph *tt_build(tt_trace *trace);

/* The one live task with this name and kind (asserts there is exactly one). */
int32_t tt_find(rv_graph *graph, const char *name, rv_task_kind kind);
/* Same, or -1 when there is none (asserts there is not more than one). */
int32_t tt_find_opt(rv_graph *graph, const char *name, rv_task_kind kind);
/* Number of edges from -> to of this kind (kind < 0: any kind). */
int tt_edge_count(const rv_graph *graph, int32_t from, int32_t to, int kind);
/* Does the edge exist, and is it from the producer's start? */
gboolean tt_has_edge(const rv_graph *graph, int32_t from, int32_t to, rv_edge_kind kind);
gboolean tt_edge_from_start(const rv_graph *graph, int32_t from, int32_t to, rv_edge_kind kind);
/* Number of edges of a kind in the graph. */
int tt_kind_count(const rv_graph *graph, rv_edge_kind kind);
/* One line per edge, for failure messages; g_free. */
char *tt_describe_edges(const rv_graph *graph);

/* Replay (asserting success).  Clear with rv_sim_result_clear. */
void tt_simulate(const rv_graph *graph, rv_sim_result *result);
/* The timing rules explain the recording (nothing unexplained or early,
 * explain.h), and so the untransformed replay reproduces it: every live
 * task starts at its recorded start minus the trace origin, and every
 * step's simulated time equals its recorded time.  The tiny traces are
 * written to be explained: every launch latency and stream gap alike. */
void tt_assert_replay_exact(const rv_graph *graph);

#endif
