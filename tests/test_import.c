/*
 * test_import.c - Check tests for the importer's handling of bad and untidy
 * input (DESIGN "Inputs": stop with one clear message - file, byte offset
 * or event index, what is wrong - where the input is not a trace; keep
 * going and count what was skipped where it is merely untidy).
 *
 * The bad files live in tests/data/bad/ (REVERIE_BAD_DATA points there) and
 * are shared with cli_errors.sh, which checks the command line's side:
 * exit status 2, one line on stderr, nothing on stdout.
 */
#include "tiny_trace.h"

#include <check.h>
#include <glib/gstdio.h>
#include <string.h>
#include <zlib.h>

static char *data_path(const char *name)
{
    const char *dir = g_getenv("REVERIE_BAD_DATA");
    ck_assert_msg(dir != NULL, "REVERIE_BAD_DATA is not set (run through meson test)");
    return g_build_filename(dir, name, NULL);
}

/* Load must fail with one RV_ERROR_INPUT line naming the file, a position
 * (unless no_position) and what is wrong (want). */
static void expect_failure(const char *path, const char *want, gboolean no_position, int threads)
{
    GError *error = NULL;
    rv_import_options options = { .threads = threads };
    rv_trace *trace = rv_trace_load(path, NULL, &options, &error);
    ck_assert_msg(trace == NULL, "%s loaded, but it is not a trace", path);
    ck_assert_ptr_nonnull(error);
    ck_assert_msg(error->domain == RV_ERROR && error->code == RV_ERROR_INPUT,
                  "%s: code %d, expected RV_ERROR_INPUT: %s", path, error->code, error->message);
    const char *message = error->message;
    ck_assert_msg(strchr(message, '\n') == NULL, "message is more than one line: %s", message);
    ck_assert_msg(strstr(message, path) != NULL, "message does not name the file %s: %s", path, message);
    if (!no_position)
        ck_assert_msg(strstr(message, "event #") != NULL || strstr(message, "byte") != NULL,
                      "message gives no event index or byte offset: %s", message);
    ck_assert_msg(strstr(message, want) != NULL, "message lacks \"%s\": %s", want, message);
    g_error_free(error);
}

typedef struct {
    const char *file;
    const char *want;       /* what the message must say is wrong */
    const char *position;   /* the position it must give, or NULL for any */
} bad_case;

static const bad_case bad_cases[] = {
    { "empty.json", "empty", "byte 0" },
    { "no_events.json", "\"traceEvents\" is empty", NULL },
    { "truncated.json.gz", "truncated", NULL },
    { "truncated_event.json", "truncated", "event #1" },
    { "not_trace_array.json", "expected an object", "event #0" },
    { "not_trace_object.json", "no \"traceEvents\"", NULL },
    { "not_trace_number.json", "not a Chrome trace", "byte 0" },
    { "not_trace_string.json", "not a Chrome trace", "byte 0" },
    { "event_string.json", "expected an object, found a string", "event #1" },
    { "ts_string.json", "\"ts\" must be a number", "event #1" },
    { "dur_object.json", "\"dur\" must be a number", "event #1" },
    { "args_list.json", "\"args\" must be an object", "event #1" },
    { "name_number.json", "\"name\" must be a string", "event #1" },
    { "pid_list.json", "\"pid\" must be", "event #1" },
    { "pid_huge.json", "\"pid\" must be", "event #1" },
    { "correlation_huge.json", "\"correlation\" must be", "event #1" },
    { "negative_dur.json", "negative duration", "event #1" },
    { "dur_1e999.json", "overflow", "event #1" },
    { "dur_nan.json", "NaN", "event #1" },
    { "dur_infinity.json", "Infinity", "event #1" },
    { "dur_minus_infinity.json", "invalid JSON", "event #1" },
    { "dur_out_of_range.json", "\"dur\" is out of range", "event #1" },
    { "ts_out_of_range.json", "\"ts\" is out of range", "event #1" },
    { "flows_only.json", "flow events without partners", NULL },
    { "garbage.bin", "not a Chrome trace", "byte 0" },
};

