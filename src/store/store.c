/*
 * store.c - saved graphs (.rvg): import a trace once, query it many times.
 *
 * `reverie import` builds the dependency graph of a trace and saves it here;
 * every other command can then load the graph without parsing JSON again.
 * A loaded graph is indistinguishable from the one the builder made: the
 * same string ids, the same resource, task, edge and step arrays in the same
 * order, the same metadata and the same import and build counters.  Its
 * source is the path of the original trace, so reports name the recording.
 *
 * A file is trusted only after every byte of it has been checked: a
 * truncated, corrupted or foreign file gives one RV_ERROR_INPUT line that
 * names the file, the section and the problem, never a crash and never a
 * graph that differs from the one saved.
 *
 * FILE FORMAT, VERSIONS 7 TO 9 (version 1 held per-task gaps and lags derived
 * from recorded starts; version 2 holds the rules-only timing of graph.h;
 * version 3 adds the ranks of a job and its collectives, job.h; version 4
 * the recorded memory peaks, memory.h; version 5 each timing estimate with
 * its evidence, rv_estimate, and how kernels were launched, rv_launch;
 * version 6 the profiler's per-operator cost and each call's operators;
 * version 7 the operators' arguments, a convolution's geometry; version 8,
 * written only for a job whose ranks are alike, holds them once: section
 * 13 below; version 9, written only for a job of several classes of alike
 * ranks, holds each class once.  A job of one class is still written as
 * version 8 and every other graph as version 7, so that older readers
 * still read them)
 *
 * Integers are little-endian and fixed-width (u8 .. u64 unsigned, i32/i64
 * two's complement).  Nothing is padded and no C struct is written as it
 * lies in memory, so a file reads the same on every machine.  "str" is a u32
 * byte count followed by that many bytes of text, with no terminating NUL;
 * the bytes themselves contain no NUL.
 *
 * Header: 24 bytes at offset 0.
 *    0   8  magic "RVGRAPH" and a NUL byte: 52 56 47 52 41 50 48 00
 *    8   4  u32 format version: 7, 8 for a job of alike ranks, 9 for a
 *           job of several classes of alike ranks
 *   12   4  u32 section count N, 1 to 64 (version 7 writes 12, versions 8
 *           and 9 13)
 *   16   4  u32 CRC-32 of the header and the section table, with these
 *           four bytes counted as zero
 *   20   4  u32 reserved: 0
 *
 * Section table: N entries of 24 bytes, from offset 24.
 *    0   4  u32 section id (below)
 *    4   4  u32 CRC-32 of the section's bytes (zlib's crc32)
 *    8   8  u64 offset of the section from the start of the file
 *   16   8  u64 length of the section in bytes
 *
 * Sections, by id.  Each starts with a u32 record count where it has
 * records; index fields refer to positions in the other sections.
 *   1 strings    u32 count, then count x str.  Entry i is string id i of
 *                graph->strings; entry 0 is the empty string and no two
 *                entries are equal, so interning them in order gives back
 *                exactly the same ids.
 *   2 resources  u32 count, then count x 95 bytes:
 *                i64 process, i64 thread, i64 launch_latency_ns,
 *                i64 idle_gap_ns, i32 queue_depth, i32 name (string), u8 kind,
 *                i32 rank_index (a rank, or -1 for the job's own),
 *                est measured_latency, est measured_gap, where "est" (an
 *                rv_estimate) is 25 bytes: i64 value, i64 spread,
 *                u64 samples, u8 source
 *   3 tasks      u32 count, then count x 72 bytes:
 *                i64 duration_ns, i64 host_overhead_ns,
 *                i64 recorded_start_ns, i64 correlation, i64 bytes,
 *                i32 resource, i32 name, i32 op, i32 layer (strings),
 *                i32 input_dims (string or -1), i32 step (step or -1),
 *                u8 kind, u8 phase, u16 flags,
 *                i32 collective (1 + a collective, or 0)
 *   4 edges      u32 count, then count x 10 bytes:
 *                i32 from, i32 to (tasks), u8 kind, u8 from_start (0 or 1)
 *   5 steps      u32 count, then count x 28 bytes:
 *                i32 name (string), i64 recorded_begin_ns,
 *                i64 recorded_end_ns, i32 begin_marker, i32 end_marker (tasks)
 *   6 metadata   str source (the trace the graph was built from);
 *                u32 device count, then that many str device names;
 *                i64 rank; i64 world_size;
 *                u8 has_backend (0 or 1), then str backend if it is 1;
 *                u8 legacy_schema (0 or 1); u8 whole_trace_step (0 or 1);
 *                u32 9, then the 9 rv_trace_stats counters as u64 in the
 *                order of the struct (events_total .. unmodelled_backend);
 *                u32 23, then the 23 rv_build_stats counters as u64 in the
 *                order of the struct (nested_runtime_calls .. waits_by_gpu_timeline);
 *                the timing estimates (rv_timing): est clock_offset,
 *                i64 offset_low_ns, i64 offset_high_ns,
 *                u64 offset_launch_pairs, u64 offset_sync_pairs,
 *                u64 offset_contradicted, est launch_latency, est idle_gap,
 *                est queue_depth, est sync_return,
 *                u64 queue_unblocked_in_flight, u8 clock_status,
 *                est profiler_op_cost, u64 profiled_operators
 *   7 collectives u32 count, then count x 40 bytes:
 *                i64 bytes, i64 seq, i32 group (string), i32 group_size,
 *                i32 peer, i32 rendezvous (task or -1), i32 participants,
 *                u8 op, u8 parallelism, u8 matched_by, u8 inserted (0 or 1)
 *   8 ranks      u32 count, then count x 32 bytes:
 *                i64 rank, i64 world_size, i64 clock_offset_ns,
 *                i32 source (string), i32 offset_samples
 *   9 memory     u32 count, then count x 52 bytes (rv_memory_record):
 *                i64 peak_allocated, i64 peak_reserved,
 *                i64 allocated_before, i64 events, i64 peak_above_start, i32 device,
 *                i32 step (step or -1), i32 rank_index (a rank)
 *  10 launches   u32 count, then count x 20 bytes (rv_launch of the tasks
 *                that have one, in task order): i32 task, u32 blocks,
 *                u32 threads, u32 registers, u32 shared_bytes
 *  11 host operators  u32 count, then count x 8 bytes (the CPU tasks whose
 *                host overhead holds recorded operators, in task order):
 *                i32 task, u32 operators
 *  12 operator arguments  u32 count, then count x 8 bytes (the tasks
 *                whose outermost operator recorded arguments their shapes
 *                need, graph.h's op_args, in task order): i32 task,
 *                i32 string (not the empty string 0)
 *  13 alike ranks (version 8 only; alike.h) u32 ranks R, i32 tasks per
 *                rank n, i32 threads and streams per rank m, i32 steps per
 *                rank S, u32 edges per rank, u32 columns (bit 0
 *                correlation, 1 bytes, 2 step, 3 collective); then, each
 *                for every rank-local task k and rank r in the order
 *                k * R + r: i64 duration_ns, i64 host_overhead_ns,
 *                i64 recorded_start_ns, and where its bit is set i64
 *                correlation, i64 bytes, i32 step (the rank's own step
 *                index, or -1), i32 collective.  In a version 8 file the
 *                tasks, edges, launches, host operators and operator
 *                arguments sections hold the structure: rank 0's n tasks
 *                then the job's own, in the structure's numbering (a
 *                rank's thread or stream below m, the job's from m on;
 *                a task's step rank 0's), and rank 0's edges (the first
 *                "edges per rank") then the job's; the other sections hold
 *                the whole job.  The joint graph is rank r's task k at
 *                r * n + k, the job's after all ranks', rank r's resources
 *                and steps at r * m and r * S, and each rank's edges in
 *                turn, then the job's (alike.c, rv_alike_to_job).
 *                Version 9 (classes of alike ranks, alike.h): u32 ranks
 *                R, u32 classes C, u32 columns (as above); then for each
 *                class, in the order of their first members: i32 tasks
 *                n, i32 threads and streams m, i32 steps S, u32 edges,
 *                u32 members M, then M x u32 rank indices, ascending;
 *                then the columns, class by class, each for every class
 *                task k and member i in the order k * M + i.  The
 *                structure holds each class's first member's block, class
 *                by class, then the job's; a task's step is its class's
 *                (its block of steps); the joint graph holds each rank's
 *                block, of its class's sizes, in rank order.
 *
 * Invariants that a reader checks, rejecting the file otherwise:
 *   - the magic matches and the version is 7, 8 or 9 (a newer version asks the
 *     user to update reverie, the older versions 1 to 6 to re-import the
 *     trace);
 *   - the header CRC matches and the reserved field is 0;
 *   - each of the twelve ids (versions 8 and 9: thirteen) appears exactly once and
 *     no other id appears;
 *   - versions 8 and 9: the alike ranks section's counts fit the sections
 *     before it (R is the ranks section's count; every rank is in one
 *     class, members ascending, classes in the order of their first
 *     members; the ranks' tasks plus the job's fit an int32; the ranks'
 *     resources and steps are there; a class's edges are at most the edges
 *     section's and at most 16 per task), a class's edges join its tasks
 *     or the job's and the job's the job's, its tasks run on its
 *     resources (the job's on the job's) and in its steps, every meeting
 *     point is the job's task, the columns fill the rest of the section
 *     exactly, and every step column value is -1 or one of its class's;
 *     then the joint graph it stands for passes every check below;
 *   - the sections follow the table in table order with no gaps or
 *     overlaps, and the file ends exactly where the last section ends;
 *   - every section's CRC matches;
 *   - every record count agrees with its section's length exactly, and every
 *     section is consumed to its last byte;
 *   - every kind, phase, edge kind, clock status and estimate source is
 *     below its *_COUNT enum, task flags use only the bits graph.h defines, flags stored as
 *     u8 are 0 or 1;
 *   - a resource's launch latency and idle gap lie in [0, 1 s] and its queue
 *     depth is not negative;
 *   - every string id is below the string count (input_dims may be -1),
 *     every task's resource is a resource, every edge endpoint a task, every
 *     task's step a step or -1, and every step marker a task (the step
 *     report reads the markers unconditionally, so -1 is not allowed);
 *   - every resource's rank index a rank (or -1), every task's collective
 *     a collective (or 0), every collective's meeting point a task (or -1)
 *     and its kinds below their *_COUNT;
 *   - every memory record's step a step or -1, its rank index a rank (or 0
 *     in a graph without ranks), its device in [0, 4096), its figures in
 *     [-1, 2^53] and its event count not negative;
 *   - launch records name tasks in increasing order, each with blocks and
 *     threads above 0; host-operator records likewise, each count above 0;
 *   - the profiler's per-operator cost lies in [0, 1 s];
 *   - durations and host overheads are not negative and add up, over all
 *     tasks, to less than 2^61 ns; recorded task starts and step begin and end
 *     times lie in [-2^60, 2^62) ns.  Any real recording is far inside
 *     these bounds; they keep the replay's and the reports' int64 sums
 *     from overflowing on a forged file.
 * The writer runs the same graph checks before writing, so it never writes
 * a file that the reader would reject.
 *
 * Compatibility: any change to this layout bumps the version.  Readers
 * reject unknown section ids rather than skip them, because a section they
 * do not understand may change what the graph means.
 */
#include "reverie/store.h"
#include "reverie/alike.h"
#include "reverie/job.h"
#include "reverie/output.h"
#include "reverie/validate.h"
#include "reverie/error.h"
#include "reverie/checked.h"
#include "../util/columns.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <zlib.h>

#define RVG_VERSION 9u         /* a job of several classes of alike ranks, held once per class (alike.h) */
#define RVG_ALIKE_VERSION 8u   /* a job of one class of alike ranks: the layout of version 8, which older readers read */
#define RVG_FLAT_VERSION 7u    /* every other graph: the layout of version 7, which older readers read */
#define RVG_HEADER_SIZE 24u
#define RVG_ENTRY_SIZE 24u
#define RVG_MAX_SECTIONS 64u
#define RVG_RESOURCE_SIZE 95u
#define RVG_TASK_SIZE 72u
#define RVG_EDGE_SIZE 10u
#define RVG_STEP_SIZE 28u
#define RVG_COLLECTIVE_SIZE 40u
#define RVG_RANK_SIZE 32u
#define RVG_MEMORY_SIZE 52u
#define RVG_LAUNCH_SIZE 20u
#define RVG_HOST_OPERATORS_SIZE 8u
#define RVG_OP_ARGS_SIZE 8u
/* Bounds on times that keep every sum the simulator and the step report
 * form inside int64: recorded times lie in [-2^60, 2^62) ns (2^62 ns after
 * the epoch is the year 2116), and the durations and host overheads of all
 * tasks add up to less than 2^61 ns (73 years).  A stream's typical delays
 * are at most a second.  A replay never exceeds the
 * total work, and a recorded time plus a duration minus another recorded
 * time stays below 2^63. */
