/*
 * test_store.c - Check tests for saved graphs (src/store/store.c).
 *
 * Round trips: a graph saved and loaded again must equal the original in
 * every field and replay to exactly the same step times, for a hand-built
 * graph and for every trace the project ships (traces/, with its subfolders).
 * Robustness: every truncation, every single-bit flip, a newer version, an
 * empty file, a JSON trace under a .rvg name, hand-forged fields with valid
 * checksums and the fuzzer's regression inputs must each fail with one
 * RV_ERROR_INPUT message, never crash and never load.
 *
 * Directories come from the environment (set by tests/meson.build):
 *   REVERIE_TRACES             traces/ (the program is skipped when a trace it
 *                              names is missing)
 *   REVERIE_FUZZ_REGRESSIONS   tests/fuzz/regressions
 */
#define _GNU_SOURCE /* memmem */
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/comm.h"
#include "reverie/job.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/store.h"
#include "reverie/trace.h"

#include <check.h>
#include "project_traces.h"
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* The layout constants the tests forge against (see store.c). */
enum { HEADER_SIZE = 24, ENTRY_SIZE = 24, TASK_SIZE = 72, EDGE_SIZE = 10, STEP_SIZE = 28, RESOURCE_SIZE = 95,
       COLLECTIVE_SIZE = 40, RANK_SIZE = 32, LAUNCH_SIZE = 20 };
enum { SEC_STRINGS = 1, SEC_RESOURCES, SEC_TASKS, SEC_EDGES, SEC_STEPS, SEC_METADATA, SEC_COLLECTIVES, SEC_RANKS,
       SEC_MEMORY, SEC_LAUNCHES, SEC_HOST_OPERATORS, SEC_OP_ARGS, SEC_ALIKE };

/* ---- helpers: files and bytes ------------------------------------------ */

static char *temp_dir(void)
{
    GError *error = NULL;
    char *dir = g_dir_make_tmp("test_store-XXXXXX", &error);
    ck_assert_msg(dir != NULL, "%s", error ? error->message : "");
    return dir;
}

static void remove_dir(char *dir)
{
    GDir *handle = g_dir_open(dir, 0, NULL);
    const char *name;
    while (handle && (name = g_dir_read_name(handle)) != NULL) {
        char *path = g_build_filename(dir, name, NULL);
        g_remove(path);
        g_free(path);
    }
    if (handle) g_dir_close(handle);
    g_rmdir(dir);
    g_free(dir);
}

/* The bytes rv_store_save writes for graph. */
static guint8 *save_bytes(const rv_graph *graph, gsize *length)
{
    char *dir = temp_dir();
    char *path = g_build_filename(dir, "graph.rvg", NULL);
    GError *error = NULL;
    ck_assert_msg(rv_store_save(graph, path, &error), "save: %s", error ? error->message : "");
    gchar *contents = NULL;
    ck_assert(g_file_get_contents(path, &contents, length, NULL));
    g_free(path);
    remove_dir(dir);
    return (guint8 *)contents;
}

static rv_graph *load_bytes(const guint8 *data, gsize length)
{
    GError *error = NULL;
    rv_graph *graph = rv_store_load_buffer(data, length, "test.rvg", &error);
    ck_assert_msg(graph != NULL, "load: %s", error ? error->message : "");
    return graph;
}

/* Loading must fail with RV_ERROR_INPUT, naming the file, and (if want is
 * given) saying want. */
static void expect_load_error(const guint8 *data, gsize length, const char *want, const char *what)
{
    GError *error = NULL;
    rv_graph *graph = rv_store_load_buffer(data, length, "test.rvg", &error);
    ck_assert_msg(graph == NULL, "%s: a damaged file loaded", what);
    ck_assert_msg(error != NULL, "%s: no error set", what);
    ck_assert_msg(error->domain == RV_ERROR && error->code == RV_ERROR_INPUT, "%s: error code %d: %s", what,
                  error->code, error->message);
    ck_assert_msg(g_str_has_prefix(error->message, "test.rvg: "), "%s: message lacks the file: %s", what,
                  error->message);
    ck_assert_msg(strchr(error->message, '\n') == NULL, "%s: message is not one line", what);
    if (want != NULL)
        ck_assert_msg(strstr(error->message, want) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
                      error->message, want);
    g_error_free(error);
}

/* The bytes written to a file and loaded from it (read section by section,
 * store.c) give what loading them from memory gives: the same error
 * message, or a graph that saves back to the same bytes. */
static void expect_file_loads_like_buffer(const guint8 *data, gsize length, const char *what)
{
    char *dir = temp_dir();
    char *path = g_build_filename(dir, "damaged.rvg", NULL);
    ck_assert(g_file_set_contents(path, (const char *)data, (gssize)length, NULL));
    GError *from_file = NULL, *from_buffer = NULL;
    rv_graph *file_graph = rv_store_load(path, &from_file);
    rv_graph *buffer_graph = rv_store_load_buffer(data, length, path, &from_buffer);
    ck_assert_msg((file_graph == NULL) == (buffer_graph == NULL), "%s: one way loads, the other does not", what);
    if (file_graph == NULL) {
        ck_assert_msg(from_file && from_buffer && strcmp(from_file->message, from_buffer->message) == 0,
                      "%s: the file says \"%s\", the buffer \"%s\"", what, from_file ? from_file->message : "",
                      from_buffer ? from_buffer->message : "");
    } else {
        gsize again_length = 0;
        guint8 *again = save_bytes(file_graph, &again_length);
        ck_assert_msg(again_length == length && memcmp(again, data, length) == 0, "%s: saved back differently", what);
        g_free(again);
    }
    g_clear_error(&from_file);
    g_clear_error(&from_buffer);
    rv_graph_free(file_graph);
    rv_graph_free(buffer_graph);
    g_free(path);
    remove_dir(dir);
}

