/*
 * store.h - saved graphs (.rvg): import once, query many times.
 * The format is described in src/store/store.c and in the README.
 */
#ifndef REVERIE_STORE_H
#define REVERIE_STORE_H

#include <glib.h>
#include <stdio.h>
#include "reverie/alike.h"
#include "reverie/graph.h"

G_BEGIN_DECLS

/* TRUE if the file starts with the .rvg magic number (content, not name). */
gboolean rv_store_is_graph_file(const char *path);
/* Save to path through the one output writer (output.h): atomically,
 * never over an input of the run, replacing an existing file. */
gboolean rv_store_save(const rv_graph *graph, const char *path, GError **error);
/* The same bytes to a stream (*bytes: how many, when not NULL); FALSE
 * with an error when the graph is inconsistent, or with the stream's error
 * flag set when a write failed. */
gboolean rv_store_write(const rv_graph *graph, FILE *file, guint64 *bytes, GError **error);
/* Load a saved graph; every corruption is an RV_ERROR_INPUT error, never a crash. */
rv_graph *rv_store_load(const char *path, GError **error);
/* A saved job whose ranks are alike (format version 8) as the job held
 * once, without rebuilding every rank's tasks: what a replay of a job of
 * many ranks needs (alike.h).  Every check rv_store_load makes that the
 * replay and its reports rely on is made.  The correlation and payload
 * columns are not kept, nor, unless recorded_starts (rv_alike_explain
 * needs them) or the job has no steps, the recorded starts.  For any other
 * saved graph NULL with *held FALSE and no error (load it with
 * rv_store_load); a damaged file of a job held once is NULL with *held
 * TRUE and the error. */
rv_alike_job *rv_store_load_alike(const char *path, gboolean recorded_starts, gboolean *held, GError **error);
/* The same for a file already in memory (tests and the fuzz harness). */
rv_alike_job *rv_store_load_alike_buffer(const guint8 *data, gsize length, const char *name, gboolean recorded_starts,
                                        gboolean *held, GError **error);
/* The same for a file already in memory; name is used in messages only.
 * For tests and the fuzz harness. */
rv_graph *rv_store_load_buffer(const guint8 *data, gsize length, const char *name, GError **error);

G_END_DECLS

#endif
