/*
 * compose.h - the composition law: what each optimization reads and
 * rewrites, and which orders of two optimizations reverie accepts.
 *
 * Each plugin declares its effects (rv_plugin.effects, plugin.h) over a
 * set of ASPECTS of a graph - the GPU work of each phase, the host's
 * calls, the collectives of each parallelism, the step structure, the
 * device the cost model prices kernels for, the memory model's tensors,
 * the scheduling priority, the contention rule, the cluster, the model's
 * parameters - in four
 * ways:
 *
 *   reads       which tasks exist and how they depend on each other
 *               (what it selects, where it attaches its own work);
 *   reads_time  their durations (a cost derived from a recorded time, a
 *               sum, an overlap);
 *   scales      it multiplies durations of tasks it selects by factors
 *               that do not depend on those durations: nothing else;
 *   reprices    it sets durations of tasks it selects from a model (the
 *               kernel cost model, the communication model): no task or
 *               edge added or removed;
 *   rewrites    anything more: inserts or removes tasks, adds edges, sets
 *               a rule or a priority.
 *
 * THE LAW.  Two plugins P (applied first) and N CONFLICT when one rewrites
 * an aspect the other touches in any way, one reprices an aspect whose
 * durations the other reads, scales or reprices, or one scales an aspect
 * whose durations the other reads.  Plugins that do not conflict commute:
 * both orders give the same graph timing, because neither sees anything
 * the other changed (scalings commute with each other: multiplication
 * does; a plugin that reads only which tasks exist does not see their
 * prices).
 * Conflicting plugins are taken in one order only, the CANONICAL ORDER:
 * each plugin has a place (`order`), its stage times 100 plus its place
 * in the stage, and the stages follow how a what-if is built up:
 *
 *   1 model       what the model computes per step (batch, sizes,
 *                 recomputation, fused or removed operators)
 *   2 precision   the dtype it computes in
 *   3 execution   how its work is issued and where tensors live (fused
 *                 optimizer, CUDA Graphs, data loading, offload)
 *   4 device      the GPU and host it runs on
 *   5 parallel    how the job is split over GPUs
 *   6 cluster     the cluster: world size, network, stragglers, contention
 *   7 adjustment  a last change to any tasks the graph holds by then
 *                 (scale: "what if these took half as long?")
 *
 * A plugin N applied after a conflicting P whose place comes later is
 * refused in one line that names the aspect, the reason and the order to
 * use.  The same plugin twice is allowed (a second ddp re-costs the
 * first's all-reduces).  Equal places (two third-party plugins) go in name
 * order.  A plugin that declares nothing (effects NULL) is neither checked
 * nor checked against: reverie cannot know what it does.
 *
 * tests/test_plugin_pairs.c holds every shipped plugin to its
 * declaration: on five traces every pair of plugins either agrees in both
 * orders within 0.1% or is refused in one.
 */
#ifndef REVERIE_COMPOSE_H
#define REVERIE_COMPOSE_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* The aspects, as bits of the masks below. */
enum {
    RV_ASPECT_HOST = 1u << 0,           /* CPU calls, their host time, data loading */
    RV_ASPECT_FORWARD = 1u << 1,        /* GPU work of the forward pass (and of an inference trace) */
    RV_ASPECT_BACKWARD = 1u << 2,       /* GPU work of the backward pass */
    RV_ASPECT_OPTIMIZER = 1u << 3,      /* GPU work of the optimizer */
    RV_ASPECT_DATA_COMM = 1u << 4,      /* data-parallel collectives, recorded or inserted */
    RV_ASPECT_TENSOR_COMM = 1u << 5,    /* tensor-parallel collectives */
    RV_ASPECT_PIPELINE_COMM = 1u << 6,  /* pipeline transfers (point to point) */
    RV_ASPECT_OTHER_COMM = 1u << 7,     /* expert / embedding all-to-all, collectives of unknown parallelism */
    RV_ASPECT_STEPS = 1u << 8,          /* what a step holds: micro-batches, stages, where its phases meet */
    RV_ASPECT_DEVICE = 1u << 9,         /* the GPU and the dtype the cost model prices kernels for */
    RV_ASPECT_MEMORY = 1u << 10,        /* the tensors the memory model counts (memory.h's effects) */
    RV_ASPECT_SCHEDULE = 1u << 11,      /* the replay's priority (sim.h) */
    RV_ASPECT_CONTENTION = 1u << 12,    /* the contention rule (contention.h) */
    RV_ASPECT_CLUSTER = 1u << 13,       /* world size, group sizes, ranks */
    RV_ASPECT_WEIGHTS = 1u << 14,       /* the model's parameters: their shapes and how they are split */
    RV_ASPECT_COUNT = 15
};

/* Shorthands. */
#define RV_ASPECT_GPU_WORK (RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_OPTIMIZER)
#define RV_ASPECT_COMM (RV_ASPECT_DATA_COMM | RV_ASPECT_TENSOR_COMM | RV_ASPECT_PIPELINE_COMM | RV_ASPECT_OTHER_COMM)
#define RV_ASPECT_TASKS (RV_ASPECT_HOST | RV_ASPECT_GPU_WORK | RV_ASPECT_COMM)

typedef enum {
    RV_STAGE_MODEL = 1,
    RV_STAGE_PRECISION = 2,
    RV_STAGE_EXECUTION = 3,
    RV_STAGE_DEVICE = 4,
    RV_STAGE_PARALLEL = 5,
    RV_STAGE_CLUSTER = 6,
    RV_STAGE_ADJUST = 7
} rv_stage;

#define RV_ORDER(stage, place) ((uint16_t)((stage) * 100 + (place)))

/* What a plugin does to a graph (above). */
typedef struct {
    uint32_t reads;
    uint32_t reads_time;
    uint32_t scales;
    uint32_t reprices;
    uint32_t rewrites;
    uint16_t order;      /* RV_ORDER(stage, place) */
} rv_plugin_effects;

/* One plugin applied to a graph so far (graph->applied). */
typedef struct {
    int32_t name;               /* string id: the plugin's name */
    uint32_t declared;          /* 0: it declared no effects */
    rv_plugin_effects effects;
} rv_applied_plugin;

/* The aspects where two declarations conflict (0: they commute). */
uint32_t rv_effects_conflict(const rv_plugin_effects *a, const rv_plugin_effects *b);

/* One aspect's name ("data-parallel collectives"), for messages. */
const char *rv_aspect_name(uint32_t aspect_bit);
/* A stage's name ("the parallel split"); "?" if unknown. */
const char *rv_stage_name(int stage);
/* Aspects as text, "forward GPU work, backward GPU work" (g_free); "nothing" if none. */
char *rv_aspects_describe(uint32_t mask);

/* May the plugin `name` with these effects be applied to the graph after
 * the plugins applied so far (graph->applied)?  FALSE with one
 * RV_ERROR_PLUGIN line naming the earlier plugin, the aspect, why the
 * orders differ and the order to use.  effects NULL: TRUE. */
gboolean rv_compose_check(const rv_graph *graph, const char *name, const rv_plugin_effects *effects, GError **error);
/* Note that the plugin was applied (effects may be NULL). */
void rv_compose_record(rv_graph *graph, const char *name, const rv_plugin_effects *effects);
/* Forget what was applied: the graph as it is counts as the recording, and
 * later plugins are checked only against each other.  For a command that
 * asks a question of a what-if's result (comm-fraction scales the compute
 * and links of the graph the --opt list made), never to let a user's
 * order through. */
void rv_compose_rebase(rv_graph *graph);

G_END_DECLS

#endif
