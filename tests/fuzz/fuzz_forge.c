/*
 * fuzz_forge.c - libFuzzer harness that forges saved graphs (.rvg) with
 * valid checksums and runs every report on the ones the loader accepts.
 *
 * fuzz_store.c mutates bytes, which mostly breaks a section's framing
 * before any field means anything.  Here the input is a list of edits to
 * the fields of a real graph's records (a small trace built and saved at
 * start-up): a task's start or duration, an edge's ends (a self-loop), a
 * step's times or markers (nested, overlapping), a resource's gaps, a
 * collective's figures, a string made 64 KiB long, an edge appended.  The
 * file is then reassembled with correct lengths and CRC-32s, as someone
 * forging a file on purpose would, and loaded.  It aborts on:
 *   - any AddressSanitizer or UndefinedBehaviorSanitizer report (signed
 *     overflow included: every sum of recorded times must saturate or be
 *     refused);
 *   - a rejection that is not one RV_ERROR_INPUT line naming the file;
 *   - an accepted graph whose replay fails other than with one line, or
 *     that gives a negative step time, recorded or simulated;
 * and runs the reports a user would on the graph: the step table, the
 * unexplained time, the breakdown, the critical path, and the timeline
 * (written to /dev/null through the output writer).
 *
 * Each edit is 14 bytes: section selector (its top 3 bits 6: append an
 * edge, 7: lengthen a string), field selector, record index (2 bytes),
 * value mode, a spare byte, and an 8-byte value (raw; a small number; one
 * of the extreme values; or a field of another record).
 * Build and run: tests/fuzz/run_all.sh (seeds written by seed_forge).
 */
#include "reverie/breakdown.h"
#include "reverie/critical_path.h"
#include "reverie/error.h"
#include "reverie/explain.h"
#include "reverie/graph.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/store.h"
#include "reverie/timeline.h"
#include "reverie/trace.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define NAME "forged.rvg"
#define EDIT_SIZE 14

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_forge: %s: %s\n", what, detail ? detail : "");
    abort();
}

/* ---- the seed: a small real-looking trace, built and saved once -------- */

static const char seed_trace[] =
    "{\"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA A100-SXM4-80GB\"}],"
    " \"distributedInfo\": {\"rank\": 0, \"world_size\": 2, \"backend\": \"nccl\"},"
    " \"traceEvents\": ["
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":400},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":60,"
    "\"args\":{\"External id\":1,\"Input Dims\":[[64,128],[256,128],[256]]}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":20,\"dur\":5,"
    "\"args\":{\"correlation\":11,\"External id\":1}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ampere_sgemm_128x64_tn\",\"pid\":0,\"tid\":7,\"ts\":30,\"dur\":80,"
    "\"args\":{\"stream\":7,\"device\":0,\"correlation\":11,\"grid\":[4,1,1],\"block\":[256,1,1]}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":40,\"dur\":5,"
    "\"args\":{\"correlation\":12}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclKernel_AllReduce_RING_LL_Sum_float\",\"pid\":0,\"tid\":13,"
    "\"ts\":120,\"dur\":90,\"args\":{\"stream\":13,\"device\":0,\"correlation\":12,\"Process Group Name\":\"0\","
    "\"Group size\":2,\"In msg nelems\":65536,\"dtype\":\"Float\"}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaDeviceSynchronize\",\"pid\":1,\"tid\":1,\"ts\":60,\"dur\":160},"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":1,\"tid\":1,\"ts\":400,\"dur\":300},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\",\"pid\":1,\"tid\":1,\"ts\":420,\"dur\":8,"
    "\"args\":{\"correlation\":13}},"
    "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pinned -> Device)\",\"pid\":0,\"tid\":7,\"ts\":440,"
    "\"dur\":30,\"args\":{\"stream\":7,\"device\":0,\"correlation\":13,\"bytes\":1048576}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaStreamSynchronize\",\"pid\":1,\"tid\":1,\"ts\":450,\"dur\":40}"
    "]}";

