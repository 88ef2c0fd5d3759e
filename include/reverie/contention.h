/*
 * contention.h - work slowing other work down while it overlaps on one
 * GPU: communication and computation (the contention rule), and compute
 * kernels of different streams sharing the GPU (the sharing rule, below).
 *
 * An NCCL kernel is a GPU kernel: while a compute kernel runs on the same
 * GPU they share its memory bandwidth and its SMs.  Daydream measured real
 * NCCL all-reduces 34% slower than their formula while they competed with
 * compute kernels, and about as fast as the formula alone (its Figure 4.9;
 * synchronizing before each all-reduce won back 22.8%).
 *
 * THE RULE.  A GPU is a rank's device (rv_resource.rank_index, .process).
 * A communication task (RV_TASK_COMM, not a rendezvous) and a compute task
 * (RV_TASK_KERNEL) on streams of one GPU run at reduced speed while both
 * are running:
 *
 *   communication progresses at 1 / comm_slowdown of its speed while at
 *   least one compute kernel runs on its GPU, compute at 1 / compute_slowdown
 *   while at least one communication task does; alone, each at full speed.
 *
 * A task's duration is its work at full speed, so an overlapped stretch of
 * length d costs a communication task d * (1 - 1/comm_slowdown) of extra
 * time.  The replay (sim.h) follows every change of who runs on each GPU
 * (a fluid model): a task's end is known only when nothing can change its
 * speed any more.  Channels (RV_RES_CHANNEL: inserted transfers off the GPU)
 * and copies are outside the rule.
 *
 * Off by default: a built graph replays as before.  Plugins that overlap
 * communication with compute turn it on (rv_contention_enable), and the
 * `contention` plugin turns it on alone.  The defaults:
 *   comm_slowdown 1.34: Daydream's measured 34%;
 *   compute_slowdown 1.11: NCCL runs one CTA per channel, about 8 channels
 *     on one node of 8 V100s, i.e. ~8 of 80 SMs taken from compute
 *     (80/72 = 1.11); no paper at hand measures the compute side.
 */
#ifndef REVERIE_CONTENTION_H
#define REVERIE_CONTENTION_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

#define RV_CONTENTION_COMM_SLOWDOWN 1.34
#define RV_CONTENTION_COMPUTE_SLOWDOWN 1.11

typedef struct {
    gboolean enabled;         /* FALSE: the replay ignores the rule (a built graph) */
    double comm_slowdown;     /* >= 1: time factor of communication while compute runs on its GPU */
    double compute_slowdown;  /* >= 1: time factor of compute while communication runs on its GPU */
} rv_contention;

/* The default rule (enabled, the factors above). */
rv_contention rv_contention_default(void);

/* Both factors finite and in [1, 100]: else FALSE with an RV_ERROR_USAGE line. */
gboolean rv_contention_check(double comm_slowdown, double compute_slowdown, GError **error);

/* Does the rule change anything (enabled and a factor above 1)? */
static inline gboolean rv_contention_active(const rv_contention *contention)
{
    return contention->enabled && (contention->comm_slowdown > 1.0 || contention->compute_slowdown > 1.0);
}

/*
 * KERNELS SHARING A GPU (the sharing rule; the concurrent-kernels plugin,
 * after GOLDYLOC, Pati's thesis ch. 7).  Without it, kernels on different
 * streams of one GPU overlap at full speed, as if each had a GPU of its
 * own.  With it, the compute kernels (RV_TASK_KERNEL) running at once on
 * one GPU share what it has.  Each asks (rv_kernel_demand):
 *
 *   occupancy, per SM resource r (threads, block slots, registers, shared
 *     memory): u x blocks_per_sm x its blocks' use of r / the SM's r, as a
 *     share of the whole GPU: u is its wave utilization (blocks / (waves x
 *     SMs x blocks_per_sm), costmodel.h), blocks_per_sm what one SM holds
 *     of it (the GPU's residency limits, gpus.h).  On the resource that
 *     limits its blocks per SM it holds u: what is left of that resource
 *     fits no block of its own, and is counted as held;
 *   memory bandwidth: bandwidth_ns / duration (at most 1), bandwidth_ns
 *     being its bytes at the GPU's memory bandwidth;
 *   compute: compute_ns / duration (at most 1), compute_ns being its FLOPs
 *     at the peak of the unit and dtype it runs on.
 *
 * While a set of compute kernels runs on a GPU the load on each resource
 * is the sum of their demands, and a kernel progresses at
 *     1 / max(1, the highest load among the resources it asks for)
 * (a fluid share: work is conserved, nothing runs faster than alone).  A
 * kernel alone asks at most 1 of each: it runs at its duration, so the
 * rule changes nothing where nothing overlaps.  With contention on too, a
 * compute kernel's rate is also divided by compute_slowdown while
 * communication runs on its GPU; communication is not in this rule
 * (contention.h's slowdowns stand for NCCL's SMs and bandwidth).  Copies
 * (copy engines) and channels are outside it.
 *
 * What it does not see: a recorded kernel that overlapped another compute
 * kernel in the recording already ran shared, so its duration holds that
 * sharing once and the rule counts it again (the plugin says how many);
 * caches, and the hardware scheduler's order of blocks (the rule shares
 * the whole run evenly, so a kernel's tail wave is shared as well as its
 * full ones).
 */
enum {
    RV_SHARE_THREADS,        /* resident threads (whole warps) per SM */
    RV_SHARE_BLOCKS,         /* resident block slots per SM */
    RV_SHARE_REGISTERS,      /* the register file */
    RV_SHARE_SHARED_MEMORY,  /* shared memory (LDS) */
    RV_SHARE_BANDWIDTH,      /* memory bandwidth */
    RV_SHARE_COMPUTE,        /* the peak of its unit */
    RV_SHARE_COUNT
};
#define RV_SHARE_OCCUPANCY_COUNT 4  /* the first four: per-SM residency */

/* What one kernel asks of its GPU (above).  A task past the end of
 * graph->kernel_demands asks for all of every resource. */
typedef struct {
    float occupancy[RV_SHARE_OCCUPANCY_COUNT];  /* shares in [0, 1] */
    float bandwidth_ns;  /* its bytes at the GPU's memory bandwidth */
    float compute_ns;    /* its FLOPs at its unit's peak */
} rv_kernel_demand;

/* The demand of a kernel nothing is known about: the whole GPU. */
rv_kernel_demand rv_kernel_demand_whole(int64_t duration_ns);

/* A kernel's demand on resource `share` (RV_SHARE_*) while it lasts
 * duration_ns, in [0, 1]. */
double rv_kernel_demand_share(const rv_kernel_demand *demand, int share, int64_t duration_ns);

/* The sharing rule's switch (graph->sharing): off in a built graph. */
typedef struct {
    gboolean enabled;
    int32_t reserved;   /* 0 */
} rv_sharing;

G_END_DECLS

#endif
