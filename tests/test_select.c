/*
 * test_select.c - Check tests for the selection language (select.h): every
 * key, globs, substrings, comma lists, negation, steps and ranges on a small
 * hand-built graph; the error messages for bad selections; and sanity
 * checks on a real ResNet-50 trace the project ships.
 */
#include "reverie/select.h"
#include "reverie/compose.h"
#include "reverie/error.h"
#include "reverie/graph.h"
#include "reverie/trace.h"

#include <check.h>
#include "project_traces.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the hand-built graph ------------------------------------------------ */

enum { RES_CPU, RES_GPU, RES_NET };

typedef struct {
    rv_task_kind kind;
    rv_phase phase;
    int32_t step;
    int32_t resource;
    const char *name, *layer, *op;
    uint16_t flags;
} task_spec;

/* Task ids are the indices here; the tests below refer to them by number. */
static const task_spec hand_tasks[] = {
    /* 0 */ { RV_TASK_CPU, RV_PHASE_FORWARD, 0, RES_CPU, "cudaLaunchKernel", "nn.Module: conv1", "aten::conv2d", 0 },
    /* 1 */ { RV_TASK_KERNEL, RV_PHASE_FORWARD, 0, RES_GPU, "volta_sgemm_128x64_nn", "nn.Module: conv1",
              "aten::cudnn_convolution", RV_TASK_FLAG_GPU },
    /* 2 */ { RV_TASK_KERNEL, RV_PHASE_BACKWARD, 0, RES_GPU, "void at::native::batch_norm_backward_kernel<float>",
              "autograd::engine::evaluate_function: CudnnBatchNormBackward0", "aten::native_batch_norm_backward",
              RV_TASK_FLAG_GPU },
    /* 3 */ { RV_TASK_MEMCPY, RV_PHASE_OPTIMIZER, 1, RES_GPU, "Memcpy HtoD (Pageable -> Device)",
              "Optimizer.step#SGD.step", "aten::copy_", RV_TASK_FLAG_GPU },
    /* 4 */ { RV_TASK_COMM, RV_PHASE_BACKWARD, 1, RES_NET, "ncclAllReduceRingLLKernel", "", "", 0 },
    /* 5 */ { RV_TASK_DATALOAD, RV_PHASE_DATALOAD, 2, RES_CPU, "enumerate(DataLoader)#_SingleProcessDataLoaderIter",
              "", "", 0 },
    /* 6 */ { RV_TASK_MARKER, RV_PHASE_OTHER, -1, RES_CPU, "ProfilerStep#10", "", "", RV_TASK_FLAG_STEP_BEGIN },
    /* 7 */ { RV_TASK_KERNEL, RV_PHASE_FORWARD, 2, RES_GPU, "relu_kernel", "aten::relu_", "aten::relu_",
              RV_TASK_FLAG_GPU | RV_TASK_FLAG_REMOVED },
    /* 8 */ { RV_TASK_SYNC, RV_PHASE_OTHER, -1, RES_CPU, "cudaDeviceSynchronize", "", "", 0 },
};

static rv_graph *hand_graph;

static void add_step(rv_graph *graph, const char *name)
{
    rv_step step = { rv_strings_intern(graph->strings, name), 0, 0, -1, -1 };
    g_array_append_val(graph->steps, step);
}

