/*
 * test_hardening.c - Check tests for the code that stands between reverie
 * and hostile input (issue 15): the limits and checked arithmetic
 * (checked.h), the graph check (validate.h), escaping (escape.h), the
 * input layer (input.h), the importer's limits and linear-time scanning,
 * the ELF reader behind `reverie plugins`, parameter parsing and
 * rv_plugin_apply with plugins that misbehave (hostile_plugin.c).
 *
 * Every input is made here.  The command line's side (exit statuses, one
 * line, files left intact) is cli_hostile.sh.
 *
 * Environment (set by tests/meson.build):
 *   REVERIE_HOSTILE_PLUGINS   folder of the hostile_*.so test plugins
 *   REVERIE_TEST_PLUGIN_DIR   folder of the real plugins (scale.so, ...)
 */
#include <check.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "reverie/checked.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/graph.h"
#include "reverie/input.h"
#include "reverie/plugin.h"
#include "reverie/trace.h"
#include "reverie/validate.h"
#include "../src/transform/elf.h"

/* ---- helpers ------------------------------------------------------------ */

static char *temp_path(const char *suffix)
{
    char *name = g_strdup_printf("reverie-hardening-XXXXXX%s", suffix);
    char *path = NULL;
    int fd = g_file_open_tmp(name, &path, NULL);
    ck_assert_int_ge(fd, 0);
    close(fd);
    g_free(name);
    return path;
}

static char *write_text(const char *text, gsize length, const char *suffix)
{
    char *path = temp_path(suffix);
    ck_assert(g_file_set_contents(path, text, (gssize)length, NULL));
    return path;
}

/* A gzip file made of the given pieces, in order, as one member. */
static char *write_gzip(const char *const *pieces, const gsize *lengths, int count)
{
    char *path = temp_path(".json.gz");
    gzFile file = gzopen(path, "wb1");
    ck_assert_ptr_nonnull(file);
    for (int i = 0; i < count; i++) ck_assert_int_eq(gzwrite(file, pieces[i], (unsigned)lengths[i]), (int)lengths[i]);
    ck_assert_int_eq(gzclose(file), Z_OK);
    return path;
}

static const char one_kernel[] =
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":2,"
    "\"args\":{\"stream\":7,\"device\":0}}";

/* A small valid trace: `events` copies of one kernel. */
static char *trace_text(int events)
{
    GString *text = g_string_new("{\"traceEvents\": [");
    for (int i = 0; i < events; i++) g_string_append_printf(text, "%s%s", i ? "," : "", one_kernel);
    g_string_append(text, "]}");
    return g_string_free(text, FALSE);
}

/* Load must fail with RV_ERROR_INPUT, one line, naming want. */
static void expect_load_error(const char *path, const rv_import_options *options, const char *want)
{
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, options, &error);
    ck_assert_msg(trace == NULL, "%s loaded", path);
    ck_assert_msg(error->domain == RV_ERROR && error->code == RV_ERROR_INPUT, "%s", error->message);
    ck_assert_msg(strchr(error->message, '\n') == NULL, "two lines: %s", error->message);
    ck_assert_msg(strstr(error->message, want) != NULL, "lacks \"%s\": %s", want, error->message);
    g_error_free(error);
}

static rv_trace *expect_load(const char *path, const rv_import_options *options)
{
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, options, &error);
    ck_assert_msg(trace != NULL, "%s: %s", path, error ? error->message : "?");
    return trace;
}

/* ---- escaping ----------------------------------------------------------- */

static void expect_escape(const char *text, const char *want)
{
    char *got = rv_escape_text(text);
    ck_assert_str_eq(got, want);
    ck_assert_int_eq(rv_text_needs_escape(text), strcmp(text, want) != 0);
    g_free(got);
}

START_TEST(escape_controls_and_invisible_characters)
{
    expect_escape("volta_sgemm_128x64_nn", "volta_sgemm_128x64_nn");
    expect_escape("caf\xc3\xa9 \xe6\xbc\xa2\xe5\xad\x97", "caf\xc3\xa9 \xe6\xbc\xa2\xe5\xad\x97");
    expect_escape("a\nb\rc\td", "a\\nb\\rc\\td");
    expect_escape("\033]0;pwned\007", "\\x1b]0;pwned\\x07");
    expect_escape("del\x7f", "del\\x7f");
    expect_escape("c1 \xc2\x9b" "2J", "c1 \\u009b2J");
    expect_escape("rtl \xe2\x80\xae" "txt", "rtl \\u202etxt");
    expect_escape("bom \xef\xbb\xbf", "bom \\ufeff");
    expect_escape("bad \xff byte", "bad \\xff byte");
    expect_escape("cut \xe2\x80", "cut \\xe2\\x80");
    expect_escape("back\\slash", "back\\slash");
    char *empty = rv_escape_text(NULL);
    ck_assert_str_eq(empty, "");
    g_free(empty);
}
END_TEST