static GByteArray *seed;   /* the seed graph's .rvg bytes */

static void build_seed(void)
{
    char *path = NULL;
    int fd = g_file_open_tmp("fuzz-forge-XXXXXX.json", &path, NULL);
    if (fd < 0 || write(fd, seed_trace, sizeof seed_trace - 1) != (ssize_t)(sizeof seed_trace - 1)) fail("seed", "write");
    close(fd);
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, NULL, &error);
    rv_graph *graph = trace ? rv_graph_build(trace, &error) : NULL;
    if (graph == NULL) fail("seed", error ? error->message : NULL);
    char *bytes = NULL;
    size_t length = 0;
    FILE *memory = open_memstream(&bytes, &length);
    if (!rv_store_write(graph, memory, NULL, &error)) fail("seed", error ? error->message : NULL);
    fclose(memory);
    seed = g_byte_array_new_take((guint8 *)bytes, length);
    rv_graph_free(graph);
    rv_trace_free(trace);
    unlink(path);
    g_free(path);
}

/* ---- the file's sections ---------------------------------------------------- */

static uint64_t get_le(const guint8 *at, int width)
{
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; i--) value = value << 8 | at[i];
    return value;
}

static void put_le(guint8 *at, uint64_t value, int width)
{
    for (int i = 0; i < width; i++) at[i] = (guint8)(value >> (8 * i));
}

enum { SECTIONS = 9 };
typedef struct {
    uint32_t ids[SECTIONS];      /* table order */
    GByteArray *bytes[SECTIONS]; /* by table position */
    guint8 header[24];
} forged_file;

static void split(forged_file *file)
{
    memcpy(file->header, seed->data, 24);
    for (int i = 0; i < SECTIONS; i++) {
        const guint8 *entry = seed->data + 24 + 24 * i;
        file->ids[i] = (uint32_t)get_le(entry, 4);
        uint64_t offset = get_le(entry + 8, 8), length = get_le(entry + 16, 8);
        file->bytes[i] = g_byte_array_new();
        g_byte_array_append(file->bytes[i], seed->data + offset, (guint)length);
    }
}

static GByteArray *section(forged_file *file, uint32_t id)
{
    for (int i = 0; i < SECTIONS; i++)
        if (file->ids[i] == id) return file->bytes[i];
    fail("seed", "a section is missing");
    return NULL;
}

/* The whole file again, with lengths, offsets and CRC-32s that match. */
static GByteArray *join(forged_file *file)
{
    GByteArray *out = g_byte_array_new();
    g_byte_array_append(out, file->header, 24);
    g_byte_array_set_size(out, 24 + 24 * SECTIONS);
    uint64_t offset = out->len;
    for (int i = 0; i < SECTIONS; i++) {
        guint8 *entry = out->data + 24 + 24 * i;
        put_le(entry, file->ids[i], 4);
        put_le(entry + 4, crc32_z(0, file->bytes[i]->data, file->bytes[i]->len), 4);
        put_le(entry + 8, offset, 8);
        put_le(entry + 16, file->bytes[i]->len, 8);
        offset += file->bytes[i]->len;
    }
    for (int i = 0; i < SECTIONS; i++) g_byte_array_append(out, file->bytes[i]->data, file->bytes[i]->len);
    static const guint8 zero[4] = { 0 };
    uLong crc = crc32_z(0, out->data, 16);
    crc = crc32_z(crc, zero, 4);
    crc = crc32_z(crc, out->data + 20, 24 * SECTIONS + 4);
    put_le(out->data + 16, crc, 4);
    return out;
}

static void free_file(forged_file *file)
{
    for (int i = 0; i < SECTIONS; i++) g_byte_array_unref(file->bytes[i]);
}

/* ---- edits ---------------------------------------------------------------- */

/* The fixed-size records (store.c's layout): section id, record size, and
 * each field's offset and width. */
typedef struct {
    uint32_t id;
    guint size;
    guint8 offsets[16], widths[16];
    guint fields;
} record_layout;

