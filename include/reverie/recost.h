/*
 * recost.h - a graph's collectives re-costed for another world size or
 * cluster with the communication model (comm.h), for the what-ifs that
 * change either: world-size, ddp on a trace that holds its all-reduces.
 *
 * Each selected collective's transfer (in a job of several ranks, the part
 * after the rendezvous; in a rank alone, the whole kernel, wait included)
 * is scaled by model(new) / model(recorded) (rv_collective_recost_ns), with
 * the payload the trace gave or, if it gave none, the one the model needs
 * to take the recorded time.  The recording is taken to have run on the
 * same kind of cluster: its group of p ranks on ceil(p / gpus_per_node)
 * nodes with the plan's links.
 *
 * GROUP SIZES.  A collective's parallelism is its own (graph.h), except
 * that a process group holding any tensor-parallel collective is tensor
 * parallel throughout (Megatron's backward all-reduces of input gradients
 * look like data parallelism by their phase).  The data-parallel groups -
 * every collective group that is neither tensor nor pipeline parallel nor
 * point to point, and has the data-parallel size (rv_graph_parallel_sizes)
 * - take the plan's `world` (weak scaling: each rank keeps its batch, so
 * its buffers keep their size); tensor-parallel groups of the recorded
 * tensor-parallel size take `tensor` when it is given, and keep their size
 * otherwise; pipeline transfers and other groups keep theirs.  The graph's
 * world size then becomes the recorded one times the groups' growth, so a
 * later what-if starts from it.
 */
#ifndef REVERIE_RECOST_H
#define REVERIE_RECOST_H

#include <glib.h>
#include "reverie/comm.h"
#include "reverie/graph.h"
#include "reverie/plugin.h"

G_BEGIN_DECLS

typedef struct {
    int world;                  /* the new world size, >= 1 */
    int gpus_per_node;          /* >= 1 */
    rv_link intra, inter;       /* checked with rv_link_check */
    int all_reduce;             /* -1: each all-reduce's recorded algorithm; else the rv_collective all-reduce to use */
    uint32_t parallelism;       /* which collectives: bits 1u << rv_parallelism */
    int payload_divisor;        /* each rank moves 1/this of the payload (tensor parallelism's shards); 0 or 1: all */
    int tensor;                 /* the tensor-parallel groups' new size; 0: as recorded */
} rv_recost_plan;

typedef struct {
    guint collectives;          /* collectives re-costed */
    guint tasks;                /* their transfer tasks (one per participating rank) */
    guint inferred_payloads;    /* collectives whose payload was solved from the recorded time */
    guint unknown_operation;    /* selected but not a collective the model costs: left as they were */
    int recorded_world;         /* the graph's world size before */
    int64_t before_ns, after_ns;   /* their transfers' time, summed over the tasks */
    int64_t bytes;              /* payloads used, summed over the collectives */
} rv_recost_summary;

/* Re-cost the selected collectives of the graph.  FALSE with an
 * RV_ERROR_USAGE error naming `cause` when a new time is out of range
 * (validate.h). */
gboolean rv_graph_recost_collectives(rv_graph *graph, const rv_recost_plan *plan, const char *cause,
                                     rv_recost_summary *summary, GError **error);

/* A live data-parallel all-reduce's transfer (not a rank's arrival at its
 * rendezvous): what ZeRO, BlueConnect and DGC rewrite. */
static inline gboolean rv_task_is_data_allreduce(const rv_graph *graph, const rv_task *task)
{
    const rv_collective_info *info = rv_task_collective(graph, task);
    return info && !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) &&
           info->parallelism == RV_PARALLEL_DATA &&
           (info->op == RV_COLL_ALLREDUCE_RING || info->op == RV_COLL_ALLREDUCE_TREE || info->op == RV_COLL_ALLREDUCE_HIER);
}

/* The parameter specs of a two-level cluster's links, for a plugin's
 * rv_param_spec table: bandwidth and latency between nodes (IB EDR),
 * intra_bandwidth and intra_latency inside one (NVLink V100). */
#define RV_CLUSTER_LINK_PARAM_SPECS \
    { "bandwidth", RV_PARAM_BANDWIDTH, "100Gbps", "B/s", "inter-node link bandwidth per direction (IB EDR)", NULL }, \
    { "latency", RV_PARAM_DURATION, "5us", "ns", "inter-node per-message latency", NULL }, \
    { "intra_bandwidth", RV_PARAM_BANDWIDTH, "150GB/s", "B/s", "intra-node bandwidth (NVLink V100: 6 links x 25 GB/s)", \
      NULL }, \
    { "intra_latency", RV_PARAM_DURATION, "2us", "ns", "intra-node per-message latency", NULL }

/* The two links those parameters give, checked (rv_link_check). */
gboolean rv_params_cluster_links(const rv_params *params, rv_link *intra, rv_link *inter, GError **error);

/* The graph's recorded world size, or the largest group any of its
 * collectives other than tensor-parallel ones spans when it has none; at
 * least 1. */
int rv_graph_world_size(const rv_graph *graph);

/* The job's parallel degrees as its collectives show them (group sizes
 * above): *tensor the largest tensor-parallel group (1: none), *data the
 * largest data-parallel one (the world over *tensor where it has none);
 * both at least 1.  What the world holds beyond data x tensor is taken to
 * be pipeline stages. */
void rv_graph_parallel_sizes(const rv_graph *graph, int *data, int *tensor);

G_END_DECLS

#endif
