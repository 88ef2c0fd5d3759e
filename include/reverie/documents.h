/*
 * documents.h - the JSON documents reverie reports (`--json`), built once
 * for every front end: the command line prints them, the Python package
 * returns them (Result.to_dict()), so both say exactly the same.  Their
 * schemas are in docs/commands.md.
 *
 * Each builder returns a new jansson object (json_decref it).  Text from a
 * trace is bounded as escape.h's rv_bounded_name does: bytes that are not
 * valid UTF-8 (a forged saved graph) escaped rather than refused, a name
 * longer than RV_NAME_BOUND cut with its length said.  Reals print with RV_DOCUMENT_DIGITS
 * significant digits, except the critical path's, which holds absolute
 * trace timestamps (RV_DOCUMENT_TIMESTAMP_DIGITS).
 */
#ifndef REVERIE_DOCUMENTS_H
#define REVERIE_DOCUMENTS_H

#include <glib.h>
#include <jansson.h>
#include "reverie/explain.h"
#include "reverie/graph.h"
#include "reverie/plugin.h"
#include "reverie/report.h"
#include "reverie/runs.h"
#include "reverie/whatif.h"

G_BEGIN_DECLS

#define RV_DOCUMENT_DIGITS 12
/* microseconds since the epoch, to the nanosecond's first digit */
#define RV_DOCUMENT_TIMESTAMP_DIGITS 16

/* A json_t string of text, bounded (escape.h's rv_bounded_name: valid
 * UTF-8, at most RV_NAME_BOUND bytes and the length said).  Never NULL. */
json_t *rv_json_text(const char *text);

/* `simulate`: each step recorded and simulated, its error and unexplained
 * time, the totals; with detail, where the unexplained time sits (x's
 * largest tasks); for a job, each rank. */
/* A rank alone's recorded waits for its peers, in all (job.h). */
int64_t rv_peer_wait_total(const rv_graph *graph);
/* A job whose ranks recorded one step each: its step if every rank had
 * entered the recorded window together (job.h), or -1. */
int64_t rv_job_step_entering_together(const rv_graph *graph, const GArray *steps);
json_t *rv_simulate_document(const rv_graph *graph, const rv_replay *replay, const rv_explanation *x,
                             gboolean detail);
/* What the simulate document says of the whole job beyond its replay,
 * worked out from the graph by rv_simulate_document; given here for a job
 * held once (alike.h), whose `graph` is its structure. */
typedef struct {
    int32_t live_tasks;
    guint edges;
    int64_t peer_wait_ns;          /* rv_peer_wait_total */
    int64_t entering_together_ns;  /* rv_job_step_entering_together, or -1 */
} rv_job_figures;
rv_job_figures rv_job_figures_of(const rv_graph *graph, const GArray *steps);
json_t *rv_simulate_document_with(const rv_graph *graph, const rv_replay *replay, const rv_explanation *x,
                                  gboolean detail, const rv_job_figures *figures);

/* `whatif`: the optimizations (opts: rv_opt, as applied to graph) with
 * their parameters, notes and changed tasks; each step recorded, baseline
 * and predicted; totals, speedup, GPU kernel time, peak memory; for a job,
 * each rank.  graph: the optimized one. */
json_t *rv_whatif_document(const rv_graph *graph, GPtrArray *opts, const rv_whatif *whatif);

/* `breakdown`: each run's steps, split into CPU only / GPU only / overlap /
 * idle, per phase and per stream. */
json_t *rv_breakdown_document(const rv_runs *runs);

/* `critical-path`: the baseline's path (and under "baseline", inside the
 * prediction's, when there is one): steps, totals and every link. */
json_t *rv_critical_path_document(const rv_runs *runs);

/* `plugins`: one plugin's name, summary and parameter table. */
json_t *rv_plugin_document(const rv_plugin *plugin);

/* The text of a document as `--json` prints it: indented by 2, reals with
 * `digits` significant digits, no final newline.  Free with free()
 * (jansson's allocation); NULL only when memory runs out. */
char *rv_document_text(const json_t *document, int digits);

G_END_DECLS

#endif