static void check_bad_case(const bad_case *c, int threads)
{
    char *path = data_path(c->file);
    ck_assert_msg(g_file_test(path, G_FILE_TEST_IS_REGULAR), "missing test input %s", path);
    expect_failure(path, c->want, FALSE, threads);
    if (c->position != NULL) {
        GError *error = NULL;
        rv_import_options options = { .threads = threads };
        ck_assert_ptr_null(rv_trace_load(path, NULL, &options, &error));
        ck_assert_msg(strstr(error->message, c->position) != NULL, "message lacks \"%s\": %s",
                      c->position, error->message);
        g_error_free(error);
    }
    g_free(path);
}

/* Each bad file, parsed on one thread and on the default pool. */
START_TEST(test_bad_file_serial) { check_bad_case(&bad_cases[_i], 1); }
END_TEST

START_TEST(test_bad_file_parallel) { check_bad_case(&bad_cases[_i], 0); }
END_TEST

START_TEST(test_directory)
{
    char *dir = data_path("");
    expect_failure(dir, "is a directory", TRUE, 1);
    g_free(dir);
}
END_TEST

START_TEST(test_missing_file)
{
    char *path = data_path("does_not_exist.json");
    expect_failure(path, "No such file", TRUE, 1);
    g_free(path);
}
END_TEST

/* ---- generated inputs ------------------------------------------------ */

/* A trace of n kernels with their launches, large enough to span several
 * of the reader's blocks when n is big. */
static char *many_events_text(int n)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    for (int i = 0; i < n; i++) {
        tt_runtime(trace, 1, "cudaLaunchKernel", 10.0 * i, 4, i + 1);
        tt_kernel(trace, 7, "void at::native::vectorized_elementwise_kernel<4>(int)", 10.0 * i + 5, 4, i + 1);
    }
    char *text = tt_text(trace);
    tt_free(trace);
    return text;
}

static char *write_gzip(const char *text, gsize length)
{
    char *path = tt_write_temp("", 0, ".json.gz");
    gzFile file = gzopen(path, "wb");
    ck_assert_ptr_nonnull(file);
    ck_assert_int_eq(gzwrite(file, text, (unsigned)length), (int)length);
    ck_assert_int_eq(gzclose(file), Z_OK);
    return path;
}

static void truncate_file(const char *path, double fraction)
{
    char *data = NULL;
    gsize length = 0;
    ck_assert(g_file_get_contents(path, &data, &length, NULL));
    ck_assert(g_file_set_contents(path, data, (gssize)(length * fraction), NULL));
    g_free(data);
}

/* A real-sized gzip trace loads; cut in half (in the compressed stream) it
 * fails cleanly, whichever the cut falls in. */
START_TEST(test_truncated_gzip_generated)
{
    char *text = many_events_text(5000); /* ~2 MB of JSON, several of the reader's 1 MiB blocks */
    char *path = write_gzip(text, strlen(text));
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, NULL, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "?");
    ck_assert_uint_eq(trace->events->len, 10000);
    rv_trace_free(trace);
    g_unlink(path);
    g_free(path);
    static const double cuts[] = { 0.5, 0.1, 0.9, 0.999 };
    for (gsize i = 0; i < G_N_ELEMENTS(cuts); i++) {
        path = write_gzip(text, strlen(text));
        truncate_file(path, cuts[i]);
        expect_failure(path, "truncated", FALSE, 0);
        g_unlink(path);
        g_free(path);
    }
    g_free(text);
}
END_TEST