#define RVG_RECORDED_MIN_NS (-((int64_t)1 << 60))
#define RVG_RECORDED_MAX_NS ((int64_t)1 << 62)
#define RVG_WORK_MAX_NS ((uint64_t)1 << 61)
#define RVG_STREAM_DELAY_MAX_NS ((int64_t)1000000000)
/* Every flag graph.h defines; anything else in a file is corruption. */
#define RVG_KNOWN_TASK_FLAGS ((uint16_t)((RV_TASK_FLAG_COMPILED << 1) - 1))

static const guint8 rvg_magic[8] = { 'R', 'V', 'G', 'R', 'A', 'P', 'H', '\0' };

enum {
    SECTION_STRINGS = 1,
    SECTION_RESOURCES,
    SECTION_TASKS,
    SECTION_EDGES,
    SECTION_STEPS,
    SECTION_METADATA,
    SECTION_COLLECTIVES,
    SECTION_RANKS,
    SECTION_MEMORY,
    SECTION_LAUNCHES,
    SECTION_HOST_OPERATORS,
    SECTION_OP_ARGS,
    SECTION_COUNT = SECTION_OP_ARGS,  /* the sections of every file */
    SECTION_ALIKE,                    /* versions 8 and 9 only */
    SECTION_MAX = SECTION_ALIKE
};

static const char *const section_names[SECTION_MAX + 1] = {
    "?", "strings", "resources", "tasks", "edges", "steps", "metadata", "collectives", "ranks", "memory",
    "launches", "host operators", "operator arguments", "alike ranks",
};

/* The alike ranks section's columns beyond duration, host overhead and
 * recorded start: a bit each, set where some rank's differs. */
enum { ALIKE_CORRELATION = 1, ALIKE_BYTES = 2, ALIKE_STEP = 4, ALIKE_COLLECTIVE = 8, ALIKE_COLUMNS = 15 };

/* The counters of the metadata section, in file order. */
static const size_t trace_stat_offsets[] = {
    offsetof(rv_trace_stats, events_total),      offsetof(rv_trace_stats, events_used),
    offsetof(rv_trace_stats, skipped_no_duration), offsetof(rv_trace_stats, skipped_no_ph),
    offsetof(rv_trace_stats, ignored_category),  offsetof(rv_trace_stats, ignored_phase),
    offsetof(rv_trace_stats, gpu_annotations),   offsetof(rv_trace_stats, bytes_uncompressed),
    offsetof(rv_trace_stats, unmodelled_backend),
};
static const size_t build_stat_offsets[] = {
    offsetof(rv_build_stats, nested_runtime_calls), offsetof(rv_build_stats, unmatched_gpu_tasks),
    offsetof(rv_build_stats, blocking_calls_split), offsetof(rv_build_stats, dropped_edges),
    offsetof(rv_build_stats, overlapping_gpu_tasks), offsetof(rv_build_stats, inter_thread_inferred),
    offsetof(rv_build_stats, sync_events_used), offsetof(rv_build_stats, syncs_by_api),
    offsetof(rv_build_stats, syncs_device), offsetof(rv_build_stats, syncs_stream),
    offsetof(rv_build_stats, syncs_event), offsetof(rv_build_stats, syncs_copy),
    offsetof(rv_build_stats, syncs_staged_copy),
    offsetof(rv_build_stats, waits_by_cuda_sync), offsetof(rv_build_stats, waits_by_call_order),
    offsetof(rv_build_stats, waits_unresolved),
    offsetof(rv_build_stats, queue_blocked_launches), offsetof(rv_build_stats, implicit_waits),
    offsetof(rv_build_stats, syncs_contradicted), offsetof(rv_build_stats, syncs_rerouted),
    offsetof(rv_build_stats, tails_released), offsetof(rv_build_stats, threads_started_by_step),
    offsetof(rv_build_stats, waits_by_gpu_timeline),
};
G_STATIC_ASSERT(sizeof(rv_trace_stats) == sizeof trace_stat_offsets / sizeof(size_t) * sizeof(uint64_t));
G_STATIC_ASSERT(sizeof(rv_build_stats) == sizeof build_stat_offsets / sizeof(size_t) * sizeof(uint64_t));
/* Tripwires: a field added to a graph struct changes its size.  Save the new
 * field here, document it above, and bump RVG_VERSION; then update these. */
#if GLIB_SIZEOF_VOID_P == 8
G_STATIC_ASSERT(sizeof(rv_resource) == 112);
G_STATIC_ASSERT(sizeof(rv_task) == 72);
G_STATIC_ASSERT(sizeof(rv_edge) == 12);
G_STATIC_ASSERT(sizeof(rv_step) == 32);
G_STATIC_ASSERT(sizeof(rv_estimate) == 32);
G_STATIC_ASSERT(sizeof(rv_timing) == 256);
G_STATIC_ASSERT(sizeof(rv_collective_info) == 40);
G_STATIC_ASSERT(sizeof(rv_rank) == 32);
G_STATIC_ASSERT(sizeof(rv_memory_record) == 56);
G_STATIC_ASSERT(sizeof(rv_launch) == 16);
/* graph->index (at 600), a cache, is not saved; nor graph->contention (at
 * 624): only plugins turn it on, and a saved graph is an imported one.
 * graph->memory (at 648) is the memory section.  graph->memory_effects (at
 * 656) is not saved either: plugins make them.  graph->launches (at 664)
 * is the launches section; graph->duration_ranges (at 672) is not saved:
 * plugins make them; nor graph->applied (at 680), the plugins applied so
 * far.  graph->host_operators (at 688) is the host operators section.
 * graph->sharing and graph->kernel_demands (at 696 and 704) are not saved:
 * only plugins set them.  graph->op_args (at 712) is the operator
 * arguments section. */
G_STATIC_ASSERT(sizeof(rv_graph) == 720);
#endif

typedef struct {
    uint32_t id;
    uint32_t crc;
    uint64_t offset;
    uint64_t length;
} section_entry;

static uint32_t crc_of(const guint8 *data, gsize length)
{
    return (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), data, length);
}

/* The header CRC covers the header and table with the CRC field as zero. */
static uint32_t header_crc(const guint8 *data, gsize table_end)
{
    static const guint8 zero[4] = { 0 };
    uLong crc = crc32_z(0L, Z_NULL, 0);
    crc = crc32_z(crc, data, 16);
    crc = crc32_z(crc, zero, 4);
    crc = crc32_z(crc, data + 20, table_end - 20);
    return (uint32_t)crc;
}

/* ---- graph checks, shared by the writer and the reader ---------------- */

static gboolean string_ok(int32_t id, int32_t string_count)
{
    return id >= 0 && id < string_count;
}

static gboolean check_resources(const rv_graph *graph, int32_t string_count, GString *why)
{
    for (guint r = 0; r < graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        if (resource->kind >= RV_RES_KIND_COUNT)
            g_string_printf(why, "resource %u has kind %u (there are %d kinds)", r, resource->kind, RV_RES_KIND_COUNT);
        else if (resource->launch_latency_ns < 0 || resource->launch_latency_ns > RVG_STREAM_DELAY_MAX_NS ||
                 resource->idle_gap_ns < 0 || resource->idle_gap_ns > RVG_STREAM_DELAY_MAX_NS ||
                 resource->queue_depth < 0)
            g_string_printf(why, "resource %u has impossible timing (launch latency %" G_GINT64_FORMAT
                            " ns, idle gap %" G_GINT64_FORMAT " ns, queue depth %d)", r,
                            resource->launch_latency_ns, resource->idle_gap_ns, resource->queue_depth);
        else if (!string_ok(resource->name, string_count))
            g_string_printf(why, "resource %u names string %d (there are %d strings)", r, resource->name, string_count);
        else if (resource->measured_latency.source >= RV_SOURCE_COUNT || resource->measured_gap.source >= RV_SOURCE_COUNT)
            g_string_printf(why, "resource %u has an estimate of unknown source (there are %d)", r, RV_SOURCE_COUNT);
        else if (resource->rank_index < -1 || (resource->rank_index >= 0 &&
                                               (guint)resource->rank_index >= MAX(graph->ranks->len, 1)))
            g_string_printf(why, "resource %u belongs to rank index %d (there are %u ranks)", r, resource->rank_index,
                            graph->ranks->len);
        else
            continue;
        return FALSE;
    }
    return TRUE;
}

/* The string fields of a task; input_dims may also be -1 (no shapes). */
static gboolean check_task_strings(const rv_task *task, int32_t id, int32_t string_count, GString *why)
{
    const struct { const char *field; int32_t value; } fields[] = {
        { "name", task->name }, { "op", task->op }, { "layer", task->layer },
        { "input_dims", task->input_dims == -1 ? 0 : task->input_dims },
    };
    for (gsize f = 0; f < G_N_ELEMENTS(fields); f++) {
        if (string_ok(fields[f].value, string_count)) continue;
        g_string_printf(why, "task %d: %s is string %d (there are %d strings)", id, fields[f].field,
                        fields[f].value, string_count);
        return FALSE;
    }
    return TRUE;
}

static gboolean recorded_time_ok(int64_t ns)
{
    return ns >= RVG_RECORDED_MIN_NS && ns < RVG_RECORDED_MAX_NS;
}

/* Times are non-negative and, added up over the graph (*work), small enough
 * that no replay or report sum can overflow. */
static gboolean check_task_times(const rv_task *task, int32_t id, uint64_t *work, GString *why)
{
    if (task->duration_ns < 0 || task->host_overhead_ns < 0) {
        g_string_printf(why, "task %d has a negative time (duration %" G_GINT64_FORMAT ", host overhead %"
                        G_GINT64_FORMAT " ns)", id, task->duration_ns, task->host_overhead_ns);
        return FALSE;
    }
    if (!recorded_time_ok(task->recorded_start_ns)) {
        g_string_printf(why, "task %d was recorded at an impossible time (%" G_GINT64_FORMAT " ns)", id,
                        task->recorded_start_ns);
        return FALSE;
    }
    /* Each term is checked before it is added, so the sum cannot wrap. */
    const int64_t terms[] = { task->duration_ns, task->host_overhead_ns };
    for (gsize i = 0; i < G_N_ELEMENTS(terms); i++) {
        if ((uint64_t)terms[i] >= RVG_WORK_MAX_NS - *work) {
            g_string_printf(why, "the durations and host overheads of tasks 0 to %d add up to more than 2^61 ns", id);
            return FALSE;
        }
        *work += (uint64_t)terms[i];
    }
    return TRUE;
}

static gboolean check_task(const rv_graph *graph, int32_t id, int32_t string_count, uint64_t *work, GString *why)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    if (task->resource < 0 || (guint)task->resource >= graph->resources->len)
        g_string_printf(why, "task %d runs on resource %d (there are %u resources)", id, task->resource,
                        graph->resources->len);
    else if (task->kind >= RV_TASK_KIND_COUNT)
        g_string_printf(why, "task %d has kind %u (there are %d kinds)", id, task->kind, RV_TASK_KIND_COUNT);
    else if (task->phase >= RV_PHASE_COUNT)
        g_string_printf(why, "task %d has phase %u (there are %d phases)", id, task->phase, RV_PHASE_COUNT);
    else if (task->flags & ~RVG_KNOWN_TASK_FLAGS)
        g_string_printf(why, "task %d has unknown flags 0x%x", id, task->flags & ~RVG_KNOWN_TASK_FLAGS);
    else if (task->step < -1 || (task->step >= 0 && (guint)task->step >= graph->steps->len))
        g_string_printf(why, "task %d belongs to step %d (there are %u steps)", id, task->step, graph->steps->len);
    else if (task->collective < 0 || (guint)task->collective > graph->collectives->len)
        g_string_printf(why, "task %d belongs to collective %" G_GINT64_FORMAT " (there are %u)", id,
                        (int64_t)task->collective - 1, graph->collectives->len);
    else
        return check_task_strings(task, id, string_count, why) && check_task_times(task, id, work, why);
    return FALSE;
}

static gboolean check_tasks(const rv_graph *graph, int32_t string_count, GString *why)
{
    uint64_t work = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
        if (!check_task(graph, id, string_count, &work, why)) return FALSE;
    return TRUE;
}

static gboolean task_ok(const rv_graph *graph, int32_t id)
{
    return id >= 0 && id < rv_graph_task_count(graph);
}