/* Whatever the bytes, the result is UTF-8 without a single control character. */
START_TEST(escape_every_byte_pair)
{
    char text[3] = { 0 };
    for (int a = 1; a < 256; a++) {
        for (int b = 0; b < 256; b += 17) {
            text[0] = (char)a;
            text[1] = (char)b;
            char *got = rv_escape_text(text);
            ck_assert_msg(g_utf8_validate(got, -1, NULL), "not UTF-8 for %02x %02x", a, b);
            for (const char *c = got; *c; c = g_utf8_next_char(c)) {
                gunichar u = g_utf8_get_char(c);
                ck_assert_msg(u >= 0x20 && u != 0x7f && !(u >= 0x80 && u <= 0x9f), "control %04x left for %02x %02x",
                              u, a, b);
            }
            g_free(got);
        }
    }
}
END_TEST

/* ---- checked arithmetic ------------------------------------------------ */

START_TEST(checked_arithmetic)
{
    int64_t out = 7;
    ck_assert(rv_checked_add(INT64_MAX - 1, 1, &out) && out == INT64_MAX);
    ck_assert(!rv_checked_add(INT64_MAX, 1, &out) && out == INT64_MAX);
    ck_assert(!rv_checked_add(INT64_MIN, -1, &out));
    ck_assert(rv_checked_mul(3037000499, 3037000499, &out));
    ck_assert(!rv_checked_mul(3037000500, 3037000500, &out));
    ck_assert(!rv_checked_mul(INT64_MIN, -1, &out));
    ck_assert_int_eq(rv_saturating_add(INT64_MAX, 5), INT64_MAX);
    ck_assert_int_eq(rv_saturating_add(INT64_MIN, -5), INT64_MIN);
    ck_assert_int_eq(rv_saturating_add(40, 2), 42);
    ck_assert(!rv_checked_round(NAN, &out));
    ck_assert(!rv_checked_round(INFINITY, &out));
    ck_assert(!rv_checked_round(9223372036854775808.0, &out));
    ck_assert(rv_checked_round(-9223372036854775808.0, &out) && out == INT64_MIN);
    ck_assert(rv_checked_round(2.5, &out) && out == 3);
    ck_assert(rv_checked_duration(1e15, &out) && out == RV_MAX_DURATION_NS);
    ck_assert(!rv_checked_duration(1e15 + 1, &out));
    ck_assert(!rv_checked_duration(-1, &out));
    ck_assert(!rv_checked_duration(1e300, &out));
    ck_assert(rv_checked_duration(-0.4, &out) && out == 0);
}
END_TEST

/* ---- the graph check ---------------------------------------------------- */

/* One CPU thread and one stream: a launch and its kernel between two markers,
 * in one step whose markers are tasks 0 and 3. */
static rv_graph *small_graph(void)
{
    rv_graph *graph = rv_graph_new(NULL, "small");
    int32_t cpu = rv_graph_add_resource(graph, RV_RES_CPU_THREAD, 1, 1, "thread 1/1");
    int32_t gpu = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu 0 stream 7");
    static const struct { int kind; int resource_gpu; int64_t duration; } tasks[] = {
        { RV_TASK_MARKER, 0, 0 }, { RV_TASK_CPU, 0, 5000 }, { RV_TASK_KERNEL, 1, 20000 }, { RV_TASK_MARKER, 0, 0 },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(tasks); i++) {
        rv_task task = { 0 };
        task.duration_ns = tasks[i].duration;
        task.resource = tasks[i].resource_gpu ? gpu : cpu;
        task.name = rv_strings_intern(graph->strings, tasks[i].kind == RV_TASK_KERNEL ? "kernel" : "call");
        task.input_dims = -1;
        task.kind = (uint8_t)tasks[i].kind;
        task.phase = RV_PHASE_FORWARD;
        rv_graph_add_task(graph, &task);
    }
    rv_graph_add_edge(graph, 0, 1, RV_EDGE_THREAD, FALSE);
    rv_graph_add_edge(graph, 1, 3, RV_EDGE_THREAD, FALSE);
    rv_graph_add_edge(graph, 1, 2, RV_EDGE_LAUNCH, TRUE);
    rv_graph_add_edge(graph, 2, 3, RV_EDGE_SYNC, FALSE);
    rv_step step = { rv_strings_intern(graph->strings, "ProfilerStep#1"), 0, 100, 0, 3 };
    g_array_append_val(graph->steps, step);
    return graph;
}

static void expect_invalid(rv_graph *graph, const char *want)
{
    GError *error = NULL;
    ck_assert_msg(!rv_graph_validate(graph, &error), "accepted a graph with: %s", want);
    ck_assert_msg(strstr(error->message, want) != NULL, "lacks \"%s\": %s", want, error->message);
    ck_assert(strchr(error->message, '\n') == NULL);
    g_error_free(error);
    rv_graph_free(graph);
}

#define TASK(graph, id) rv_graph_task(graph, id)
#define EDGE(graph, e) (&g_array_index((graph)->edges, rv_edge, e))

START_TEST(validate_accepts_a_good_graph)
{
    rv_graph *graph = small_graph();
    GError *error = NULL;
    ck_assert_msg(rv_graph_validate(graph, &error), "%s", error ? error->message : "");
    rv_graph_free(graph);
}
END_TEST