/* Plain JSON cut at many points: never a crash, always one clear error. */
START_TEST(test_truncated_json_every_cut)
{
    char *text = many_events_text(3);
    gsize length = strlen(text);
    /* Whitespace after the closing brace is the only cut that leaves a whole trace. */
    gsize whole = length;
    while (whole > 0 && g_ascii_isspace(text[whole - 1])) whole--;
    for (gsize cut = 0; cut < whole; cut += 7) {
        char *path = tt_write_temp(text, cut, ".json");
        GError *error = NULL;
        rv_import_options options = { .threads = 1 };
        rv_trace *trace = rv_trace_load(path, NULL, &options, &error);
        ck_assert_msg(trace == NULL, "a trace cut at byte %zu of %zu loaded", cut, length);
        ck_assert_int_eq(error->code, RV_ERROR_INPUT);
        ck_assert_msg(strchr(error->message, '\n') == NULL, "%s", error->message);
        ck_assert_msg(strstr(error->message, path) != NULL, "%s", error->message);
        ck_assert_msg(strstr(error->message, "byte") != NULL || strstr(error->message, "event #") != NULL,
                      "cut at %zu: %s", cut, error->message);
        g_error_free(error);
        g_unlink(path);
        g_free(path);
    }
    g_free(text);
}
END_TEST

/* Untidy input is loaded; what was skipped is counted. */
START_TEST(test_untidy_trace_loads)
{
    tt_trace *trace = tt_new(1700000000000000.0);
    tt_runtime(trace, 1, "cudaLaunchKernel", 0, 5, 1);
    tt_kernel(trace, 7, "k", 10, 5, 1);
    /* no duration */
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"pid\": 1, \"tid\": 1, "
                    "\"ts\": %.0f}", tt_base(trace) + 1);
    /* no phase */
    tt_event(trace, "{\"cat\": \"cpu_op\", \"name\": \"x\", \"ts\": %.0f}", tt_base(trace) + 1);
    /* an unknown category, a metadata and an instant event */
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch Profiler (0)\", \"pid\": \"Spans\", "
                    "\"tid\": \"PyTorch Profiler\", \"ts\": %.0f, \"dur\": 100}", tt_base(trace));
    tt_event(trace, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"python\"}}");
    tt_event(trace, "{\"ph\": \"i\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": %.0f}",
             tt_base(trace) + 2);
    /* a duplicate step annotation on the GPU timeline */
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 0, "
                    "\"tid\": 7, \"ts\": %.0f, \"dur\": 5}", tt_base(trace) + 10);
    /* a flow without a partner, a negative and a string thread id */
    tt_event(trace, "{\"ph\": \"f\", \"id\": 99, \"pid\": 0, \"tid\": 7, \"ts\": %.0f, \"cat\": \"ac2g\", "
                    "\"name\": \"ac2g\", \"bp\": \"e\"}", tt_base(trace) + 10);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaFree\", \"pid\": 1, \"tid\": -5, "
                    "\"ts\": %.0f, \"dur\": 3, \"args\": {\"correlation\": 2}}", tt_base(trace) + 20);
    tt_event(trace, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaMalloc\", \"pid\": 1, "
                    "\"tid\": \"worker\", \"ts\": %.0f, \"dur\": 3, \"args\": {\"correlation\": 3}}",
             tt_base(trace) + 30);
    rv_trace *loaded = tt_load(trace);
    tt_free(trace);
    ck_assert_uint_eq(loaded->stats.events_total, 11);
    ck_assert_uint_eq(loaded->stats.skipped_no_duration, 1);
    ck_assert_uint_eq(loaded->stats.skipped_no_ph, 1);
    ck_assert_uint_eq(loaded->stats.ignored_category, 1);
    ck_assert_uint_eq(loaded->stats.ignored_phase, 2);
    ck_assert_uint_eq(loaded->stats.gpu_annotations, 1);
    ck_assert_uint_eq(loaded->stats.events_used, 5); /* 3 calls, 1 kernel, 1 flow */
    ck_assert_uint_eq(loaded->events->len, 5);
    ck_assert_uint_eq(loaded->device_names->len, 1);
    GError *error = NULL;
    rv_graph *graph = rv_graph_build(loaded, &error);
    ck_assert_msg(graph != NULL, "%s", error ? error->message : "?");
    tt_assert_replay_exact(graph);
    rv_graph_free(graph);
    rv_trace_free(loaded);
}
END_TEST

