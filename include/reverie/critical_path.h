/*
 * critical_path.h - the chain of tasks and waits that decides when each
 * step ends.
 *
 * The simulator keeps only each task's start and end (sim.h).  Which rule
 * set a start is re-derived afterwards from the graph: by graph.h's timing
 * model a task starts at the latest of its resource's previous task's end
 * (plus the stream's idle gap), each predecessor's release (a launch edge
 * adds the stream's launch latency; a from_start edge releases at the
 * predecessor's start), plus its host overhead on a CPU thread - or, for a
 * launch call, when its launch-queue holder ends.  The constraint equal to
 * the start is the one that decided it ("binding"); on a tie a dependency
 * edge wins over resource order, because it names a reason.
 *
 * Walking the binding constraints back from the task that ends a step gives
 * the step's critical path.  Its links tile the step: each link covers its
 * task's run on the path, the task's host overhead, and the wait between the
 * predecessor's release and the start (launch latency or a stream's idle
 * gap), so the parts add up to the step time exactly.  The walk stops where
 * it crosses into the previous step (the first step: where the chain
 * begins).
 */
#ifndef REVERIE_CRITICAL_PATH_H
#define REVERIE_CRITICAL_PATH_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

/* What made a task start when it did. */
typedef enum {
    RV_VIA_NOTHING,   /* no constraint: the chain begins here */
    RV_VIA_RESOURCE,  /* the previous task on its thread, stream or channel */
    RV_VIA_EDGE,      /* a dependency edge (edge_kind says which) */
    RV_VIA_QUEUE,     /* a full launch queue: the GPU task that freed a slot */
    RV_VIA_COUNT
} rv_via;

/* The waits between tasks on a path, and the host overhead before a call. */
typedef enum {
    RV_WAIT_HOST_OVERHEAD,  /* CPU time before a call that no task accounts for */
    RV_WAIT_LAUNCH_LATENCY, /* a launch call's end to its GPU task's start */
    RV_WAIT_IDLE_GAP,       /* a stream's gap between two tasks */
    RV_WAIT_KIND_COUNT
} rv_wait_kind;

typedef struct {
    int32_t task;
    int32_t predecessor;     /* the task whose release decided the start, or -1 */
    uint8_t via;             /* rv_via */
    uint8_t edge_kind;       /* rv_edge_kind, when via is RV_VIA_EDGE */
    int64_t run_ns;          /* of the task's own run on the path (clipped to the step) */
    int64_t host_overhead_ns;/* of its host overhead on the path */
    int64_t wait_ns;         /* launch latency or idle gap before it on the path */
    uint8_t wait_kind;       /* rv_wait_kind of wait_ns */
} rv_path_link;

typedef struct {
    int64_t begin_ns, end_ns;  /* the step's window on the timeline */
    int64_t before_chain_ns;   /* part of the window before the chain begins (0 normally) */
    GArray *links;             /* rv_path_link, earliest first */
} rv_step_path;

typedef struct {
    GArray *steps;             /* rv_step_path, one per step (one for a graph without steps) */
} rv_critical_path;

/* The critical path of each step of a replay. */
rv_critical_path *rv_critical_path_find(const rv_graph *graph, const rv_sim_result *sim);
void rv_critical_path_free(rv_critical_path *path);

/* Of the paths of every step: the time on them (path_ns), and the part
 * that is recorded host time (host_ns): CPU calls' runs and the host
 * overheads before them, blocking calls' returns included.  No what-if on
 * the GPU can make a step shorter than its host part. */
void rv_critical_path_host_share(const rv_critical_path *path, const rv_graph *graph, int64_t *path_ns,
                                 int64_t *host_ns);

/* A per-task flag: 1 for the tasks on the path (g_free). */
guint8 *rv_critical_path_members(const rv_critical_path *path, int32_t task_count);

/* The time a link stands for on the path: run + host overhead + wait. */
static inline int64_t rv_path_link_ns(const rv_path_link *link)
{
    return link->run_ns + link->host_overhead_ns + link->wait_ns;
}

/* Where a path's time went: each link's run by its task's kind, its host
 * overhead and wait by wait kind, and all three by its task's phase and
 * layer (a GPU task's layer is its launch call's). */
typedef struct {
    int64_t total_ns;
    uint64_t links;
    int64_t by_kind_ns[RV_TASK_KIND_COUNT];
    int64_t by_wait_ns[RV_WAIT_KIND_COUNT];
    int64_t by_phase_ns[RV_PHASE_COUNT];
    GHashTable *by_layer_ns;   /* layer string id (GINT_TO_POINTER) -> int64_t*; id 0: no layer */
} rv_path_totals;

void rv_path_totals_init(rv_path_totals *totals);
void rv_path_totals_add(rv_path_totals *totals, const rv_graph *graph, const rv_step_path *step);
void rv_path_totals_clear(rv_path_totals *totals);
/* The layers by time on the path, largest first: GArray of int32 string ids. */
GArray *rv_path_totals_layers(const rv_path_totals *totals);
int64_t rv_path_totals_layer_ns(const rv_path_totals *totals, int32_t layer);

const char *rv_via_name(rv_via via);
const char *rv_wait_kind_name(rv_wait_kind kind);

G_END_DECLS

#endif