static uint32_t le32(const guint8 *at)
{
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

static void put_le(guint8 *at, uint64_t value, int width)
{
    for (int i = 0; i < width; i++) at[i] = (guint8)(value >> (8 * i));
}

/* Where section id starts in the file (its table entry's offset). */
static gsize section_offset(const guint8 *data, uint32_t id)
{
    uint32_t count = le32(data + 12);
    for (uint32_t i = 0; i < count; i++) {
        const guint8 *entry = data + HEADER_SIZE + ENTRY_SIZE * i;
        if (le32(entry) == id) return (gsize)le32(entry + 8) | (gsize)le32(entry + 12) << 32;
    }
    ck_abort_msg("no section %u", id);
    return 0;
}

/* Where section id ends in the file. */
static gsize section_end(const guint8 *data, uint32_t id)
{
    uint32_t count = le32(data + 12);
    for (uint32_t i = 0; i < count; i++) {
        const guint8 *entry = data + HEADER_SIZE + ENTRY_SIZE * i;
        if (le32(entry) == id)
            return section_offset(data, id) + ((gsize)le32(entry + 16) | (gsize)le32(entry + 20) << 32);
    }
    ck_abort_msg("no section %u", id);
    return 0;
}

/* Recompute every checksum, so a forged field reaches the graph checks. */
static void fix_checksums(guint8 *data, gsize length)
{
    if (length < HEADER_SIZE) return;
    uint32_t count = le32(data + 12);
    gsize table_end = HEADER_SIZE + (gsize)ENTRY_SIZE * count;
    if (table_end > length) return; /* the reader rejects the count first */
    for (uint32_t i = 0; i < count; i++) {
        guint8 *entry = data + HEADER_SIZE + ENTRY_SIZE * i;
        gsize offset = (gsize)le32(entry + 8) | (gsize)le32(entry + 12) << 32;
        gsize size = (gsize)le32(entry + 16) | (gsize)le32(entry + 20) << 32;
        if (offset <= length && size <= length - offset)
            put_le(entry + 4, crc32_z(0, data + offset, size), 4);
    }
    static const guint8 zero[4] = { 0 };
    uLong crc = crc32_z(0, data, 16);
    crc = crc32_z(crc, zero, 4);
    crc = crc32_z(crc, data + 20, table_end - 20);
    put_le(data + 16, crc, 4);
}

/* ---- helpers: graphs ------------------------------------------------------ */

static rv_task make_task(int32_t resource, const rv_graph *graph, const char *name, rv_task_kind kind,
                         int64_t start, int64_t duration)
{
    rv_task task = { 0 };
    task.resource = resource;
    task.name = rv_strings_intern(graph->strings, name);
    task.kind = (uint8_t)kind;
    task.phase = RV_PHASE_FORWARD;
    task.recorded_start_ns = start;
    task.duration_ns = duration;
    task.correlation = -1;
    task.input_dims = -1;
    task.step = 0;
    return task;
}

/* A small graph using every section and most fields, built through the
 * public API so these tests need no trace files. */
static rv_graph *hand_built_graph(void)
{
    rv_graph *graph = rv_graph_new(NULL, "hand-built.json");
    int32_t cpu = rv_graph_add_resource(graph, RV_RES_CPU_THREAD, 11, 12, "thread 11/12");
    int32_t gpu = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    rv_graph_add_resource(graph, RV_RES_CHANNEL, -1, -1, "net");
    rv_resource *stream = &g_array_index(graph->resources, rv_resource, gpu);
    stream->launch_latency_ns = 1500;
    stream->idle_gap_ns = 900;
    stream->queue_depth = 1024;
    int32_t step_name = rv_strings_intern(graph->strings, "ProfilerStep#1");

    rv_task begin = make_task(cpu, graph, "ProfilerStep#1", RV_TASK_MARKER, 1000, 0);
    begin.flags = RV_TASK_FLAG_STEP_BEGIN;
    begin.phase = RV_PHASE_OTHER;
    rv_task launch = make_task(cpu, graph, "cudaLaunchKernel", RV_TASK_CPU, 1000, 5000);
    launch.host_overhead_ns = 700;
    launch.correlation = 42;
    launch.op = rv_strings_intern(graph->strings, "aten::mm");
    launch.layer = rv_strings_intern(graph->strings, "layerA");
    launch.input_dims = rv_strings_intern(graph->strings, "[[2, 3], [3, 4]]");
    rv_task kernel = make_task(gpu, graph, "gemm_kernel", RV_TASK_KERNEL, 4000, 20000);
    kernel.flags = RV_TASK_FLAG_GPU;
    kernel.correlation = 42;
    kernel.layer = rv_strings_intern(graph->strings, "layerB");
    kernel.bytes = 1 << 20;
    kernel.phase = RV_PHASE_BACKWARD;
    rv_task sync = make_task(cpu, graph, "cudaDeviceSynchronize", RV_TASK_SYNC, 6700, 300);
    sync.flags = RV_TASK_FLAG_BLOCKING;
    sync.phase = RV_PHASE_OPTIMIZER;
    rv_task end = make_task(cpu, graph, "ProfilerStep#1", RV_TASK_MARKER, 30000, 0);
    end.flags = RV_TASK_FLAG_STEP_END;
    end.phase = RV_PHASE_OTHER;

    int32_t ids[5] = {
        rv_graph_add_task(graph, &begin), rv_graph_add_task(graph, &launch), rv_graph_add_task(graph, &kernel),
        rv_graph_add_task(graph, &sync), rv_graph_add_task(graph, &end),
    };
    rv_graph_add_edge(graph, ids[0], ids[1], RV_EDGE_THREAD, FALSE);
    rv_graph_add_edge(graph, ids[1], ids[2], RV_EDGE_LAUNCH, FALSE);
    rv_graph_add_edge(graph, ids[1], ids[3], RV_EDGE_THREAD, FALSE);
    rv_graph_add_edge(graph, ids[2], ids[3], RV_EDGE_SYNC, FALSE);
    rv_graph_add_edge(graph, ids[3], ids[4], RV_EDGE_THREAD, FALSE);

    rv_step step = { step_name, 1000, 24000, ids[0], ids[4] };
    g_array_append_val(graph->steps, step);
    g_ptr_array_add(graph->device_names, g_strdup("Tesla V100-SXM2-32GB"));
    g_ptr_array_add(graph->device_names, g_strdup("Tesla V100-SXM2-32GB"));
    graph->rank = 1;
    graph->world_size = 8;
    graph->backend = g_strdup("nccl");
    graph->legacy_schema = TRUE;
    graph->trace_stats = (rv_trace_stats){ 100, 90, 1, 2, 3, 4, 5, 123456789, 2 };
    graph->build_stats.nested_runtime_calls = 6;
    graph->build_stats.sync_events_used = 7;
    graph->build_stats.dropped_edges = 8;
    graph->build_stats.queue_blocked_launches = 9;
    graph->timing = (rv_timing){ .clock_offset = { -2500, 9000, 12, RV_SOURCE_MEASURED }, .offset_low_ns = -3000,
                                 .offset_high_ns = 6000, .offset_launch_pairs = 10, .offset_sync_pairs = 2,
                                 .offset_contradicted = 1, .launch_latency = { 1500, 200, 30, RV_SOURCE_MEASURED },
                                 .idle_gap = { 900, 100, 40, RV_SOURCE_TRACE_WIDE },
                                 .queue_depth = { 1024, 0, 50, RV_SOURCE_PRIOR }, .sync_return = { 5000, 0, 3, RV_SOURCE_PRIOR },
                                 .queue_unblocked_in_flight = 700, .clock_status = RV_CLOCK_CORRECTED,
                                 .profiler_op_cost = { 1200, 800, 45, RV_SOURCE_BOUND }, .profiled_operators = 7 };
    /* the kernel is rank 1's part of an all-reduce among 8 */
    rv_collective_info all_reduce = { 1 << 20, 17, rv_strings_intern(graph->strings, "0"), 8, -1, -1, 1, 0,
                                      RV_PARALLEL_DATA, RV_MATCH_NONE, 0 };
    rv_graph_task(graph, ids[2])->collective = rv_graph_add_collective(graph, &all_reduce);
    rv_rank rank = { 1, 8, -1234, rv_strings_intern(graph->strings, "rank1.json"), 3 };
    g_array_append_val(graph->ranks, rank);
    /* what [memory] events recorded before the step and in it */
    rv_memory_record outside = { 1000, 2 << 20, -1, 3, 1000, 0, -1, 0 };
    rv_memory_record inside = { 5000, 4 << 20, 1000, 12, 4000, 0, 0, 0 };
    g_array_append_val(graph->memory, outside);
    g_array_append_val(graph->memory, inside);
    /* the kernel ran 264 blocks of 128 threads, 32 registers each, 4 KiB of shared memory */
    g_array_set_size(graph->launches, (guint)ids[2] + 1);
    g_array_index(graph->launches, rv_launch, ids[2]) = (rv_launch){ 264, 128, 32, 4096 };
    /* the profiler recorded 7 operators before the launch call (task 1) */
    g_array_set_size(graph->host_operators, 2);
    g_array_index(graph->host_operators, uint32_t, 1) = 7;
    /* the launch call's operator was a stride-2 convolution */
    rv_task_set_op_args(graph, 1, rv_strings_intern(graph->strings, "{\"stride\":[2,2],\"padding\":[1,1]}"));
    return graph;
}

static void assert_strings_equal(const rv_graph *a, const rv_graph *b)
{
    ck_assert_int_eq(rv_strings_count(a->strings), rv_strings_count(b->strings));
    for (int32_t id = 0; id < rv_strings_count(a->strings); id++)
        ck_assert_str_eq(rv_strings_get(a->strings, id), rv_strings_get(b->strings, id));
}

static void assert_resources_equal(const rv_graph *a, const rv_graph *b)
{
    ck_assert_uint_eq(a->resources->len, b->resources->len);
    for (guint r = 0; r < a->resources->len; r++) {
        const rv_resource *x = &g_array_index(a->resources, rv_resource, r);
        const rv_resource *y = &g_array_index(b->resources, rv_resource, r);
        ck_assert(x->process == y->process && x->thread == y->thread);
        ck_assert(x->name == y->name && x->kind == y->kind);
        ck_assert(x->launch_latency_ns == y->launch_latency_ns && x->idle_gap_ns == y->idle_gap_ns &&
                  x->queue_depth == y->queue_depth && x->rank_index == y->rank_index);
    }
}

static void assert_task_equal(const rv_task *x, const rv_task *y, guint id)
{
    ck_assert_msg(x->duration_ns == y->duration_ns && x->host_overhead_ns == y->host_overhead_ns &&
                  x->recorded_start_ns == y->recorded_start_ns && x->correlation == y->correlation &&
                  x->bytes == y->bytes, "task %u: times, correlation or bytes differ", id);
    ck_assert_msg(x->resource == y->resource && x->name == y->name && x->op == y->op && x->layer == y->layer &&
                  x->input_dims == y->input_dims && x->step == y->step, "task %u: indices differ", id);
    ck_assert_msg(x->kind == y->kind && x->phase == y->phase && x->flags == y->flags && x->collective == y->collective,
                  "task %u: kind, phase, flags or collective differ", id);
}

static void assert_tasks_edges_steps_equal(const rv_graph *a, const rv_graph *b)
{
    ck_assert_uint_eq(a->tasks->len, b->tasks->len);
    for (guint t = 0; t < a->tasks->len; t++)
        assert_task_equal(&g_array_index(a->tasks, rv_task, t), &g_array_index(b->tasks, rv_task, t), t);
    ck_assert_uint_eq(a->edges->len, b->edges->len);
    for (guint e = 0; e < a->edges->len; e++) {
        const rv_edge *x = &g_array_index(a->edges, rv_edge, e), *y = &g_array_index(b->edges, rv_edge, e);
        ck_assert_msg(x->from == y->from && x->to == y->to && x->kind == y->kind && x->from_start == y->from_start,
                      "edge %u differs", e);
    }
    ck_assert_uint_eq(a->steps->len, b->steps->len);
    for (guint s = 0; s < a->steps->len; s++) {
        const rv_step *x = &g_array_index(a->steps, rv_step, s), *y = &g_array_index(b->steps, rv_step, s);
        ck_assert_msg(x->name == y->name && x->recorded_begin_ns == y->recorded_begin_ns &&
                      x->recorded_end_ns == y->recorded_end_ns && x->begin_marker == y->begin_marker &&
                      x->end_marker == y->end_marker, "step %u differs", s);
    }
}

/* Field by field: rv_estimate has padding, which nothing writes. */
static void assert_estimate_equal(const rv_estimate *a, const rv_estimate *b)
{
    ck_assert(a->value == b->value && a->spread == b->spread && a->samples == b->samples && a->source == b->source);
}

static void assert_timing_equal(const rv_timing *a, const rv_timing *b)
{
    assert_estimate_equal(&a->clock_offset, &b->clock_offset);
    assert_estimate_equal(&a->launch_latency, &b->launch_latency);
    assert_estimate_equal(&a->idle_gap, &b->idle_gap);
    assert_estimate_equal(&a->queue_depth, &b->queue_depth);
    assert_estimate_equal(&a->sync_return, &b->sync_return);
    assert_estimate_equal(&a->profiler_op_cost, &b->profiler_op_cost);
    ck_assert(a->profiled_operators == b->profiled_operators);
    ck_assert(a->offset_low_ns == b->offset_low_ns && a->offset_high_ns == b->offset_high_ns &&
              a->offset_launch_pairs == b->offset_launch_pairs && a->offset_sync_pairs == b->offset_sync_pairs &&
              a->offset_contradicted == b->offset_contradicted &&
              a->queue_unblocked_in_flight == b->queue_unblocked_in_flight && a->clock_status == b->clock_status);
}

static void assert_metadata_equal(const rv_graph *a, const rv_graph *b)
{
    ck_assert_str_eq(a->source, b->source);
    ck_assert_uint_eq(a->device_names->len, b->device_names->len);
    for (guint d = 0; d < a->device_names->len; d++)
        ck_assert_str_eq(g_ptr_array_index(a->device_names, d), g_ptr_array_index(b->device_names, d));
    ck_assert(a->rank == b->rank && a->world_size == b->world_size);
    ck_assert(g_strcmp0(a->backend, b->backend) == 0);
    ck_assert(!a->legacy_schema == !b->legacy_schema && !a->whole_trace_step == !b->whole_trace_step);
    ck_assert(memcmp(&a->trace_stats, &b->trace_stats, sizeof a->trace_stats) == 0);
    ck_assert(memcmp(&a->build_stats, &b->build_stats, sizeof a->build_stats) == 0);
    assert_timing_equal(&a->timing, &b->timing);
    ck_assert_uint_eq(a->collectives->len, b->collectives->len);
    for (guint c = 0; c < a->collectives->len; c++) {
        const rv_collective_info *x = &g_array_index(a->collectives, rv_collective_info, c);
        const rv_collective_info *y = &g_array_index(b->collectives, rv_collective_info, c);
        ck_assert_msg(x->bytes == y->bytes && x->seq == y->seq && x->group == y->group &&
                      x->group_size == y->group_size && x->peer == y->peer && x->rendezvous == y->rendezvous &&
                      x->participants == y->participants && x->op == y->op && x->parallelism == y->parallelism &&
                      x->matched_by == y->matched_by && x->inserted == y->inserted, "collective %u differs", c);
    }
    ck_assert_uint_eq(a->ranks->len, b->ranks->len);
    for (guint r = 0; r < a->ranks->len; r++) {
        const rv_rank *x = &g_array_index(a->ranks, rv_rank, r), *y = &g_array_index(b->ranks, rv_rank, r);
        ck_assert_msg(x->rank == y->rank && x->world_size == y->world_size && x->clock_offset_ns == y->clock_offset_ns &&
                      x->source == y->source && x->offset_samples == y->offset_samples, "rank index %u differs", r);
    }
    ck_assert_uint_eq(a->memory->len, b->memory->len);
    for (guint m = 0; m < a->memory->len; m++) {
        const rv_memory_record *x = &g_array_index(a->memory, rv_memory_record, m);
        const rv_memory_record *y = &g_array_index(b->memory, rv_memory_record, m);
        ck_assert_msg(x->peak_allocated == y->peak_allocated && x->peak_reserved == y->peak_reserved &&
                      x->allocated_before == y->allocated_before && x->events == y->events &&
                      x->peak_above_start == y->peak_above_start &&
                      x->device == y->device && x->step == y->step && x->rank_index == y->rank_index,
                      "memory record %u differs", m);
    }
    ck_assert_uint_eq(a->launches->len, b->launches->len);
    ck_assert_msg(a->launches->len == 0 ||
                      memcmp(a->launches->data, b->launches->data, a->launches->len * sizeof(rv_launch)) == 0,
                  "launches differ");
    ck_assert_uint_eq(a->host_operators->len, b->host_operators->len);
    ck_assert_msg(a->host_operators->len == 0 ||
                      memcmp(a->host_operators->data, b->host_operators->data, a->host_operators->len * 4) == 0,
                  "host operators differ");
    ck_assert_uint_eq(a->op_args->len, b->op_args->len);
    ck_assert_msg(a->op_args->len == 0 || memcmp(a->op_args->data, b->op_args->data, a->op_args->len * 4) == 0,
                  "operator arguments differ");
}

/* Replays of both graphs agree task by task and step by step. */
static void assert_same_replay(const rv_graph *a, const rv_graph *b)
{
    rv_sim_result sim_a = { 0 }, sim_b = { 0 };
    GError *error = NULL;
    gboolean ok_a = rv_simulate(a, NULL, &sim_a, &error);
    g_clear_error(&error);
    gboolean ok_b = rv_simulate(b, NULL, &sim_b, &error);
    g_clear_error(&error);
    ck_assert(ok_a == ok_b);
    if (!ok_a || sim_a.task_count == 0) return;
    ck_assert(memcmp(sim_a.start_ns, sim_b.start_ns, sizeof(int64_t) * (gsize)sim_a.task_count) == 0);
    ck_assert(memcmp(sim_a.end_ns, sim_b.end_ns, sizeof(int64_t) * (gsize)sim_a.task_count) == 0);
    GArray *times_a = rv_step_times(a, &sim_a), *times_b = rv_step_times(b, &sim_b);
    ck_assert_uint_eq(times_a->len, times_b->len);
    for (guint s = 0; s < times_a->len; s++) {
        const rv_step_time *x = &g_array_index(times_a, rv_step_time, s);
        const rv_step_time *y = &g_array_index(times_b, rv_step_time, s);
        ck_assert_str_eq(x->name, y->name);
        ck_assert(x->recorded_ns == y->recorded_ns && x->simulated_ns == y->simulated_ns);
    }
    g_array_unref(times_a);
    g_array_unref(times_b);
    rv_sim_result_clear(&sim_a);
    rv_sim_result_clear(&sim_b);
}

/* Save, load, compare everything; saving the loaded graph gives the same bytes. */
static void assert_round_trip(const rv_graph *graph)
{
    gsize length = 0, again_length = 0;
    guint8 *bytes = save_bytes(graph, &length);
    rv_graph *loaded = load_bytes(bytes, length);
    expect_file_loads_like_buffer(bytes, length, graph->source ? graph->source : "round trip");
    assert_strings_equal(graph, loaded);
    assert_resources_equal(graph, loaded);
    assert_tasks_edges_steps_equal(graph, loaded);
    assert_metadata_equal(graph, loaded);
    assert_same_replay(graph, loaded);
    guint8 *again = save_bytes(loaded, &again_length);
    ck_assert(length == again_length && memcmp(bytes, again, length) == 0);
    g_free(again);
    rv_graph_free(loaded);
    g_free(bytes);
}

static guint8 *hand_built_bytes(gsize *length)
{
    rv_graph *graph = hand_built_graph();
    guint8 *bytes = save_bytes(graph, length);
    rv_graph_free(graph);
    return bytes;
}

/* The graph of a trace, or NULL (with a note) if the importer rejects it. */
static rv_graph *graph_of_trace(const char *path)
{
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, NULL, &error);
    rv_graph *graph = trace ? rv_graph_build(trace, &error) : NULL;
    if (graph == NULL) {
        fprintf(stderr, "note: %s does not import (%s); not round-tripped\n", path, error ? error->message : "?");
        g_clear_error(&error);
    }
    if (trace) rv_trace_free(trace);
    return graph;
}

