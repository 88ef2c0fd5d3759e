/*
 * fuzz_store.c - libFuzzer harness for the saved-graph loader (store.c).
 *
 * Each input is loaded twice through rv_store_load_buffer: as it is, and
 * with its checksums recomputed, because random bytes almost never carry a
 * valid CRC-32 and would otherwise stop at the checksum check instead of
 * reaching the section decoders and graph checks.  The properties checked:
 *   - no crash, leak or undefined behaviour (ASan, UBSan);
 *   - a rejected input fails with one RV_ERROR_INPUT line naming the file;
 *   - an accepted graph keeps every promise the loader makes: all indices
 *     in range, so the consumers that trust them (the simulator, the step
 *     report) run without touching memory they should not;
 *   - the same holds for a job of alike ranks loaded as it is held
 *     (rv_store_load_alike_buffer): its lockstep replay and its reports.
 * Build and run with tests/fuzz/run.sh.
 */
#include "reverie/alike.h"
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define NAME "fuzz.rvg"

static uint32_t le32(const uint8_t *at)
{
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

static uint64_t le64(const uint8_t *at)
{
    return (uint64_t)le32(at) | (uint64_t)le32(at + 4) << 32;
}

static void put32(uint8_t *at, uint32_t value)
{
    for (int i = 0; i < 4; i++) at[i] = (uint8_t)(value >> (8 * i));
}

/* Recompute the section and header CRCs where the table lets us find them
 * (layout: src/store/store.c).  Returns 0 if the input has no usable table. */
static int fix_checksums(uint8_t *data, size_t size)
{
    if (size < 24) return 0;
    uint32_t count = le32(data + 12);
    if (count == 0 || count > 64 || size < 24 + 24 * (size_t)count) return 0;
    size_t table_end = 24 + 24 * (size_t)count;
    for (uint32_t i = 0; i < count; i++) {
        uint8_t *entry = data + 24 + 24 * (size_t)i;
        uint64_t offset = le64(entry + 8), length = le64(entry + 16);
        if (offset <= size && length <= size - offset)
            put32(entry + 4, (uint32_t)crc32_z(0, data + offset, (size_t)length));
    }
    static const uint8_t zero[4] = { 0 };
    uLong crc = crc32_z(0, data, 16);
    crc = crc32_z(crc, zero, 4);
    crc = crc32_z(crc, data + 20, table_end - 20);
    put32(data + 16, (uint32_t)crc);
    return 1;
}

/* The loader's promises, checked independently of its own code. */
static void check_accepted(const rv_graph *graph)
{
    int32_t strings = rv_strings_count(graph->strings), tasks = rv_graph_task_count(graph);
    for (int32_t t = 0; t < tasks; t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (task->resource < 0 || (guint)task->resource >= graph->resources->len || task->name < 0 ||
            task->name >= strings || task->kind >= RV_TASK_KIND_COUNT || task->phase >= RV_PHASE_COUNT ||
            task->step < -1 || (task->step >= 0 && (guint)task->step >= graph->steps->len))
            abort();
    }
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->from < 0 || edge->from >= tasks || edge->to < 0 || edge->to >= tasks) abort();
    }
    rv_sim_result sim = { 0 };
    GError *error = NULL;
    if (rv_simulate(graph, NULL, &sim, &error)) {
        g_array_unref(rv_step_times(graph, &sim));
        rv_sim_result_clear(&sim);
    }
    g_clear_error(&error);
}

static void load_once(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    rv_graph *graph = rv_store_load_buffer(data, size, NAME, &error);
    if (graph != NULL) {
        if (error != NULL) abort();
        check_accepted(graph);
        rv_graph_free(graph);
        return;
    }
    /* A rejection is one RV_ERROR_INPUT line that names the file. */
    if (error == NULL || error->domain != RV_ERROR || error->code != RV_ERROR_INPUT ||
        strncmp(error->message, NAME ": ", strlen(NAME ": ")) != 0 || strchr(error->message, '\n') != NULL) {
        fprintf(stderr, "bad rejection: %s\n", error ? error->message : "(no error)");
        abort();
    }
    g_error_free(error);
}

/* A job held once: loaded without rebuilding it, replayed and reported. */
static void load_held_once(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    gboolean held = FALSE;
    rv_alike_job *alike = rv_store_load_alike_buffer(data, size, NAME, TRUE, &held, &error);
    if (alike == NULL) {
        if (held && (error == NULL || strchr(error->message, '\n') != NULL)) abort();
        g_clear_error(&error);
        return;
    }
    rv_replay replay;
    if (rv_alike_replay_run(alike, &replay, NULL)) {
        rv_explanation *x = rv_alike_explain(alike);
        rv_explanation_free(x);
        (void)rv_alike_step_entering_together(alike, replay.steps);
    }
    rv_replay_clear(&replay);
    rv_alike_job_free(alike);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_once(data, size);
    load_held_once(data, size);
    /* An exact-size copy, so ASan sees any read past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    if (fix_checksums(copy, size)) {
        load_once(copy, size);
        load_held_once(copy, size);
    }
    free(copy);
    return 0;
}
