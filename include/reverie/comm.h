/*
** comm.h — the alpha-beta cost model for collective communication.
**
** A collective among p ranks over a link with per-message latency alpha
** (ns) and bandwidth B (bytes/s) is modelled as
**
**   time = steps(p) * alpha + factor(p) * S / (B * e)
**
** where S is the buffer size in bytes and e in (0, 1] is an efficiency
** that derates the bandwidth.  Daydream observed real NCCL all-reduces
** running ~34% slower than the formula while competing with compute
** kernels; e is the knob for that (the API default is 1.0, plugins pick
** their own defaults).
**
**   collective            steps(p)           factor(p)
**   all-reduce, ring      2(p-1)             2(p-1)/p
**   all-reduce, tree      2*ceil(log2 p)     2
**   reduce-scatter (ring) p-1                (p-1)/p
**   all-gather (ring)     p-1                (p-1)/p
**   all-to-all            p-1                (p-1)/p
**   broadcast (pipelined) p-1                1
**
** S is the full buffer each rank holds: the all-reduce input, the
** reduce-scatter input, the all-gather output, the all-to-all send buffer
** and the broadcast payload.  p = 1 costs nothing.  Hierarchical
** all-reduce on n nodes of g GPUs (p = n*g) is an intra-node
** reduce-scatter over g ranks, an inter-node ring all-reduce of S/g bytes
** over n ranks, and an intra-node all-gather over g ranks.
**
** Times are int64 nanoseconds rounded to the nearest ns (each phase of a
** hierarchical all-reduce is rounded separately), saturating at
** INT64_MAX.  Invalid arguments give -1 (the cost functions take no
** GError so they can be called in the simulator's inner loop; validate
** user-supplied links once with rv_link_check()).
*/
#ifndef REVERIE_COMM_H
#define REVERIE_COMM_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef enum {
  RV_COLL_ALLREDUCE_RING,
  RV_COLL_ALLREDUCE_TREE,
  RV_COLL_ALLREDUCE_HIER,
  RV_COLL_REDUCE_SCATTER,
  RV_COLL_ALL_GATHER,
  RV_COLL_ALL_TO_ALL,
  RV_COLL_BROADCAST
} rv_collective;

#define RV_COLL_COUNT 7

/* One link class.  efficiency in (0, 1] divides the bandwidth term; 0 is
** read as 1.0 so that { .bandwidth_Bps = ..., .latency_ns = ... }
** initialisers mean "no derating". */
typedef struct {
  double bandwidth_Bps;
  int64_t latency_ns;
  double efficiency;
} rv_link;

/* A named link class with the provenance of its figures.  Bandwidths are
** per direction, the rate one rank can send while it also receives. */
typedef struct {
  const char *name;
  const char *description;
  double bandwidth_Bps;
  int64_t latency_ns;
  const char *source;
} rv_link_preset;

/* n nodes of g GPUs each: intra links inside a node, inter between. */
typedef struct {
  int nodes;
  int gpus_per_node;
  rv_link intra;
  rv_link inter;
} rv_cluster;

#define RV_COMM_ERROR (rv_comm_error_quark())
GQuark rv_comm_error_quark(void);

typedef enum {
  RV_COMM_ERROR_UNKNOWN_COLLECTIVE,
  RV_COMM_ERROR_UNKNOWN_LINK,
  RV_COMM_ERROR_INVALID_LINK
} rv_comm_error;

/* ---- links ---- */

rv_link rv_link_make(double bandwidth_Bps, int64_t latency_ns,
                     double efficiency);

/* TRUE if bandwidth is finite and > 0, latency >= 0 and efficiency is 0
** (meaning 1.0) or in (0, 1]; otherwise says which field is wrong. */
gboolean rv_link_check(const rv_link *link, GError **error);

/* bandwidth_Bps * efficiency (with 0 read as 1.0). */
double rv_link_effective_bandwidth(const rv_link *link);

/* ---- cost model ---- */

/* Time of collective c on bytes over ranks ranks sharing one link class.
** -1 for invalid arguments and for RV_COLL_ALLREDUCE_HIER, which needs
** two link classes (use rv_hierarchical_allreduce_ns). */
int64_t rv_collective_time_ns(rv_collective c, int64_t bytes, int ranks,
                              const rv_link *link);