/* Every .json / .json.gz file in a folder and its subfolders; how many. */
static int for_each_trace_in(const char *dir_name, void (*check)(const char *path))
{
    GDir *dir = g_dir_open(dir_name, 0, NULL);
    if (dir == NULL) return 0;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) g_ptr_array_add(names, g_strdup(name));
    g_dir_close(dir);
    g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
    int count = 0;
    for (guint i = 0; i < names->len; i++) {
        const char *entry = g_ptr_array_index(names, i);
        char *path = g_build_filename(dir_name, entry, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
            count += for_each_trace_in(path, check);
        } else if (g_str_has_suffix(entry, ".json") || g_str_has_suffix(entry, ".json.gz")) {
            check(path);
            count++;
        }
        g_free(path);
    }
    g_ptr_array_unref(names);
    return count;
}

/* The same for the folder named by env_name; 0 if it is not set. */
static int for_each_trace(const char *env_name, void (*check)(const char *path))
{
    const char *dir_name = g_getenv(env_name);
    return dir_name ? for_each_trace_in(dir_name, check) : 0;
}

static void round_trip_trace(const char *path)
{
    rv_graph *graph = graph_of_trace(path);
    if (graph == NULL) return;
    assert_round_trip(graph);
    rv_graph_free(graph);
}

