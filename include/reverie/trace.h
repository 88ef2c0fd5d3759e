/*
 * trace.h - a PyTorch profiler (Kineto) trace, read into flat events.
 *
 * The importer (src/import/) turns a Chrome-trace JSON file, plain or
 * gzipped, modern or 2021-legacy schema, into an array of rv_event in file
 * order.  Everything schema-specific stops here: the category spelling, the
 * "External id" / "external id" key, string thread ids, microsecond floats.
 * Later stages see integer nanoseconds and a small closed set of kinds.
 *
 * Untidy input (events with no duration, unpaired flows, unknown
 * categories) is skipped and counted in rv_trace_stats.  Input that is not a
 * trace at all fails with one RV_ERROR_INPUT line naming the file, the event
 * index or byte offset, and the problem.
 *
 * Hostile input is bounded: the JSON text (after decompression) may not
 * exceed max_bytes, traceEvents may not hold more than max_events entries,
 * no single event or metadata value may exceed RV_IMPORT_MAX_VALUE_BYTES,
 * and values under keys the importer ignores are skipped in linear time
 * without being kept.  Each limit gives one line saying which was reached.
 */
#ifndef REVERIE_TRACE_H
#define REVERIE_TRACE_H

#include <glib.h>
#include <stdint.h>
#include "reverie/input.h"
#include "reverie/strings.h"

G_BEGIN_DECLS

typedef enum {
    RV_EV_CPU_OP,          /* cpu_op / Operator: tags only, not simulated */
    RV_EV_USER_ANNOTATION, /* user_annotation: ProfilerStep#, Optimizer.step#, DataLoader */
    RV_EV_PYTHON_FUNCTION, /* python_function: nn.Module scopes */
    RV_EV_RUNTIME,         /* cuda_runtime / cuda_driver / Runtime: a CPU task */
    RV_EV_KERNEL,          /* kernel / Kernel */
    RV_EV_MEMCPY,          /* gpu_memcpy / Memcpy */
    RV_EV_MEMSET,          /* gpu_memset / Memset */
    RV_EV_CUDA_SYNC,       /* cuda_sync: exact synchronization facts */
    RV_EV_FLOW_START,      /* ph "s" */
    RV_EV_FLOW_END,        /* ph "f" */
    /* ph "i" named "[memory]" (profile_memory=True) on a GPU: one
     * allocation (bytes > 0) or free (bytes < 0) of the caching allocator,
     * with the device's totals after it (memory.h) */
    RV_EV_MEMORY,
    RV_EV_KIND_COUNT
} rv_event_kind;

typedef enum { RV_FLOW_LAUNCH, RV_FLOW_FWDBWD, RV_FLOW_OTHER } rv_flow_category;

typedef enum {
    RV_SYNC_NONE, RV_SYNC_STREAM, RV_SYNC_CONTEXT, RV_SYNC_EVENT, RV_SYNC_STREAM_WAIT_EVENT
} rv_sync_kind;

/*
 * One event.  Invariants the importer guarantees: dur_ns >= 0; ts_ns is
 * finite; for GPU kinds device >= 0.  Fields that a kind does not have are -1.
 */
typedef struct {
    int64_t ts_ns;
    int64_t dur_ns;
    int64_t pid, tid;          /* numeric; non-numeric ids are mapped to negative ids */
    int64_t correlation;       /* links a runtime call to its GPU task */
    int64_t external_id;       /* links both to the cpu_op that issued them */
    int64_t flow_id;           /* flows only */
    int64_t bytes;             /* memcpy/memset payload; memory: "Bytes", < 0 for a free */
    union {
        struct {
            int64_t wait_on_stream;    /* cuda_sync */
            int64_t wait_on_record_correlation; /* cuda_sync: the cudaEventRecord waited on */
        };
        /* memory events only (the two kinds never meet, so they share the
         * space): the device's "Total Allocated" and "Total Reserved" after
         * the event, -1 where an old profiler did not write them */
        struct {
            int64_t total_allocated;
            int64_t total_reserved;
        };
        /* kernels only: how it was launched, as Kineto records it (grid and
         * block as written, unchanged; 0 where the trace does not say):
         * blocks = grid x*y*z, threads = block x*y*z, registers per thread,
         * shared memory per block in bytes.  ROCm's module launches write
         * the grid in work-items; the graph builder turns it into blocks. */
        struct {
            uint32_t launch_blocks;
            uint32_t launch_threads;
            uint32_t launch_registers;
            uint32_t launch_shared_bytes;
        };
    };
    /* Stream ids are kept whole: CUDA's are small, but ROCm's can be
     * pointer-sized, and cutting them could merge two streams. */
    int64_t device;            /* GPU kinds */
    int64_t stream;            /* GPU kinds and cuda_sync; -1 if unknown */
    int32_t name;              /* string id */
    int32_t input_dims;        /* string id of compact "Input Dims" JSON, or -1 */
    /* string id of what the event says about a collective, or -1: a compact
     * JSON object of the args PyTorch writes on NCCL kernels and on the
     * record_param_comms / c10d:: operators ("Collective name", "Process
     * Group Name", "Process Group Description", "Process Group Ranks",
     * "Group size", "Seq", "In msg nelems", "Out msg nelems", "dtype",
     * "Src Rank", "Dst Rank"), plus "Operator" (its name), "Input type" and
 * "Input Dims" on the operators */
    int32_t comm;
    /* string id of the operator's scalar arguments that its shapes need, or
     * -1: a convolution's geometry from its "Concrete Inputs" (shapes.h's
     * rv_conv_geometry), a compact JSON object */
    int32_t op_args;
    uint32_t file_index;       /* position in traceEvents, for messages */
    uint8_t kind;              /* rv_event_kind */
    uint8_t flow_category;     /* rv_flow_category, flows only */
    uint8_t sync_kind;         /* rv_sync_kind, cuda_sync only */
    uint8_t schema_legacy;     /* 1 if the category came from the 2021 schema */
} rv_event;