/* Hierarchical all-reduce as described above; -1 for invalid arguments.
** With nodes = 1 it equals reduce-scatter + all-gather on intra; with
** gpus_per_node = 1 it equals a ring all-reduce on inter. */
int64_t rv_hierarchical_allreduce_ns(int64_t bytes, int nodes,
                                     int gpus_per_node, const rv_link *intra,
                                     const rv_link *inter);

/* Collective c over all nodes*gpus_per_node ranks of a cluster.  HIER is
** rv_hierarchical_allreduce_ns.  On one node the others use the intra
** link; across nodes a flat ring or tree is limited by its slowest hop,
** so they use the lower effective bandwidth and higher latency of the
** two links.  -1 for invalid arguments. */
int64_t rv_cluster_collective_ns(rv_collective c, int64_t bytes,
                                 const rv_cluster *cluster);

/* The cluster p ranks occupy: ceil(p / gpus_per_node) nodes of
** min(p, gpus_per_node) GPUs, intra links inside a node, inter between. */
rv_cluster rv_cluster_for_ranks(int ranks, int gpus_per_node,
                                const rv_link *intra, const rv_link *inter);

/* ---- re-costing a recorded collective ---- */

/* A recorded collective moved to another cluster (another group size, or
** other links) or algorithm: the recorded time scaled by the model's ratio,
**
**   wanted_ns = recorded_ns * time(wanted_c, S / divisor, wanted) / time(c, S, recorded)
**
** so that the same cluster and algorithm give back the recorded time
** exactly (divisor 1: the same payload; 4: each rank holds a quarter of
** it, as under 4-way tensor parallelism).  S is `bytes` when the trace gave the payload; else (bytes <= 0)
** the payload for which time(c, S, recorded) = recorded_ns, solved from
** the model (0 when the recorded time is below the model's latency alone).
** The payload used goes to *bytes_used (may be NULL).  -1 for invalid
** arguments; saturates at INT64_MAX. */
int64_t rv_collective_recost_ns(rv_collective c, rv_collective wanted_c, int64_t bytes,
                                int64_t divisor, int64_t recorded_ns,
                                const rv_cluster *recorded,
                                const rv_cluster *wanted,
                                int64_t *bytes_used);

/* ---- names ---- */

/* Canonical names: "allreduce_ring", "allreduce_tree", "allreduce_hier",
** "reduce_scatter", "all_gather", "all_to_all", "broadcast".  NULL for
** values outside the enum. */
const char *rv_collective_name(rv_collective c);

/* Case-insensitive and ignoring '-', '_' and spaces, so "all-reduce",
** "AllReduce" and "ring_allreduce" all work; "allreduce" means ring,
** "hierarchical_allreduce"/"allreduce_hierarchical" mean HIER, "alltoall"
** and "sendrecv" mean all-to-all. */
gboolean rv_collective_from_name(const char *name, rv_collective *out,
                                 GError **error);

/* Recognises NCCL/RCCL kernel names as they appear in profiler traces:
** "ncclKernel_AllReduce_RING_LL_Sum_float(...)",
** "ncclDevKernel_AllReduce_Sum_f32_TREE_LL(...)",
** "ncclDevKernel_AllGather_RING_LL(...)", "ncclKernel_ReduceScatter_...",
** "ncclKernel_SendRecv_..." (all-to-all), "ncclDevKernel_Broadcast...",
** and the older "ncclAllReduceTreeLLKernel_sum_f32(...)" style.  An
** all-reduce whose algorithm mentions TREE (including NVLS_TREE) is
** RV_COLL_ALLREDUCE_TREE, otherwise RING.  Returns the rv_collective, or
** -1 when the name is not a recognised collective kernel (including
** ncclDevKernel_Generic, plain Reduce and non-NCCL kernels). */
int rv_collective_from_kernel_name(const char *kernel_name);

/* ---- presets (presets.c) ---- */

/* The built-in table; *count receives its length. */
const rv_link_preset *rv_link_presets(size_t *count);

/* Exact, case-sensitive name lookup ("pcie4", "nvlink-a100", "ib-hdr",
** ...); NULL if unknown. */
const rv_link_preset *rv_link_preset_find(const char *name);

/* Like rv_link_preset_find but the error lists the known names. */
const rv_link_preset *rv_link_preset_lookup(const char *name, GError **error);

/* A link with the preset's bandwidth and latency. */
rv_link rv_link_from_preset(const rv_link_preset *preset, double efficiency);

G_END_DECLS

#endif /* REVERIE_COMM_H */
