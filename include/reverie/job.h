/*
 * job.h - several ranks of one distributed job in one graph.
 *
 * Each rank's trace is built into a graph on its own (graph.h); joining
 * puts them side by side - every resource keeps its rank (rv_resource.
 * rank_index, graph->ranks) - and then makes the ranks meet where the job
 * made them meet: in their collectives.
 *
 * 1. Match.  The kernels that are one collective on several ranks are found
 *    from what the traces say (rv_collective_info): by process group and
 *    sequence number where every participant has one; else the k-th
 *    collective of a process group (or, unnamed, of the NCCL stream, which
 *    is one per group) on each rank; point-to-point sends and receives that
 *    name their peer pair up in order per direction.  Ranks whose
 *    collectives do not line up - a different count in a group, a different
 *    operation at one position - are not one job: refused.
 * 2. Clocks.  Hosts' clocks differ.  A collective ends at the same moment on
 *    all its participants (the last arriver's data completes everyone's), so
 *    each rank's offset from the first rank is the median, over their common
 *    collectives, of the difference of their ends.  It is subtracted from
 *    that rank's recorded times; nothing per task is taken from them.
 * 3. Rendezvous.  A recorded NCCL kernel is a wait for the last participant
 *    plus the transfer.  Each becomes an arrival (zero length, where the
 *    kernel started on its stream) and the transfer (the kernel itself); all
 *    arrivals lead to one meeting task and that to every transfer, so in the
 *    replay a transfer starts when every participant has arrived.  The
 *    transfer lasts what the last arriver's kernel lasted (it waited for
 *    nobody): a rule, not each rank's own wait copied.
 * 4. Start.  Each rank entered the recorded window at its own moment (its
 *    previous, unrecorded step ended then).  That moment, after the clock
 *    correction and relative to the job's first rank, is the one per-rank
 *    value taken from recorded times: a zero-length marker opens each of
 *    the rank's threads with that lag as its host overhead (the threads'
 *    own tasks keep theirs, so a faster host does not shorten the lag).
 *    It is the replay's initial condition, not a wait: every wait after
 *    it comes from the rules.
 *
 * Input that cannot be one job is refused with one line naming the files:
 * two traces of one rank, different world sizes, a rank missing from the
 * world, collectives that do not line up.
 */
#ifndef REVERIE_JOB_H
#define REVERIE_JOB_H

#include <glib.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* One collective found on several ranks: its kernels, one per participant,
 * in rank-index order. */
typedef struct {
    GArray *kernels;     /* int32 task ids */
    rv_match_rule rule;
} rv_matched_collective;

/*
 * Which kernels of a joined graph (ranks side by side, not yet met) are one
 * collective: a GPtrArray of rv_matched_collective* (g_ptr_array_unref
 * frees them), or NULL with RV_ERROR_INPUT when the ranks' collectives do
 * not line up.  Kernels in no entry stay unmatched.
 */
GPtrArray *rv_collectives_match(const rv_graph *graph, GError **error);

/*
 * Join the graphs of several ranks' traces (each built by rv_graph_build)
 * into one: the steps above.  `source` names the job in reports (a folder,
 * or the first file).  The inputs are left as they were.  A single graph
 * is joined too (a job of one rank).  NULL with RV_ERROR_INPUT for input
 * that is not one job.
 */
rv_graph *rv_job_join(GPtrArray *graphs, const char *source, GError **error);
/* As rv_job_join, but each input is freed as soon as it is copied into the
 * joint graph and its slot in `graphs` set to NULL, so a job of many ranks
 * is never held twice (an import's peak memory).  Inputs refused before
 * the copying starts (not one world, a rank missing) are left as they
 * were; once it has started every slot ends NULL, whether or not the join
 * then succeeds. */
rv_graph *rv_job_join_freeing(GPtrArray *graphs, const char *source, GError **error);

/* ---- a rank without its peers (peers.c) ------------------------------- */

/* A trace of one rank of a larger job: split each collective kernel into a
 * wait for the peers (RV_TASK_SYNC, flagged RENDEZVOUS and GPU, on the
 * kernel's stream, lasting the recorded wait) and the transfer (the kernel,
 * lasting its fastest recorded instance).  rv_graph_build does this for
 * every trace with peers; nothing to do for one process. */
void rv_graph_split_peer_waits(rv_graph *graph);
/* Undo it (rv_job_join, before it matches the ranks). */
void rv_graph_merge_peer_waits(rv_graph *graph);
/* Per step (and one more slot: outside every step), the recorded waits for
 * peers of a rank alone, ns.  g_array_unref. */
GArray *rv_peer_waits_by_step(const rv_graph *graph);

/* A joint job's entry moments (join.c): each rank enters the recorded
 * window at its recorded lag behind the first rank, an initial condition
 * read from the recording.  Set them to 0 (every rank enters together) and
 * return how many there were; with one recorded step they can decide much
 * of the job's step, and `simulate` says how much. */
guint rv_job_enter_together(rv_graph *graph);

/* The rank an edge of a joint graph belongs to: its source's, else its
 * target's (the join never joins two ranks directly); -1 for an edge among
 * the job's own tasks (the rendezvous). */
static inline int32_t rv_edge_rank_index(const rv_graph *graph, const rv_edge *edge)
{
    int32_t r = rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task, edge->from));
    return r >= 0 ? r : rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task, edge->to));
}

/* Ranks the graph holds (1 for a graph of one trace, or one built by hand). */
static inline guint rv_graph_rank_count(const rv_graph *graph)
{
    return MAX(graph->ranks->len, 1);
}

G_END_DECLS

#endif