typedef struct {
    uint64_t events_total;       /* entries in traceEvents */
    uint64_t events_used;        /* kept in rv_trace.events */
    uint64_t skipped_no_duration;/* complete events without "dur" */
    uint64_t skipped_no_ph;      /* entries without a phase */
    uint64_t ignored_category;   /* complete events of categories we do not use */
    uint64_t ignored_phase;      /* metadata, instant, counter events */
    uint64_t gpu_annotations;    /* gpu_user_annotation duplicates of CPU annotations */
    uint64_t bytes_uncompressed;
    /* Of ignored_category: events of device backends reverie does not
     * model (MTIA, Gaudi, XPU, MLU, GCU, PrivateUse1: mtia_ccp_events,
     * hpu_op, ...), whose work is missing from the graph. */
    uint64_t unmodelled_backend;
} rv_trace_stats;

/* How messages name the backends counted in unmodelled_backend. */
#define RV_UNMODELLED_BACKENDS "MTIA, Gaudi, XPU, MLU, GCU or PrivateUse1 categories such as mtia_ccp_events"

typedef struct {
    char *source;                /* path as given, "<stdin>" for standard input */
    rv_strings *strings;         /* shared with the graph built from it */
    GArray *events;              /* rv_event, in file order */
    GPtrArray *device_names;     /* char*, from deviceProperties */
    int64_t rank, world_size;    /* distributedInfo, -1 if absent */
    char *backend;               /* distributedInfo.backend or NULL */
    gboolean legacy_schema;      /* any 2021-schema category seen */
    rv_trace_stats stats;
    /* Bytes the JSON scanner looked at: the text's length when scanning is
     * linear (a benchmark checks it stays so on hostile input). */
    uint64_t bytes_scanned;
} rv_trace;

typedef void (*rv_progress_fn)(uint64_t bytes_done, uint64_t events_done, void *user_data);

/* The limits applied when rv_import_options leaves them 0.  A real trace
 * of 10 million events is about 2.4 GB of JSON and needs a few GB of memory
 * to import; both limits can be raised. */
#define RV_IMPORT_DEFAULT_MAX_BYTES ((uint64_t)4 << 30)
#define RV_IMPORT_DEFAULT_MAX_EVENTS ((uint64_t)10000000)
/* One event, one metadata value: no profiler writes anything near this. */
#define RV_IMPORT_MAX_VALUE_BYTES ((gsize)64 << 20)

typedef struct {
    int threads;                 /* parser threads; 0 = number of processors */
    rv_progress_fn progress;     /* called every few MB from the calling thread */
    void *progress_data;
    uint64_t max_bytes;          /* JSON text after decompression; 0: the default above */
    uint64_t max_events;         /* entries of "traceEvents"; 0: the default above */
    int read_timeout_ms;         /* pipes and FIFOs, see input.h; 0: its default */
} rv_import_options;

/* Read a trace from a path ("-": standard input).  strings may be NULL (a
 * new table is made) or shared.  options may be NULL. */
rv_trace *rv_trace_load(const char *path, rv_strings *strings,
                        const rv_import_options *options, GError **error);

/* The same from an input already opened (and perhaps peeked at: nothing
 * peeked is lost).  The input is read to its end, not closed. */
rv_trace *rv_trace_load_input(rv_input *input, rv_strings *strings,
                              const rv_import_options *options, GError **error);
void rv_trace_free(rv_trace *trace);

const char *rv_event_kind_name(rv_event_kind kind);

G_END_DECLS

#endif
