/*
 * build.h - internals of the graph builder (not public).
 *
 * Building runs in passes over one builder: tasks and launch edges
 * (build.c), the CPU/GPU clock offset (clock.c), steps (build.c),
 * layer/phase/step tags (tags.c), dependency edges (sync.c, edges.c), and
 * finally the typical GPU delays and the host overheads (timing.c).  Each
 * pass may rely on the ones before.
 */
#ifndef REVERIE_GRAPH_BUILD_H
#define REVERIE_GRAPH_BUILD_H

#include "reverie/error.h"
#include "reverie/graph.h"

/* Tolerance for clock disagreement between CPU and GPU timelines when
 * deciding whether a recorded dependency is possible. */
#define RV_CAUSAL_TOLERANCE_NS 2000

typedef struct {
    const rv_trace *trace;
    rv_graph *graph;
    GPtrArray *resource_tasks;      /* per resource: GArray of int32 task ids, in time order */
    GArray *task_event;             /* per task: index into trace->events, or -1 */
    GArray *task_launch;            /* per task: launching CPU task for GPU tasks, else -1 */
    GHashTable *cpu_by_correlation; /* correlation -> task id + 1 (the call, or its head) */
    GHashTable *gpu_by_correlation; /* correlation -> first GPU task id + 1 */
    GHashTable *cpu_resource;       /* "pid/tid" key -> resource id + 1 */
    GHashTable *gpu_resource;       /* "device/stream" key -> resource id + 1 */
    GArray *step_pids;              /* per step: pid of its annotation */
    GArray *task_comm;              /* per task: comm_scope, what the enclosing c10d operators say (tags.c) */
    int64_t origin_ns;              /* earliest recorded start of any task */
    int64_t long_launch_ns;         /* a launch call this long may have blocked (timing.c) */
    int64_t unblocked_launch_ns;    /* what a launch call costs when it does not block (timing.c) */
    GArray *return_samples;         /* int64: blocked calls' return after what they waited for (sync.c) */
} builder;

static inline const rv_event *builder_event(const builder *b, int32_t task)
{
    int32_t index = g_array_index(b->task_event, int32_t, task);
    return index >= 0 ? &g_array_index(b->trace->events, rv_event, index) : NULL;
}

static inline int64_t task_recorded_end(const rv_task *task)
{
    return task->recorded_start_ns + task->duration_ns;
}

static inline GArray *builder_resource_tasks(const builder *b, int32_t resource)
{
    return g_ptr_array_index(b->resource_tasks, resource);
}

int32_t builder_add_task(builder *b, const rv_task *task, int32_t event_index);
int32_t builder_cpu_resource(builder *b, int64_t pid, int64_t tid);
void builder_sort_resource(builder *b, int32_t resource);
gboolean builder_is_gpu_task(const rv_task *task);

/* The collective metadata (trace.h's rv_event.comm) of the innermost two
 * operators around a CPU task that carry any, -1 where there are none. */
typedef struct {
    int32_t inner, outer;
} comm_scope;

/* Scope events (operators, annotations, Python functions) per resource
 * (GPtrArray of const rv_event *), sorted by start, the longer first when
 * two start together; CPU threads only, others empty.  Free with
 * g_ptr_array_free(per_thread, TRUE). */
GPtrArray *builder_scopes_by_thread(builder *b);
void rv_build_tags(builder *b);
/* The collective of every NCCL/RCCL kernel (collectives.c), after tags. */
void rv_build_collectives(builder *b);
void rv_build_inter_thread_edges(builder *b);
/* What starts each thread (origins.c): after the inter-thread edges. */
void rv_build_thread_origins(builder *b);
/* Per resource: does the thread take part in the training loop (does
 * anything but ask: launches, copies, blocks, opens a step)?  g_free. */
gboolean *rv_build_foreground_threads(builder *b);
/* When a process's threads may start: the trace's earliest CPU call
 * (origins.c). */
int64_t rv_build_process_start(const builder *b, int64_t pid);
void rv_build_order_edges(builder *b);
/* How each kernel was launched, in blocks (launches.c), after launch edges. */
void rv_build_launches(builder *b);
/* The profiler's per-operator cost bound and each call's operators
 * (profiler.c), after the tasks are sorted. */
void rv_build_profiler_cost(builder *b);
/* Per device and step, what the [memory] events recorded (memory_records.c). */
void rv_build_memory(builder *b);

#endif