START_TEST(validate_refuses_each_defect)
{
    rv_graph *g;
    g = small_graph(); g_array_index(g->resources, rv_resource, 1).kind = 9; expect_invalid(g, "resource 1 has an unknown kind");
    g = small_graph(); g_array_index(g->resources, rv_resource, 0).name = 99999; expect_invalid(g, "resource 0 names string");
    g = small_graph(); TASK(g, 2)->resource = 7; expect_invalid(g, "task #2 is on resource 7");
    g = small_graph(); TASK(g, 2)->resource = -1; expect_invalid(g, "task #2 is on resource -1");
    g = small_graph(); TASK(g, 1)->kind = 200; expect_invalid(g, "task #1 has an unknown kind");
    g = small_graph(); TASK(g, 1)->phase = 9; expect_invalid(g, "task #1 has an unknown phase");
    g = small_graph(); TASK(g, 1)->name = 99999; expect_invalid(g, "task #1 names a string");
    g = small_graph(); TASK(g, 1)->layer = -3; expect_invalid(g, "task #1 names a string");
    g = small_graph(); TASK(g, 1)->input_dims = 99999; expect_invalid(g, "task #1 names a string");
    g = small_graph(); TASK(g, 1)->step = 1; expect_invalid(g, "task #1 is in step 1");
    g = small_graph(); TASK(g, 2)->duration_ns = -1; expect_invalid(g, "task #2 (kernel) has a duration of -1 ns");
    g = small_graph(); TASK(g, 2)->duration_ns = RV_MAX_DURATION_NS + 1; expect_invalid(g, "outside 0 .. 11.6 days");
    g = small_graph(); TASK(g, 2)->bytes = -8; expect_invalid(g, "negative byte count");
    g = small_graph(); EDGE(g, 2)->to = 4; expect_invalid(g, "edge 2 joins task #1 to task #4");
    g = small_graph(); EDGE(g, 0)->from = -7; expect_invalid(g, "edge 0 joins task #-7");
    g = small_graph(); EDGE(g, 1)->kind = 99; expect_invalid(g, "edge 1 has an unknown kind");
    g = small_graph(); g_array_index(g->steps, rv_step, 0).end_marker = 4; expect_invalid(g, "step 0 has a marker");
    g = small_graph(); g_array_index(g->steps, rv_step, 0).name = 1 << 30; expect_invalid(g, "step 0 names a string");
    g = small_graph(); rv_graph_add_edge(g, 3, 0, RV_EDGE_PLUGIN, FALSE); expect_invalid(g, "has a cycle");
}
END_TEST

/* Each task within the limit, all of them together beyond 2^61 ns. */
START_TEST(validate_bounds_the_total_work)
{
    rv_graph *graph = small_graph();
    for (int i = 0; i < 2400; i++) {
        rv_task task = *TASK(graph, 2);
        task.duration_ns = RV_MAX_DURATION_NS;
        rv_graph_add_task(graph, &task);
    }
    expect_invalid(graph, "durations add up to more than");
    /* The same tasks removed by a plugin do not run and do not count. */
    graph = small_graph();
    for (int i = 0; i < 2400; i++) {
        rv_task task = *TASK(graph, 2);
        task.duration_ns = RV_MAX_DURATION_NS;
        task.flags |= RV_TASK_FLAG_REMOVED;
        rv_graph_add_task(graph, &task);
    }
    ck_assert(rv_graph_validate(graph, NULL));
    rv_graph_free(graph);
}
END_TEST

static void expect_scale_refused(rv_graph *graph, GArray *tasks, double factor, const char *want)
{
    GError *error = NULL;
    ck_assert(!rv_tasks_check_scale(graph, tasks, factor, "factor=x", &error));
    ck_assert_int_eq(error->code, RV_ERROR_USAGE);
    ck_assert_msg(strstr(error->message, want) != NULL, "%s", error->message);
    g_error_free(error);
}

START_TEST(check_scale_refuses_factors_that_overflow)
{
    rv_graph *graph = small_graph();
    GArray *tasks = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int32_t kernel = 2;
    g_array_append_val(tasks, kernel);
    ck_assert(rv_tasks_check_scale(graph, tasks, 0.5, "factor=0.5", NULL));
    ck_assert(rv_tasks_check_scale(graph, tasks, 0, "factor=0", NULL));
    ck_assert(rv_tasks_check_scale(graph, tasks, 5e10, "factor=5e10", NULL)); /* 20 us x 5e10 = 1e15 ns */
    expect_scale_refused(graph, tasks, 1e300, "would make task #2 (kernel) last");
    expect_scale_refused(graph, tasks, 5.1e10, "would make task #2");
    expect_scale_refused(graph, tasks, -1, "finite number >= 0");
    expect_scale_refused(graph, tasks, NAN, "finite number >= 0");
    expect_scale_refused(graph, tasks, INFINITY, "finite number >= 0");
    int64_t out = 0;
    GError *error = NULL;
    ck_assert(!rv_task_duration_from(graph, 2, 1e20, "bandwidth=1bps", &out, &error));
    ck_assert(strstr(error->message, "bandwidth=1bps would make task #2 (kernel) last") != NULL);
    g_clear_error(&error);
    ck_assert(rv_task_duration_from(graph, -1, 12.4, "x", &out, NULL) && out == 12);
    g_array_unref(tasks);
    rv_graph_free(graph);
}
END_TEST

/* ---- the input layer ---------------------------------------------------- */

typedef struct {
    int fd;
    const char *text;
    gsize length;
    gulong delay_us;
} pipe_writer;

