/*
 * graph.h - the dependency graph that reverie simulates and transforms.
 *
 * A graph is three flat arrays - resources, tasks and typed edges - plus the
 * recorded steps and the trace metadata.  DESIGN.md ("The dependency graph")
 * defines what each kind means; this header is the C form of that page.
 *
 * TIMING MODEL (the simulator implements it; every plugin relies on it).
 * A task's start comes from rules, never from its recorded start time:
 *
 *   CPU task t on thread r:
 *     start(t) = max(free(r), ready(t)) + host_overhead(t)
 *     and, if t launches GPU work on stream s whose launch queue holds
 *     queue_depth(s) launches, not before the GPU task launched
 *     queue_depth(s) launches earlier on s has ended (CUDA's launch queue:
 *     a launch blocks while the queue is full).
 *   GPU task t on stream s:
 *     start(t) = max(free(s), ready(t)), where a launch edge makes t ready
 *     launch_latency(s) after its launch call ends.
 *   free(r)   = end of the previous task on r, plus idle_gap(r) on a GPU
 *               stream (the inter-kernel gap of a busy stream) unless that
 *               task was a rank's arrival at a collective (job.h: the
 *               transfer that follows is the same kernel);
 *   ready(t)  = latest end (or start, for from_start edges) of t's
 *               predecessors through non-order edges;
 *   end(t)    = start(t) + duration(t).
 *
 * host_overhead_ns is the one per-task value the builder takes from recorded
 * times: the CPU time before a call on its own thread that no recorded task
 * accounts for (Python, framework dispatch).  It belongs to the call, so a
 * CPU what-if can shrink it.  launch_latency_ns, idle_gap_ns and queue_depth
 * are typical values per GPU stream, estimated from the whole trace
 * (timing.c).  Time the recording shows that these rules do not explain is
 * reported by explain.h and never replayed.  recorded_start_ns is kept for
 * reports, diagnostics and ordering; the simulator never reads it.
 * GPU recorded times are on the CPU clock: the builder estimates the offset
 * between the two clocks and subtracts it before inferring any edge.
 */
#ifndef REVERIE_GRAPH_H
#define REVERIE_GRAPH_H

#include <glib.h>
#include <stdint.h>
#include "reverie/contention.h"
#include "reverie/strings.h"
#include "reverie/trace.h"

G_BEGIN_DECLS

typedef enum { RV_RES_CPU_THREAD, RV_RES_GPU_STREAM, RV_RES_CHANNEL, RV_RES_KIND_COUNT } rv_resource_kind;

/* Where an estimated timing value comes from (`info` prints it beside the
 * value). */
typedef enum {
    RV_SOURCE_NONE,        /* not estimated (a resource a plugin added, a trace without GPU work) */
    RV_SOURCE_MEASURED,    /* from this trace: enough samples, spread given */
    RV_SOURCE_TRACE_WIDE,  /* a stream with too few samples of its own: the trace's measured value */
    RV_SOURCE_PRIOR,       /* too little evidence in the trace: a documented default (timing.c) */
    RV_SOURCE_BOUND,       /* not seen directly, but bounded by what the trace shows */
    RV_SOURCE_COUNT
} rv_estimate_source;

/* One value estimated from a trace, with its evidence. */
typedef struct {
    int64_t value;      /* ns; a launch-queue depth in launches (0: unbounded) */
    int64_t spread;     /* interquartile range of the samples, same unit; 0 when not measured */
    uint64_t samples;   /* observations it rests on */
    uint8_t source;     /* rv_estimate_source */
} rv_estimate;