/* A small real graph for the exhaustive damage tests. */
static guint8 *event_sync_bytes(gsize *length)
{
    char *path = project_trace_path("hta_event_sync.json.gz");
    rv_graph *graph = graph_of_trace(path);
    g_free(path);
    ck_assert(graph != NULL);
    guint8 *bytes = save_bytes(graph, length);
    rv_graph_free(graph);
    return bytes;
}

/* ---- round trips ------------------------------------------------------------ */

START_TEST(round_trip_hand_built)
{
    rv_graph *graph = hand_built_graph();
    assert_round_trip(graph);
    rv_graph_free(graph);
}
END_TEST

START_TEST(round_trip_empty_graph)
{
    rv_graph *graph = rv_graph_new(NULL, NULL);
    graph->whole_trace_step = TRUE;
    assert_round_trip(graph);
    rv_graph_free(graph);
}
END_TEST


START_TEST(round_trip_project_traces)
{
    int count = for_each_trace("REVERIE_TRACES", round_trip_trace);
    ck_assert_int_gt(count, 8);
}
END_TEST

START_TEST(saving_is_deterministic)
{
    gsize first_length, second_length;
    guint8 *first = hand_built_bytes(&first_length);
    guint8 *second = hand_built_bytes(&second_length);
    ck_assert(first_length == second_length && memcmp(first, second, first_length) == 0);
    /* The header is the documented, stable one. */
    ck_assert(memcmp(first, "RVGRAPH\0", 8) == 0);
    ck_assert_uint_eq(le32(first + 8), 7);
    ck_assert_uint_eq(le32(first + 12), 12);
    ck_assert_uint_eq(le32(first + 20), 0);
    g_free(first);
    g_free(second);
}
END_TEST

START_TEST(is_graph_file_reads_content)
{
    char *dir = temp_dir();
    char *graph_path = g_build_filename(dir, "g.rvg", NULL);
    char *short_path = g_build_filename(dir, "short.rvg", NULL);
    rv_graph *graph = hand_built_graph();
    ck_assert(rv_store_save(graph, graph_path, NULL));
    ck_assert(g_file_set_contents(short_path, "RVGRAP", 6, NULL));
    ck_assert(rv_store_is_graph_file(graph_path));
    ck_assert(!rv_store_is_graph_file(short_path));
    ck_assert(!rv_store_is_graph_file(dir));
    ck_assert(!rv_store_is_graph_file("/nonexistent/graph.rvg"));
    rv_graph *loaded = rv_store_load(graph_path, NULL);
    ck_assert_ptr_nonnull(loaded);
    ck_assert_str_eq(loaded->source, "hand-built.json");
    rv_graph_free(loaded);
    rv_graph_free(graph);
    g_free(graph_path);
    g_free(short_path);
    remove_dir(dir);
}
END_TEST

/* ---- damaged files ---------------------------------------------------------- */

static void every_truncation_fails(const guint8 *bytes, gsize length)
{
    for (gsize cut = 0; cut < length; cut++) {
        guint8 *copy = g_memdup2(bytes, cut); /* exact size, so ASan sees any overread */
        char what[64];
        g_snprintf(what, sizeof what, "cut at %zu of %zu bytes", (size_t)cut, (size_t)length);
        expect_load_error(copy, cut, NULL, what);
        g_free(copy);
    }
}

static void every_bit_flip_fails(const guint8 *bytes, gsize length)
{
    guint8 *copy = g_memdup2(bytes, length);
    for (gsize at = 0; at < length; at++) {
        for (int bit = 0; bit < 8; bit++) {
            copy[at] ^= (guint8)(1u << bit);
            char what[64];
            g_snprintf(what, sizeof what, "bit %d of byte %zu flipped", bit, (size_t)at);
            expect_load_error(copy, length, NULL, what);
            copy[at] ^= (guint8)(1u << bit);
        }
    }
    g_free(copy);
}

START_TEST(truncated_hand_built)
{
    gsize length;
    guint8 *bytes = hand_built_bytes(&length);
    every_truncation_fails(bytes, length);
    g_free(bytes);
}
END_TEST

START_TEST(bit_flips_hand_built)
{
    gsize length;
    guint8 *bytes = hand_built_bytes(&length);
    every_bit_flip_fails(bytes, length);
    g_free(bytes);
}
END_TEST

START_TEST(truncated_and_flipped_real_graph)
{
    gsize length;
    guint8 *bytes = event_sync_bytes(&length);
    every_truncation_fails(bytes, length);
    every_bit_flip_fails(bytes, length);
    g_free(bytes);
}
END_TEST

/* A sample of cuts and bit flips through a file: the same message as the
 * buffer gives (the exhaustive damage tests run on buffers). */
START_TEST(damaged_files_fail_like_buffers)
{
    gsize length;
    guint8 *bytes = event_sync_bytes(&length);
    for (gsize cut = 0; cut < length; cut += 97) {
        char what[64];
        g_snprintf(what, sizeof what, "file cut at %zu of %zu bytes", (size_t)cut, (size_t)length);
        expect_file_loads_like_buffer(bytes, cut, what);
    }
    guint8 *copy = g_memdup2(bytes, length);
    for (gsize at = 0; at < length; at += 89) {
        copy[at] ^= (guint8)(1u << (at % 8));
        char what[64];
        g_snprintf(what, sizeof what, "file with byte %zu flipped", (size_t)at);
        expect_file_loads_like_buffer(copy, length, what);
        copy[at] ^= (guint8)(1u << (at % 8));
    }
    g_free(copy);
    g_free(bytes);
}
END_TEST