static gpointer write_pipe(gpointer data)
{
    pipe_writer *writer = data;
    if (writer->delay_us) g_usleep(writer->delay_us);
    gsize done = 0;
    while (done < writer->length) {
        gssize wrote = write(writer->fd, writer->text + done, MIN((gsize)4096, writer->length - done));
        if (wrote <= 0) break;
        done += (gsize)wrote;
    }
    close(writer->fd);
    return NULL;
}

/* Standard input replaced by a pipe that a thread fills with text. */
static GThread *stdin_from_pipe(pipe_writer *writer, int *saved_stdin)
{
    int ends[2];
    ck_assert_int_eq(pipe(ends), 0);
    *saved_stdin = dup(STDIN_FILENO);
    dup2(ends[0], STDIN_FILENO);
    close(ends[0]);
    writer->fd = ends[1];
    return g_thread_new("writer", write_pipe, writer);
}

static void restore_stdin(GThread *thread, int saved_stdin)
{
    g_thread_join(thread);
    dup2(saved_stdin, STDIN_FILENO);
    close(saved_stdin);
}

/* The format check peeks; the importer must still get every byte. */
START_TEST(input_peek_loses_nothing_on_a_pipe)
{
    char *text = trace_text(3000);
    pipe_writer writer = { -1, text, strlen(text), 0 };
    int saved;
    GThread *thread = stdin_from_pipe(&writer, &saved);
    GError *error = NULL;
    rv_input *input = rv_input_open("-", 5000, &error);
    ck_assert_msg(input != NULL, "%s", error ? error->message : "");
    ck_assert_str_eq(rv_input_name(input), "<stdin>");
    ck_assert(!rv_input_is_regular(input));
    const guint8 *head = NULL;
    ck_assert_int_eq(rv_input_peek(input, 8, &head, &error), 8);
    ck_assert(memcmp(head, "{\"traceE", 8) == 0);
    rv_trace *trace = rv_trace_load_input(input, NULL, NULL, &error);
    ck_assert_msg(trace != NULL, "%s", error ? error->message : "");
    ck_assert_uint_eq(trace->events->len, 3000);
    ck_assert_str_eq(trace->source, "<stdin>");
    rv_trace_free(trace);
    rv_input_close(input);
    restore_stdin(thread, saved);
    g_free(text);
}
END_TEST

START_TEST(input_read_all_stops_at_the_limit)
{
    char *text = g_strnfill(3 << 20, 'x');
    pipe_writer writer = { -1, text, strlen(text), 0 };
    int saved;
    GThread *thread = stdin_from_pipe(&writer, &saved);
    GError *error = NULL;
    rv_input *input = rv_input_open("-", 5000, &error);
    ck_assert_ptr_null(rv_input_read_all(input, 1 << 20, &error));
    ck_assert(strstr(error->message, "larger than the limit of 1048576 bytes") != NULL);
    g_clear_error(&error);
    rv_input_close(input);
    /* Drain what the writer still sends, so that it ends. */
    char sink[65536];
    while (read(STDIN_FILENO, sink, sizeof sink) > 0) {}
    restore_stdin(thread, saved);
    g_free(text);
}
END_TEST

START_TEST(input_fifo_without_writer_times_out)
{
    char *path = temp_path(".fifo");
    g_unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    GError *error = NULL;
    gint64 started = g_get_monotonic_time();
    rv_input *input = rv_input_open(path, 200, &error); /* opening must not wait for a writer */
    ck_assert_msg(input != NULL, "%s", error ? error->message : "");
    guint8 buffer[16];
    ck_assert_int_eq(rv_input_read(input, buffer, sizeof buffer, &error), -1);
    ck_assert_msg(strstr(error->message, "no data for 0.2 s") && strstr(error->message, "FIFO has no writer"), "%s",
                  error->message);
    ck_assert(g_get_monotonic_time() - started < 30 * G_USEC_PER_SEC);
    g_clear_error(&error);
    rv_input_close(input);
    g_unlink(path);
    g_free(path);
}
END_TEST

START_TEST(input_refuses_what_is_not_a_file)
{
    GError *error = NULL;
    ck_assert_ptr_null(rv_input_open(g_get_tmp_dir(), 0, &error));
    ck_assert(strstr(error->message, "is a directory") != NULL);
    g_clear_error(&error);
    ck_assert_ptr_null(rv_input_open("/nonexistent/reverie/trace.json", 0, &error));
    ck_assert(strstr(error->message, "No such file") != NULL);
    g_clear_error(&error);
}
END_TEST

