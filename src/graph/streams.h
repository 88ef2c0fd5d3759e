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

/* The passes that ask those questions.  Splitting blocking calls adds CPU
 * tasks only, so one index built after the launch edges serves both. */
void rv_build_sync_edges(builder *b, const stream_index *index);
void rv_build_cross_stream_edges(builder *b, const stream_index *index);

#endif