typedef struct {
    int64_t process;   /* CPU: pid.  GPU: device.  channel: -1 */
    int64_t thread;    /* CPU: tid.  GPU: stream.  channel: -1 */
    /* GPU streams only (0 elsewhere): what the replay uses.  The builder
     * sets the trace's own values (timing.c); plugins may change them. */
    int64_t launch_latency_ns;  /* launch call's end -> its task's start on an idle stream */
    int64_t idle_gap_ns;        /* a task's end -> the next one's start on a busy stream */
    int32_t queue_depth;        /* launches in flight before a launch call blocks; 0: unbounded */
    int32_t name;      /* string id: "thread 1102/1262", "gpu 0 stream 7", "net" */
    uint8_t kind;      /* rv_resource_kind */
    /* Appended in ABI 4 (several ranks in one graph, job.h): the rank whose
     * thread, stream or channel this is, as an index into graph->ranks; 0 in
     * a graph of one trace; -1 for a resource of the whole job (the
     * rendezvous where a collective's participants meet). */
    int32_t rank_index;
    /* Appended in ABI 8 (GPU streams): what the trace showed for this
     * stream, the evidence behind the builder's values above. */
    rv_estimate measured_latency, measured_gap;
} rv_resource;

typedef enum {
    RV_TASK_CPU,       /* a runtime call or other CPU work */
    RV_TASK_KERNEL,
    RV_TASK_MEMCPY,
    RV_TASK_MEMSET,
    RV_TASK_SYNC,      /* the waiting part of a blocking call */
    RV_TASK_COMM,      /* a collective: NCCL kernel or an inserted transfer */
    RV_TASK_DATALOAD,  /* data-loading CPU time */
    RV_TASK_MARKER,    /* zero-length step boundary on a CPU thread */
    RV_TASK_KIND_COUNT
} rv_task_kind;

typedef enum {
    RV_PHASE_FORWARD, RV_PHASE_BACKWARD, RV_PHASE_OPTIMIZER, RV_PHASE_DATALOAD, RV_PHASE_OTHER,
    RV_PHASE_COUNT
} rv_phase;

typedef enum {
    RV_EDGE_THREAD,        /* consecutive CPU tasks on one thread */
    RV_EDGE_STREAM,        /* consecutive GPU tasks on one stream */
    RV_EDGE_LAUNCH,        /* runtime call -> the GPU task it launched */
    RV_EDGE_SYNC,          /* GPU task -> the blocking CPU call that waited for it */
    RV_EDGE_CROSS_STREAM,  /* GPU task -> GPU task on another stream that waited */
    RV_EDGE_INTER_THREAD,  /* CPU task -> CPU task on another thread that waited */
    RV_EDGE_COMM,          /* producer -> collective, and collectives across ranks */
    RV_EDGE_PLUGIN,        /* added by an optimization */
    RV_EDGE_KIND_COUNT
} rv_edge_kind;

enum {
    RV_TASK_FLAG_GPU = 1u << 0,        /* runs on a GPU stream */
    RV_TASK_FLAG_BLOCKING = 1u << 1,   /* head of a split blocking call */
    RV_TASK_FLAG_INSERTED = 1u << 2,   /* made by a plugin */
    RV_TASK_FLAG_STEP_BEGIN = 1u << 3, /* marker: a step's annotation begins */
    RV_TASK_FLAG_STEP_END = 1u << 4,   /* marker: a step's annotation ends */
    RV_TASK_FLAG_REMOVED = 1u << 5,    /* removed by a plugin; skipped by the simulator */
    /* A rank's arrival at a collective, or the moment all participants have
     * arrived (job.h): zero-length bookkeeping of the rendezvous.  No idle
     * gap follows an arrival on its stream (the transfer is the same kernel),
     * and plugins that re-cost communication leave these alone. */
    RV_TASK_FLAG_RENDEZVOUS = 1u << 6,
    /* Run from inside a torch.compile graph (its region or its autograd
     * Function encloses the call, or the call that launched the kernel). */
    RV_TASK_FLAG_COMPILED = 1u << 7
};