static const record_layout layouts[] = {
    { 2, 45, { 0, 8, 16, 24, 32, 36, 40, 41 }, { 8, 8, 8, 8, 4, 4, 1, 4 }, 8 },
    { 3, 72, { 0, 8, 16, 24, 32, 40, 44, 48, 52, 56, 60, 64, 65, 66, 68 }, { 8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 4, 1, 1, 2, 4 }, 15 },
    { 4, 10, { 0, 4, 8, 9 }, { 4, 4, 1, 1 }, 4 },
    { 5, 28, { 0, 4, 12, 20, 24 }, { 4, 8, 8, 4, 4 }, 5 },
    { 7, 40, { 0, 8, 16, 20, 24, 28, 32, 36, 37, 38, 39 }, { 8, 8, 4, 4, 4, 4, 4, 1, 1, 1, 1 }, 11 },
    { 8, 32, { 0, 8, 16, 24, 28 }, { 8, 8, 8, 4, 4 }, 5 },
};

static const int64_t extremes[] = {
    INT64_MAX, INT64_MIN, 0, -1, 1, (int64_t)1 << 60, -((int64_t)1 << 60), ((int64_t)1 << 62) - 1,
    ((int64_t)1 << 61), 1000000000000000, INT32_MAX, INT32_MIN,
};

static uint64_t choose_value(const guint8 *edit, GByteArray *records, const record_layout *layout, guint field)
{
    uint64_t raw = get_le(edit + 6, 8);
    guint count = (guint)get_le(records->data, 4);
    switch (edit[4] & 3) {
    case 0: return raw;
    case 1: return (uint64_t)((int64_t)(raw % 20) - 2);
    case 2: return (uint64_t)extremes[raw % G_N_ELEMENTS(extremes)];
    default: { /* a field of another record (low half: which; high half:
                * which field): an edge's `to` set to its `from`, two steps
                * with one marker, a start copied into a duration */
        guint other = count ? (guint)((raw & 0xffffffff) % count) : 0, from = (guint)(raw >> 32) % layout->fields;
        const guint8 *at = records->data + 4 + (gsize)other * layout->size + layout->offsets[from];
        return count ? get_le(at, layout->widths[from]) : raw;
    }
    }
}

static void edit_record(forged_file *file, const guint8 *edit)
{
    const record_layout *layout = &layouts[edit[0] % G_N_ELEMENTS(layouts)];
    GByteArray *records = section(file, layout->id);
    guint count = (guint)get_le(records->data, 4);
    if (count == 0) return;
    guint index = (guint)get_le(edit + 2, 2) % count, field = edit[1] % layout->fields;
    uint64_t value = choose_value(edit, records, layout, field);
    put_le(records->data + 4 + (gsize)index * layout->size + layout->offsets[field], value, layout->widths[field]);
}

/* A new edge between two tasks (from the value's two halves). */
static void append_edge(forged_file *file, const guint8 *edit)
{
    guint tasks = (guint)get_le(section(file, 3)->data, 4);
    GByteArray *edges = section(file, 4);
    if (tasks == 0) return;
    guint8 record[10];
    put_le(record, get_le(edit + 6, 4) % tasks, 4);
    put_le(record + 4, get_le(edit + 10, 4) % tasks, 4);
    record[8] = edit[1] % RV_EDGE_KIND_COUNT;
    record[9] = edit[4] & 1;
    g_byte_array_append(edges, record, sizeof record);
    put_le(edges->data, get_le(edges->data, 4) + 1, 4);
}

/* String i becomes a run of one byte, up to 64 KiB long (a name that every
 * event of a timeline would copy). */
