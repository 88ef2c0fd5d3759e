/*
 * inserted.h - small kernels a what-if adds next to recorded GPU work
 * (autocast's casts, Gist's encodings): each on its neighbour's stream,
 * with a launch call on the thread that launched the neighbour, costed as
 * streaming `bytes` through the cost model (the trace's own memory
 * efficiency, costmodel.h), and its launch call costed as the trace's
 * median launch with the median host time before one.
 */
#ifndef REVERIE_INSERTED_H
#define REVERIE_INSERTED_H

#include <glib.h>
#include "reverie/costmodel.h"
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef struct {
    rv_graph *graph;
    const rv_cost_model *model;
    int64_t launch_call_ns;     /* the trace's median launch call */
    int64_t launch_overhead_ns; /* the median host time before a launch (framework dispatch) */
    guint kernels;              /* inserted so far */
    GError **error;             /* where insertion failures go */
} rv_kernel_inserter;

/* Measure the launch costs once (O(tasks)). */
void rv_kernel_inserter_init(rv_kernel_inserter *in, rv_graph *graph, const rv_cost_model *model, GError **error);

/* A kernel named `name` streaming `bytes`, on gpu_task's stream right
 * before it (before = TRUE) or right after it, launched right before /
 * after gpu_task's launch call, with gpu_task's layer, phase and step.
 * Returns its id; -1 without an error where there is no such place (no
 * launch call, the first task of its stream or thread); -2 with
 * *in->error set where the duration or the insertion fails. */
int32_t rv_kernel_inserter_add(rv_kernel_inserter *in, int32_t gpu_task, gboolean before, const char *name, double bytes);
/* The same with a duration the caller costed (in->model may then be NULL;
 * duration_ns within 0 .. RV_MAX_DURATION_NS). */
int32_t rv_kernel_inserter_add_lasting(rv_kernel_inserter *in, int32_t gpu_task, gboolean before, const char *name,
                                       int64_t duration_ns);

G_END_DECLS

#endif