static void build_hand_graph(void)
{
    rv_graph *graph = rv_graph_new(NULL, "hand-built");
    rv_graph_add_resource(graph, RV_RES_CPU_THREAD, 1, 1, "thread 1/1");
    rv_graph_add_resource(graph, RV_RES_GPU_STREAM, 0, 7, "gpu stream 0/7");
    rv_graph_add_resource(graph, RV_RES_CHANNEL, -1, -1, "net");
    add_step(graph, "ProfilerStep#10");
    add_step(graph, "ProfilerStep#11");
    add_step(graph, "ProfilerStep#12");
    for (gsize i = 0; i < G_N_ELEMENTS(hand_tasks); i++) {
        const task_spec *spec = &hand_tasks[i];
        rv_task task = { 0 };
        task.duration_ns = 1000 * (int64_t)(i + 1);
        task.correlation = -1;
        task.resource = spec->resource;
        task.name = rv_strings_intern(graph->strings, spec->name);
        task.layer = rv_strings_intern(graph->strings, spec->layer);
        task.op = rv_strings_intern(graph->strings, spec->op);
        task.input_dims = -1;
        task.step = spec->step;
        task.kind = (uint8_t)spec->kind;
        task.phase = (uint8_t)spec->phase;
        task.flags = spec->flags;
        rv_graph_add_task(graph, &task);
    }
    for (int32_t id = 1; id < (int32_t)G_N_ELEMENTS(hand_tasks); id++) rv_graph_add_edge(graph, id - 1, id, RV_EDGE_PLUGIN, FALSE);
    hand_graph = graph;
}

static void free_hand_graph(void)
{
    rv_graph_free(hand_graph);
    hand_graph = NULL;
}

/* ---- helpers ------------------------------------------------------------- */

static rv_selection *parse_ok(const char *text)
{
    GError *error = NULL;
    rv_selection *sel = rv_selection_parse(text, &error);
    ck_assert_msg(sel != NULL, "\"%s\" failed: %s", text, error ? error->message : "?");
    return sel;
}

/* "1,2,5" style list of the ids a selection picks, for readable failures. */
static char *ids_text(const GArray *ids)
{
    GString *text = g_string_new(NULL);
    for (guint i = 0; i < ids->len; i++) g_string_append_printf(text, "%s%d", i ? "," : "", g_array_index(ids, int32_t, i));
    return g_string_free(text, FALSE);
}

/* The selection must pick exactly want ("" for nothing), and rv_selection_matches must agree. */
static void expect_ids(const char *text, const char *want)
{
    rv_selection *sel = parse_ok(text);
    GArray *ids = rv_select(hand_graph, sel);
    char *got = ids_text(ids);
    ck_assert_msg(strcmp(got, want) == 0, "\"%s\" picked {%s}, expected {%s}", text, got, want);
    for (guint i = 0; i < ids->len; i++)
        ck_assert(rv_selection_matches(sel, hand_graph, g_array_index(ids, int32_t, i)));
    g_free(got);
    g_array_unref(ids);
    rv_selection_free(sel);
}