START_TEST(newer_version)
{
    gsize length;
    guint8 *bytes = hand_built_bytes(&length);
    put_le(bytes + 8, 10, 4);
    fix_checksums(bytes, length);
    expect_load_error(bytes, length,
                      "test.rvg: format version 10 is newer than this reverie supports (9); re-import the trace",
                      "version 10");
    /* versions 8 and 9 are jobs of alike ranks: their section 13 must be there */
    for (uint32_t version = 8; version <= 9; version++) {
        put_le(bytes + 8, version, 4);
        fix_checksums(bytes, length);
        expect_load_error(bytes, length, "test.rvg: section table: there is no 'alike ranks' section", "version 8 or 9");
    }
    put_le(bytes + 8, 6, 4);
    fix_checksums(bytes, length);
    expect_load_error(bytes, length, "test.rvg: format version 6 predates the operators' arguments", "version 6");
    put_le(bytes + 8, 5, 4);
    fix_checksums(bytes, length);
    expect_load_error(bytes, length, "test.rvg: format version 5 predates the profiler's per-operator cost", "version 5");
    put_le(bytes + 8, 4, 4);
    fix_checksums(bytes, length);
    expect_load_error(bytes, length, "test.rvg: format version 4 predates the timing estimates' evidence", "version 4");
    put_le(bytes + 8, 2, 4);
    fix_checksums(bytes, length);
    expect_load_error(bytes, length, "test.rvg: format version 2 predates jobs of several ranks", "version 2");
    put_le(bytes + 8, 3, 4);
    fix_checksums(bytes, length);
    expect_load_error(bytes, length, "test.rvg: format version 3 predates the recorded memory peaks", "version 3");
    put_le(bytes + 8, 1, 4);
    fix_checksums(bytes, length);
    expect_load_error(bytes, length, "test.rvg: format version 1 holds an older timing model", "version 1");
    put_le(bytes + 8, 0, 4);
    fix_checksums(bytes, length);
    expect_load_error(bytes, length, "format version 0", "version 0");
    g_free(bytes);
}
END_TEST

START_TEST(empty_file)
{
    char *dir = temp_dir();
    char *path = g_build_filename(dir, "empty.rvg", NULL);
    ck_assert(g_file_set_contents(path, "", 0, NULL));
    ck_assert(!rv_store_is_graph_file(path));
    GError *error = NULL;
    ck_assert_ptr_null(rv_store_load(path, &error));
    ck_assert(error && error->domain == RV_ERROR && error->code == RV_ERROR_INPUT);
    ck_assert(strstr(error->message, "magic number") != NULL);
    g_error_free(error);
    expect_load_error((const guint8 *)"", 0, "magic number", "empty buffer");
    g_free(path);
    remove_dir(dir);
}
END_TEST

START_TEST(json_trace_named_rvg)
{
    static const char json[] = "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
                               "\"ts\": 1, \"dur\": 2, \"pid\": 0, \"tid\": 7}]}";
    char *dir = temp_dir();
    char *path = g_build_filename(dir, "trace.rvg", NULL);
    ck_assert(g_file_set_contents(path, json, sizeof json - 1, NULL));
    ck_assert(!rv_store_is_graph_file(path));
    GError *error = NULL;
    ck_assert_ptr_null(rv_store_load(path, &error));
    ck_assert(error && error->domain == RV_ERROR && error->code == RV_ERROR_INPUT);
    ck_assert_msg(strstr(error->message, path) && strstr(error->message, "magic number"), "%s", error->message);
    g_error_free(error);
    g_free(path);
    remove_dir(dir);
}
END_TEST

START_TEST(missing_file)
{
    GError *error = NULL;
    ck_assert_ptr_null(rv_store_load("/nonexistent/graph.rvg", &error));
    ck_assert(error && error->domain == RV_ERROR && error->code == RV_ERROR_INPUT);
    ck_assert(strstr(error->message, "/nonexistent/graph.rvg") != NULL);
    g_error_free(error);
}
END_TEST

/* One forgery: width bytes at section id + at set to value, checksums
 * fixed so only the graph checks can catch it. */
typedef struct {
    uint32_t section;   /* 0: at is a file offset */
    gsize at;
    uint64_t value;
    int width;
    const char *want;
} forgery;

static const forgery forgeries[] = {
    /* header and table */
    { 0, 12, 0, 4, "the header gives 0 sections" },
    { 0, 12, 1000, 4, "the header gives 1000 sections" },
    { 0, 20, 1, 4, "reserved header field" },
    { 0, HEADER_SIZE, 99, 4, "unknown section id 99" },
    { 0, HEADER_SIZE + ENTRY_SIZE, SEC_STRINGS, 4, "section 'strings' appears twice" },
    { 0, HEADER_SIZE + 8, 1, 8, "section 'strings': starts at byte 1" },
    { 0, HEADER_SIZE + 16, 1u << 30, 8, "truncated: section 'strings'" },
    /* records */
    { SEC_RESOURCES, 0, 4, 4, "section 'resources': 4 records of 95 bytes" },
    { SEC_RESOURCES, 4 + 41, 2, 4, "resource 0 belongs to rank index 2" },
    { SEC_RESOURCES, 4 + 41, (uint32_t)-2, 4, "resource 0 belongs to rank index -2" },
    { SEC_RESOURCES, 4 + RESOURCE_SIZE + 16, (uint64_t)-1, 8, "resource 1 has impossible timing" },
    { SEC_RESOURCES, 4 + RESOURCE_SIZE + 24, 2000000000, 8, "resource 1 has impossible timing" },
    { SEC_RESOURCES, 4 + RESOURCE_SIZE + 32, (uint32_t)-1, 4, "resource 1 has impossible timing" },
    { SEC_RESOURCES, 4 + 36, 9999, 4, "resource 0 names string 9999" },
    { SEC_RESOURCES, 4 + 40, RV_RES_KIND_COUNT, 1, "resource 0 has kind 3" },
    { SEC_TASKS, 0, 0, 4, "section 'tasks': 0 records of 72 bytes" },
    { SEC_TASKS, 4 + TASK_SIZE + 68, 5, 4, "task 1 belongs to collective 4 (there are 1)" },
    { SEC_TASKS, 4 + TASK_SIZE + 68, (uint32_t)-1, 4, "task 1 belongs to collective -2" },
    { SEC_COLLECTIVES, 0, 2, 4, "section 'collectives': 2 records of 40 bytes" },
    { SEC_COLLECTIVES, 4 + 16, 10000, 4, "collective 0 names string 10000" },
    { SEC_COLLECTIVES, 4 + 28, 99, 4, "collective 0 meets at task 99" },
    { SEC_COLLECTIVES, 4 + 37, RV_PARALLEL_COUNT, 1, "collective 0 has an impossible kind" },
    { SEC_COLLECTIVES, 4 + 38, RV_MATCH_COUNT, 1, "collective 0 has an impossible kind" },
    { SEC_COLLECTIVES, 4 + 0, (uint64_t)-1, 8, "collective 0 has an impossible kind, size or count" },
    { SEC_RANKS, 0, 3, 4, "section 'ranks': 3 records of 32 bytes" },
    { SEC_RANKS, 4 + 24, 10000, 4, "rank index 0 names string 10000" },
    { SEC_RANKS, 4 + 28, (uint32_t)-1, 4, "rank index 0 has an impossible clock offset" },
    { SEC_MEMORY, 0, 3, 4, "section 'memory': 3 records of 52 bytes" },
    { SEC_MEMORY, 4 + 52 + 44, 1, 4, "record 1 names step 1 (there are 1 steps)" },
    { SEC_MEMORY, 4 + 52 + 44, (uint32_t)-2, 4, "record 1 names step -2" },
    { SEC_MEMORY, 4 + 52 + 48, 1, 4, "record 1 belongs to rank index 1 (there are 1 ranks)" },
    { SEC_MEMORY, 4 + 40, 4096, 4, "record 0 names device 4096" },
    { SEC_MEMORY, 4 + 32, (uint64_t)-1, 8, "record 0 holds an impossible byte count" },
    { SEC_MEMORY, 4 + 0, (uint64_t)-2, 8, "record 0 holds an impossible byte count" },
    { SEC_MEMORY, 4 + 24, (uint64_t)-1, 8, "record 0 holds an impossible byte count" },
    { SEC_LAUNCHES, 0, 2, 4, "section 'launches': 2 records of 20 bytes" },
    { SEC_LAUNCHES, 4 + 0, 5, 4, "record 0 names task 5 (after task -1, of 5 tasks)" },
    { SEC_LAUNCHES, 4 + 0, (uint32_t)-1, 4, "record 0 names task -1" },
    { SEC_LAUNCHES, 4 + 4, 0, 4, "record 0: task 2's launch has 0 blocks of 128 threads" },
    { SEC_LAUNCHES, 4 + 8, 0, 4, "record 0: task 2's launch has 264 blocks of 0 threads" },
    { SEC_HOST_OPERATORS, 0, 2, 4, "section 'host operators': 2 records of 8 bytes" },
    { SEC_HOST_OPERATORS, 4 + 0, 5, 4, "record 0 names task 5 (after task -1, of 5 tasks)" },
    { SEC_HOST_OPERATORS, 4 + 4, 0, 4, "record 0: task 1 has 0 operators" },
    { SEC_OP_ARGS, 0, 2, 4, "section 'operator arguments': 2 records of 8 bytes" },
    { SEC_OP_ARGS, 4 + 0, 5, 4, "record 0 names task 5 (after task -1, of 5 tasks)" },
    { SEC_OP_ARGS, 4 + 4, 0, 4, "record 0: task 1's arguments name string 0" },
    { SEC_OP_ARGS, 4 + 4, 10000, 4, "record 0: task 1's arguments name string 10000" },
    { SEC_TASKS, 4 + TASK_SIZE + 40, 3, 4, "task 1 runs on resource 3 (there are 3 resources)" },
    { SEC_TASKS, 4 + TASK_SIZE + 40, (uint32_t)-1, 4, "task 1 runs on resource -1" },
    { SEC_TASKS, 4 + TASK_SIZE + 44, 10000, 4, "task 1: name is string 10000" },
    { SEC_TASKS, 4 + TASK_SIZE + 48, (uint32_t)-1, 4, "task 1: op is string -1" },
    { SEC_TASKS, 4 + TASK_SIZE + 52, 10000, 4, "task 1: layer is string 10000" },
    { SEC_TASKS, 4 + TASK_SIZE + 56, (uint32_t)-2, 4, "task 1: input_dims is string -2" },
    { SEC_TASKS, 4 + TASK_SIZE + 60, 1, 4, "task 1 belongs to step 1 (there are 1 steps)" },
    { SEC_TASKS, 4 + TASK_SIZE + 60, (uint32_t)-2, 4, "task 1 belongs to step -2" },
    { SEC_TASKS, 4 + TASK_SIZE + 64, RV_TASK_KIND_COUNT, 1, "task 1 has kind 8" },
    { SEC_TASKS, 4 + TASK_SIZE + 65, RV_PHASE_COUNT, 1, "task 1 has phase 5" },
    { SEC_TASKS, 4 + TASK_SIZE + 66, 0x8000, 2, "task 1 has unknown flags 0x8000" },
    { SEC_TASKS, 4 + TASK_SIZE + 0, (uint64_t)-5, 8, "task 1 has a negative time" },
    { SEC_TASKS, 4 + TASK_SIZE + 8, (uint64_t)-5, 8, "task 1 has a negative time" },
    { SEC_TASKS, 4 + TASK_SIZE + 8, (uint64_t)1 << 61, 8, "tasks 0 to 1 add up to more than 2^61 ns" },
    { SEC_TASKS, 4 + TASK_SIZE + 16, (uint64_t)1 << 62, 8, "task 1 was recorded at an impossible time" },
    { SEC_TASKS, 4 + TASK_SIZE + 16, (uint64_t)-((int64_t)1 << 61), 8, "task 1 was recorded at an impossible" },
    { SEC_STEPS, 4 + 12, (uint64_t)1 << 63, 8, "step 0 was recorded at impossible times" },
    { SEC_EDGES, 4 + EDGE_SIZE + 0, 5, 4, "edge 1 joins tasks 5 -> 2 (there are 5 tasks)" },
    { SEC_EDGES, 4 + EDGE_SIZE + 4, (uint32_t)-1, 4, "edge 1 joins tasks 1 -> -1" },
    { SEC_EDGES, 4 + EDGE_SIZE + 8, RV_EDGE_KIND_COUNT, 1, "edge 1 has kind 8" },
    { SEC_EDGES, 4 + EDGE_SIZE + 9, 2, 1, "edge 1 has from_start 2" },
    { SEC_EDGES, 0, 6, 4, "section 'edges': 6 records of 10 bytes" },
    { SEC_STEPS, 4 + 0, 10000, 4, "step 0 names string 10000" },
    { SEC_STEPS, 4 + 20, (uint32_t)-1, 4, "step 0 has marker tasks -1 and 4" },
    { SEC_STEPS, 4 + 24, 5, 4, "step 0 has marker tasks 0 and 5" },
    /* strings and metadata */
    { SEC_STRINGS, 0, 0, 4, "no strings" },
    { SEC_STRINGS, 0, 0x7fffffff, 4, "2147483647 strings cannot fit" },
    { SEC_STRINGS, 4, 3, 4, "string 0" },
    { SEC_METADATA, 0, 1000, 4, "the source path (1000 bytes) runs past the end" },
    { SEC_METADATA, 4, 0, 1, "the source path contains a NUL byte" },
};