typedef struct {
    int64_t duration_ns;
    int64_t host_overhead_ns;   /* CPU tasks: host time before the call on its thread; else 0 */
    int64_t recorded_start_ns;  /* reports, diagnostics and ordering; GPU times clock-corrected */
    int64_t correlation;        /* launch correlation id, -1 if none */
    int64_t bytes;              /* payload where known, else 0 */
    int32_t resource;
    int32_t name;               /* string id */
    int32_t op;                 /* string id: innermost operator, 0 if none */
    int32_t layer;              /* string id: layer (module or top-level op), 0 if none */
    int32_t input_dims;         /* string id of the op's Input Dims, -1 if none */
    int32_t step;               /* index into steps, -1 if outside every step */
    uint8_t kind;               /* rv_task_kind */
    uint8_t phase;              /* rv_phase */
    uint16_t flags;
    /* Appended in ABI 4: 1 + the index of the collective this task belongs
     * to in graph->collectives (its transfer, or its arrival), 0 for none -
     * so a zero-initialised task is part of no collective.  Use
     * rv_task_collective(). */
    int32_t collective;
} rv_task;

typedef struct {
    int32_t from, to;
    uint8_t kind;        /* rv_edge_kind */
    uint8_t from_start;  /* ready at from's start rather than its end */
} rv_edge;

typedef struct {
    int32_t name;                 /* "ProfilerStep#12" */
    int64_t recorded_begin_ns;    /* annotation start */
    int64_t recorded_end_ns;      /* later of annotation end and last GPU task launched in it */
    int32_t begin_marker;         /* task ids of the boundary markers */
    int32_t end_marker;
} rv_step;

/* What the builder found, which rule explained it, and what it left out. */
typedef struct {
    uint64_t nested_runtime_calls;   /* runtime calls inside another on the same thread */
    uint64_t unmatched_gpu_tasks;    /* GPU tasks with no launch call in the trace */
    uint64_t blocking_calls_split;
    uint64_t dropped_edges;          /* candidate edges that contradict the recording */
    uint64_t overlapping_gpu_tasks;  /* GPU tasks starting before the previous ended */
    uint64_t inter_thread_inferred;  /* inter-thread edges from long gaps */
    uint64_t sync_events_used;       /* blocking calls resolved by their cuda_sync record */
    uint64_t syncs_by_api;           /* blocking calls resolved from the API's semantics, of which: */
    uint64_t syncs_device;           /*   device synchronize, cudaFree */
    uint64_t syncs_stream;           /*   stream synchronize */
    uint64_t syncs_event;            /*   event synchronize */
    uint64_t syncs_copy;             /*   blocking copies */
    uint64_t syncs_staged_copy;      /*   large pageable host-to-device copies */
    uint64_t waits_by_cuda_sync;     /* stream waits resolved by their cuda_sync record */
    uint64_t waits_by_call_order;    /* stream waits resolved from the launch order */
    uint64_t waits_unresolved;       /* stream waits with no other stream to wait for */
    uint64_t queue_blocked_launches; /* launches whose recorded time includes a full-queue wait */
    uint64_t implicit_waits;         /* fallback: calls released by a GPU task's end (time window) */
    /* Appended in ABI 8 (sync.c): */
    uint64_t syncs_contradicted;     /* waits the API is sure of that the recording contradicts (kept) */
    uint64_t syncs_rerouted;         /* stream/event syncs moved to the stream that fits the recording */
    uint64_t tails_released;         /* long returns explained by a later GPU task's end */
    uint64_t threads_started_by_step; /* threads whose first call counts from its step's start */
    uint64_t waits_by_gpu_timeline;  /* stream waits of work launched before the recording, from GPU times */
} rv_build_stats;

/* How the clock offset was estimated (clock.c). */
typedef enum {
    RV_CLOCK_NO_EVIDENCE,   /* no launch or sync pair: offset 0 assumed */
    RV_CLOCK_CONSISTENT,    /* 0 fits every launch and sync pair: no correction needed */
    RV_CLOCK_CORRECTED,     /* an offset other than 0 fits the evidence: corrected by it */
    RV_CLOCK_INCONSISTENT,  /* no single offset fits every pair: the one the fewest contradict */
    RV_CLOCK_STATUS_COUNT
} rv_clock_status;

/* The trace-wide timing estimates, for `info` and the saved graph, each
 * with its evidence (timing.c, clock.c). */
