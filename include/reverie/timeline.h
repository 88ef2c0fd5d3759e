/*
 * timeline.h - a replay written as Chrome trace JSON, for Perfetto
 * (ui.perfetto.dev), chrome://tracing, HTA and TraceLens.
 *
 * The file reads like a Kineto trace of the simulated run: runtime calls
 * as `cuda_runtime`, kernels, copies and sets as `kernel`, `gpu_memcpy`,
 * `gpu_memset` with device, stream and correlation ids; each call's
 * operator as a `cpu_op` over its host overhead and the call (consecutive
 * calls of one operator merged); `ProfilerStep#N` annotations; `ac2g` flow
 * arrows for launches and one flow category per other dependency kind
 * (sync, cross_stream, inter_thread, comm, plugin).  Every task carries its
 * layer, phase and step in args.
 *
 * Several runs (a baseline and a prediction) go side by side in one file:
 * each run's tracks are grouped under one process per rank whose
 * process_name begins with the run's label ("baseline rank 0", "predicted
 * rank 0"); all start at time zero.  Against another run's graph, tasks
 * are marked in args.change: "inserted" (a plugin made it), "removed" (the
 * other run dropped it) or "changed" (another duration or host overhead,
 * given in args as "<other label>_dur_us").  Tasks on a critical path get
 * args.critical = 1, as in HTA's overlaid critical-path traces, and a
 * `critical_path` flow between consecutive links on different tracks.
 *
 * A run's tasks are those of its steps: from the first step's start to the
 * last step's end (a graph without steps: every task).  Work before the
 * first ProfilerStep or after the last (warm-up, profiler teardown, a
 * watchdog thread) is not part of any step's prediction and is left out,
 * so the timeline spans the predicted time; the top-level "reverie" array
 * says per run how many tasks were left out.
 *
 * The file is streamed event by event (large graphs never sit in memory
 * as JSON); a name ending in .gz is written gzip-compressed.  Its first key,
 * "reverie_timeline" (reverie's version), marks it as a replay: the
 * importer refuses it as a trace, since a replay read back as a recording
 * would be replayed against itself.
 */
#ifndef REVERIE_TIMELINE_H
#define REVERIE_TIMELINE_H

#include <glib.h>
#include "reverie/critical_path.h"
#include "reverie/graph.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

typedef struct {
    const char *label;                  /* "baseline", "predicted" */
    const rv_graph *graph;
    const rv_sim_result *sim;
    const rv_graph *other;              /* the run to mark changes against, or NULL */
    const rv_critical_path *critical;   /* to mark, or NULL */
    const char *other_label;            /* the other run's label, for "<label>_dur_us" */
} rv_timeline_run;

/* Write the runs to path.  Fails (RV_ERROR_INPUT) when the file cannot be written. */
gboolean rv_timeline_write(const char *path, const rv_timeline_run *runs, guint count, GError **error);

G_END_DECLS

#endif