static void expect_error(const char *text, const char *want)
{
    GError *error = NULL;
    rv_selection *sel = rv_selection_parse(text, &error);
    ck_assert_msg(sel == NULL, "\"%s\" parsed but should fail", text);
    ck_assert_ptr_nonnull(error);
    ck_assert(error->domain == RV_ERROR);
    ck_assert_int_eq(error->code, RV_ERROR_USAGE);
    ck_assert_msg(strstr(error->message, want) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", text, error->message, want);
    ck_assert_msg(strchr(error->message, '\n') == NULL, "message is not one line: %s", error->message);
    g_error_free(error);
}

/* ---- keys ------------------------------------------------------------------ */

START_TEST(test_kind)
{
    expect_ids("kind=kernel", "1,2");
    expect_ids("kind=KERNEL", "1,2");
    expect_ids("kind=kernel,memcpy", "1,2,3");
    expect_ids("kind=gpu", "1,2,3");
    expect_ids("kind=comm", "4");
    expect_ids("kind=dataload,marker,sync", "5,6,8");
    expect_ids("kind!=cpu", "1,2,3,4,5,6,8");
    expect_ids("kind!=kernel,memcpy", "0,4,5,6,8");
}
END_TEST

START_TEST(test_phase)
{
    expect_ids("phase=backward", "2,4");
    expect_ids("phase=forward,optimizer", "0,1,3");
    expect_ids("phase=dataload", "5");
    expect_ids("phase=other", "6,8");
    expect_ids("phase!=other", "0,1,2,3,4,5");
}
END_TEST

START_TEST(test_layer)
{
    expect_ids("layer=nn.Module: conv1", "0,1");       /* unquoted space: the word continues the value */
    expect_ids("layer=\"nn.Module: conv1\"", "0,1");   /* quoted */
    expect_ids("layer='nn.Module: conv1' kind=cpu", "0");
    expect_ids("layer=nn.Module:*", "0,1");
    expect_ids("layer=nn.module:*", "");               /* globs are case-sensitive */
    expect_ids("layer~batchnorm", "2");                /* substrings are not */
    expect_ids("layer~CONV", "0,1");
    expect_ids("layer=Optimizer.step#*", "3");
    expect_ids("layer=*", "0,1,2,3,4,5,6,8");          /* the empty layer matches * too */
    expect_ids("layer!~conv", "2,3,4,5,6,8");
}
END_TEST

START_TEST(test_name_and_op)
{
    expect_ids("name=volta_*", "1");
    expect_ids("name~SGEMM", "1");
    expect_ids("name=*kernel*", "2");                  /* case-sensitive: not ...LLKernel */
    expect_ids("name~kernel", "0,2,4");
    expect_ids("name!~kernel", "1,3,5,6,8");
    expect_ids("name=cudaDeviceSynchronize", "8");
    expect_ids("name=cudaDevice", "");                 /* = without wildcards is exact */
    expect_ids("name=Memcpy HtoD*", "3");
    expect_ids("name~memcpy,nccl", "3,4");
    expect_ids("op=aten::conv*", "0");
    expect_ids("op~conv", "0,1");
    expect_ids("op=aten::copy_,aten::conv2d", "0,3");
}
END_TEST

START_TEST(test_resource)
{
    expect_ids("resource=gpu*", "1,2,3");
    expect_ids("resource=gpu stream 0/7", "1,2,3");
    expect_ids("resource=net", "4");
    expect_ids("resource=channel", "4");               /* by resource kind */
    expect_ids("resource=cpu_thread", "0,5,6,8");
    expect_ids("resource~THREAD", "0,5,6,8");
    expect_ids("resource!=gpu_stream", "0,4,5,6,8");
}
END_TEST

START_TEST(test_step)
{
    expect_ids("step=0", "0,1,2");
    expect_ids("step=0,2", "0,1,2,5");
    expect_ids("step=1..2", "3,4,5");
    expect_ids("step=1..", "3,4,5");
    expect_ids("step=..0", "0,1,2");
    expect_ids("step=0..0", "0,1,2");
    expect_ids("step=7", "");
    expect_ids("step=ProfilerStep#11", "3,4");
    expect_ids("step=ProfilerStep#1*", "0,1,2,3,4,5");
    expect_ids("step=none", "6,8");
    expect_ids("step!=none", "0,1,2,3,4,5");
    expect_ids("step=none,2", "5,6,8");
    expect_ids("step!=0..1", "5,6,8");
}
END_TEST

START_TEST(test_combinations)
{
    expect_ids("kind=kernel phase=backward", "2");
    expect_ids("  kind=kernel   phase=forward  ", "1");
    expect_ids("kind=gpu step=0 name~batch", "2");
    expect_ids("layer~conv layer~module kind!=cpu", "1");
    expect_ids("kind=kernel kind=memcpy", "");         /* terms are ANDed, even on one key */
    expect_ids("", "0,1,2,3,4,5,6,8");                 /* empty: everything but removed tasks */
    expect_ids("kind=kernel name=relu_kernel", "");    /* task 7 is removed */
}
END_TEST

START_TEST(test_argv_and_text)
{
    GError *error = NULL;
    char *split[] = { "kind=kernel", "phase=backward" };
    char *joined[] = { "kind=kernel phase=backward" };
    char *spaced[] = { "layer=nn.Module:", "conv1", "kind=gpu" };
    rv_selection *a = rv_selection_parse_argv(split, 2, &error);
    rv_selection *b = rv_selection_parse_argv(joined, 1, &error);
    rv_selection *c = rv_selection_parse_argv(spaced, 3, &error);
    ck_assert(a && b && c);
    ck_assert_str_eq(rv_selection_text(a), "kind=kernel phase=backward");
    ck_assert_str_eq(rv_selection_text(b), "kind=kernel phase=backward");
    ck_assert_str_eq(rv_selection_text(c), "layer=nn.Module: conv1 kind=gpu");
    ck_assert(!rv_selection_is_empty(a));
    GArray *ids = rv_select(hand_graph, c);
    ck_assert_int_eq(ids->len, 1);
    ck_assert_int_eq(g_array_index(ids, int32_t, 0), 1);
    g_array_unref(ids);
    rv_selection_free(a);
    rv_selection_free(b);
    rv_selection_free(c);
    rv_selection *empty = rv_selection_parse(NULL, &error);
    ck_assert(empty && rv_selection_is_empty(empty));
    ck_assert_str_eq(rv_selection_text(empty), "");
    rv_selection_free(empty);
}
END_TEST

START_TEST(test_matches_removed)
{
    /* rv_selection_matches judges the task alone; only rv_select skips removed tasks. */
    rv_selection *sel = parse_ok("kind=kernel name=relu_*");
    ck_assert(rv_selection_matches(sel, hand_graph, 7));
    ck_assert(!rv_selection_matches(sel, hand_graph, 1));
    rv_selection_free(sel);
}
END_TEST

/* ---- selections remembered for a sweep ----------------------------------- */

static char *memo_ids_text(GArray *ids)
{
    GString *text = g_string_new(NULL);
    for (guint i = 0; i < ids->len; i++) g_string_append_printf(text, i ? ",%d" : "%d", g_array_index(ids, int32_t, i));
    g_array_unref(ids);
    return g_string_free(text, FALSE);
}

/* A copy that no plugin changed is answered from memory; once a plugin was
 * applied (graph->applied grew) the copy is matched again.  The unrecorded
 * change shows that the memory is what answers. */
START_TEST(test_remembered_selections)
{
    rv_graph *graph = rv_graph_copy(hand_graph);
    rv_graph_remember_selections(graph);
    char *text = memo_ids_text(rv_select_text(graph, "kind=kernel", NULL));
    ck_assert_str_eq(text, "1,2");
    g_free(text);
    rv_graph *copy = rv_graph_copy(graph);
    text = memo_ids_text(rv_select_text(copy, "kind=kernel", NULL));
    ck_assert_str_eq(text, "1,2");
    g_free(text);
    g_array_index(copy->tasks, rv_task, 2).kind = RV_TASK_MEMCPY; /* not as a plugin: unseen */
    text = memo_ids_text(rv_select_text(copy, "kind=kernel", NULL));
    ck_assert_str_eq(text, "1,2");
    g_free(text);
    rv_compose_record(copy, "by-hand", NULL); /* as rv_plugin_apply does after apply() */
    text = memo_ids_text(rv_select_text(copy, "kind=kernel", NULL));
    ck_assert_str_eq(text, "1");
    g_free(text);
    rv_graph *again = rv_graph_copy(graph); /* a fresh copy is remembered again */
    text = memo_ids_text(rv_select_text(again, "kind=kernel phase=backward", NULL));
    ck_assert_str_eq(text, "2");
    g_free(text);
    GError *error = NULL;
    ck_assert(rv_select_text(again, "knd=kernel", &error) == NULL);
    ck_assert(error != NULL);
    g_error_free(error);
    rv_graph_free(again);
    rv_graph_free(copy);
    rv_graph_free(graph);
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

START_TEST(test_errors)
{
    expect_error("knd=kernel", "unknown selection key \"knd\"");
    expect_error("knd=kernel", "keys: kind, phase, layer, name, op, resource, step");
    expect_error("kind=kernel knd=kernel", "\"knd\"");
    expect_error("kind=kernal", "kind=kernal: unknown kind \"kernal\"");
    expect_error("kind=kernel,kernal", "\"kernal\"");
    expect_error("phase=bakward", "phase=bakward: unknown phase \"bakward\" (forward, backward, optimizer, dataload, other)");
    expect_error("kind~kern", "kind~kern: kind takes = or !=, not ~");
    expect_error("step~1", "not ~");
    expect_error("kind=", "kind=: empty value");
    expect_error("kind=kernel,,memcpy", "empty value");
    expect_error("step=3..1", "step=3..1: empty step range \"3..1\"");
    expect_error("step=1..x", "malformed step \"1..x\"");
    expect_error("step=..", "malformed step \"..\"");
    expect_error("step=-1", "malformed step \"-1\"");
    expect_error("step=1.5", "malformed step \"1.5\"");
    expect_error("kernel", "selection term \"kernel\" has no operator");
    expect_error("=kernel", "\"=kernel\" has no operator");
}
END_TEST

/* ---- the real trace ----------------------------------------------------- */

static rv_graph *real_graph;

/* main() has checked that the trace is there (require_project_traces). */
static void load_real_graph(void)
{
    char *path = project_trace_path("hta_resnet50_v100.json.gz");
    GError *error = NULL;
    rv_trace *trace = rv_trace_load(path, NULL, NULL, &error);
    if (trace) real_graph = rv_graph_build(trace, &error);
    if (error) fprintf(stderr, "test_select: %s: %s\n", path, error->message);
    g_clear_error(&error);
    if (trace) rv_trace_free(trace);
    g_free(path);
}

static void free_real_graph(void)
{
    if (real_graph) rv_graph_free(real_graph);
    real_graph = NULL;
}

static guint count_selected(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = g_strdup_vprintf(format, args);
    va_end(args);
    rv_selection *sel = parse_ok(text);
    GArray *ids = rv_select(real_graph, sel);
    guint count = ids->len;
    g_array_unref(ids);
    rv_selection_free(sel);
    g_free(text);
    return count;
}

START_TEST(test_real_backward_kernels)
{
    if (real_graph == NULL) return;
    rv_selection *sel = parse_ok("kind=kernel phase=backward");
    GArray *ids = rv_select(real_graph, sel);
    guint direct = 0;
    for (int32_t id = 0; id < rv_graph_task_count(real_graph); id++) {
        const rv_task *task = rv_graph_task(real_graph, id);
        gboolean want = task->kind == RV_TASK_KERNEL && task->phase == RV_PHASE_BACKWARD;
        direct += want;
        ck_assert_int_eq(rv_selection_matches(sel, real_graph, id), want); /* cached and direct paths agree */
    }
    ck_assert_uint_gt(ids->len, 100);
    ck_assert_uint_eq(ids->len, direct);
    for (guint i = 0; i < ids->len; i++) {
        const rv_task *task = rv_graph_task(real_graph, g_array_index(ids, int32_t, i));
        ck_assert_int_eq(task->kind, RV_TASK_KERNEL);
        ck_assert_int_eq(task->phase, RV_PHASE_BACKWARD);
    }
    g_array_unref(ids);
    rv_selection_free(sel);
}
END_TEST

START_TEST(test_real_phases_add_up)
{
    if (real_graph == NULL) return;
    guint kernels = count_selected("kind=kernel"), sum = 0;
    for (int p = 0; p < RV_PHASE_COUNT; p++) sum += count_selected("kind=kernel phase=%s", rv_phase_name(p));
    ck_assert_uint_gt(kernels, 1000);
    ck_assert_uint_eq(sum, kernels);
    ck_assert_uint_eq(count_selected("kind=kernel phase=forward,backward,optimizer,dataload,other"), kernels);
    ck_assert_uint_eq(count_selected("kind=kernel phase!=backward") + count_selected("kind=kernel phase=backward"), kernels);
    ck_assert_uint_eq(count_selected("kind=gpu"), count_selected("kind=kernel,memcpy,memset,comm resource=gpu_stream"));
}
END_TEST

START_TEST(test_real_steps)
{
    if (real_graph == NULL) return;
    guint all = count_selected(""), steps = real_graph->steps->len;
    ck_assert_uint_ge(steps, 2);
    ck_assert_uint_eq(count_selected("step=0..%u", steps - 1) + count_selected("step=none"), all);
    const char *first = rv_strings_get(real_graph->strings, g_array_index(real_graph->steps, rv_step, 0).name);
    ck_assert_uint_eq(count_selected("step=%s", first), count_selected("step=0"));
    ck_assert_uint_gt(count_selected("step=0 kind=kernel"), 100);
    ck_assert_uint_eq(count_selected("step=0,1"), count_selected("step=0..1"));
}
END_TEST

/* Kernels grouped by layer: several believable layers, not one bucket. */
START_TEST(test_real_layers)
{
    if (real_graph == NULL) return;
    rv_selection *sel = parse_ok("kind=kernel");
    GArray *ids = rv_select(real_graph, sel);
    GHashTable *layers = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < ids->len; i++) {
        const rv_task *task = rv_graph_task(real_graph, g_array_index(ids, int32_t, i));
        const char *layer = rv_strings_get(real_graph->strings, task->layer);
        g_hash_table_insert(layers, (gpointer)layer, GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(layers, layer)) + 1));
    }
    ck_assert_uint_ge(g_hash_table_size(layers), 5);
    const char *wanted[] = { "conv", "batch", "relu" };
    for (gsize w = 0; w < G_N_ELEMENTS(wanted); w++) {
        GHashTableIter iter;
        gpointer key, value;
        gboolean found = FALSE;
        g_hash_table_iter_init(&iter, layers);
        while (g_hash_table_iter_next(&iter, &key, &value)) {
            char *lower = g_ascii_strdown(key, -1);
            found |= strstr(lower, wanted[w]) != NULL;
            ck_assert_uint_lt(GPOINTER_TO_UINT(value), ids->len * 9 / 10); /* no single bucket */
            g_free(lower);
        }
        ck_assert_msg(found, "no kernel layer mentions \"%s\"", wanted[w]);
    }
    ck_assert_uint_gt(count_selected("kind=kernel layer~conv"), 100);
    ck_assert_uint_gt(count_selected("kind=kernel layer~batch_norm,batchnorm"), 50);
    g_hash_table_destroy(layers);
    g_array_unref(ids);
    rv_selection_free(sel);
}
END_TEST