typedef struct {
    rv_estimate clock_offset;    /* subtracted from every GPU time (GPU clock minus CPU clock) */
    int64_t offset_low_ns;       /* the offset is at least this (a sync returns after what it waited for) */
    int64_t offset_high_ns;      /* and at most this (a GPU task starts after its launch began) */
    uint64_t offset_launch_pairs, offset_sync_pairs;
    uint64_t offset_contradicted; /* launch and sync pairs that the chosen offset contradicts */
    rv_estimate launch_latency;  /* typical over the trace */
    rv_estimate idle_gap;
    rv_estimate queue_depth;     /* value 0: unbounded */
    rv_estimate sync_return;     /* a blocking call's return after the GPU work it waited for ended */
    uint64_t queue_unblocked_in_flight; /* most launches seen in flight on one stream without a call blocking */
    uint8_t clock_status;        /* rv_clock_status */
    /* What the profiler's own callbacks cost the host per operator it
     * recorded (profiler.c): an upper bound from the gaps between sibling
     * operators, source RV_SOURCE_BOUND, or RV_SOURCE_NONE without enough
     * of them.  graph->host_operators says how many operators each call's
     * host overhead holds. */
    rv_estimate profiler_op_cost;
    uint64_t profiled_operators;  /* operators counted into host overheads, in all */
} rv_timing;

/* Which parallelism a collective serves, so that composed what-ifs re-cost
 * only their own (a data-parallel world size leaves tensor-parallel
 * all-reduces alone).  From the process group's name or description where
 * the trace has one; else from the operation: point-to-point is pipeline,
 * all-to-all expert (or embedding) parallel, an all-reduce launched in the
 * forward pass tensor parallel, other reductions and gathers data parallel. */
typedef enum {
    RV_PARALLEL_UNKNOWN, RV_PARALLEL_DATA, RV_PARALLEL_TENSOR, RV_PARALLEL_PIPELINE, RV_PARALLEL_EXPERT,
    RV_PARALLEL_COUNT
} rv_parallelism;

/* How a collective's participants on different ranks were found (job.h). */
typedef enum {
    RV_MATCH_NONE,       /* one rank only: nothing to match (a trace alone, or left unmatched) */
    RV_MATCH_SEQUENCE,   /* process group and sequence number from the trace */
    RV_MATCH_ORDER,      /* the k-th collective of its process group (or stream) on every rank */
    RV_MATCH_PEER,       /* point-to-point: the k-th send from a to b with the k-th receive on b from a */
    RV_MATCH_COUNT
} rv_match_rule;

/* rv_collective_info.op when the kernel is not one comm.h can cost. */
#define RV_COLLECTIVE_OP_UNKNOWN 0xFF

/* One collective: the kernels of all its participants in the graph share
 * it.  What the trace says about it (names, sizes, sequence) comes from the
 * NCCL kernel's arguments or the record_param_comms / c10d operator that
 * launched it. */
typedef struct {
    int64_t bytes;          /* payload per rank (the input buffer), 0 if unknown */
    int64_t seq;            /* sequence number in its process group, -1 if unknown */
    int32_t group;          /* string id: the process group ("0", or "stream 84" when unnamed) */
    int32_t group_size;     /* ranks in the process group, 0 if unknown */
    int32_t peer;           /* point-to-point: the other rank, else -1 */
    int32_t rendezvous;     /* task where the participants meet, -1 when unmatched */
    int32_t participants;   /* ranks of this graph that take part (1 when unmatched) */
    uint8_t op;             /* rv_collective (comm.h), or RV_COLLECTIVE_OP_UNKNOWN */
    uint8_t parallelism;    /* rv_parallelism */
    uint8_t matched_by;     /* rv_match_rule */
    uint8_t inserted;       /* 1: made by a plugin */
} rv_collective_info;