START_TEST(describe_content_names_formats)
{
    static const struct { const char *bytes; gsize length; const char *want; } cases[] = {
        { "\x1f\x8b\x08", 3, "gzip" },
        { "PK\x03\x04", 4, "ZIP archive" },
        { "BZh91AY", 7, "bzip2" },
        { "\xfd" "7zXZ\0", 6, "xz" },
        { "\x28\xb5\x2f\xfd", 4, "zstd" },
        { "\x7f" "ELF\x02", 5, "ELF" },
        { "\xff\xfe{\0", 4, "UTF-16" },
        { "\0\0\0\0", 4, "NUL bytes" },
        { "  <!DOCTYPE html><html>", 23, "HTML page" },
        { "<HTML><body>", 12, "HTML page" },
        { "RVGRAPH\0", 8, "saved graph" },
        { "%PDF-1.7", 8, "PDF" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        const char *got = rv_describe_content((const guint8 *)cases[i].bytes, cases[i].length);
        ck_assert_msg(got && strstr(got, cases[i].want), "case %zu: %s", i, got ? got : "(null)");
    }
    ck_assert_ptr_null(rv_describe_content((const guint8 *)"{\"traceEvents\"", 14));
    ck_assert_ptr_null(rv_describe_content((const guint8 *)"", 0));
    guint8 tar[600] = { 0 };
    memcpy(tar, "trace.json", 10);
    memcpy(tar + 257, "ustar", 5);
    ck_assert(strstr(rv_describe_content(tar, sizeof tar), "tar archive") != NULL);
}
END_TEST

/* ---- the importer's limits ---------------------------------------------- */

/* The scanner looks at each byte once, whatever the size of a value under
 * an ignored key: 4x the data costs 4x the work (the issue allows 6x).
 * Work is counted in bytes looked at, not in (flaky) seconds. */
START_TEST(ignored_values_scan_in_linear_work)
{
    guint64 scanned[2], total[2];
    static const gsize sizes[2] = { 64u << 20, 256u << 20 };
    char *block = g_strnfill(1 << 20, 'a');
    for (int i = 0; i < 2; i++) {
        GString *pieces = g_string_new("{\"junk\": \"");
        char *tail = g_strdup_printf("\", \"traceEvents\": [%s]}", one_kernel);
        gzFile file;
        char *path = temp_path(".json.gz");
        file = gzopen(path, "wb1");
        gzwrite(file, pieces->str, (unsigned)pieces->len);
        for (gsize mb = 0; mb < sizes[i] >> 20; mb++) ck_assert_int_eq(gzwrite(file, block, 1 << 20), 1 << 20);
        gzwrite(file, tail, (unsigned)strlen(tail));
        ck_assert_int_eq(gzclose(file), Z_OK);
        rv_trace *trace = expect_load(path, NULL);
        scanned[i] = trace->bytes_scanned;
        total[i] = trace->stats.bytes_uncompressed;
        ck_assert_uint_eq(trace->events->len, 1);
        rv_trace_free(trace);
        g_unlink(path);
        g_free(path);
        g_free(tail);
        g_string_free(pieces, TRUE);
    }
    g_free(block);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(scanned[i] <= total[i] + 1024, "scanned %" G_GUINT64_FORMAT " bytes of %" G_GUINT64_FORMAT,
                      scanned[i], total[i]);
    double ratio = (double)scanned[1] / (double)scanned[0];
    fprintf(stderr, "ignored value: 64 MiB -> %" G_GUINT64_FORMAT " bytes scanned, 256 MiB -> %" G_GUINT64_FORMAT
            " (ratio %.2f, limit 6)\n", scanned[0], scanned[1], ratio);
    ck_assert_msg(ratio <= 6.0, "256 MiB cost %.2f x the work of 64 MiB", ratio);
}
END_TEST

/* Nested arrays and a long number under an ignored key, and white space:
 * each byte is still looked at once. */
START_TEST(ignored_structures_scan_once)
{
    GString *text = g_string_new("{\"nested\": ");
    for (int i = 0; i < 300000; i++) g_string_append_c(text, '[');
    for (int i = 0; i < 300000; i++) g_string_append_c(text, ']');
    g_string_append(text, ", \"number\": ");
    for (int i = 0; i < 3000000; i++) g_string_append_c(text, '7');
    g_string_append(text, ",\n");
    for (int i = 0; i < 3000000; i++) g_string_append_c(text, ' ');
    g_string_append_printf(text, "\"traceEvents\": [%s]}", one_kernel);
    char *path = write_text(text->str, text->len, ".json");
    rv_trace *trace = expect_load(path, NULL);
    ck_assert_uint_le(trace->bytes_scanned, text->len);
    ck_assert_uint_ge(trace->bytes_scanned, text->len - 4096);
    rv_trace_free(trace);
    g_unlink(path);
    g_free(path);
    g_string_free(text, TRUE);
}
END_TEST

START_TEST(limits_on_events_and_bytes)
{
    char *text = trace_text(100);
    char *path = write_text(text, strlen(text), ".json");
    rv_import_options few_events = { .threads = 1, .max_events = 50 };
    expect_load_error(path, &few_events, "more than 50 events in \"traceEvents\" - the limit; --max-events");
    rv_import_options few_bytes = { .threads = 2, .max_bytes = 1000 };
    expect_load_error(path, &few_bytes, "more than 1000 bytes of JSON");
    rv_import_options enough = { .threads = 2, .max_events = 100, .max_bytes = strlen(text) };
    rv_trace *trace = expect_load(path, &enough);
    ck_assert_uint_eq(trace->events->len, 100);
    rv_trace_free(trace);
    g_unlink(path);
    g_free(path);
    const char *pieces[] = { text };
    gsize lengths[] = { strlen(text) };
    path = write_gzip(pieces, lengths, 1);
    expect_load_error(path, &few_bytes, "bytes of JSON after decompression");
    g_unlink(path);
    g_free(path);
    g_free(text);
}
END_TEST

START_TEST(an_event_larger_than_64_mib_is_refused)
{
    char *huge = g_strnfill(65u << 20, 'x');
    char *text = g_strdup_printf("{\"traceEvents\": [%s, {\"ph\": \"X\", \"name\": \"%s\"}]}", one_kernel, huge);
    g_free(huge);
    char *path = write_text(text, strlen(text), ".json");
    g_free(text);
    expect_load_error(path, NULL, "event #1 is longer than 65536 KiB");
    g_unlink(path);
    g_free(path);
}
END_TEST

START_TEST(byte_order_mark_and_gzip_members)
{
    char *text = trace_text(3);
    char *with_bom = g_strconcat("\xef\xbb\xbf", text, NULL);
    char *path = write_text(with_bom, strlen(with_bom), ".json");
    rv_trace *trace = expect_load(path, NULL);
    ck_assert_uint_eq(trace->events->len, 3);
    rv_trace_free(trace);
    g_unlink(path);
    g_free(path);
    /* Three gzip members, then bytes that are not gzip (ignored, as gzip's
     * own readers do). */
    gsize length = strlen(with_bom), third = length / 3;
    GString *file = g_string_new(NULL);
    for (int i = 0; i < 3; i++) {
        const char *piece = with_bom + third * (gsize)i;
        gsize piece_length = i < 2 ? third : length - 2 * third;
        char *part_path = write_gzip(&piece, &piece_length, 1);
        gchar *bytes = NULL;
        gsize bytes_length = 0;
        ck_assert(g_file_get_contents(part_path, &bytes, &bytes_length, NULL));
        g_string_append_len(file, bytes, (gssize)bytes_length);
        g_free(bytes);
        g_unlink(part_path);
        g_free(part_path);
    }
    g_string_append(file, "trailing junk");
    path = write_text(file->str, file->len, ".json.gz");
    trace = expect_load(path, NULL);
    ck_assert_uint_eq(trace->events->len, 3);
    rv_trace_free(trace);
    /* Cut inside the last member: truncated, said so. */
    ck_assert(g_file_set_contents(path, file->str, (gssize)(file->len - strlen("trailing junk") - 5), NULL));
    expect_load_error(path, NULL, "the file is truncated");
    g_unlink(path);
    g_free(path);
    g_string_free(file, TRUE);
    g_free(with_bom);
    g_free(text);
}
END_TEST

START_TEST(values_out_of_range_are_refused)
{
    static const struct { const char *args; const char *want; } cases[] = {
        { "\"stream\": -8589934592, \"device\": 0", "field \"stream\" is out of range" },
        { "\"stream\": 7, \"device\": -2", "field \"device\" is out of range" },
        { "\"stream\": 7, \"device\": 0, \"bytes\": 9223372036854775807", "field \"bytes\" is out of range" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *text = g_strdup_printf("{\"traceEvents\": [{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"m\",\"pid\":0,"
                                     "\"tid\":7,\"ts\":1,\"dur\":2,\"args\":{%s}}]}", cases[i].args);
        char *path = write_text(text, strlen(text), ".json");
        expect_load_error(path, NULL, cases[i].want);
        g_unlink(path);
        g_free(path);
        g_free(text);
    }
    /* Wide stream ids (ROCm's can be pointers) stay whole: two streams that
     * differ only above bit 32 are two resources. */
    char *wide = g_strdup_printf("{\"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":2,"
        "\"args\":{\"stream\": 8589934599, \"device\": 0}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"b\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":2,"
        "\"args\":{\"stream\": 7, \"device\": 0}}]}");
    char *wide_path = write_text(wide, strlen(wide), ".json");
    rv_trace *wide_trace = expect_load(wide_path, NULL);
    ck_assert_int_eq(g_array_index(wide_trace->events, rv_event, 0).stream, INT64_C(8589934599));
    ck_assert_int_eq(g_array_index(wide_trace->events, rv_event, 1).stream, 7);
    rv_trace_free(wide_trace);
    g_unlink(wide_path);
    g_free(wide_path);
    g_free(wide);
    /* CUPTI's "all streams" (2^32 - 1) is a real value: it means unknown. */
    char *text = g_strdup_printf("{\"traceEvents\": [%s, {\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"s\",\"pid\":1,"
                                 "\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{\"stream\": 4294967295}}]}", one_kernel);
    char *path = write_text(text, strlen(text), ".json");
    rv_trace *trace = expect_load(path, NULL);
    ck_assert_int_eq(g_array_index(trace->events, rv_event, 1).stream, -1);
    rv_trace_free(trace);
    g_unlink(path);
    g_free(path);
    g_free(text);
    text = g_strdup_printf("{\"distributedInfo\": {\"rank\": 0, \"world_size\": 1000000000}, \"traceEvents\": [%s]}",
                           one_kernel);
    path = write_text(text, strlen(text), ".json");
    expect_load_error(path, NULL, "distributedInfo.world_size = 1000000000 is out of range");
    g_unlink(path);
    g_free(path);
    g_free(text);
}
END_TEST

/* ---- the ELF reader ------------------------------------------------------ */

static GBytes *read_file(const char *folder_variable, const char *name)
{
    const char *folder = g_getenv(folder_variable);
    ck_assert_msg(folder != NULL, "%s is not set (run through meson test)", folder_variable);
    char *path = g_build_filename(folder, name, NULL);
    gchar *data = NULL;
    gsize length = 0;
    ck_assert_msg(g_file_get_contents(path, &data, &length, NULL), "cannot read %s", path);
    g_free(path);
    return g_bytes_new_take(data, length);
}

START_TEST(elf_reader_finds_the_descriptor)
{
    GBytes *plugin = read_file("REVERIE_TEST_PLUGIN_DIR", "scale.so");
    GBytes *other = read_file("REVERIE_HOSTILE_PLUGINS", "hostile_not_a_plugin.so");
    gsize length = 0;
    const guint8 *data = g_bytes_get_data(plugin, &length);
    const char *why = NULL;
    ck_assert(rv_elf_defines_symbol(data, length, RV_PLUGIN_SYMBOL, &why));
    ck_assert(!rv_elf_defines_symbol(data, length, "no_such_symbol", &why));
    const guint8 *other_data = g_bytes_get_data(other, &length);
    ck_assert(!rv_elf_defines_symbol(other_data, length, RV_PLUGIN_SYMBOL, &why));
    ck_assert(strstr(why, "does not define rv_plugin_descriptor") != NULL);
    ck_assert(!rv_elf_defines_symbol((const guint8 *)"#!/bin/sh\n", 10, RV_PLUGIN_SYMBOL, &why));
    ck_assert_str_eq(why, "not an ELF file");
    g_bytes_unref(plugin);
    g_bytes_unref(other);
}
END_TEST

/* Every truncation and a damaged copy of every 97th byte: an answer, never a
 * read outside the buffer (ASan watches in the sanitizer build). */
START_TEST(elf_reader_survives_damage)
{
    GBytes *plugin = read_file("REVERIE_TEST_PLUGIN_DIR", "scale.so");
    gsize length = 0;
    const guint8 *data = g_bytes_get_data(plugin, &length);
    for (gsize cut = 0; cut < length; cut += 61) {
        guint8 *copy = g_memdup2(data, cut);
        (void)rv_elf_defines_symbol(copy, cut, RV_PLUGIN_SYMBOL, NULL);
        g_free(copy);
    }
    guint8 *copy = g_memdup2(data, length);
    for (gsize at = 0; at < length; at += 97) {
        guint8 saved = copy[at];
        copy[at] = 0xff;
        (void)rv_elf_defines_symbol(copy, length, RV_PLUGIN_SYMBOL, NULL);
        copy[at] = saved;
    }
    g_free(copy);
    g_bytes_unref(plugin);
}
END_TEST

/* ---- parameters and applying plugins ----------------------------------- */

static rv_loaded_plugin *load_plugin(const char *folder_variable, const char *file)
{
    char *path = g_build_filename(g_getenv(folder_variable), file, NULL);
    GError *error = NULL;
    rv_loaded_plugin *plugin = rv_plugin_load(path, &error);
    ck_assert_msg(plugin != NULL, "%s: %s", path, error ? error->message : "");
    g_free(path);
    return plugin;
}

static void expect_params_refused(const char *file, const char *text, const char *want)
{
    rv_loaded_plugin *plugin = load_plugin("REVERIE_TEST_PLUGIN_DIR", file);
    GError *error = NULL;
    rv_params *params = rv_params_parse(rv_plugin_descriptor_of(plugin), text, &error);
    ck_assert_msg(params == NULL, "%s:%s was accepted", file, text);
    ck_assert_int_eq(error->code, RV_ERROR_USAGE);
    ck_assert_msg(strstr(error->message, want) != NULL, "%s: %s", text, error->message);
    g_error_free(error);
    rv_plugin_unload(plugin);
}

START_TEST(parameters_are_bounded_and_given_once)
{
    expect_params_refused("scale.so", "factor=2,factor=3", "parameter 'factor' is given twice");
    expect_params_refused("scale.so", "factor=1e999", "too large");
    expect_params_refused("ddp.so", "world=1e300", "\"1e300\" is out of range");
    expect_params_refused("ddp.so", "world=9007199254740993", "out of range");
    expect_params_refused("ddp.so", "world=1.5", "not a whole number");
    expect_params_refused("network.so", "added_latency=1e9s", "is out of range (a duration");
    expect_params_refused("ddp.so", "bucket_cap=16PiB", "is out of range (a size");
    expect_params_refused("scale.so", "factor=2, factor = 3", "parameter 'factor' is given twice");
}
END_TEST

/* Spaces after commas and around '=' are how people type lists. */
START_TEST(parameters_allow_spaces)
{
    rv_loaded_plugin *plugin = load_plugin("REVERIE_TEST_PLUGIN_DIR", "scale.so");
    GError *error = NULL;
    rv_params *params = rv_params_parse(rv_plugin_descriptor_of(plugin), " factor = 0.25 , part=duration ", &error);
    ck_assert_msg(params != NULL, "%s", error ? error->message : "");
    ck_assert(rv_params_number(params, "factor") == 0.25);
    ck_assert_str_eq(rv_params_string(params, "part"), "duration");
    rv_params_free(params);
    rv_plugin_unload(plugin);
}
END_TEST

START_TEST(plugin_names_and_paths)
{
    GError *error = NULL;
    ck_assert_ptr_null(rv_plugin_load("scale.so", &error));
    ck_assert_int_eq(error->code, RV_ERROR_USAGE);
    ck_assert(strstr(error->message, "give its path (./scale.so)") != NULL);
    g_clear_error(&error);
    ck_assert_ptr_null(rv_plugin_load("sc$ale", &error));
    ck_assert_int_eq(error->code, RV_ERROR_USAGE);
    g_clear_error(&error);
    ck_assert_ptr_null(rv_plugin_load("./no-such-plugin.so", &error));
    ck_assert_int_eq(error->code, RV_ERROR_USAGE);
    ck_assert(strstr(error->message, "no such file") != NULL);
    g_clear_error(&error);
    ck_assert_ptr_null(rv_plugin_load("no-such-plugin", &error));
    ck_assert_int_eq(error->code, RV_ERROR_USAGE);
    ck_assert(strstr(error->message, "no optimization named 'no-such-plugin'") != NULL);
    g_clear_error(&error);
    rv_loaded_plugin *wrong_abi = NULL;
    char *path = g_build_filename(g_getenv("REVERIE_HOSTILE_PLUGINS"), "hostile_wrong_abi.so", NULL);
    wrong_abi = rv_plugin_load(path, &error);
    ck_assert_ptr_null(wrong_abi);
    ck_assert(strstr(error->message, "built for plugin ABI") != NULL);
    g_clear_error(&error);
    g_free(path);
}
END_TEST

static const struct {
    const char *file;
    const char *want;
} broken_plugins[] = {
    { "hostile_fail_silently.so", "failed without saying why" },
    { "hostile_succeed_with_error.so", "reported success but set an error" },
    { "hostile_bad_edge.so", "edge 4 joins task #0 to task #9" },
    { "hostile_cycle.so", "has a cycle" },
    { "hostile_negative_duration.so", "has a duration of -5 ns" },
    { "hostile_huge_duration.so", "has a duration of 9223372036854775807 ns" },
    { "hostile_bad_kind.so", "task #0 has an unknown kind (200)" },
    { "hostile_bad_resource.so", "task #0 is on resource 1002" },
};

START_TEST(apply_blames_a_plugin_that_breaks_the_graph)
{
    rv_loaded_plugin *plugin = load_plugin("REVERIE_HOSTILE_PLUGINS", broken_plugins[_i].file);
    rv_params *params = rv_params_parse(rv_plugin_descriptor_of(plugin), "", NULL);
    rv_graph *graph = small_graph();
    rv_plugin_output output = { .notes = g_string_new(NULL) };
    GError *error = NULL;
    ck_assert(!rv_plugin_apply(plugin, graph, params, &output, &error));
    ck_assert_msg(error != NULL && error->code == RV_ERROR_PLUGIN, "%s", error ? error->message : "no error");
    ck_assert_msg(strstr(error->message, broken_plugins[_i].want) != NULL, "%s", error->message);
    ck_assert_msg(g_str_has_prefix(error->message, "hostile: "), "%s", error->message);
    g_error_free(error);
    g_string_free(output.notes, TRUE);
    rv_graph_free(graph);
    rv_params_free(params);
    rv_plugin_unload(plugin);
}
END_TEST

static Suite *hardening_suite(void)
{
    Suite *suite = suite_create("hardening");
    TCase *units = tcase_create("units");
    tcase_add_test(units, escape_controls_and_invisible_characters);
    tcase_add_test(units, escape_every_byte_pair);
    tcase_add_test(units, checked_arithmetic);
    tcase_add_test(units, validate_accepts_a_good_graph);
    tcase_add_test(units, validate_refuses_each_defect);
    tcase_add_test(units, validate_bounds_the_total_work);
    tcase_add_test(units, check_scale_refuses_factors_that_overflow);
    tcase_add_test(units, describe_content_names_formats);
    suite_add_tcase(suite, units);

    TCase *input = tcase_create("input");
    tcase_set_timeout(input, 600);
    tcase_add_test(input, input_peek_loses_nothing_on_a_pipe);
    tcase_add_test(input, input_read_all_stops_at_the_limit);
    tcase_add_test(input, input_fifo_without_writer_times_out);
    tcase_add_test(input, input_refuses_what_is_not_a_file);
    tcase_add_test(input, ignored_values_scan_in_linear_work);
    tcase_add_test(input, ignored_structures_scan_once);
    tcase_add_test(input, limits_on_events_and_bytes);
    tcase_add_test(input, an_event_larger_than_64_mib_is_refused);
    tcase_add_test(input, byte_order_mark_and_gzip_members);
    tcase_add_test(input, values_out_of_range_are_refused);
    suite_add_tcase(suite, input);

    TCase *plugins = tcase_create("plugins");
    tcase_set_timeout(plugins, 120);
    tcase_add_test(plugins, elf_reader_finds_the_descriptor);
    tcase_add_test(plugins, elf_reader_survives_damage);
    tcase_add_test(plugins, parameters_are_bounded_and_given_once);
    tcase_add_test(plugins, parameters_allow_spaces);
    tcase_add_test(plugins, plugin_names_and_paths);
    tcase_add_loop_test(plugins, apply_blames_a_plugin_that_breaks_the_graph, 0, G_N_ELEMENTS(broken_plugins));
    suite_add_tcase(suite, plugins);
    return suite;
}

int main(void)
{
    SRunner *runner = srunner_create(hardening_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
