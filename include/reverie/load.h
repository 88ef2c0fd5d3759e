/*
 * load.h - the inputs every front end takes: a trace or a saved graph,
 * told apart by content, or several of them - a list or a folder - as the
 * ranks of one job, joined (job.h).
 *
 * A trace is imported (trace.h) and built (graph.h); a saved graph is read
 * whole (store.h).  Either way the graph is checked before it is handed
 * out, so that the simulator and the reports can trust it: impossible
 * durations are bad input (RV_ERROR_INPUT), and a source name that is not
 * clean text is escaped (escape.h).  A file named .rvg that is not a graph
 * gets a line saying what it is instead.
 *
 * A folder holds the ranks' traces or graphs (.json, .json.gz, .rvg) and
 * is read in natural order (rank2 before rank10).  A saved graph that holds
 * a job already cannot be one rank of another.
 */
#ifndef REVERIE_LOAD_H
#define REVERIE_LOAD_H

#include <glib.h>
#include "reverie/graph.h"
#include "reverie/trace.h"

G_BEGIN_DECLS

typedef struct {
    /* Limits and progress of a trace's import (trace.h); a saved graph is
     * held to import.max_bytes too.  Zeros take the defaults. */
    rv_import_options import;
    /* Called with each input's name (the path, or "<stdin>") as it is
     * opened, before anything is read; may be NULL. */
    void (*opened)(const char *name, void *data);
    void *opened_data;
    /* Where to put what the timing model had to assume about each input
     * (explain.h's rv_timing_notes), as "SOURCE: note" lines (char*, owned
     * by the array, which must free with g_free); NULL: not collected.
     * For a job, each rank's, added once the ranks are known to be one job. */
    GPtrArray *notes;
} rv_load_options;

/* A trace or saved graph (path "-": standard input).  options may be NULL. */
rv_graph *rv_load(const char *path, const rv_load_options *options, GError **error);

/* One input as rv_load reads it; several, or one folder, as the ranks of
 * one job, joined.  The job is named after the folder, or after the first
 * file ("a.json and 3 more"). */
rv_graph *rv_load_job(char *const *paths, int count, const rv_load_options *options, GError **error);

G_END_DECLS

#endif