/* One rank of the job the graph holds (a graph of one trace has one). */
typedef struct {
    int64_t rank;             /* distributedInfo's rank, else the position the trace was given in */
    int64_t world_size;       /* distributedInfo's world size, -1 if absent */
    int64_t clock_offset_ns;  /* its host clock minus the job's, from collectives' common ends; already
                                 subtracted from its recorded times */
    int32_t source;           /* string id: the trace it came from */
    int32_t offset_samples;   /* common ends the offset rests on (0: none, offset 0 assumed) */
} rv_rank;

/* What the trace's [memory] events (profile_memory=True) recorded on one
 * device of one rank within one step: the caching allocator's totals after
 * each allocation and free.  memory.h reads these; the graph keeps only
 * these figures, not the events. */
typedef struct {
    int64_t peak_allocated;    /* the highest "Total Allocated" seen, bytes; -1 if no event said */
    int64_t peak_reserved;     /* the highest "Total Reserved" seen, bytes; -1 if no event said */
    int64_t allocated_before;  /* allocated before the first event (its total minus its bytes); -1 unknown */
    int64_t events;            /* allocations and frees counted */
    int64_t peak_above_start;  /* the highest running sum of the events' Bytes in time order: what was
                                  allocated above the level before the first event (old profilers write
                                  Bytes without totals, so this is known for every trace with events) */
    int32_t device;            /* the device id */
    int32_t step;              /* index into steps, -1 for events outside every step */
    int32_t rank_index;        /* index into ranks (0 in a graph of one trace) */
} rv_memory_record;

/* What an optimization did to the tensors of one operator call, for the
 * memory model (memory.h): plugins add these with rv_memory_effect_add;
 * a built or loaded graph has none. */
typedef struct {
    int32_t call;      /* the launch call (CPU task) whose tensors change; -1: every call */
    uint8_t kind;      /* rv_memory_effect_kind (memory.h) */
    int32_t segment;   /* RV_MEM_EFFECT_RECOMPUTED: the checkpoint segment; else 0 */
    double factor;     /* the _SCALE kinds: new size / recorded size */
} rv_memory_effect;

/* How a kernel was launched (trace.h's launch fields), for the cost
 * model's wave and occupancy terms (costmodel.h).  blocks is the grid in
 * blocks, whatever unit the trace wrote it in; 0 where the trace does not
 * say (copies, sets, CPU tasks, old or ROCm traces without the figure). */
typedef struct {
    uint32_t blocks;
    uint32_t threads;        /* per block */
    uint32_t registers;      /* per thread; 0: not recorded (ROCm) */
    uint32_t shared_bytes;   /* shared memory (LDS) per block, as recorded */
} rv_launch;

/* A range on a task's duration that a plugin estimated (range.h): the
 * duration times low and times high bound what the estimate allows. */
typedef struct {
    float low, high;
} rv_duration_range;