static gboolean check_edges(const rv_graph *graph, GString *why)
{
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (!task_ok(graph, edge->from) || !task_ok(graph, edge->to))
            g_string_printf(why, "edge %u joins tasks %d -> %d (there are %d tasks)", e, edge->from, edge->to,
                            rv_graph_task_count(graph));
        else if (edge->kind >= RV_EDGE_KIND_COUNT)
            g_string_printf(why, "edge %u has kind %u (there are %d kinds)", e, edge->kind, RV_EDGE_KIND_COUNT);
        else if (edge->from_start > 1)
            g_string_printf(why, "edge %u has from_start %u (must be 0 or 1)", e, edge->from_start);
        else
            continue;
        return FALSE;
    }
    return TRUE;
}

static gboolean check_steps(const rv_graph *graph, int32_t string_count, GString *why)
{
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        if (!string_ok(step->name, string_count))
            g_string_printf(why, "step %u names string %d (there are %d strings)", s, step->name, string_count);
        else if (!task_ok(graph, step->begin_marker) || !task_ok(graph, step->end_marker))
            g_string_printf(why, "step %u has marker tasks %d and %d (there are %d tasks)", s, step->begin_marker,
                            step->end_marker, rv_graph_task_count(graph));
        else if (!recorded_time_ok(step->recorded_begin_ns) || !recorded_time_ok(step->recorded_end_ns))
            g_string_printf(why, "step %u was recorded at impossible times (%" G_GINT64_FORMAT " to %"
                            G_GINT64_FORMAT " ns)", s, step->recorded_begin_ns, step->recorded_end_ns);
        else
            continue;
        return FALSE;
    }
    return TRUE;
}

static gboolean check_collectives(const rv_graph *graph, int32_t string_count, GString *why)
{
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        if (!string_ok(info->group, string_count))
            g_string_printf(why, "collective %u names string %d (there are %d strings)", c, info->group, string_count);
        else if (info->rendezvous < -1 || (info->rendezvous >= 0 && !task_ok(graph, info->rendezvous)))
            g_string_printf(why, "collective %u meets at task %d (there are %d tasks)", c, info->rendezvous,
                            rv_graph_task_count(graph));
        else if (info->parallelism >= RV_PARALLEL_COUNT || info->matched_by >= RV_MATCH_COUNT || info->inserted > 1 ||
                 info->bytes < 0 || info->group_size < 0 || info->participants < 0)
            g_string_printf(why, "collective %u has an impossible kind, size or count", c);
        else
            continue;
        return FALSE;
    }
    return TRUE;
}

static gboolean check_ranks(const rv_graph *graph, int32_t string_count, GString *why)
{
    for (guint r = 0; r < graph->ranks->len; r++) {
        const rv_rank *rank = &g_array_index(graph->ranks, rv_rank, r);
        if (!string_ok(rank->source, string_count))
            g_string_printf(why, "rank index %u names string %d (there are %d strings)", r, rank->source, string_count);
        else if (rank->offset_samples < 0 || !recorded_time_ok(rank->clock_offset_ns) ||
                 !recorded_time_ok(-rank->clock_offset_ns))
            g_string_printf(why, "rank index %u has an impossible clock offset", r);
        else
            continue;
        return FALSE;
    }
    return TRUE;
}

static gboolean memory_figure_ok(int64_t bytes) { return bytes >= -1 && bytes <= RV_MAX_BYTES; }

static gboolean check_memory(const rv_graph *graph, GString *why)
{
    for (guint i = 0; i < graph->memory->len; i++) {
        const rv_memory_record *record = &g_array_index(graph->memory, rv_memory_record, i);
        if (record->step < -1 || (record->step >= 0 && (guint)record->step >= graph->steps->len))
            g_string_printf(why, "record %u names step %d (there are %u steps)", i, record->step, graph->steps->len);
        else if (record->rank_index < 0 || (guint)record->rank_index >= MAX(graph->ranks->len, 1))
            g_string_printf(why, "record %u belongs to rank index %d (there are %u ranks)", i, record->rank_index,
                            graph->ranks->len);
        else if (record->device < 0 || record->device >= 4096)
            g_string_printf(why, "record %u names device %d", i, record->device);
        else if (!memory_figure_ok(record->peak_allocated) || !memory_figure_ok(record->peak_reserved) ||
                 !memory_figure_ok(record->allocated_before) || record->events < 0 ||
                 record->peak_above_start < 0 || record->peak_above_start > RV_MAX_BYTES)
            g_string_printf(why, "record %u holds an impossible byte count", i);
        else
            continue;
        return FALSE;
    }
    return TRUE;
}