/* The parallel reader gives the same events, in file order, as one thread. */
START_TEST(test_parallel_matches_serial)
{
    char *text = many_events_text(8000); /* ~3 MB: two of the reader's 2 MiB batches */
    char *path = tt_write_temp(text, strlen(text), ".json");
    g_free(text);
    rv_import_options serial = { .threads = 1 }, parallel = { .threads = 4 };
    GError *error = NULL;
    rv_trace *one = rv_trace_load(path, NULL, &serial, &error);
    ck_assert_msg(one != NULL, "%s", error ? error->message : "?");
    rv_trace *four = rv_trace_load(path, NULL, &parallel, &error);
    ck_assert_msg(four != NULL, "%s", error ? error->message : "?");
    ck_assert_uint_eq(one->events->len, four->events->len);
    for (guint i = 0; i < one->events->len; i++) {
        const rv_event *a = &g_array_index(one->events, rv_event, i);
        const rv_event *b = &g_array_index(four->events, rv_event, i);
        ck_assert_int_eq(a->ts_ns, b->ts_ns);
        ck_assert_int_eq(a->dur_ns, b->dur_ns);
        ck_assert_int_eq(a->correlation, b->correlation);
        ck_assert_uint_eq(a->file_index, b->file_index);
        ck_assert_str_eq(rv_strings_get(one->strings, a->name), rv_strings_get(four->strings, b->name));
    }
    ck_assert_uint_eq(one->stats.events_total, four->stats.events_total);
    rv_trace_free(one);
    rv_trace_free(four);
    g_unlink(path);
    g_free(path);
}
END_TEST

/* A bad event deep in a large file is reported with its own index, also when
 * it is parsed by a worker thread in a later batch. */
START_TEST(test_bad_event_deep_in_file)
{
    char *good = many_events_text(8000); /* ~3 MB: event #12000 is in the second batch */
    /* Break the 12001st event (index 12000): a call's "dur" becomes a string. */
    GString *text = g_string_new(good);
    g_free(good);
    const char *at = text->str;
    for (int i = 0; i <= 12000; i++) {
        at = strstr(at + 1, "{\"ph\"");
        ck_assert_ptr_nonnull(at);
    }
    const char *dur = strstr(at, "\"dur\": ");
    gsize offset = (gsize)(dur - text->str) + strlen("\"dur\": ");
    g_string_insert_c(text, offset, '"');
    const char *end = strchr(text->str + offset + 1, ',');
    g_string_insert_c(text, (gssize)(end - text->str), '"');
    char *path = tt_write_temp(text->str, text->len, ".json");
    g_string_free(text, TRUE);
    expect_failure(path, "event #12000", FALSE, 0);
    expect_failure(path, "\"dur\" must be a number", FALSE, 1);
    g_unlink(path);
    g_free(path);
}
END_TEST

static Suite *import_suite(void)
{
    Suite *suite = suite_create("import");
    TCase *bad = tcase_create("bad_files");
    tcase_add_loop_test(bad, test_bad_file_serial, 0, G_N_ELEMENTS(bad_cases));
    tcase_add_loop_test(bad, test_bad_file_parallel, 0, G_N_ELEMENTS(bad_cases));
    tcase_add_test(bad, test_directory);
    tcase_add_test(bad, test_missing_file);
    suite_add_tcase(suite, bad);

    TCase *generated = tcase_create("generated");
    tcase_set_timeout(generated, 110);
    tcase_add_test(generated, test_truncated_gzip_generated);
    tcase_add_test(generated, test_truncated_json_every_cut);
    tcase_add_test(generated, test_untidy_trace_loads);
    tcase_add_test(generated, test_parallel_matches_serial);
    tcase_add_test(generated, test_bad_event_deep_in_file);
    suite_add_tcase(suite, generated);
    return suite;
}

int main(void)
{
    SRunner *runner = srunner_create(import_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