typedef struct {
    char *source;
    rv_strings *strings;
    GArray *resources;   /* rv_resource */
    GArray *tasks;       /* rv_task */
    GArray *edges;       /* rv_edge */
    GArray *steps;       /* rv_step */
    GPtrArray *device_names;
    int64_t rank, world_size;
    char *backend;
    gboolean legacy_schema;
    gboolean whole_trace_step;  /* no ProfilerStep: one step spans the trace */
    rv_trace_stats trace_stats;
    rv_build_stats build_stats;
    rv_timing timing;
    /* Private to the library: the transform API's edge index (NULL until
     * first used).  Appended last, so the fields above keep their offsets
     * and plugins built against ABI 3 still read them right. */
    struct rv_graph_index *index;
    /* Appended in ABI 4 (job.h): the collectives (rv_collective_info) and the
     * ranks (rv_rank) the graph holds. */
    GArray *collectives;
    GArray *ranks;
    /* Appended in ABI 5 (contention.h): whether communication and compute
     * on one GPU slow each other while they overlap; off in a built graph,
     * turned on by plugins. */
    rv_contention contention;
    /* Appended in ABI 6 (memory.h): rv_memory_record, one per (rank,
     * device, step) that has [memory] events; empty without them. */
    GArray *memory;
    /* Appended in ABI 7 (memory.h): rv_memory_effect, what the plugins
     * applied so far did to tensors; empty in a built graph. */
    GArray *memory_effects;
    /* Appended in ABI 8 (costmodel.h): rv_launch per task id, as recorded;
     * shorter than tasks when the last tasks have none (tasks plugins add
     * never do).  Use rv_task_launch(). */
    GArray *launches;
    /* Appended in ABI 8 (range.h): rv_duration_range per task id, set by
     * plugins that estimate durations; empty in a built graph, and a task
     * past its end has none (its duration is exact). */
    GArray *duration_ranges;
    /* Appended in ABI 8 (compose.h): rv_applied_plugin, the plugins
     * applied so far in order, so that the composition law can refuse an
     * order; empty in a built graph. */
    GArray *applied;
    /* Appended in ABI 9 (profiler.c): uint32_t per task id, how many
     * operators the profiler recorded in that CPU task's host overhead
     * (between the previous call on its thread and it); shorter than tasks
     * when the last tasks have none.  Use rv_task_profiler_overhead_ns(). */
    GArray *host_operators;
    /* Appended in ABI 9 (contention.h): whether compute kernels of
     * different streams of one GPU share its SMs and memory bandwidth while
     * they overlap (off in a built graph, turned on by concurrent-kernels),
     * and what each kernel asks of its GPU (rv_kernel_demand per task id;
     * empty in a built graph; a task past its end asks for all of it). */
    rv_sharing sharing;
    GArray *kernel_demands;
    /* Appended in ABI 12 (shapes.h): int32_t per task id, the string id of
     * the scalar arguments its outermost operator recorded that its shapes
     * need (a convolution's geometry, rv_conv_geometry), 0 for none;
     * shorter than tasks when the last tasks have none.  Use
     * rv_task_op_args(). */
    GArray *op_args;
} rv_graph;

/* Build the graph of a trace.  The graph gets its own string table, numbered
 * in order of first use (resources, tasks, steps), so that the same trace
 * always gives the same ids, whatever order the importer's threads interned
 * them in; ids of trace->strings do not apply to it. */
rv_graph *rv_graph_build(const rv_trace *trace, GError **error);
/* An empty graph sharing strings (for hand-built tests and the store). */
rv_graph *rv_graph_new(rv_strings *strings, const char *source);
void rv_graph_free(rv_graph *graph);
/* A deep copy sharing the string table (which is safe to intern into from
 * several threads), for what-ifs that must leave the original as it is. */
rv_graph *rv_graph_copy(const rv_graph *graph);
/* The trace's metadata of source into target, replacing target's: device
 * names, rank, world size, backend, schema, the import and build counters,
 * the timing estimates. */
void rv_graph_copy_metadata(rv_graph *target, const rv_graph *source);
/* Make `target` such a copy of `source`, reusing target's buffers: a sweep
 * copies the same graph once per variant. */
void rv_graph_assign(rv_graph *target, const rv_graph *source);

static inline rv_task *rv_graph_task(rv_graph *graph, int32_t id)
{
    return &g_array_index(graph->tasks, rv_task, id);
}
static inline int32_t rv_graph_task_count(const rv_graph *graph) { return (int32_t)graph->tasks->len; }
/* The collective a task belongs to, or NULL (see rv_task.collective). */
static inline rv_collective_info *rv_task_collective(const rv_graph *graph, const rv_task *task)
{
    if (task->collective <= 0 || (guint)task->collective > graph->collectives->len) return NULL;
    return &g_array_index(graph->collectives, rv_collective_info, task->collective - 1);
}
/* The rank index (into graph->ranks) of a task's resource; -1 for the job's own. */
static inline int32_t rv_task_rank_index(const rv_graph *graph, const rv_task *task)
{
    return g_array_index(graph->resources, rv_resource, task->resource).rank_index;
}
/* How a task was launched, or NULL when the trace does not say. */
static inline const rv_launch *rv_task_launch(const rv_graph *graph, int32_t task)
{
    if (task < 0 || graph->launches == NULL || (guint)task >= graph->launches->len) return NULL;
    const rv_launch *launch = &g_array_index(graph->launches, rv_launch, task);
    return launch->blocks > 0 ? launch : NULL;
}
/* Operators the profiler recorded in a CPU task's host overhead (0 when
 * the graph does not say). */