static Suite *select_suite(void)
{
    Suite *suite = suite_create("select");
    TCase *hand = tcase_create("hand-built");
    tcase_add_unchecked_fixture(hand, build_hand_graph, free_hand_graph);
    tcase_add_test(hand, test_kind);
    tcase_add_test(hand, test_phase);
    tcase_add_test(hand, test_layer);
    tcase_add_test(hand, test_name_and_op);
    tcase_add_test(hand, test_resource);
    tcase_add_test(hand, test_step);
    tcase_add_test(hand, test_combinations);
    tcase_add_test(hand, test_argv_and_text);
    tcase_add_test(hand, test_matches_removed);
    tcase_add_test(hand, test_remembered_selections);
    tcase_add_test(hand, test_errors);
    suite_add_tcase(suite, hand);
    TCase *real = tcase_create("real-trace");
    tcase_set_timeout(real, 120);
    /* Loaded in each test's own process: forking after the importer's
     * worker threads started would leave the child with orphaned thread state. */
    tcase_add_checked_fixture(real, load_real_graph, free_real_graph);
    tcase_add_test(real, test_real_backward_kernels);
    tcase_add_test(real, test_real_phases_add_up);
    tcase_add_test(real, test_real_steps);
    tcase_add_test(real, test_real_layers);
    suite_add_tcase(suite, real);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "hta_resnet50_v100.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(select_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