static gboolean check_launches(const rv_graph *graph, GString *why)
{
    if (graph->launches->len > graph->tasks->len) {
        g_string_printf(why, "%u launch records for %u tasks", graph->launches->len, graph->tasks->len);
        return FALSE;
    }
    for (guint i = 0; i < graph->launches->len; i++) {
        const rv_launch *launch = &g_array_index(graph->launches, rv_launch, i);
        if ((launch->blocks == 0) != (launch->threads == 0)) {
            g_string_printf(why, "task %u's launch has %u blocks of %u threads", i, launch->blocks, launch->threads);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean check_host_operators(const rv_graph *graph, GString *why)
{
    if (graph->host_operators->len > graph->tasks->len) {
        g_string_printf(why, "%u host-operator counts for %u tasks", graph->host_operators->len, graph->tasks->len);
        return FALSE;
    }
    return TRUE;
}

static gboolean check_op_args(const rv_graph *graph, int32_t string_count, GString *why)
{
    if (graph->op_args->len > graph->tasks->len) {
        g_string_printf(why, "%u operator-argument records for %u tasks", graph->op_args->len, graph->tasks->len);
        return FALSE;
    }
    for (guint i = 0; i < graph->op_args->len; i++) {
        int32_t id = g_array_index(graph->op_args, int32_t, i);
        if (id < 0 || id >= string_count) {
            g_string_printf(why, "task %u's arguments name string %d (of %d)", i, id, string_count);
            return FALSE;
        }
    }
    return TRUE;
}

/* NULL if the graph is consistent, else the section at fault with *why. */
static const char *check_graph(const rv_graph *graph, GString *why)
{
    int32_t string_count = rv_strings_count(graph->strings);
    if (!check_resources(graph, string_count, why)) return section_names[SECTION_RESOURCES];
    if (!check_tasks(graph, string_count, why)) return section_names[SECTION_TASKS];
    if (!check_edges(graph, why)) return section_names[SECTION_EDGES];
    if (!check_steps(graph, string_count, why)) return section_names[SECTION_STEPS];
    if (!check_collectives(graph, string_count, why)) return section_names[SECTION_COLLECTIVES];
    if (!check_ranks(graph, string_count, why)) return section_names[SECTION_RANKS];
    if (!check_memory(graph, why)) return section_names[SECTION_MEMORY];
    if (!check_launches(graph, why)) return section_names[SECTION_LAUNCHES];
    if (!check_host_operators(graph, why)) return section_names[SECTION_HOST_OPERATORS];
    if (!check_op_args(graph, string_count, why)) return section_names[SECTION_OP_ARGS];
    return NULL;
}

/* ---- writing ------------------------------------------------------------ */

static void put_le(GString *out, uint64_t value, int width)
{
    char bytes[8];
    for (int i = 0; i < width; i++) bytes[i] = (char)(value >> (8 * i));
    g_string_append_len(out, bytes, width);
}
static void put_u8(GString *out, uint8_t value) { put_le(out, value, 1); }
static void put_u16(GString *out, uint16_t value) { put_le(out, value, 2); }
static void put_u32(GString *out, uint32_t value) { put_le(out, value, 4); }
static void put_i32(GString *out, int32_t value) { put_le(out, (uint32_t)value, 4); }
static void put_u64(GString *out, uint64_t value) { put_le(out, value, 8); }
static void put_i64(GString *out, int64_t value) { put_le(out, (uint64_t)value, 8); }

static void put_str(GString *out, const char *text)
{
    gsize length = strlen(text);
    put_u32(out, (uint32_t)length);
    g_string_append_len(out, text, (gssize)length);
}

/* Overwrite bytes already written (the header, once the sections are known). */
static void patch_le(GString *out, gsize at, uint64_t value, int width)
{
    for (int i = 0; i < width; i++) out->str[at + i] = (char)(value >> (8 * i));
}

/*
 * Where a section's bytes go: a small buffer, spilled every megabyte into
 * the section's running CRC and length and, when `file` is set, the file.
 * So a graph is saved without its whole file in memory (a job of many
 * ranks is as large as its graph again): the sections are encoded once to
 * learn their CRCs and lengths for the table at the front, and again to be
 * written.
 */
typedef struct {
    GString *buffer;
    FILE *file;          /* NULL: only measure */
    uLong crc;
    guint64 length;
    gboolean write_failed;
} rvg_sink;

enum { SINK_SPILL_BYTES = 1 << 20 };

static void sink_flush(rvg_sink *sink)
{
    if (sink->buffer->len == 0) return;
    sink->crc = crc32_z(sink->crc, (const Bytef *)sink->buffer->str, sink->buffer->len);
    sink->length += sink->buffer->len;
    if (sink->file != NULL && !sink->write_failed &&
        fwrite(sink->buffer->str, 1, sink->buffer->len, sink->file) != sink->buffer->len)
        sink->write_failed = TRUE;
    g_string_truncate(sink->buffer, 0);
}

/* Called once per record: cheap unless the buffer is full. */
static inline void sink_spill(rvg_sink *sink)
{
    if (sink->buffer->len >= SINK_SPILL_BYTES) sink_flush(sink);
}

static void write_strings(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    int32_t count = rv_strings_count(graph->strings);
    put_u32(out, (uint32_t)count);
    for (int32_t id = 0; id < count; id++) {
        sink_spill(sink);
        put_str(out, rv_strings_get(graph->strings, id));
    }
}

/* An rv_estimate: i64 value, i64 spread, u64 samples, u8 source. */
static void put_estimate(GString *out, const rv_estimate *estimate)
{
    put_i64(out, estimate->value);
    put_i64(out, estimate->spread);
    put_u64(out, estimate->samples);
    put_u8(out, estimate->source);
}

static void write_resources(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    put_u32(out, graph->resources->len);
    for (guint r = 0; r < graph->resources->len; r++) {
        sink_spill(sink);
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        put_i64(out, resource->process);
        put_i64(out, resource->thread);
        put_i64(out, resource->launch_latency_ns);
        put_i64(out, resource->idle_gap_ns);
        put_i32(out, resource->queue_depth);
        put_i32(out, resource->name);
        put_u8(out, resource->kind);
        put_i32(out, resource->rank_index);
        put_estimate(out, &resource->measured_latency);
        put_estimate(out, &resource->measured_gap);
    }
}

static void write_tasks(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    put_u32(out, graph->tasks->len);
    for (guint t = 0; t < graph->tasks->len; t++) {
        sink_spill(sink);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        put_i64(out, task->duration_ns);
        put_i64(out, task->host_overhead_ns);
        put_i64(out, task->recorded_start_ns);
        put_i64(out, task->correlation);
        put_i64(out, task->bytes);
        put_i32(out, task->resource);
        put_i32(out, task->name);
        put_i32(out, task->op);
        put_i32(out, task->layer);
        put_i32(out, task->input_dims);
        put_i32(out, task->step);
        put_u8(out, task->kind);
        put_u8(out, task->phase);
        put_u16(out, task->flags);
        put_i32(out, task->collective);
    }
}

static void write_edges(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    put_u32(out, graph->edges->len);
    for (guint e = 0; e < graph->edges->len; e++) {
        sink_spill(sink);
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        put_i32(out, edge->from);
        put_i32(out, edge->to);
        put_u8(out, edge->kind);
        put_u8(out, edge->from_start);
    }
}

static void write_steps(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    put_u32(out, graph->steps->len);
    for (guint s = 0; s < graph->steps->len; s++) {
        sink_spill(sink);
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        put_i32(out, step->name);
        put_i64(out, step->recorded_begin_ns);
        put_i64(out, step->recorded_end_ns);
        put_i32(out, step->begin_marker);
        put_i32(out, step->end_marker);
    }
}

static void write_counters(GString *out, const void *stats, const size_t *offsets, gsize count)
{
    put_u32(out, (uint32_t)count);
    for (gsize i = 0; i < count; i++) put_u64(out, *(const uint64_t *)((const char *)stats + offsets[i]));
}

static void write_timing(GString *out, const rv_timing *timing)
{
    put_estimate(out, &timing->clock_offset);
    put_i64(out, timing->offset_low_ns);
    put_i64(out, timing->offset_high_ns);
    put_u64(out, timing->offset_launch_pairs);
    put_u64(out, timing->offset_sync_pairs);
    put_u64(out, timing->offset_contradicted);
    put_estimate(out, &timing->launch_latency);
    put_estimate(out, &timing->idle_gap);
    put_estimate(out, &timing->queue_depth);
    put_estimate(out, &timing->sync_return);
    put_u64(out, timing->queue_unblocked_in_flight);
    put_u8(out, timing->clock_status);
    put_estimate(out, &timing->profiler_op_cost);
    put_u64(out, timing->profiled_operators);
}

static void write_metadata(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    put_str(out, graph->source ? graph->source : "");
    put_u32(out, graph->device_names->len);
    for (guint d = 0; d < graph->device_names->len; d++)
        put_str(out, g_ptr_array_index(graph->device_names, d));
    put_i64(out, graph->rank);
    put_i64(out, graph->world_size);
    put_u8(out, graph->backend != NULL);
    if (graph->backend != NULL) put_str(out, graph->backend);
    put_u8(out, graph->legacy_schema ? 1 : 0);
    put_u8(out, graph->whole_trace_step ? 1 : 0);
    write_counters(out, &graph->trace_stats, trace_stat_offsets, G_N_ELEMENTS(trace_stat_offsets));
    write_counters(out, &graph->build_stats, build_stat_offsets, G_N_ELEMENTS(build_stat_offsets));
    write_timing(out, &graph->timing);
}

static void write_collectives(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    put_u32(out, graph->collectives->len);
    for (guint c = 0; c < graph->collectives->len; c++) {
        sink_spill(sink);
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        put_i64(out, info->bytes);
        put_i64(out, info->seq);
        put_i32(out, info->group);
        put_i32(out, info->group_size);
        put_i32(out, info->peer);
        put_i32(out, info->rendezvous);
        put_i32(out, info->participants);
        put_u8(out, info->op);
        put_u8(out, info->parallelism);
        put_u8(out, info->matched_by);
        put_u8(out, info->inserted);
    }
}

static void write_ranks(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    put_u32(out, graph->ranks->len);
    for (guint r = 0; r < graph->ranks->len; r++) {
        sink_spill(sink);
        const rv_rank *rank = &g_array_index(graph->ranks, rv_rank, r);
        put_i64(out, rank->rank);
        put_i64(out, rank->world_size);
        put_i64(out, rank->clock_offset_ns);
        put_i32(out, rank->source);
        put_i32(out, rank->offset_samples);
    }
}

static void write_memory(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    put_u32(out, graph->memory->len);
    for (guint i = 0; i < graph->memory->len; i++) {
        sink_spill(sink);
        const rv_memory_record *record = &g_array_index(graph->memory, rv_memory_record, i);
        put_i64(out, record->peak_allocated);
        put_i64(out, record->peak_reserved);
        put_i64(out, record->allocated_before);
        put_i64(out, record->events);
        put_i64(out, record->peak_above_start);
        put_i32(out, record->device);
        put_i32(out, record->step);
        put_i32(out, record->rank_index);
    }
}

static void write_launches(rvg_sink *sink, const rv_graph *graph)
{
    GString *out = sink->buffer;
    guint count = 0;
    for (guint i = 0; i < graph->launches->len; i++) count += g_array_index(graph->launches, rv_launch, i).blocks > 0;
    put_u32(out, count);
    for (guint i = 0; i < graph->launches->len; i++) {
        sink_spill(sink);
        const rv_launch *launch = &g_array_index(graph->launches, rv_launch, i);
        if (launch->blocks == 0) continue;
        put_i32(out, (int32_t)i);
        put_u32(out, launch->blocks);
        put_u32(out, launch->threads);
        put_u32(out, launch->registers);
        put_u32(out, launch->shared_bytes);
    }
}

/* A dense per-task array of 4-byte values, 0 for none, as sparse (task,
 * value) records: the host operators (u32) and the operator arguments (a
 * string id, i32, never negative in a checked graph: the same bytes). */
static void write_sparse_words(rvg_sink *sink, const GArray *values)
{
    GString *out = sink->buffer;
    guint count = 0;
    for (guint i = 0; i < values->len; i++) count += g_array_index(values, uint32_t, i) != 0;
    put_u32(out, count);
    for (guint i = 0; i < values->len; i++) {
        sink_spill(sink);
        uint32_t value = g_array_index(values, uint32_t, i);
        if (value == 0) continue;
        put_i32(out, (int32_t)i);
        put_u32(out, value);
    }
}

static void write_host_operators(rvg_sink *sink, const rv_graph *graph) { write_sparse_words(sink, graph->host_operators); }
static void write_op_args(rvg_sink *sink, const rv_graph *graph) { write_sparse_words(sink, graph->op_args); }

/* Section 13: the job's shape, then its columns task by task, every
 * rank's value of one task together (alike.h's layout). */
static void put_column_i64(rvg_sink *sink, const int64_t *values, gsize count)
{
    for (gsize i = 0; i < count; i++) {
        if (i % 4096 == 0) sink_spill(sink);
        put_i64(sink->buffer, values[i]);
    }
}

static void put_column_i32(rvg_sink *sink, const int32_t *values, gsize count)
{
    for (gsize i = 0; i < count; i++) {
        if (i % 4096 == 0) sink_spill(sink);
        put_i32(sink->buffer, values[i]);
    }
}

static uint32_t alike_columns(const rv_alike_job *alike)
{
    return (alike->correlation ? ALIKE_CORRELATION : 0) | (alike->bytes ? ALIKE_BYTES : 0) |
           (alike->step ? ALIKE_STEP : 0) | (alike->collective ? ALIKE_COLLECTIVE : 0);
}

/* Version 8's shape: one class of every rank. */
static void put_one_class(GString *out, const rv_alike_job *alike)
{
    const rv_alike_class *only = &alike->classes[0];
    put_u32(out, alike->rank_count);
    put_i32(out, only->task_count);
    put_i32(out, only->resource_count);
    put_i32(out, only->step_count);
    put_u32(out, only->edge_count);
    put_u32(out, alike_columns(alike));
}

/* Version 9's: each class's sizes and members. */
static void put_classes(GString *out, const rv_alike_job *alike)
{
    put_u32(out, alike->rank_count);
    put_u32(out, alike->class_count);
    put_u32(out, alike_columns(alike));
    for (guint c = 0; c < alike->class_count; c++) {
        const rv_alike_class *cls = &alike->classes[c];
        put_i32(out, cls->task_count);
        put_i32(out, cls->resource_count);
        put_i32(out, cls->step_count);
        put_u32(out, cls->edge_count);
        put_u32(out, cls->member_count);
        for (guint m = 0; m < cls->member_count; m++) put_u32(out, cls->members[m]);
    }
}

static uint32_t version_of(const rv_alike_job *alike)
{
    return alike == NULL ? RVG_FLAT_VERSION : alike->class_count == 1 ? RVG_ALIKE_VERSION : RVG_VERSION;
}

static void write_alike(rvg_sink *sink, const rv_alike_job *alike)
{
    if (version_of(alike) == RVG_ALIKE_VERSION) put_one_class(sink->buffer, alike);
    else put_classes(sink->buffer, alike);
    gsize cells = alike->cell_count;
    put_column_i64(sink, alike->duration_ns, cells);
    put_column_i64(sink, alike->host_overhead_ns, cells);
    put_column_i64(sink, alike->recorded_start_ns, cells);
    if (alike->correlation) put_column_i64(sink, alike->correlation, cells);
    if (alike->bytes) put_column_i64(sink, alike->bytes, cells);
    if (alike->step) put_column_i32(sink, alike->step, cells);
    if (alike->collective) put_column_i32(sink, alike->collective, cells);
}

typedef void (*section_writer)(rvg_sink *sink, const rv_graph *graph);

static const section_writer section_writers[SECTION_COUNT + 1] = {
    NULL, write_strings, write_resources, write_tasks, write_edges, write_steps, write_metadata,
    write_collectives, write_ranks, write_memory, write_launches, write_host_operators, write_op_args,
};

/* What a file is written from: the graph, and where its ranks are alike
 * the job held once, whose structure's tasks, edges and per-task side
 * arrays stand for every rank's (alike.h). */
typedef struct {
    const rv_graph *graph;
    const rv_alike_job *alike;  /* NULL: a flat file, version 7 */
} rvg_content;

static gboolean from_structure(uint32_t id)
{
    return id == SECTION_TASKS || id == SECTION_EDGES || id == SECTION_LAUNCHES || id == SECTION_HOST_OPERATORS ||
           id == SECTION_OP_ARGS;
}

static uint32_t section_count_of(const rvg_content *content)
{
    return content->alike ? SECTION_MAX : SECTION_COUNT;
}

/* One section through a sink: its CRC and length, and its bytes written to
 * `file` unless that is NULL.  FALSE when the file refused a write. */
static gboolean encode_section(const rvg_content *content, uint32_t id, GString *buffer, FILE *file, uint32_t *crc,
                               guint64 *length)
{
    rvg_sink sink = { buffer, file, crc32_z(0L, Z_NULL, 0), 0, FALSE };
    g_string_truncate(buffer, 0);
    if (id == SECTION_ALIKE)
        write_alike(&sink, content->alike);
    else
        section_writers[id](&sink, content->alike && from_structure(id) ? content->alike->structure : content->graph);
    sink_flush(&sink);
    *crc = (uint32_t)sink.crc;
    *length = sink.length;
    return !sink.write_failed;
}

/* The header and the section table, from each section's CRC and length
 * (the sections follow the table in id order). */
static GString *encode_front(const rvg_content *content, const uint32_t *crcs, const guint64 *lengths)
{
    uint32_t count = section_count_of(content);
    gsize table_end = RVG_HEADER_SIZE + RVG_ENTRY_SIZE * (gsize)count;
    GString *out = g_string_sized_new(table_end);
    g_string_append_len(out, (const char *)rvg_magic, sizeof rvg_magic);
    put_u32(out, version_of(content->alike));
    put_u32(out, count);
    put_u32(out, 0); /* header CRC, patched below */
    put_u32(out, 0); /* reserved */
    guint64 offset = table_end;
    for (uint32_t id = 1; id <= count; id++) {
        put_u32(out, id);
        put_u32(out, crcs[id]);
        put_u64(out, offset);
        put_u64(out, lengths[id]);
        offset += lengths[id];
    }
    patch_le(out, 16, header_crc((const guint8 *)out->str, table_end), 4);
    return out;
}

/* The sections, measured first for the table at the front, then written. */
static gboolean encode_sections(const rvg_content *content, const char *name, FILE *file, guint64 *bytes,
                                GError **error)
{
    uint32_t count = section_count_of(content), crcs[SECTION_MAX + 1] = { 0 };
    guint64 lengths[SECTION_MAX + 1] = { 0 };
    GString *buffer = g_string_sized_new(SINK_SPILL_BYTES + 4096);
    for (uint32_t id = 1; id <= count; id++) encode_section(content, id, buffer, NULL, &crcs[id], &lengths[id]);
    GString *front = encode_front(content, crcs, lengths);
    gboolean ok = fwrite(front->str, 1, front->len, file) == front->len;
    guint64 total = front->len;
    g_string_free(front, TRUE);
    for (uint32_t id = 1; id <= count && ok; id++) {
        uint32_t crc;
        guint64 length;
        ok = encode_section(content, id, buffer, file, &crc, &length);
        total += length;
        if (ok && (crc != crcs[id] || length != lengths[id])) { /* the table written above would lie */
            g_set_error(error, RV_ERROR, RV_ERROR_INTERNAL, "cannot save %s: its %s changed while it was written",
                        name, section_names[id]);
            ok = FALSE;
        }
    }
    g_string_free(buffer, TRUE);
    if (bytes) *bytes = total;
    return ok;
}

/* The graph as a .rvg file, written to `file` section by section; first
 * checked to be one the reader would accept (name: for the message).  A
 * job whose ranks are alike is written once (version 8), any other graph
 * as it is (version 7).  A write the file refuses is FALSE with no error:
 * the caller's stream says why (output.h). */
static gboolean encode_checked(const rv_graph *graph, const char *name, FILE *file, guint64 *bytes, GError **error)
{
    GString *why = g_string_new(NULL);
    const char *section = check_graph(graph, why);
    if (section != NULL)
        g_set_error(error, RV_ERROR, RV_ERROR_INTERNAL, "cannot save %s: the graph is inconsistent (%s: %s)",
                    name, section, why->str);
    g_string_free(why, TRUE);
    if (section != NULL) return FALSE;
    rvg_content content = { graph, rv_graph_rank_count(graph) > 1 ? rv_alike_from_job(graph, NULL) : NULL };
    gboolean ok = encode_sections(&content, name, file, bytes, error);
    rv_alike_job_free((rv_alike_job *)content.alike);
    return ok;
}

gboolean rv_store_write(const rv_graph *graph, FILE *file, guint64 *bytes, GError **error)
{
    return encode_checked(graph, "the graph", file, bytes, error);
}

static gboolean fill_graph(FILE *file, gpointer graph, GError **error)
{
    return rv_store_write(graph, file, NULL, error);
}

gboolean rv_store_save(const rv_graph *graph, const char *path, GError **error)
{
    /* output.h: a temporary beside the file, renamed when complete, never
     * over an input of the run; a device is written in place. */
    return rv_output_write(path, RV_OUTPUT_REPLACE, fill_graph, (gpointer)graph, error);
}

/* ---- reading: bounds-checked little-endian cursor ----------------------- */

/* A file read section by section: a cursor over a section of it holds a
 * window of RVG_READ_WINDOW bytes (more for one longer string) and refills
 * it as the decoding goes, so loading a graph needs the graph and one
 * window, not the graph and the whole file (at 256 ranks the file was 40%
 * of the peak). */
#define RVG_READ_WINDOW ((gsize)256 * 1024)

typedef struct {
    FILE *file;
    guint64 left;           /* bytes of the section not yet read into buffer */
    guint8 *buffer;
    gsize capacity;
    gboolean failed;        /* a read error (not a short section) */
} section_source;

/* Reads past the end return zeros and set overrun, which the caller checks
 * once per record or string rather than after every field.  data holds the
 * whole section (a buffer in memory), or a window of it that take()
 * refills from source. */
typedef struct {
    const guint8 *data;
    gsize length, pos;          /* bytes in data; the next one to read */
    gboolean overrun;
    gsize section_length;       /* the whole section's bytes, for messages */
    section_source *source;     /* NULL when data holds the whole section */
} cursor;

/* Make at least count bytes readable at c->pos: keep the unread bytes,
 * read the rest of a window after them.  FALSE when the section has fewer
 * bytes left than count, or the file cannot be read. */
static gboolean refill(cursor *c, gsize count)
{
    section_source *source = c->source;
    gsize kept = c->length - c->pos;
    if (source == NULL || source->failed || source->left < count - kept) return FALSE;
    gsize want = MAX(count, (gsize)MIN((guint64)RVG_READ_WINDOW, kept + source->left));
    if (want > source->capacity) {
        guint8 *bigger = g_malloc(want);
        if (kept) memcpy(bigger, c->data + c->pos, kept);
        g_free(source->buffer);
        source->buffer = bigger;
        source->capacity = want;
    } else if (kept) {
        memmove(source->buffer, c->data + c->pos, kept);
    }
    gsize wanted = want - kept;
    if (fread(source->buffer + kept, 1, wanted, source->file) != wanted) {
        source->failed = TRUE;
        return FALSE;
    }
    source->left -= wanted;
    c->data = source->buffer;
    c->length = want;
    c->pos = 0;
    return TRUE;
}

static inline const guint8 *take(cursor *c, gsize count)
{
    if (c->overrun || (c->length - c->pos < count && !refill(c, count))) {
        c->overrun = TRUE;
        return NULL;
    }
    const guint8 *at = c->data + c->pos;
    c->pos += count;
    return at;
}

/* Each field is one memcpy and a byte-order conversion (a no-op on
 * little-endian hosts): at a million tasks, decoding byte by byte was a
 * fifth of `reverie info`. */
#define DEFINE_GET_LE(name, type, from_le)            \
    static inline type name(cursor *c)                \
    {                                                 \
        const guint8 *at = take(c, sizeof(type));     \
        type value = 0;                               \
        if (at != NULL) memcpy(&value, at, sizeof value); \
        return from_le(value);                        \
    }
#define IDENTITY(value) (value)
DEFINE_GET_LE(get_u8, uint8_t, IDENTITY)
DEFINE_GET_LE(get_u16, uint16_t, GUINT16_FROM_LE)
DEFINE_GET_LE(get_u32, uint32_t, GUINT32_FROM_LE)
DEFINE_GET_LE(get_u64, uint64_t, GUINT64_FROM_LE)
#undef IDENTITY
#undef DEFINE_GET_LE
static inline int32_t get_i32(cursor *c) { return (int32_t)get_u32(c); }
static inline int64_t get_i64(cursor *c) { return (int64_t)get_u64(c); }

static gsize remaining(const cursor *c) { return c->length - c->pos + (c->source ? (gsize)c->source->left : 0); }

/* A str as a new NUL-terminated string; NULL (with *why) if it is cut off
 * or holds a NUL byte. */
static char *get_str(cursor *c, const char *what, GString *why)
{
    uint32_t length = get_u32(c);
    const guint8 *text = take(c, length);
    if (text == NULL) {
        g_string_printf(why, "%s (%u bytes) runs past the end of the section", what, length);
        return NULL;
    }
    if (memchr(text, '\0', length) != NULL) {
        g_string_printf(why, "%s contains a NUL byte", what);
        return NULL;
    }
    return g_strndup((const char *)text, length);
}

/* ---- reading: header and section table ---------------------------------- */

/* data holds the whole file (a buffer), or, when file is set, its first
 * bytes up to the end of the largest possible section table; length is
 * the whole file's either way. */
typedef struct {
    const char *name;           /* the file, for messages */
    const guint8 *data;
    gsize length;
    section_entry sections[SECTION_MAX + 1];  /* by id */
    GError **error;
    section_source *file;       /* NULL: data holds every section */
    uint32_t version;           /* RVG_FLAT_VERSION, RVG_ALIKE_VERSION or RVG_VERSION */
} reader;

/* The sections a file of the reader's version holds: 1 to this. */
static uint32_t sections_of(const reader *r)
{
    return r->version == RVG_FLAT_VERSION ? SECTION_COUNT : SECTION_MAX;
}

static gboolean fail(reader *r, const char *section, const char *format, ...) G_GNUC_PRINTF(3, 4);
static gboolean fail(reader *r, const char *section, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *detail = g_strdup_vprintf(format, args);
    va_end(args);
    if (section != NULL)
        g_set_error(r->error, RV_ERROR, RV_ERROR_INPUT, "%s: section '%s': %s", r->name, section, detail);
    else
        g_set_error(r->error, RV_ERROR, RV_ERROR_INPUT, "%s: %s", r->name, detail);
    g_free(detail);
    return FALSE;
}

static uint32_t read_u32_at(const guint8 *at)
{
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}
static uint64_t read_u64_at(const guint8 *at)
{
    return (uint64_t)read_u32_at(at) | (uint64_t)read_u32_at(at + 4) << 32;
}

/* Magic, version and the size of the section table. */
static gboolean read_header(reader *r, uint32_t *section_count)
{
    if (r->length < sizeof rvg_magic || memcmp(r->data, rvg_magic, sizeof rvg_magic) != 0)
        return fail(r, NULL, "not a reverie graph (it does not start with the graph magic number)");
    if (r->length < RVG_HEADER_SIZE)
        return fail(r, NULL, "truncated: the file is %zu bytes, shorter than the %u-byte header",
                    (size_t)r->length, RVG_HEADER_SIZE);
    uint32_t version = read_u32_at(r->data + 8);
    if (version > RVG_VERSION)
        return fail(r, NULL, "format version %u is newer than this reverie supports (%u); re-import the trace",
                    version, RVG_VERSION);
    if (version == 6)
        return fail(r, NULL, "format version 6 predates the operators' arguments (this reverie reads version %u); "
                    "re-import the trace", RVG_VERSION);
    if (version == 5)
        return fail(r, NULL, "format version 5 predates the profiler's per-operator cost (this reverie reads version %u); "
                    "re-import the trace", RVG_VERSION);
    if (version == 4)
        return fail(r, NULL, "format version 4 predates the timing estimates' evidence and the kernels' launch "
                    "figures (this reverie reads version %u); "
                    "re-import the trace", RVG_VERSION);
    if (version == 3)
        return fail(r, NULL, "format version 3 predates the recorded memory peaks (this reverie reads version %u); "
                    "re-import the trace", RVG_VERSION);
    if (version == 2)
        return fail(r, NULL, "format version 2 predates jobs of several ranks (this reverie reads version %u); "
                    "re-import the trace", RVG_VERSION);
    if (version == 1)
        return fail(r, NULL, "format version 1 holds an older timing model that this reverie no longer "
                    "replays; import the trace again");
    if (version != RVG_VERSION && version != RVG_ALIKE_VERSION && version != RVG_FLAT_VERSION)
        return fail(r, NULL, "format version %u was never written by reverie (this one reads versions %u to %u)",
                    version, RVG_FLAT_VERSION, RVG_VERSION);
    r->version = version;
    *section_count = read_u32_at(r->data + 12);
    if (*section_count == 0 || *section_count > RVG_MAX_SECTIONS)
        return fail(r, NULL, "section table: the header gives %u sections (1 to %u are possible)", *section_count,
                    RVG_MAX_SECTIONS);
    gsize table_end = RVG_HEADER_SIZE + (gsize)RVG_ENTRY_SIZE * *section_count;
    if (r->length < table_end)
        return fail(r, NULL, "truncated: the section table ends at byte %zu but the file is %zu bytes",
                    (size_t)table_end, (size_t)r->length);
    uint32_t stored = read_u32_at(r->data + 16), computed = header_crc(r->data, table_end);
    if (stored != computed)
        return fail(r, NULL, "section table: checksum mismatch (stored 0x%08x, computed 0x%08x): the header "
                    "or section table is corrupt", stored, computed);
    if (read_u32_at(r->data + 20) != 0)
        return fail(r, NULL, "section table: the reserved header field is 0x%08x, not 0", read_u32_at(r->data + 20));
    return TRUE;
}

/* One table entry: a known id, seen once, starting where the last ended. */
static gboolean read_entry(reader *r, uint32_t index, uint64_t *expected_offset)
{
    const guint8 *at = r->data + RVG_HEADER_SIZE + (gsize)RVG_ENTRY_SIZE * index;
    section_entry entry = { read_u32_at(at), read_u32_at(at + 4), read_u64_at(at + 8), read_u64_at(at + 16) };
    if (entry.id == 0 || entry.id > sections_of(r))
        return fail(r, NULL, "section table: entry %u has unknown section id %u (version %u)", index, entry.id,
                    r->version);
    const char *name = section_names[entry.id];
    if (r->sections[entry.id].id != 0)
        return fail(r, NULL, "section table: section '%s' appears twice", name);
    if (entry.offset != *expected_offset)
        return fail(r, name, "starts at byte %" G_GUINT64_FORMAT ", expected byte %" G_GUINT64_FORMAT
                    " (right after the previous one)", entry.offset, *expected_offset);
    if (entry.offset > r->length || entry.length > r->length - entry.offset)
        return fail(r, NULL, "truncated: section '%s' needs bytes %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT
                    " but the file is %zu bytes", name, entry.offset, entry.offset + entry.length,
                    (size_t)r->length);
    r->sections[entry.id] = entry;
    *expected_offset = entry.offset + entry.length;
    return TRUE;
}

/* A cursor at the start of section id: over the buffer, or over the file
 * from the section's offset, its window filled on the first take(). */
static cursor section_cursor(const reader *r, uint32_t id)
{
    const section_entry *entry = &r->sections[id];
    if (r->file == NULL) {
        cursor c = { r->data + entry->offset, entry->length, 0, FALSE, entry->length, NULL };
        return c;
    }
    cursor c = { NULL, 0, 0, FALSE, entry->length, r->file };
    r->file->left = entry->length;
    if (fseeko(r->file->file, (off_t)entry->offset, SEEK_SET) != 0) r->file->failed = TRUE;
    return c;
}

/* The CRC of a section of the file, read a window at a time. */
static uint32_t crc_of_file(reader *r, const section_entry *entry)
{
    cursor c = section_cursor(r, entry->id);
    uLong crc = crc32_z(0L, Z_NULL, 0);
    for (guint64 left = entry->length; left > 0 && !r->file->failed;) {
        gsize chunk = (gsize)MIN(left, (guint64)RVG_READ_WINDOW);
        const guint8 *bytes = take(&c, chunk);
        if (bytes == NULL) break;
        crc = crc32_z(crc, bytes, chunk);
        left -= chunk;
    }
    return (uint32_t)crc;
}

static gboolean read_table(reader *r, uint32_t section_count)
{
    uint64_t expected_offset = RVG_HEADER_SIZE + (uint64_t)RVG_ENTRY_SIZE * section_count;
    for (uint32_t i = 0; i < section_count; i++)
        if (!read_entry(r, i, &expected_offset)) return FALSE;
    for (uint32_t id = 1; id <= sections_of(r); id++)
        if (r->sections[id].id == 0) return fail(r, NULL, "section table: there is no '%s' section", section_names[id]);
    if (expected_offset != r->length)
        return fail(r, NULL, "%" G_GUINT64_FORMAT " bytes of unknown data follow the last section",
                    (uint64_t)r->length - expected_offset);
    for (uint32_t id = 1; id <= sections_of(r); id++) {
        const section_entry *entry = &r->sections[id];
        uint32_t computed = r->file ? crc_of_file(r, entry) : crc_of(r->data + entry->offset, entry->length);
        if (r->file && r->file->failed) return FALSE; /* rv_store_load says why */
        if (computed != entry->crc)
            return fail(r, section_names[id], "checksum mismatch (stored 0x%08x, computed 0x%08x): the file is "
                        "corrupt", entry->crc, computed);
    }
    return TRUE;
}

/* ---- reading: sections --------------------------------------------------- */

static gboolean read_strings(reader *r, rv_strings *strings)
{
    const char *section = section_names[SECTION_STRINGS];
    cursor c = section_cursor(r, SECTION_STRINGS);
    uint32_t count = get_u32(&c);
    if (c.overrun || count == 0)
        return fail(r, section, "no strings (string 0, the empty string, must be present)");
    if (count > remaining(&c) / 4 || count > G_MAXINT32)
        return fail(r, section, "%u strings cannot fit in %zu bytes", count, (size_t)c.section_length);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t length = get_u32(&c);
        const guint8 *text = take(&c, length);
        if (text == NULL)
            return fail(r, section, "string %u (%u bytes) runs past the end of the section", i, length);
        if (memchr(text, '\0', length) != NULL)
            return fail(r, section, "string %u contains a NUL byte", i);
        /* Names come from JSON, which is UTF-8; a forged one must not reach
         * jansson (which refuses it) or a terminal. */
        if (!g_utf8_validate((const char *)text, length, NULL))
            return fail(r, section, "string %u is not valid UTF-8", i);
        if (i == 0 && length != 0)
            return fail(r, section, "string 0 is not the empty string");
        /* Interning in order reproduces the saved ids unless a text repeats. */
        int32_t id = i == 0 ? 0 : rv_strings_intern_len(strings, (const char *)text, length);
        if (id != (int32_t)i)
            return fail(r, section, "string %u repeats string %d, so ids would shift", i, id);
    }
    if (remaining(&c) != 0)
        return fail(r, section, "%zu bytes left over after the last string", (size_t)remaining(&c));
    return TRUE;
}

/* The record count of a section of fixed-size records, which must account
 * for every byte of it; the array is sized to match. */
static gboolean read_record_count(reader *r, uint32_t id, gsize record_size, cursor *c, GArray *records)
{
    *c = section_cursor(r, id);
    uint32_t count = get_u32(c);
    if (c->overrun)
        return fail(r, section_names[id], "the section is %zu bytes, too short for its record count",
                    (size_t)c->section_length);
    if ((uint64_t)count * record_size != remaining(c))
        return fail(r, section_names[id], "%u records of %zu bytes need %" G_GUINT64_FORMAT
                    " bytes but the section has %zu after its count", count, (size_t)record_size,
                    (uint64_t)count * record_size, (size_t)remaining(c));
    if (count > G_MAXINT32)
        return fail(r, section_names[id], "%u records are more than a graph can hold", count);
    g_array_set_size(records, count);
    return TRUE;
}

static void get_estimate(cursor *c, rv_estimate *estimate)
{
    estimate->value = get_i64(c);
    estimate->spread = get_i64(c);
    estimate->samples = get_u64(c);
    estimate->source = get_u8(c);
}

static gboolean read_resources(reader *r, rv_graph *graph)
{
    cursor c;
    if (!read_record_count(r, SECTION_RESOURCES, RVG_RESOURCE_SIZE, &c, graph->resources)) return FALSE;
    for (guint i = 0; i < graph->resources->len; i++) {
        rv_resource *resource = &g_array_index(graph->resources, rv_resource, i);
        memset(resource, 0, sizeof *resource);
        resource->process = get_i64(&c);
        resource->thread = get_i64(&c);
        resource->launch_latency_ns = get_i64(&c);
        resource->idle_gap_ns = get_i64(&c);
        resource->queue_depth = get_i32(&c);
        resource->name = get_i32(&c);
        resource->kind = get_u8(&c);
        resource->rank_index = get_i32(&c);
        get_estimate(&c, &resource->measured_latency);
        get_estimate(&c, &resource->measured_gap);
    }
    return TRUE;
}

static gboolean read_tasks(reader *r, rv_graph *graph)
{
    cursor c;
    if (!read_record_count(r, SECTION_TASKS, RVG_TASK_SIZE, &c, graph->tasks)) return FALSE;
    for (guint i = 0; i < graph->tasks->len; i++) {
        rv_task *task = &g_array_index(graph->tasks, rv_task, i);
        memset(task, 0, sizeof *task);
        task->duration_ns = get_i64(&c);
        task->host_overhead_ns = get_i64(&c);
        task->recorded_start_ns = get_i64(&c);
        task->correlation = get_i64(&c);
        task->bytes = get_i64(&c);
        task->resource = get_i32(&c);
        task->name = get_i32(&c);
        task->op = get_i32(&c);
        task->layer = get_i32(&c);
        task->input_dims = get_i32(&c);
        task->step = get_i32(&c);
        task->kind = get_u8(&c);
        task->phase = get_u8(&c);
        task->flags = get_u16(&c);
        task->collective = get_i32(&c);
    }
    return TRUE;
}

static gboolean read_edges(reader *r, rv_graph *graph)
{
    cursor c;
    if (!read_record_count(r, SECTION_EDGES, RVG_EDGE_SIZE, &c, graph->edges)) return FALSE;
    for (guint i = 0; i < graph->edges->len; i++) {
        rv_edge *edge = &g_array_index(graph->edges, rv_edge, i);
        memset(edge, 0, sizeof *edge);
        edge->from = get_i32(&c);
        edge->to = get_i32(&c);
        edge->kind = get_u8(&c);
        edge->from_start = get_u8(&c);
    }
    return TRUE;
}

static gboolean read_steps(reader *r, rv_graph *graph)
{
    cursor c;
    if (!read_record_count(r, SECTION_STEPS, RVG_STEP_SIZE, &c, graph->steps)) return FALSE;
    for (guint i = 0; i < graph->steps->len; i++) {
        rv_step *step = &g_array_index(graph->steps, rv_step, i);
        memset(step, 0, sizeof *step);
        step->name = get_i32(&c);
        step->recorded_begin_ns = get_i64(&c);
        step->recorded_end_ns = get_i64(&c);
        step->begin_marker = get_i32(&c);
        step->end_marker = get_i32(&c);
    }
    return TRUE;
}

static gboolean read_collectives(reader *r, rv_graph *graph)
{
    cursor c;
    if (!read_record_count(r, SECTION_COLLECTIVES, RVG_COLLECTIVE_SIZE, &c, graph->collectives)) return FALSE;
    for (guint i = 0; i < graph->collectives->len; i++) {
        rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, i);
        memset(info, 0, sizeof *info);
        info->bytes = get_i64(&c);
        info->seq = get_i64(&c);
        info->group = get_i32(&c);
        info->group_size = get_i32(&c);
        info->peer = get_i32(&c);
        info->rendezvous = get_i32(&c);
        info->participants = get_i32(&c);
        info->op = get_u8(&c);
        info->parallelism = get_u8(&c);
        info->matched_by = get_u8(&c);
        info->inserted = get_u8(&c);
    }
    return TRUE;
}

static gboolean read_ranks(reader *r, rv_graph *graph)
{
    cursor c;
    if (!read_record_count(r, SECTION_RANKS, RVG_RANK_SIZE, &c, graph->ranks)) return FALSE;
    for (guint i = 0; i < graph->ranks->len; i++) {
        rv_rank *rank = &g_array_index(graph->ranks, rv_rank, i);
        memset(rank, 0, sizeof *rank);
        rank->rank = get_i64(&c);
        rank->world_size = get_i64(&c);
        rank->clock_offset_ns = get_i64(&c);
        rank->source = get_i32(&c);
        rank->offset_samples = get_i32(&c);
    }
    return TRUE;
}

static gboolean read_memory(reader *r, rv_graph *graph)
{
    cursor c;
    if (!read_record_count(r, SECTION_MEMORY, RVG_MEMORY_SIZE, &c, graph->memory)) return FALSE;
    for (guint i = 0; i < graph->memory->len; i++) {
        rv_memory_record *record = &g_array_index(graph->memory, rv_memory_record, i);
        memset(record, 0, sizeof *record);
        record->peak_allocated = get_i64(&c);
        record->peak_reserved = get_i64(&c);
        record->allocated_before = get_i64(&c);
        record->events = get_i64(&c);
        record->peak_above_start = get_i64(&c);
        record->device = get_i32(&c);
        record->step = get_i32(&c);
        record->rank_index = get_i32(&c);
    }
    return TRUE;
}

/* A sparse per-task section (launches, host operators, operator
 * arguments): its record count, the cursor at its first record. */
static gboolean read_sparse_count(reader *r, uint32_t id, gsize record_size, cursor *c, guint *count)
{
    GArray *records = g_array_new(FALSE, FALSE, 1);
    gboolean ok = read_record_count(r, id, record_size, c, records);
    *count = records->len;
    g_array_unref(records);
    return ok;
}

/* A sparse section's records name tasks in increasing order. */
static gboolean sparse_task_in_order(reader *r, uint32_t id, guint record, int32_t task, int32_t previous,
                                     const rv_graph *graph)
{
    if (task > previous && task < rv_graph_task_count(graph)) return TRUE;
    return fail(r, section_names[id], "record %u names task %d (after task %d, of %d tasks)", record, task, previous,
                rv_graph_task_count(graph));
}

/* Sparse records in task order into the dense per-task array. */
static gboolean read_launches(reader *r, rv_graph *graph)
{
    cursor c;
    guint count;
    gboolean ok = read_sparse_count(r, SECTION_LAUNCHES, RVG_LAUNCH_SIZE, &c, &count);
    int32_t previous = -1;
    for (guint i = 0; ok && i < count; i++) {
        int32_t task = get_i32(&c);
        rv_launch launch; /* one field at a time: an initializer list has no order */
        launch.blocks = get_u32(&c);
        launch.threads = get_u32(&c);
        launch.registers = get_u32(&c);
        launch.shared_bytes = get_u32(&c);
        ok = sparse_task_in_order(r, SECTION_LAUNCHES, i, task, previous, graph);
        if (ok && (launch.blocks == 0 || launch.threads == 0))
            ok = fail(r, section_names[SECTION_LAUNCHES], "record %u: task %d's launch has %u blocks of %u threads", i,
                      task, launch.blocks, launch.threads);
        if (!ok) break;
        g_array_set_size(graph->launches, (guint)task + 1);
        g_array_index(graph->launches, rv_launch, task) = launch;
        previous = task;
    }
    return ok;
}

/* Whether a sparse section's 4-byte value for a task may stand; FALSE
 * after failing the reader. */
typedef gboolean (*word_check)(reader *r, guint record, int32_t task, uint32_t value, const rv_graph *graph);

/* Sparse (task, 4-byte value) records in task order into a dense per-task
 * array of 4-byte values (write_sparse_words). */
static gboolean read_sparse_words(reader *r, uint32_t id, rv_graph *graph, GArray *values, word_check check)
{
    cursor c;
    guint count;
    gboolean ok = read_sparse_count(r, id, 8, &c, &count);
    int32_t previous = -1;
    for (guint i = 0; ok && i < count; i++) {
        int32_t task = get_i32(&c);
        uint32_t value = get_u32(&c);
        ok = sparse_task_in_order(r, id, i, task, previous, graph) && check(r, i, task, value, graph);
        if (!ok) break;
        g_array_set_size(values, (guint)task + 1);
        g_array_index(values, uint32_t, task) = value;
        previous = task;
    }
    return ok;
}

static gboolean host_operators_stand(reader *r, guint record, int32_t task, uint32_t operators, const rv_graph *graph)
{
    (void)graph;
    if (operators > 0) return TRUE;
    return fail(r, section_names[SECTION_HOST_OPERATORS], "record %u: task %d has 0 operators", record, task);
}

/* A string id, not the empty string 0 (none is no record). */
static gboolean op_args_stand(reader *r, guint record, int32_t task, uint32_t op_args, const rv_graph *graph)
{
    if (op_args > 0 && op_args < (uint32_t)rv_strings_count(graph->strings)) return TRUE;
    return fail(r, section_names[SECTION_OP_ARGS], "record %u: task %d's arguments name string %d (of %d)", record, task,
                (int32_t)op_args, rv_strings_count(graph->strings));
}

static gboolean read_host_operators(reader *r, rv_graph *graph)
{
    G_STATIC_ASSERT(RVG_HOST_OPERATORS_SIZE == 8);
    return read_sparse_words(r, SECTION_HOST_OPERATORS, graph, graph->host_operators, host_operators_stand);
}

static gboolean read_op_args(reader *r, rv_graph *graph)
{
    G_STATIC_ASSERT(RVG_OP_ARGS_SIZE == 8);
    return read_sparse_words(r, SECTION_OP_ARGS, graph, graph->op_args, op_args_stand);
}

/* A u8 that stands for a gboolean; anything but 0 or 1 is corruption. */
static gboolean get_flag(cursor *c, const char *what, gboolean *value, GString *why)
{
    uint8_t byte = get_u8(c);
    if (c->overrun) {
        g_string_printf(why, "the section ends before %s", what);
        return FALSE;
    }
    if (byte > 1) {
        g_string_printf(why, "%s is %u (must be 0 or 1)", what, byte);
        return FALSE;
    }
    *value = byte;
    return TRUE;
}

static gboolean get_counters(cursor *c, const char *what, void *stats, const size_t *offsets, gsize count,
                             GString *why)
{
    uint32_t stored = get_u32(c);
    if (!c->overrun && stored != count) {
        g_string_printf(why, "%u %s counters stored, this version has %zu", stored, what, (size_t)count);
        return FALSE;
    }
    for (gsize i = 0; i < count; i++) *(uint64_t *)((char *)stats + offsets[i]) = get_u64(c);
    if (c->overrun) g_string_printf(why, "the section ends inside the %s counters", what);
    return !c->overrun;
}

static gboolean get_device_names(cursor *c, GPtrArray *names, GString *why)
{
    uint32_t count = get_u32(c);
    if (c->overrun || count > remaining(c) / 4) {
        g_string_printf(why, "%u device names cannot fit in the section", count);
        return FALSE;
    }
    for (uint32_t d = 0; d < count; d++) {
        char *name = get_str(c, "a device name", why);
        if (name == NULL) return FALSE;
        g_ptr_array_add(names, name);
    }
    return TRUE;
}

static gboolean get_backend(cursor *c, char **backend, GString *why)
{
    gboolean has_backend = FALSE;
    if (!get_flag(c, "has_backend", &has_backend, why)) return FALSE;
    if (!has_backend) return TRUE;
    *backend = get_str(c, "the backend", why);
    return *backend != NULL;
}

static gboolean get_timing(cursor *c, rv_timing *timing, GString *why)
{
    get_estimate(c, &timing->clock_offset);
    timing->offset_low_ns = get_i64(c);
    timing->offset_high_ns = get_i64(c);
    timing->offset_launch_pairs = get_u64(c);
    timing->offset_sync_pairs = get_u64(c);
    timing->offset_contradicted = get_u64(c);
    get_estimate(c, &timing->launch_latency);
    get_estimate(c, &timing->idle_gap);
    get_estimate(c, &timing->queue_depth);
    get_estimate(c, &timing->sync_return);
    timing->queue_unblocked_in_flight = get_u64(c);
    timing->clock_status = get_u8(c);
    get_estimate(c, &timing->profiler_op_cost);
    timing->profiled_operators = get_u64(c);
    const rv_estimate *estimates[] = { &timing->clock_offset, &timing->launch_latency, &timing->idle_gap,
                                       &timing->queue_depth, &timing->sync_return, &timing->profiler_op_cost };
    for (gsize i = 0; i < G_N_ELEMENTS(estimates); i++)
        if (estimates[i]->source >= RV_SOURCE_COUNT) {
            g_string_printf(why, "a timing estimate has source %u (there are %d)", estimates[i]->source, RV_SOURCE_COUNT);
            return FALSE;
        }
    if (timing->profiler_op_cost.value < 0 || timing->profiler_op_cost.value > RVG_STREAM_DELAY_MAX_NS) {
        g_string_printf(why, "the profiler's per-operator cost is %" G_GINT64_FORMAT " ns (must lie in [0, 1 s])",
                        timing->profiler_op_cost.value);
        return FALSE;
    }
    if (timing->clock_status >= RV_CLOCK_STATUS_COUNT) {
        g_string_printf(why, "clock status %u is unknown (there are %d)", timing->clock_status, RV_CLOCK_STATUS_COUNT);
        return FALSE;
    }
    return TRUE;
}

static gboolean decode_metadata(cursor *c, rv_graph *graph, GString *why)
{
    char *source = get_str(c, "the source path", why);
    if (source == NULL) return FALSE;
    g_free(graph->source);
    graph->source = source;
    if (!get_device_names(c, graph->device_names, why)) return FALSE;
    graph->rank = get_i64(c);
    graph->world_size = get_i64(c);
    return get_backend(c, &graph->backend, why) &&
           get_flag(c, "legacy_schema", &graph->legacy_schema, why) &&
           get_flag(c, "whole_trace_step", &graph->whole_trace_step, why) &&
           get_counters(c, "import", &graph->trace_stats, trace_stat_offsets, G_N_ELEMENTS(trace_stat_offsets), why) &&
           get_counters(c, "build", &graph->build_stats, build_stat_offsets, G_N_ELEMENTS(build_stat_offsets), why) &&
           get_timing(c, &graph->timing, why);
}

static gboolean read_metadata(reader *r, rv_graph *graph)
{
    cursor c = section_cursor(r, SECTION_METADATA);
    GString *why = g_string_new(NULL);
    gboolean ok = decode_metadata(&c, graph, why);
    if (ok && remaining(&c) != 0) {
        g_string_printf(why, "%zu bytes left over after the timing estimates", (size_t)remaining(&c));
        ok = FALSE;
    }
    if (!ok) fail(r, section_names[SECTION_METADATA], "%s", why->str);
    g_string_free(why, TRUE);
    return ok;
}

static gboolean read_sections(reader *r, rv_graph *graph)
{
    return read_strings(r, graph->strings) && read_metadata(r, graph) && read_resources(r, graph) &&
           read_tasks(r, graph) && read_edges(r, graph) && read_steps(r, graph) && read_collectives(r, graph) &&
           read_ranks(r, graph) && read_memory(r, graph) && read_launches(r, graph) && read_host_operators(r, graph) &&
           read_op_args(r, graph);
}

/* The checks of a whole graph, as the writer ran them, and what the
 * simulator trusts beyond the ids: durations within the limits and no
 * cycle (a forged edge list can close one). */
static gboolean check_loaded(reader *r, const rv_graph *graph)
{
    GString *why = g_string_new(NULL);
    const char *section = check_graph(graph, why);
    if (section != NULL) fail(r, section, "%s", why->str);
    g_string_free(why, TRUE);
    if (section != NULL) return FALSE;
    GError *invalid = NULL;
    if (rv_graph_validate(graph, &invalid)) return TRUE;
    fail(r, NULL, "%s", invalid->message);
    g_error_free(invalid);
    return FALSE;
}

/* ---- reading: a job of alike ranks (version 8) ------------------------------------ */

/* count little-endian values of `width` bytes into values, a window's
 * worth at a time (a column is most of a job's file). */
static void get_column(cursor *c, void *values, gsize count, gsize width)
{
    const gsize chunk = RVG_READ_WINDOW / 2 / width;
    for (gsize done = 0; done < count;) {
        gsize now = MIN(chunk, count - done);
        const guint8 *at = take(c, now * width);
        if (at == NULL) {
            memset((guint8 *)values + done * width, 0, (count - done) * width);
            return;
        }
        memcpy((guint8 *)values + done * width, at, now * width);
        done += now;
    }
#if G_BYTE_ORDER == G_BIG_ENDIAN
    for (gsize i = 0; i < count; i++) {
        if (width == 8) ((uint64_t *)values)[i] = GUINT64_FROM_LE(((uint64_t *)values)[i]);
        else ((uint32_t *)values)[i] = GUINT32_FROM_LE(((uint32_t *)values)[i]);
    }
#endif
}

static int64_t *get_column_i64(cursor *c, gsize count)
{
    int64_t *values = rv_column_new(count, sizeof(int64_t));
    get_column(c, values, count, sizeof(int64_t));
    return values;
}

static int32_t *get_column_i32(cursor *c, gsize count)
{
    int32_t *values = rv_column_new(count, sizeof(int32_t));
    get_column(c, values, count, sizeof(int32_t));
    return values;
}

static gsize column_bytes(uint32_t columns)
{
    return 24 + (columns & ALIKE_CORRELATION ? 8 : 0) + (columns & ALIKE_BYTES ? 8 : 0) +
           (columns & ALIKE_STEP ? 4 : 0) + (columns & ALIKE_COLLECTIVE ? 4 : 0);
}

/* A shape's members as read (the shape's classes point into them). */
typedef struct {
    rv_alike_shape shape;
    guint *members;
} shape_read;

static void shape_read_clear(shape_read *read)
{
    rv_alike_shape_clear(&read->shape);
    g_free(read->members);
    read->members = NULL;
}

/* Version 8: one class of every rank. */
static void get_one_class(cursor *c, shape_read *read, uint32_t *columns, guint ranks)
{
    rv_alike_shape *shape = &read->shape;
    shape->rank_count = get_u32(c);
    shape->class_count = 1;
    shape->classes = g_new0(rv_alike_class_shape, 1);
    rv_alike_class_shape *only = &shape->classes[0];
    only->task_count = get_i32(c);
    only->resource_count = get_i32(c);
    only->step_count = get_i32(c);
    only->edge_count = get_u32(c);
    *columns = get_u32(c);
    only->member_count = shape->rank_count == ranks ? ranks : 0; /* else refused by the shape's checks */
    read->members = g_new(guint, only->member_count + 1);
    for (guint m = 0; m < only->member_count; m++) read->members[m] = m;
    only->members = read->members;
}

/* Version 9: each class's sizes and members; FALSE where the counts could
 * not be a shape of this file's ranks (before anything is sized by them). */
static gboolean get_classes(cursor *c, shape_read *read, uint32_t *columns, guint ranks)
{
    rv_alike_shape *shape = &read->shape;
    shape->rank_count = get_u32(c);
    shape->class_count = get_u32(c);
    *columns = get_u32(c);
    if (c->overrun || shape->rank_count != ranks || shape->class_count == 0 || shape->class_count > ranks) return FALSE;
    shape->classes = g_new0(rv_alike_class_shape, shape->class_count);
    read->members = g_new(guint, ranks + 1);
    guint used = 0;
    for (guint k = 0; k < shape->class_count && !c->overrun; k++) {
        rv_alike_class_shape *cls = &shape->classes[k];
        cls->task_count = get_i32(c);
        cls->resource_count = get_i32(c);
        cls->step_count = get_i32(c);
        cls->edge_count = get_u32(c);
        cls->member_count = get_u32(c);
        if (cls->member_count > ranks - used) return FALSE;
        cls->members = read->members + used;
        for (guint m = 0; m < cls->member_count; m++) cls->members[m] = get_u32(c);
        used += cls->member_count;
    }
    return !c->overrun;
}

/* The shape at the front of section 13, checked against the sections read
 * before it; the cursor then at the first column. */
static gboolean read_alike_shape(reader *r, cursor *c, const rv_graph *stored, shape_read *read, uint32_t *columns)
{
    const char *section = section_names[SECTION_ALIKE];
    *c = section_cursor(r, SECTION_ALIKE);
    gboolean counts_ok = TRUE;
    if (r->version == RVG_ALIKE_VERSION) get_one_class(c, read, columns, stored->ranks->len);
    else counts_ok = get_classes(c, read, columns, stored->ranks->len);
    if (c->overrun) return fail(r, section, "the section is %zu bytes, too short for its shape", (size_t)c->section_length);
    if (!counts_ok) return fail(r, section, "its ranks and classes are not the ranks section's");
    if (*columns & ~(uint32_t)ALIKE_COLUMNS) return fail(r, section, "unknown columns 0x%x", *columns & ~(uint32_t)ALIKE_COLUMNS);
    const char *problem = rv_alike_shape_problem(stored, &read->shape);
    if (problem != NULL) return fail(r, section, "%s", problem);
    uint64_t cells = rv_alike_shape_cells(&read->shape);
    if (cells * column_bytes(*columns) != remaining(c))
        return fail(r, section, "%" G_GUINT64_FORMAT " tasks' columns need %" G_GUINT64_FORMAT " bytes but %zu follow the "
                    "shape", cells, cells * column_bytes(*columns), (size_t)remaining(c));
    return TRUE;
}

/* A column value's rank and task, for a message. */
static char *cell_text(const rv_alike_job *alike, gsize cell)
{
    for (guint c = 0; c < alike->class_count; c++) {
        const rv_alike_class *cls = &alike->classes[c];
        gsize cells = (gsize)cls->task_count * cls->member_count;
        if (cell >= cls->first_cell + cells) continue;
        gsize within = cell - cls->first_cell;
        return g_strdup_printf("task %zu of rank index %u", within / cls->member_count, cls->members[within % cls->member_count]);
    }
    return g_strdup_printf("cell %zu", cell);
}

static gboolean fail_at_cell(reader *r, const rv_alike_job *alike, gsize cell, const char *format, ...)
    G_GNUC_PRINTF(4, 5);
static gboolean fail_at_cell(reader *r, const rv_alike_job *alike, gsize cell, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *what = g_strdup_vprintf(format, args);
    va_end(args);
    char *where = cell_text(alike, cell);
    fail(r, section_names[SECTION_ALIKE], "%s %s", where, what);
    g_free(where);
    g_free(what);
    return FALSE;
}

/* A step column: each rank's own step of the task (of its class's), or -1. */
static gboolean steps_stand(reader *r, const rv_alike_job *alike)
{
    for (guint c = 0; c < alike->class_count && alike->step; c++) {
        const rv_alike_class *cls = &alike->classes[c];
        gsize end = cls->first_cell + (gsize)cls->task_count * cls->member_count;
        for (gsize i = cls->first_cell; i < end; i++)
            if (alike->step[i] < -1 || alike->step[i] >= cls->step_count)
                return fail_at_cell(r, alike, i, "belongs to step %d (its rank has %d)", alike->step[i], cls->step_count);
    }
    return TRUE;
}

/* Does some class have no steps (its ranks' windows need the recorded
 * starts)? */
static gboolean some_class_without_steps(const rv_alike_shape *shape)
{
    for (guint c = 0; c < shape->class_count; c++)
        if (shape->classes[c].step_count == 0) return TRUE;
    return FALSE;
}

/* Past count values of `width` bytes: read (the checksum covered them)
 * but not kept. */
static void skip_column(cursor *c, gsize count, gsize width)
{
    const gsize chunk = RVG_READ_WINDOW / 2 / width;
    for (gsize done = 0; done < count; done += chunk)
        if (take(c, MIN(chunk, count - done) * width) == NULL) return;
}

/* What a job held once is read for: rebuilding the joint graph needs every
 * column; a replay neither the correlation ids nor the payloads, and its
 * reports the recorded starts only for the unexplained time or a job
 * without steps. */
typedef enum { KEEP_ALL, KEEP_FOR_REPLAY, KEEP_FOR_REPLAY_AND_RECORDING } column_use;

static int64_t *get_or_skip_i64(cursor *c, gsize count, gboolean keep)
{
    if (keep) return get_column_i64(c, count);
    skip_column(c, count, sizeof(int64_t));
    return NULL;
}

/* Section 13 and the sections before it as the job held once. */
static rv_alike_job *read_alike_job(reader *r, rv_graph *stored, column_use use)
{
    cursor c;
    shape_read read = { { 0, 0, NULL }, NULL };
    uint32_t columns;
    GString *why = g_string_new(NULL);
    gboolean resources_ok = check_resources(stored, rv_strings_count(stored->strings), why);
    if (!resources_ok) fail(r, section_names[SECTION_RESOURCES], "%s", why->str);
    g_string_free(why, TRUE);
    if (!resources_ok || !read_alike_shape(r, &c, stored, &read, &columns)) {
        shape_read_clear(&read);
        return NULL;
    }
    gsize cells = rv_alike_shape_cells(&read.shape);
    int64_t *duration = get_column_i64(&c, cells), *overhead = get_column_i64(&c, cells);
    gboolean recorded = use != KEEP_FOR_REPLAY || some_class_without_steps(&read.shape);
    rv_alike_job *alike = rv_alike_assemble(stored, &read.shape, duration, overhead, get_or_skip_i64(&c, cells, recorded));
    shape_read_clear(&read);
    if (columns & ALIKE_CORRELATION) alike->correlation = get_or_skip_i64(&c, cells, use == KEEP_ALL);
    if (columns & ALIKE_BYTES) alike->bytes = get_or_skip_i64(&c, cells, use == KEEP_ALL);
    if (columns & ALIKE_STEP) alike->step = get_column_i32(&c, cells);
    if (columns & ALIKE_COLLECTIVE) alike->collective = get_column_i32(&c, cells);
    if (!c.overrun && remaining(&c) == 0 && steps_stand(r, alike)) return alike;
    if (c.overrun || remaining(&c) != 0)
        fail(r, section_names[SECTION_ALIKE], "the columns do not end where the section does");
    rv_alike_job_free(alike);
    return NULL;
}

/* Version 8 as the joint graph it stands for, checked whole. */
static rv_graph *load_alike_as_job(reader *r, rv_graph *stored)
{
    rv_alike_job *alike = read_alike_job(r, stored, KEEP_ALL);
    if (alike == NULL) return NULL;
    rv_graph *joint = rv_alike_to_job(alike);
    rv_alike_job_free(alike);
    if (check_loaded(r, joint)) return joint;
    rv_graph_free(joint);
    return NULL;
}

static rv_graph *load_graph(reader *r)
{
    uint32_t section_count = 0;
    if (!read_header(r, &section_count) || !read_table(r, section_count)) return NULL;
    rv_graph *graph = rv_graph_new(NULL, NULL), *loaded = NULL;
    if (read_sections(r, graph))
        loaded = r->version != RVG_FLAT_VERSION ? load_alike_as_job(r, graph) : check_loaded(r, graph) ? graph : NULL;
    if (loaded != graph) rv_graph_free(graph);
    return loaded;
}

/* ---- reading: a job held once, not rebuilt -------------------------------------- */

/* What the replay and the reports of a job held once read beyond the
 * structure (checked whole by check_loaded): each rank's times within the
 * limits the whole graph's checks would set, its collectives among the
 * job's, and each rank's step records. */
static gboolean columns_stand(reader *r, const rv_alike_job *alike)
{
    const char *section = section_names[SECTION_ALIKE];
    gsize cells = alike->cell_count;
    uint64_t work = 0;
    for (gsize i = 0; i < cells; i++) {
        int64_t duration = alike->duration_ns[i], overhead = alike->host_overhead_ns[i];
        if (duration < 0 || overhead < 0 || duration > RV_MAX_DURATION_NS || overhead > RV_MAX_DURATION_NS ||
            (alike->recorded_start_ns && !recorded_time_ok(alike->recorded_start_ns[i])))
            return fail_at_cell(r, alike, i, "has an impossible time");
        work += (uint64_t)duration + (uint64_t)overhead;
        if (work > (uint64_t)RV_MAX_WORK_NS)
            return fail(r, section, "the durations and host overheads add up to more than 2^61 ns");
        if (alike->collective && (alike->collective[i] < 0 || (guint)alike->collective[i] > alike->structure->collectives->len))
            return fail_at_cell(r, alike, i, "belongs to collective %d (there are %u)", alike->collective[i],
                                alike->structure->collectives->len);
    }
    for (guint s = 0; s < alike->steps->len; s++) {
        const rv_step *step = &g_array_index(alike->steps, rv_step, s);
        if (!string_ok(step->name, rv_strings_count(alike->structure->strings)) ||
            !recorded_time_ok(step->recorded_begin_ns) || !recorded_time_ok(step->recorded_end_ns))
            return fail(r, section_names[SECTION_STEPS], "step %u has an impossible name or time", s);
    }
    return TRUE;
}

/* Version 8 as the job held once; NULL with *held FALSE for version 7. */
static rv_alike_job *load_alike(reader *r, column_use use, gboolean *held)
{
    uint32_t section_count = 0;
    *held = FALSE;
    if (!read_header(r, &section_count)) return NULL;
    if (r->version == RVG_FLAT_VERSION) return NULL;
    *held = TRUE;
    if (!read_table(r, section_count)) return NULL;
    rv_graph *stored = rv_graph_new(NULL, NULL);
    rv_alike_job *alike = read_sections(r, stored) ? read_alike_job(r, stored, use) : NULL;
    rv_graph_free(stored);
    if (alike == NULL) return NULL;
    g_array_set_size(alike->structure->memory, 0); /* the job's records; the replay reads none */
    if (check_loaded(r, alike->structure) && columns_stand(r, alike)) return alike;
    rv_alike_job_free(alike);
    return NULL;
}

rv_graph *rv_store_load_buffer(const guint8 *data, gsize length, const char *name, GError **error)
{
    reader r = { name ? name : "(buffer)", data, length, { { 0 } }, error, NULL, 0 };
    return load_graph(&r);
}

/* A file that cannot be read as it is decoded (a pipe, say) is read whole
 * first. */
typedef gpointer (*file_loader)(reader *r, gpointer data);

static gpointer load_graph_from(reader *r, gpointer data)
{
    (void)data;
    return load_graph(r);
}

typedef struct {
    column_use use;
    gboolean *held;
} alike_request;

static gpointer load_alike_from(reader *r, gpointer data)
{
    alike_request *request = data;
    return load_alike(r, request->use, request->held);
}

static void free_loaded(file_loader loader, gpointer loaded)
{
    if (loader == load_alike_from) rv_alike_job_free(loaded);
    else rv_graph_free(loaded);
}

static gpointer load_whole(const char *path, file_loader loader, gpointer data, GError **error)
{
    gchar *contents = NULL;
    gsize length = 0;
    GError *io_error = NULL;
    if (!g_file_get_contents(path, &contents, &length, &io_error)) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s", io_error->message);
        g_error_free(io_error);
        return NULL;
    }
    reader r = { path, (const guint8 *)contents, length, { { 0 } }, error, NULL, 0 };
    gpointer loaded = loader(&r, data);
    g_free(contents);
    return loaded;
}

