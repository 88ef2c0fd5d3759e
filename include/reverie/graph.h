/*
 * graph.h - the dependency graph that reverie simulates and transforms.
 *
 * A graph is three flat arrays - resources, tasks and typed edges - plus the
 * recorded steps and the trace metadata.  DESIGN.md ("The dependency graph")
 * defines what each kind means; this header is the C form of that page.
 *
 * Timing model (relied on by the simulator and every plugin):
 *   start(t) = max(free(resource(t)), ready(t) + lag(t))
 *   free(r)  = end(previous task on r) + gap(previous task on r)
 *   ready(t) = max over in-edges e of end(e.from), or start(e.from) when
 *              e.from_start (a launch edge: the kernel can begin while the
 *              launch call is still returning)
 *   end(t)   = start(t) + duration(t)
 * gap_ns is idle time a resource spends after a task that no task accounts
 * for (Python overhead on a CPU thread, inter-kernel overhead on a stream).
 * lag_ns is the delay from readiness to start (launch latency, wake-up).
 * The builder derives both from the trace so that the untransformed graph
 * replays the recording; recorded_start_ns is kept for reports only and is
 * never read by the simulator.
 */
#ifndef REVERIE_GRAPH_H
#define REVERIE_GRAPH_H

#include <glib.h>
#include <stdint.h>
#include "reverie/strings.h"
#include "reverie/trace.h"

G_BEGIN_DECLS

typedef enum { RV_RES_CPU_THREAD, RV_RES_GPU_STREAM, RV_RES_CHANNEL, RV_RES_KIND_COUNT } rv_resource_kind;

typedef struct {
    int64_t process;   /* CPU: pid.  GPU: device.  channel: -1 */
    int64_t thread;    /* CPU: tid.  GPU: stream.  channel: -1 */
    int32_t name;      /* string id: "thread 1102/1262", "gpu 0 stream 7", "net" */
    uint8_t kind;      /* rv_resource_kind */
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
    RV_TASK_FLAG_REMOVED = 1u << 5     /* removed by a plugin; skipped by the simulator */
};

typedef struct {
    int64_t duration_ns;
    int64_t gap_ns;
    int64_t lag_ns;
    int64_t recorded_start_ns;  /* reports only */
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

/* What the builder found and what it had to leave out. */
typedef struct {
    uint64_t nested_runtime_calls;   /* runtime calls inside another on the same thread */
    uint64_t unmatched_gpu_tasks;    /* GPU tasks with no launch call in the trace */
    uint64_t blocking_calls_split;
    uint64_t dropped_edges;          /* candidate edges that contradict the recording */
    uint64_t overlapping_gpu_tasks;  /* GPU tasks starting before the previous ended */
    uint64_t inter_thread_inferred;  /* inter-thread edges from long gaps */
    uint64_t sync_events_used;       /* cuda_sync events that gave exact edges */
    uint64_t implicit_waits;         /* long calls released by a GPU task's end (full launch queue) */
} rv_build_stats;

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
} rv_graph;

/* Build the graph of a trace.  The graph takes a reference to trace->strings. */
rv_graph *rv_graph_build(const rv_trace *trace, GError **error);
/* An empty graph sharing strings (for hand-built tests and the store). */
rv_graph *rv_graph_new(rv_strings *strings, const char *source);
void rv_graph_free(rv_graph *graph);

static inline rv_task *rv_graph_task(rv_graph *graph, int32_t id)
{
    return &g_array_index(graph->tasks, rv_task, id);
}
static inline int32_t rv_graph_task_count(const rv_graph *graph) { return (int32_t)graph->tasks->len; }

int32_t rv_graph_add_resource(rv_graph *graph, rv_resource_kind kind, int64_t process,
                              int64_t thread, const char *name);
int32_t rv_graph_add_task(rv_graph *graph, const rv_task *task);
void rv_graph_add_edge(rv_graph *graph, int32_t from, int32_t to, rv_edge_kind kind,
                       gboolean from_start);

/* Check that the graph is a DAG (igraph).  A cycle is reported with its tasks. */
gboolean rv_graph_check_acyclic(const rv_graph *graph, GError **error);

const char *rv_task_kind_name(rv_task_kind kind);
const char *rv_phase_name(rv_phase phase);
const char *rv_edge_kind_name(rv_edge_kind kind);
const char *rv_resource_kind_name(rv_resource_kind kind);
/* Parse the names above back; -1 if unknown. */
int rv_task_kind_from_name(const char *name);
int rv_phase_from_name(const char *name);

G_END_DECLS

#endif