static inline uint32_t rv_task_host_operators(const rv_graph *graph, int32_t task)
{
    if (task < 0 || graph->host_operators == NULL || (guint)task >= graph->host_operators->len) return 0;
    return g_array_index(graph->host_operators, uint32_t, task);
}
/* The string id of a task's operator arguments (rv_graph.op_args), 0 for none. */
static inline int32_t rv_task_op_args(const rv_graph *graph, int32_t task)
{
    if (task < 0 || graph->op_args == NULL || (guint)task >= graph->op_args->len) return 0;
    return g_array_index(graph->op_args, int32_t, task);
}
/* Set them (0: none), growing the array with zeros as needed. */
void rv_task_set_op_args(rv_graph *graph, int32_t task, int32_t op_args);
/* The part of a task's host overhead that the profiler's own callbacks
 * may have taken: its operators times the trace's per-operator bound
 * (rv_timing.profiler_op_cost), at most the overhead itself.  An upper
 * bound; 0 when the trace gives no bound. */
int64_t rv_task_profiler_overhead_ns(const rv_graph *graph, int32_t task);
/* The same over every task not removed. */
int64_t rv_graph_profiler_overhead_ns(const rv_graph *graph);
/* The profiler's whole cost per operator over the part the trace bounds
 * (rv_timing.profiler_op_cost): the median of four host-bound jobs
 * recorded with and without the profiler on one H100 (PyTorch 2.11, shapes
 * and memory), 3.5-5.0; an H200 gave 3.8-5.2 (tests/bench/profiler_cost.py).
 * A parameter default, hence text. */
#define RV_PROFILER_WHOLE_COST "4.1"
/* The bound x whole_cost, the profiler's estimated cost per operator; -1
 * when the trace gives no bound. */
int64_t rv_profiler_op_cost_ns(const rv_graph *graph, double whole_cost);
/* Add a collective; returns the value for rv_task.collective (1 + its index). */
int32_t rv_graph_add_collective(rv_graph *graph, const rv_collective_info *info);

/* Tasks not marked removed (what info and import report). */
int32_t rv_graph_live_task_count(const rv_graph *graph);

int32_t rv_graph_add_resource(rv_graph *graph, rv_resource_kind kind, int64_t process,
                              int64_t thread, const char *name);
int32_t rv_graph_add_task(rv_graph *graph, const rv_task *task);
void rv_graph_add_edge(rv_graph *graph, int32_t from, int32_t to, rv_edge_kind kind,
                       gboolean from_start);

/* Does a runtime call of this name do work of its own after the wait it
 * implies (cudaFree, hipFree: they synchronize the device, then release
 * memory)?  Then the time it takes after the wait is its own, not a wait
 * the rules missed (sync.c, explain.h). */
gboolean rv_call_works_after_wait(const char *name);

/* Check that the graph is a DAG: Kahn's algorithm over the edge array,
 * O(V + E), no lock (cycles.c).  A cycle is reported with its tasks; an
 * edge from a task to itself is one. */
gboolean rv_graph_check_acyclic(const rv_graph *graph, GError **error);

const char *rv_task_kind_name(rv_task_kind kind);
const char *rv_phase_name(rv_phase phase);
const char *rv_edge_kind_name(rv_edge_kind kind);
const char *rv_resource_kind_name(rv_resource_kind kind);
const char *rv_clock_status_name(rv_clock_status status);
const char *rv_estimate_source_name(rv_estimate_source source);
const char *rv_parallelism_name(rv_parallelism parallelism);
const char *rv_match_rule_name(rv_match_rule rule);
/* Parse the names above back; -1 if unknown. */
int rv_task_kind_from_name(const char *name);
int rv_phase_from_name(const char *name);
int rv_parallelism_from_name(const char *name);

G_END_DECLS

#endif