static void apply_forgery(const guint8 *bytes, gsize length, const forgery *f)
{
    guint8 *copy = g_memdup2(bytes, length);
    gsize at = f->at + (f->section ? section_offset(copy, f->section) : 0);
    put_le(copy + at, f->value, f->width);
    fix_checksums(copy, length);
    expect_load_error(copy, length, f->want, f->want);
    expect_file_loads_like_buffer(copy, length, f->want);
    g_free(copy);
}

/* ---- a job of alike ranks (version 8) -------------------------------------- */

/* Three ranks of the hand-built graph, each with an all-reduce they meet
 * at, their times their own: a job the writer holds once. */
static rv_graph *alike_job(void);

/* alike_job with every rank from `first` on given its own first call's
 * name: ranks 0 .. first - 1 alike, the rest each unlike every other. */
static rv_graph *unlike_job(int32_t first)
{
    rv_graph *joint = alike_job();
    for (int32_t rank = first; rank < 3; rank++)
        for (int32_t t = 0; t < rv_graph_task_count(joint); t++) {
            rv_task *task = rv_graph_task(joint, t);
            if (rv_task_rank_index(joint, task) != rank || task->kind != RV_TASK_CPU) continue;
            char *name = g_strdup_printf("rank %d's own call", rank);
            task->name = rv_strings_intern(joint->strings, name);
            g_free(name);
            break;
        }
    return joint;
}

static rv_graph *alike_job(void)
{
    GPtrArray *ranks = g_ptr_array_new_with_free_func((GDestroyNotify)rv_graph_free);
    for (int r = 0; r < 3; r++) {
        rv_graph *graph = hand_built_graph();
        graph->rank = r;
        graph->world_size = 3;
        int32_t stream = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 20, "gpu 0 stream 20");
        rv_task reduce = make_task(stream, graph, "ncclDevKernel_AllReduce_Sum_f32", RV_TASK_COMM, 9000 + 100 * r, 4000);
        reduce.flags = RV_TASK_FLAG_GPU;
        reduce.step = 0;
        rv_collective_info info = { 1 << 20, 0, rv_strings_intern(graph->strings, "0"), 3, -1, -1, 1,
                                    RV_COLL_ALLREDUCE_RING, RV_PARALLEL_DATA, RV_MATCH_NONE, 0 };
        reduce.collective = rv_graph_add_collective(graph, &info);
        rv_graph_add_task(graph, &reduce);
        for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
            rv_task *task = rv_graph_task(graph, t);
            task->duration_ns += 37 * r * (task->duration_ns > 0);
            task->correlation += r;
        }
        g_ptr_array_add(ranks, graph);
    }
    GError *error = NULL;
    rv_graph *joint = rv_job_join(ranks, "alike-job", &error);
    ck_assert_msg(joint != NULL, "join: %s", error ? error->message : "");
    g_ptr_array_unref(ranks);
    return joint;
}

static guint8 *alike_job_bytes(gsize *length)
{
    rv_graph *joint = alike_job();
    guint8 *bytes = save_bytes(joint, length);
    rv_graph_free(joint);
    return bytes;
}

START_TEST(round_trip_alike_job)
{
    rv_graph *joint = alike_job();
    gsize length;
    guint8 *bytes = save_bytes(joint, &length);
    ck_assert_uint_eq(le32(bytes + 8), 8);   /* held once: version 8 */
    ck_assert_uint_eq(le32(bytes + 12), 13); /* with the alike ranks section */
    /* one rank's tasks are stored, not three */
    gsize tasks_bytes = section_end(bytes, SEC_TASKS) - section_offset(bytes, SEC_TASKS);
    ck_assert_uint_lt(tasks_bytes, 4 + (gsize)rv_graph_task_count(joint) * TASK_SIZE / 2);
    g_free(bytes);
    assert_round_trip(joint);
    rv_graph_free(joint);
}
END_TEST