static void lengthen_string(forged_file *file, const guint8 *edit)
{
    GByteArray *strings = section(file, 1);
    guint count = (guint)get_le(strings->data, 4), target = count > 1 ? 1 + (guint)get_le(edit + 2, 2) % (count - 1) : 0;
    if (target == 0) return;
    GByteArray *out = g_byte_array_new();
    g_byte_array_append(out, strings->data, 4);
    gsize at = 4;
    for (guint i = 0; i < count; i++) {
        guint32 length = (guint32)get_le(strings->data + at, 4);
        if (i == target) {
            guint32 longer = 1 + (guint32)(get_le(edit + 6, 2));
            guint8 prefix[4];
            put_le(prefix, longer, 4);
            g_byte_array_append(out, prefix, 4);
            guint8 fill = edit[4] ? edit[4] : 'x'; /* the loader refuses NUL bytes */
            for (guint32 k = 0; k < longer; k++) g_byte_array_append(out, &fill, 1);
        } else {
            g_byte_array_append(out, strings->data + at, 4 + length);
        }
        at += 4 + length;
    }
    g_byte_array_set_size(strings, 0);
    g_byte_array_append(strings, out->data, out->len);
    g_byte_array_unref(out);
}

static void apply_edit(forged_file *file, const guint8 *edit)
{
    switch (edit[0] >> 5) {
    case 6: append_edge(file, edit); break;
    case 7: lengthen_string(file, edit); break;
    default: edit_record(file, edit); break;
    }
}

/* ---- what a user would run on an accepted graph ------------------------------ */

static void check_steps(const GArray *steps, const char *which)
{
    for (guint s = 0; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        if (step->recorded_ns < 0) fail("a negative recorded step time", which);
        if (step->simulated_ns < 0) fail("a negative simulated step time", which);
    }
}

static void run_reports(const rv_graph *graph)
{
    rv_sim_result sim = { 0 }, recorded = { 0 };
    GError *error = NULL;
    if (!rv_simulate(graph, NULL, &sim, &error)) {
        if (error == NULL || strchr(error->message, '\n')) fail("a replay failed without one line", NULL);
        g_error_free(error);
        return;
    }
    GArray *steps = rv_step_times(graph, &sim);
    check_steps(steps, "replay");
    g_array_unref(steps);
    rv_explanation_free(rv_explain(graph, 5));
    rv_recorded_result(graph, &recorded);
    const rv_sim_result *runs[2] = { &recorded, &sim };
    for (int r = 0; r < 2; r++) {
        GArray *windows = rv_step_windows(graph, r == 0 ? NULL : runs[r]);
        rv_breakdown_free(rv_breakdown_compute(graph, runs[r], windows));
        g_array_unref(windows);
    }
    rv_critical_path *path = rv_critical_path_find(graph, &sim);
    rv_timeline_run run = { "baseline", graph, &sim, NULL, path, NULL };
    if (!rv_timeline_write("/dev/null", &run, 1, &error)) {
        if (error == NULL || strchr(error->message, '\n')) fail("a timeline failed without one line", NULL);
        g_clear_error(&error);
    }
    rv_critical_path_free(path);
    rv_sim_result_clear(&recorded);
    rv_sim_result_clear(&sim);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    build_seed();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (seed == NULL) build_seed();
    forged_file file;
    split(&file);
    for (size_t at = 0; at + EDIT_SIZE <= size && at < 64 * EDIT_SIZE; at += EDIT_SIZE) apply_edit(&file, data + at);
    GByteArray *bytes = join(&file);
    free_file(&file);
    GError *error = NULL;
    rv_graph *graph = rv_store_load_buffer(bytes->data, bytes->len, NAME, &error);
    if (getenv("FUZZ_FORGE_VERBOSE")) fprintf(stderr, "fuzz_forge: %s\n", graph ? "accepted" : error->message);
    if (graph == NULL) {
        if (error == NULL || error->domain != RV_ERROR || error->code != RV_ERROR_INPUT ||
            strncmp(error->message, NAME ": ", strlen(NAME ": ")) != 0 || strchr(error->message, '\n') != NULL)
            fail("bad rejection", error ? error->message : "(no error)");
        g_error_free(error);
    } else {
        run_reports(graph);
        rv_graph_free(graph);
    }
    g_byte_array_unref(bytes);
    return 0;
}
