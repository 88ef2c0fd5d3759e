/*
 * contention.h - communication and computation slowing each other down
 * while they overlap on one GPU.
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

G_END_DECLS

#endif