/* A graph of one trace, and a job whose ranks differ, stay version 7. */
/* unlike_job(first) saves as `version` and loads as it was. */
static void assert_unlike_job_saved_as(int32_t first, uint32_t version)
{
    rv_graph *joint = unlike_job(first);
    gsize length;
    guint8 *bytes = save_bytes(joint, &length);
    ck_assert_uint_eq(le32(bytes + 8), version);
    g_free(bytes);
    assert_round_trip(joint);
    rv_graph_free(joint);
}

START_TEST(unlike_ranks_stay_flat)
{
    rv_graph *graph = hand_built_graph();
    gsize length;
    guint8 *bytes = save_bytes(graph, &length);
    ck_assert_uint_eq(le32(bytes + 8), 7);
    g_free(bytes);
    rv_graph_free(graph);
    /* every rank another program: nothing to share */
    assert_unlike_job_saved_as(1, 7);
}
END_TEST

/* One rank unlike the others: two classes, version 9, and back as it was. */
START_TEST(round_trip_classes)
{
    assert_unlike_job_saved_as(2, 9);
}
END_TEST

/* The classes of a version 9 file forged with valid checksums: after u32
 * ranks, u32 classes, u32 columns, each class's i32 tasks, threads and
 * streams, steps, u32 edges, u32 members and the members (here ranks 0
 * and 1, then 2). */
