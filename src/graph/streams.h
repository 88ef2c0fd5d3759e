/*
 * streams.h - "which GPU task on this stream was the last one launched
 * before time t?", the question behind synchronization and cross-stream
 * edges.  Built once per graph by the builder (not public).
 */
#ifndef REVERIE_GRAPH_STREAMS_H
#define REVERIE_GRAPH_STREAMS_H

#include "build.h"

typedef struct {
    GPtrArray *launch_times;   /* per resource: GArray int64, parallel to the resource's tasks */
} stream_index;

void stream_index_init(stream_index *index, const builder *b);
void stream_index_clear(stream_index *index);
/* The last task on a GPU resource whose launch began before t, or -1.
 * Relies on a stream running its tasks in launch order (CUDA streams are FIFO). */
int32_t stream_last_launched_before(const stream_index *index, const builder *b, int32_t resource,
                                    int64_t t);
/* The first task on a GPU resource whose launch began at or after t, or -1. */
int32_t stream_first_launched_after(const stream_index *index, const builder *b, int32_t resource,
                                    int64_t t);
/* The GPU resource for (device, stream), or -1. */
int32_t builder_find_gpu_resource(const builder *b, int64_t device, int64_t stream);

/* An async copy from pageable host memory at least this large is staged
 * through pinned buffers chunk by chunk, which keeps its call busy until
 * about the copy's end (seen on V100, A100 and H100 traces: the call
 * returns 50-90 us before a 1-150 MB copy ends, while copies of 92 KB and
 * less return before their copy starts). */
#define RV_STAGED_COPY_BYTES (1024 * 1024)

typedef enum {
    RV_SYNC_RULE_CUDA_SYNC,  /* a cuda_sync record named it */
    RV_SYNC_RULE_DEVICE,     /* device synchronize, cudaFree */
    RV_SYNC_RULE_STREAM,     /* stream synchronize */
    RV_SYNC_RULE_EVENT,      /* event synchronize */
    RV_SYNC_RULE_COPY,       /* a blocking copy waits for its own copy */
    RV_SYNC_RULE_STAGED      /* a staged pageable copy: its call returns about when the copy
                                ends, a little before; not a bound on the clock offset */
} rv_sync_rule;

/* A blocking CPU call and one GPU task it waited for. */
typedef struct {
    int32_t call, awaited;
    rv_sync_rule rule;
} rv_sync_pair;

/* The passes that ask those questions.  The pairs come from the CPU side
 * alone, so they are found before the clock offset is known; splitting
 * blocking calls adds CPU tasks only, so one index built after the launch
 * edges serves every pass. */
GArray *rv_sync_pairs(const builder *b, const stream_index *index);
void rv_build_clock(builder *b, const GArray *sync_pairs);
/* How many of the other clock pairs an offset contradicts (clock.c). */
typedef guint (*rv_offset_cost)(int64_t offset, void *data);
/* The clock evidence of a GPU-bound trace (timing.c): a launch call that
 * blocked on a full queue returns just after the task `depth` launches
 * before it ends, whatever the clocks say.  For the depth whose releases
 * contradict the fewest pairs, each call in its bunch of release gaps
 * gives bounds on the offset d = GPU clock - CPU clock, appended: d >=
 * lower (the call returned after that task ended) and d <= upper (within
 * RELEASE_RETURN_MAX_NS of it).  Nothing when too few calls bunch
 * (QUEUE_MIN_AGREEING, and a quarter of the long calls). */
void rv_queue_release_bounds(const builder *b, rv_offset_cost contradicted, void *data, GArray *lower, GArray *upper);
void rv_build_sync_edges(builder *b, GArray *sync_pairs, const stream_index *streams);
void rv_build_cross_stream_edges(builder *b, const stream_index *index);
void rv_build_timing(builder *b);

#endif
