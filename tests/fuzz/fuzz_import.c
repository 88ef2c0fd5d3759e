/*
 * fuzz_import.c - libFuzzer harness for the trace importer (src/import/)
 * and what runs on every trace it accepts: the graph builder, the replay
 * and the step report.
 *
 * Each input is written to a file (rv_trace_load reads paths; plain and
 * gzipped input both go through zlib) and loaded.  The harness aborts on:
 *   - any AddressSanitizer or UndefinedBehaviorSanitizer report;
 *   - a rejected input whose error is not one RV_ERROR_INPUT line naming the
 *     file;
 *   - an accepted trace that breaks trace.h's invariants (dur >= 0, GPU
 *     events on a device >= 0, file order);
 *   - a built graph that does not replay (the builder promises a DAG), or a
 *     graph build failing with anything but one RV_ERROR_INPUT line.
 * Like the command line (rv_cli_load), only a graph that passes
 * rv_graph_validate is replayed: a trace of impossible durations is
 * refused there, as bad input.
 *
 * Build and run: tests/fuzz/run_import.sh or run_all.sh (see their headers).
 */
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/report.h"
#include "reverie/sim.h"
#include "reverie/trace.h"
#include "reverie/validate.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *input_path;

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_import: %s: %s\n", what, detail ? detail : "");
    abort();
}

static void check_error(const GError *error, const char *stage)
{
    if (error == NULL) fail(stage, "failed without an error");
    if (error->domain != RV_ERROR || error->code != RV_ERROR_INPUT) fail(stage, error->message);
    if (strchr(error->message, '\n') != NULL) fail("message is more than one line", error->message);
    if (strstr(error->message, input_path) == NULL) fail("message does not name the file", error->message);
}

static void check_trace(const rv_trace *trace)
{
    uint32_t previous = 0;
    for (guint i = 0; i < trace->events->len; i++) {
        const rv_event *event = &g_array_index(trace->events, rv_event, i);
        if (event->dur_ns < 0) fail("event with a negative duration", NULL);
        if (event->kind >= RV_EV_KIND_COUNT) fail("event of an unknown kind", NULL);
        if ((event->kind == RV_EV_KERNEL || event->kind == RV_EV_MEMCPY || event->kind == RV_EV_MEMSET) &&
            event->device < 0)
            fail("GPU event without a device", NULL);
        if (i > 0 && event->file_index <= previous) fail("events out of file order", NULL);
        previous = event->file_index;
        (void)rv_strings_get(trace->strings, event->name);
    }
}

static void replay(rv_graph *graph)
{
    rv_sim_result result;
    GError *error = NULL;
    memset(&result, 0, sizeof result);
    if (!rv_simulate(graph, NULL, &result, &error))
        fail("a built graph does not replay", error ? error->message : NULL);
    GArray *steps = rv_step_times(graph, &result);
    for (guint s = 0; s < steps->len; s++) (void)g_array_index(steps, rv_step_time, s).name[0];
    g_array_unref(steps);
    rv_sim_result_clear(&result);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) ? "/dev/shm" : g_get_tmp_dir();
    input_path = g_strdup_printf("%s/reverie-fuzz-import-%d.json", dir, (int)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    if (!g_file_set_contents(input_path, (const char *)data, (gssize)size, &error))
        fail("cannot write the input file", error->message);
    rv_import_options options = { .threads = 1 };
    rv_trace *trace = rv_trace_load(input_path, NULL, &options, &error);
    if (trace == NULL) {
        check_error(error, "load");
        g_error_free(error);
        return 0;
    }
    if (error != NULL) fail("load succeeded but set an error", error->message);
    check_trace(trace);
    rv_graph *graph = rv_graph_build(trace, &error);
    rv_trace_free(trace);
    if (graph == NULL) {
        check_error(error, "build");
        g_error_free(error);
        return 0;
    }
    if (rv_graph_validate(graph, &error)) replay(graph);
    else if (error == NULL || strchr(error->message, '\n') != NULL) fail("validation", error ? error->message : NULL);
    g_clear_error(&error);
    rv_graph_free(graph);
    return 0;
}