START_TEST(forged_classes)
{
    rv_graph *joint = unlike_job(2);
    gsize length;
    guint8 *bytes = save_bytes(joint, &length);
    rv_graph_free(joint);
    const forgery forged[] = {
        { SEC_ALIKE, 4, 0, 4, "its ranks and classes are not the ranks section's" },
        { SEC_ALIKE, 4, 4, 4, "its ranks and classes are not the ranks section's" },
        { SEC_ALIKE, 28, 3, 4, "its ranks and classes are not the ranks section's" }, /* more members than ranks left */
        { SEC_ALIKE, 36, 0, 4, "a class's members are not ranks, in order, each once" },
        { SEC_ALIKE, 36, 7, 4, "a class's members are not ranks, in order, each once" },
        { SEC_ALIKE, 60, 0, 4, "its classes are out of order" },
        { SEC_ALIKE, 12, 0x7fffffff, 4, "its tasks per rank do not fit the tasks section" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(forged); i++) apply_forgery(bytes, length, &forged[i]);
    every_truncation_fails(bytes, length);
    g_free(bytes);
}
END_TEST

START_TEST(truncated_and_flipped_alike_job)
{
    gsize length;
    guint8 *bytes = alike_job_bytes(&length);
    every_truncation_fails(bytes, length);
    every_bit_flip_fails(bytes, length);
    g_free(bytes);
}
END_TEST

/* The alike ranks section's shape and columns forged with valid checksums:
 * one line that says what is wrong, the same from a file. */
START_TEST(forged_alike_shape)
{
    gsize length;
    guint8 *bytes = alike_job_bytes(&length);
    const forgery forged[] = {
        { SEC_ALIKE, 0, 7, 4, "section 'alike ranks': its rank count is not the ranks section's" },
        { SEC_ALIKE, 4, 0x7fffffff, 4, "section 'alike ranks': its tasks per rank do not fit the tasks section" },
        { SEC_ALIKE, 4, (uint32_t)-1, 4, "section 'alike ranks': a count is negative" },
        { SEC_ALIKE, 8, 1000, 4, "its threads and streams per rank do not fit the resources section" },
        { SEC_ALIKE, 12, 2, 4, "its steps per rank do not fit the steps section" },
        { SEC_ALIKE, 16, 100000, 4, "its edges per rank do not fit the edges section" },
        { SEC_ALIKE, 20, 0x30, 4, "section 'alike ranks': unknown columns 0x30" },
        { SEC_ALIKE, 20, 1, 4, "tasks' columns need" },
        { SEC_ALIKE, 24, (uint64_t)-1, 8, "has a negative time" }, /* rank 0's first task's duration */
    };
    for (gsize i = 0; i < G_N_ELEMENTS(forged); i++) apply_forgery(bytes, length, &forged[i]);
    g_free(bytes);
}
END_TEST

/* Forgeries with valid checksums deep inside the sections of a graph
 * larger than the file reader's window (its tasks section spans several
 * refills): the file says what the buffer says. */
START_TEST(forged_large_graph_file_like_buffer)
{
    char *path = project_trace_path("hta_resnet50_v100.json.gz");
    rv_graph *graph = graph_of_trace(path);
    g_free(path);
    ck_assert(graph != NULL);
    gsize length;
    guint8 *bytes = save_bytes(graph, &length);
    guint tasks = (guint)rv_graph_task_count(graph);
    rv_graph_free(graph);
    ck_assert_uint_gt((guint64)tasks * TASK_SIZE, 4 * 256 * 1024); /* past several windows */
    const struct { uint32_t section; gsize at; uint32_t value; const char *what; } forged[] = {
        { SEC_TASKS, 4 + (gsize)(tasks - 3) * TASK_SIZE + 40, (uint32_t)-1, "the third-last task's resource" },
        { SEC_TASKS, 4 + (gsize)(tasks / 2) * TASK_SIZE + 44, 1u << 30, "a middle task's name" },
        { SEC_TASKS, 0, tasks + 1, "the task count" },
        { SEC_STRINGS, 4, 1u << 31, "the first string's length" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(forged); i++) {
        guint8 *copy = g_memdup2(bytes, length);
        put_le(copy + section_offset(copy, forged[i].section) + forged[i].at, forged[i].value, 4);
        fix_checksums(copy, length);
        expect_load_error(copy, length, NULL, forged[i].what);
        expect_file_loads_like_buffer(copy, length, forged[i].what);
        g_free(copy);
    }
    g_free(bytes);
}
END_TEST

START_TEST(forged_fields_with_valid_checksums)
{
    gsize length;
    guint8 *bytes = hand_built_bytes(&length);
    for (gsize i = 0; i < G_N_ELEMENTS(forgeries); i++) apply_forgery(bytes, length, &forgeries[i]);
    g_free(bytes);
}
END_TEST

/* The metadata section ends with the timing estimates: ..., the
 * sync_return estimate (whose last byte is its source), u64
 * queue_unblocked_in_flight, u8 clock_status, the profiler_op_cost
 * estimate (i64 value, i64 spread, u64 samples, u8 source), u64
 * profiled_operators. */
START_TEST(forged_timing_estimates)
{
    gsize length;
    guint8 *bytes = hand_built_bytes(&length);
    gsize end = section_end(bytes, SEC_METADATA);
    guint8 *copy = g_memdup2(bytes, length);
    gsize profiler = end - 8 - 25; /* the profiler_op_cost estimate */
    put_le(copy + profiler - 1, RV_CLOCK_STATUS_COUNT, 1);
    fix_checksums(copy, length);
    expect_load_error(copy, length, "clock status 4 is unknown", "clock status");
    memcpy(copy, bytes, length);
    put_le(copy + profiler - 10, RV_SOURCE_COUNT, 1);
    fix_checksums(copy, length);
    expect_load_error(copy, length, "a timing estimate has source 5 (there are 5)", "estimate source");
    memcpy(copy, bytes, length);
    put_le(copy + end - 9, RV_SOURCE_COUNT, 1);
    fix_checksums(copy, length);
    expect_load_error(copy, length, "a timing estimate has source 5 (there are 5)", "profiler estimate source");
    memcpy(copy, bytes, length);
    put_le(copy + profiler, (uint64_t)-5, 8);
    fix_checksums(copy, length);
    expect_load_error(copy, length, "the profiler's per-operator cost is -5 ns", "negative profiler cost");
    g_free(copy);
    g_free(bytes);
}
END_TEST

/* Replace the first occurrence of a text in the file (same length). */
static guint8 *with_text_replaced(const guint8 *bytes, gsize length, const char *from, const char *to)
{
    guint8 *copy = g_memdup2(bytes, length);
    const guint8 *found = memmem(copy, length, from, strlen(from));
    ck_assert_ptr_nonnull(found);
    memcpy(copy + (found - copy), to, strlen(to));
    fix_checksums(copy, length);
    return copy;
}

START_TEST(forged_strings)
{
    gsize length;
    guint8 *bytes = hand_built_bytes(&length);
    guint8 *duplicate = with_text_replaced(bytes, length, "layerB", "layerA");
    expect_load_error(duplicate, length, "section 'strings': string", "duplicate string");
    expect_load_error(duplicate, length, "repeats string", "duplicate string");
    guint8 *nul = g_memdup2(bytes, length);
    guint8 *found = memmem(nul, length, "layerB", 6);
    found[3] = '\0';
    fix_checksums(nul, length);
    expect_load_error(nul, length, "contains a NUL byte", "NUL in a string");
    g_free(nul);
    guint8 *latin1 = g_memdup2(bytes, length);
    found = memmem(latin1, length, "layerB", 6);
    found[5] = 0xe9; /* "layer\xe9": Latin-1, not UTF-8 */
    fix_checksums(latin1, length);
    expect_load_error(latin1, length, "is not valid UTF-8", "a string that is not UTF-8");
    g_free(latin1);
    g_free(duplicate);
    g_free(bytes);
}
END_TEST

/* Bytes appended: after the last section, or inside the metadata section
 * (its table length grown to cover them). */
START_TEST(extra_bytes)
{
    gsize length;
    guint8 *bytes = hand_built_bytes(&length);
    guint8 *longer = g_malloc0(length + 3);
    memcpy(longer, bytes, length);
    expect_load_error(longer, length + 3, "3 bytes of unknown data follow the last section", "trailing bytes");
    uint32_t count = le32(longer + 12);
    guint8 *last_entry = longer + HEADER_SIZE + ENTRY_SIZE * (count - 1);
    ck_assert_uint_eq(le32(last_entry), SEC_OP_ARGS);
    put_le(last_entry + 16, le32(last_entry + 16) + 3, 8);
    fix_checksums(longer, length + 3);
    expect_load_error(longer, length + 3,
                      "section 'operator arguments': 1 records of 8 bytes need 8 bytes but the section has 11",
                      "operator arguments too long");
    g_free(longer);
    g_free(bytes);
}
END_TEST

START_TEST(save_refuses_inconsistent_graph)
{
    rv_graph *graph = hand_built_graph();
    g_array_index(graph->edges, rv_edge, 0).to = 77;
    char *dir = temp_dir();
    char *path = g_build_filename(dir, "bad.rvg", NULL);
    GError *error = NULL;
    ck_assert(!rv_store_save(graph, path, &error));
    ck_assert(error && error->domain == RV_ERROR && strstr(error->message, "edge 0") != NULL);
    ck_assert(!g_file_test(path, G_FILE_TEST_EXISTS));
    g_clear_error(&error);
    rv_graph *huge = hand_built_graph();
    g_array_index(huge->tasks, rv_task, 1).duration_ns = (int64_t)1 << 60;
    g_array_index(huge->tasks, rv_task, 2).duration_ns = (int64_t)1 << 60;
    ck_assert(!rv_store_save(huge, path, &error));
    ck_assert(strstr(error->message, "tasks 0 to 2 add up to more than 2^61 ns") != NULL);
    g_clear_error(&error);
    rv_graph_free(huge);
    rv_graph *good = hand_built_graph();
    ck_assert(!rv_store_save(good, "/nonexistent/dir/g.rvg", &error));
    ck_assert(error && error->domain == RV_ERROR && error->code == RV_ERROR_INPUT);
    ck_assert(strstr(error->message, "cannot write /nonexistent/dir/g.rvg") != NULL);
    g_clear_error(&error);
    rv_graph_free(good);
    g_free(path);
    remove_dir(dir);
    rv_graph_free(graph);
}
END_TEST

/* A forged edge list can close a cycle with ids that are all in range:
 * the loader refuses it, as the simulator would never finish the tasks. */
START_TEST(cycle_refused_on_load)
{
    rv_graph *graph = hand_built_graph();
    rv_graph_add_edge(graph, 3, 1, RV_EDGE_THREAD, FALSE);
    gsize length;
    guint8 *bytes = save_bytes(graph, &length);
    expect_load_error(bytes, length, "the dependency graph has a cycle", "a cycle");
    g_free(bytes);
    rv_graph_free(graph);
}
END_TEST

/* A FIFO (or, as root, a device) is written in place, never replaced by a
 * regular file; a FIFO nobody reads fails at once. */
START_TEST(save_refuses_a_target_that_is_not_a_file)
{
    rv_graph *graph = hand_built_graph();
    char *dir = temp_dir();
    char *fifo = g_build_filename(dir, "fifo", NULL);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    GError *error = NULL;
    ck_assert(!rv_store_save(graph, fifo, &error));
    ck_assert(strstr(error->message, "cannot write") != NULL);
    ck_assert(!g_file_test(fifo, G_FILE_TEST_IS_REGULAR));
    g_clear_error(&error);
    g_free(fifo);
    remove_dir(dir);
    rv_graph_free(graph);
}
END_TEST

/* As the fuzz harness does: with valid checksums the input must still fail
 * cleanly, or load as a graph that replays without a sanitizer report. */
static void replay_if_loads_with_fixed_checksums(guint8 *data, gsize length)
{
    fix_checksums(data, length);
    GError *error = NULL;
    rv_graph *graph = rv_store_load_buffer(data, length, "test.rvg", &error);
    if (graph == NULL) {
        ck_assert(error && error->domain == RV_ERROR && error->code == RV_ERROR_INPUT);
        g_error_free(error);
        return;
    }
    rv_sim_result sim = { 0 };
    if (rv_simulate(graph, NULL, &sim, &error)) {
        g_array_unref(rv_step_times(graph, &sim));
        rv_sim_result_clear(&sim);
    }
    g_clear_error(&error);
    rv_graph_free(graph);
}

START_TEST(fuzz_regressions_fail_cleanly)
{
    const char *dir_name = g_getenv("REVERIE_FUZZ_REGRESSIONS");
    GDir *dir = dir_name ? g_dir_open(dir_name, 0, NULL) : NULL;
    if (dir == NULL) return;
    const char *name;
    int count = 0;
    while ((name = g_dir_read_name(dir)) != NULL) {
        if (name[0] == '.' || g_str_has_suffix(name, ".md") || strcmp(name, "README") == 0) continue;
        char *path = g_build_filename(dir_name, name, NULL);
        gchar *contents = NULL;
        gsize length = 0;
        ck_assert(g_file_get_contents(path, &contents, &length, NULL));
        guint8 *exact = g_memdup2(contents, length);
        expect_load_error(exact, length, NULL, path);
        replay_if_loads_with_fixed_checksums(exact, length);
        g_free(exact);
        g_free(contents);
        g_free(path);
        count++;
    }
    g_dir_close(dir);
    fprintf(stderr, "%d fuzz regression inputs rejected cleanly\n", count);
}
END_TEST

static Suite *store_suite(void)
{
    Suite *suite = suite_create("store");
    TCase *trips = tcase_create("round_trip");
    tcase_set_timeout(trips, 600);
    tcase_add_test(trips, round_trip_hand_built);
    tcase_add_test(trips, round_trip_empty_graph);
    tcase_add_test(trips, round_trip_project_traces);
    tcase_add_test(trips, saving_is_deterministic);
    tcase_add_test(trips, is_graph_file_reads_content);
    tcase_add_test(trips, round_trip_alike_job);
    tcase_add_test(trips, unlike_ranks_stay_flat);
    tcase_add_test(trips, round_trip_classes);
    suite_add_tcase(suite, trips);
    TCase *damage = tcase_create("damage");
    tcase_set_timeout(damage, 600);
    tcase_add_test(damage, truncated_hand_built);
    tcase_add_test(damage, bit_flips_hand_built);
    tcase_add_test(damage, truncated_and_flipped_real_graph);
    tcase_add_test(damage, damaged_files_fail_like_buffers);
    tcase_add_test(damage, newer_version);
    tcase_add_test(damage, forged_timing_estimates);
    tcase_add_test(damage, empty_file);
    tcase_add_test(damage, json_trace_named_rvg);
    tcase_add_test(damage, missing_file);
    tcase_add_test(damage, forged_fields_with_valid_checksums);
    tcase_add_test(damage, forged_large_graph_file_like_buffer);
    tcase_add_test(damage, forged_strings);
    tcase_add_test(damage, extra_bytes);
    tcase_add_test(damage, save_refuses_inconsistent_graph);
    tcase_add_test(damage, cycle_refused_on_load);
    tcase_add_test(damage, save_refuses_a_target_that_is_not_a_file);
    tcase_add_test(damage, fuzz_regressions_fail_cleanly);
    tcase_add_test(damage, truncated_and_flipped_alike_job);
    tcase_add_test(damage, forged_classes);
    tcase_add_test(damage, forged_alike_shape);
    suite_add_tcase(suite, damage);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "hta_event_sync.json.gz", "hta_resnet50_v100.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(store_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