/* The file section by section (section_source): the same checks in the
 * same order as a buffer gets, so the same file gives the same graph or
 * the same error either way; a read error says so instead. */
static gpointer load_streamed(const char *path, FILE *file, gsize file_length, file_loader loader, gpointer data,
                              GError **error)
{
    guint8 head[RVG_HEADER_SIZE + (gsize)RVG_ENTRY_SIZE * RVG_MAX_SECTIONS];
    section_source source = { file, 0, NULL, 0, FALSE };
    gsize wanted = MIN(sizeof head, file_length);
    if (fread(head, 1, wanted, file) != wanted) source.failed = TRUE;
    reader r = { path, head, file_length, { { 0 } }, error, &source, 0 };
    gpointer loaded = source.failed ? NULL : loader(&r, data);
    if (source.failed) {
        g_clear_error(error);
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: read error: %s", path,
                    ferror(file) ? g_strerror(errno) : "the file became shorter while it was read");
        if (loaded != NULL) free_loaded(loader, loaded);
        loaded = NULL;
    }
    g_free(source.buffer);
    return loaded;
}

static gpointer load_file(const char *path, file_loader loader, gpointer data, GError **error)
{
    rv_output_note_input(path); /* no output of this run may replace it */
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %s", path, g_strerror(errno));
        return NULL;
    }
    struct stat info;
    gpointer loaded;
    if (fstat(fileno(file), &info) == 0 && S_ISREG(info.st_mode) && (guint64)info.st_size <= G_MAXSIZE)
        loaded = load_streamed(path, file, (gsize)info.st_size, loader, data, error);
    else
        loaded = load_whole(path, loader, data, error);
    fclose(file);
    return loaded;
}

rv_graph *rv_store_load(const char *path, GError **error)
{
    return load_file(path, load_graph_from, NULL, error);
}

rv_alike_job *rv_store_load_alike_buffer(const guint8 *data, gsize length, const char *name, gboolean recorded_starts,
                                        gboolean *held, GError **error)
{
    *held = FALSE;
    reader r = { name ? name : "(buffer)", data, length, { { 0 } }, error, NULL, 0 };
    return load_alike(&r, recorded_starts ? KEEP_FOR_REPLAY_AND_RECORDING : KEEP_FOR_REPLAY, held);
}

rv_alike_job *rv_store_load_alike(const char *path, gboolean recorded_starts, gboolean *held, GError **error)
{
    *held = FALSE;
    alike_request request = { recorded_starts ? KEEP_FOR_REPLAY_AND_RECORDING : KEEP_FOR_REPLAY, held };
    return load_file(path, load_alike_from, &request, error);
}

gboolean rv_store_is_graph_file(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) return FALSE;
    guint8 head[sizeof rvg_magic];
    gboolean is_graph = fread(head, 1, sizeof head, file) == sizeof head &&
                        memcmp(head, rvg_magic, sizeof head) == 0;
    fclose(file);
    return is_graph;
}
