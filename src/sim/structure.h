/*
 * structure.h - what a replay works out from a graph's structure before it
 * starts (sim.c), shared with the replay of alike ranks in lockstep
 * (lockstep.c).  Private to src/sim.
 */
#ifndef REVERIE_SIM_STRUCTURE_H
#define REVERIE_SIM_STRUCTURE_H

#include "reverie/sim.h"

/* How an edge makes its target ready. */
enum { READY_AT_END, READY_AT_START, READY_AFTER_LAUNCH, QUEUE_RELEASE, ORDER_ONLY };

/* Successors in compressed rows: edges out of task t are
 * targets[first[t] .. first[t + 1]), the graph's live edges followed by
 * each task's launch-queue releases. */
typedef struct {
    int32_t *first;
    int32_t *targets;
    uint8_t *how;           /* one of the enum above */
    int32_t *waiting;       /* predecessors not yet dispatched */
    int32_t *holder;        /* per launch call: the task it waits for in the queue, or -1 */
    int32_t *unchained;     /* resources whose live tasks are not one chain of order edges (find_unchained) */
    int32_t unchained_count;
} adjacency;


/* What the replay reads of a task, packed by one pass over the tasks: the
 * setup and the replay then touch 8 + 16 bytes per task instead of a
 * 72-byte task (both were mostly waiting on cache misses). */
typedef struct {
    int32_t resource;
    uint8_t live;
    uint8_t gpu;
    uint8_t arrival;  /* a rank's arrival at a collective: its transfer follows with no idle gap */
    uint8_t zero;     /* always 0: no padding bytes of unknown value */
} task_key;
G_STATIC_ASSERT(sizeof(task_key) == 8);

typedef struct {
    int64_t duration;
    int64_t overhead;  /* host overhead */
} task_time;

struct rv_sim_structure {
    int32_t tasks;
    guint edge_count, resource_count;
    rv_edge *edges;          /* the edges it was built from */
    int32_t *queue_depths;   /* per resource: the holders depend on them */
    task_key *keys;          /* of the tasks it was built from */
    adjacency adj;           /* waiting: the counts before a replay starts */
    /* Every live task in an order its edges allow (find_order): a replay
     * that may dispatch in edge order (edge_order_allowed) follows it
     * instead of finding it again.  NULL where some task could never run. */
    int32_t *order;
    int32_t order_count;
    int32_t *removed;        /* the tasks that are not live, which such a replay never reaches */
    int32_t removed_count;
};

/* a + b, or RV_SIM_TIME_MAX_NS + 1 when that would pass the limit (the
 * caller turns it into an error).  Both are non-negative. */
static inline int64_t add_time(int64_t a, int64_t b)
{
    int64_t sum;
    if (__builtin_add_overflow(a, b, &sum) || sum > RV_SIM_TIME_MAX_NS) return RV_SIM_TIME_MAX_NS + 1;
    return sum;
}

#endif
