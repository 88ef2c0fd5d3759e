/*
 * test_tp_allreduce.c - the tp-allreduce plugin (optimizations/tp_allreduce.c):
 * Transformer blocks found from the kernel pattern, GEMMs sliced by the
 * degree, four all-reduces per block, and the real DDP Transformer trace.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "plugin_harness.h"

#define TRANSFORMER "hta_transformer_ddp_v100_rank1.2steps.json.gz"

/* A kernel of step 0 launched from operator `op`. */
static int32_t kernel(tiny *t, const char *name, const char *op, int64_t duration_ns)
{
    int32_t id = tiny_launch(t, name, US(5), duration_ns, RV_PHASE_FORWARD, RV_TASK_KERNEL);
    rv_task *task = rv_graph_task(t->graph, id);
    task->op = task->layer = rv_strings_intern(t->graph->strings, op);
    task->step = 0;
    rv_graph_task(t->graph, rv_graph_launch_of(t->graph, id))->step = 0;
    return id;
}

/*
 * One block, as tokens L A A L N L G L N:
 *   QKV sgemm 100us, two attention bmm 20us each, out-proj sgemm 40us,
 *   LayerNorm 10us, FC1 sgemm 160us, GELU 10us, FC2 sgemm 160us, LayerNorm 10us
 * = 530us of GPU work.  first_dims, when not NULL, is the QKV addmm's
 * Input Dims (its input 1 is the B*S x H activation).
 */
static void block(tiny *t, const char *first_dims)
{
    int32_t qkv = kernel(t, "volta_sgemm_128x64_nn", "aten::addmm", US(100));
    if (first_dims) rv_graph_task(t->graph, qkv)->input_dims = rv_strings_intern(t->graph->strings, first_dims);
    kernel(t, "volta_sgemm_128x32_nt", "aten::bmm", US(20));
    kernel(t, "volta_sgemm_128x32_nn", "aten::bmm", US(20));
    kernel(t, "volta_sgemm_64x64_nn", "aten::addmm", US(40));
    kernel(t, "layer_norm_kernel", "aten::layer_norm", US(10));
    kernel(t, "volta_sgemm_128x128_nn", "aten::addmm", US(160));
    kernel(t, "gelu_kernel", "aten::gelu", US(10));
    kernel(t, "volta_sgemm_128x128_tn", "aten::addmm", US(160));
    kernel(t, "layer_norm_kernel", "aten::layer_norm", US(10));
}

/* Two blocks: 18 launches of 5us on the CPU, kernels queued on the stream
 * from their launch's end: the GPU is the bottleneck from the first
 * launch's end on, 5 + 2 x 530 = 1065us. */
static tiny two_blocks(const char *first_dims)
{
    tiny t = tiny_new();
    block(&t, first_dims);
    block(&t, first_dims);
    tiny_close_step(&t);
    return t;
}

/* All-reduce: batch 1 x seq 1000 x hidden 250 x 4 bytes = 1,000,000 bytes.
 * Ring over 2 GPUs: 2(p-1) latency (0) + 2(p-1)/p x bytes / 10 GB/s = 100us. */
#define TP_LINK "degree=2,bandwidth=10GB/s,latency=0us"
#define TP_SHAPE ",batch=1,seq=1000,hidden=250"

/*
 * degree 2: every GEMM halves - per block 50+10+10+20+80+80 = 250us of GEMMs
 * - and so does the GELU on FC1's columns (5us); the 20us of norms stay:
 * 275us, two blocks 550us.  Two forward all-reduces per block (after
 * out-proj, the 2nd of the block's 4 linear GEMMs, and after FC2, the
 * 4th), each 100us on the stream: 400us.  Their launches add 4 x 5us to
 * the CPU's 90us, still far ahead of the GPU.  5 + 550 + 400 = 955us.
 */
START_TEST(tp_hand_built)
{
    tiny t = two_blocks(NULL);
    ck_assert_int_eq(makespan(t.graph), US(1065));
    char *notes = apply_notes(t.graph, "tp-allreduce", TP_LINK TP_SHAPE);
    ck_assert_msg(strstr(notes, "found 2 Transformer blocks per step in the forward"), "%s", notes);
    ck_assert_msg(strstr(notes, "inserted 4 all-reduces"), "%s", notes);
    g_free(notes);
    ck_assert_int_eq(makespan(t.graph), US(955));
    GError *cycle = NULL;
    ck_assert(rv_graph_check_acyclic(t.graph, &cycle));
    rv_graph_free(t.graph);
}
END_TEST

/* The same size read from the QKV addmm's shapes: input 1 is [1000, 250]. */
START_TEST(tp_size_from_shapes)
{
    tiny t = two_blocks("[[750], [1000, 250], [250, 750]]");
    apply_ok(t.graph, "tp-allreduce", TP_LINK);
    ck_assert_int_eq(makespan(t.graph), US(955));
    rv_graph_free(t.graph);
}
END_TEST

/* degree 4: GEMMs 125us and GELU 2.5us per block (+20 of norms) -> 147.5us;
 * all-reduce over 4 GPUs: 2 x 3/4 x 1e6 B / 10 GB/s = 150us, four of them
 * 600us -> 5 + 295 + 600 = 900us. */
START_TEST(tp_degree_four)
{
    tiny t = two_blocks(NULL);
    apply_ok(t.graph, "tp-allreduce", "degree=4,bandwidth=10GB/s,latency=0us" TP_SHAPE);
    ck_assert_int_eq(makespan(t.graph), US(900));
    rv_graph_free(t.graph);
}
END_TEST

/*
 * Megatron-LM's split of a language model: a block whose attention core
 * holds a softmax and a dropout between its two attention GEMMs, a
 * dropout after the output projection and norms (replicated), and a GELU;
 * an embedding lookup before the blocks, the final norm (replicated) and
 * the output layer (logits GEMM and the loss's softmax) after them.
 *   embedding 30 | per block: QKV 100, scores 20, softmax 10, dropout 10,
 *   context 20, out-proj 40, dropout 10, norm 10, FC1 160, GELU 10, FC2 160,
 *   norm 10 (560) | norm 10, logits 200, softmax 20 = 30 + 1120 + 230 =
 *   1380us of GPU, 1385us with the first launch.
 * Degree 2: the embedding 15; per block the GEMMs 250, softmax 5, the
 * attention dropout 5, GELU 5, and 30 of replicated work = 295; the norm
 * 10 and the output layer 110; all-reduces of 100us: two per block and one
 * after the embedding, 500us.  5 + 15 + 590 + 120 + 500 = 1230us.  With
 * embedding=replicated the embedding and output layer stay (250us) and
 * their all-reduce goes: 5 + 30 + 590 + 230 + 400 = 1255us.
 */
static tiny language_model(void)
{
    tiny t = tiny_new();
    kernel(&t, "indexSelectLargeIndex", "aten::embedding", US(30));
    for (int b = 0; b < 2; b++) {
        kernel(&t, "volta_sgemm_128x64_nn", "aten::addmm", US(100));
        kernel(&t, "volta_sgemm_128x32_nt", "aten::bmm", US(20));
        kernel(&t, "softmax_warp_forward", "aten::softmax", US(10));
        kernel(&t, "fused_dropout_kernel_vec", "aten::dropout", US(10));
        kernel(&t, "volta_sgemm_128x32_nn", "aten::bmm", US(20));
        kernel(&t, "volta_sgemm_64x64_nn", "aten::addmm", US(40));
        kernel(&t, "fused_dropout_kernel_vec", "aten::dropout", US(10));
        kernel(&t, "layer_norm_kernel", "aten::layer_norm", US(10));
        kernel(&t, "volta_sgemm_128x128_nn", "aten::addmm", US(160));
        kernel(&t, "gelu_kernel", "aten::gelu", US(10));
        kernel(&t, "volta_sgemm_128x128_tn", "aten::addmm", US(160));
        kernel(&t, "layer_norm_kernel", "aten::layer_norm", US(10));
    }
    kernel(&t, "layer_norm_kernel", "aten::layer_norm", US(10));
    kernel(&t, "volta_sgemm_128x128_nt", "aten::addmm", US(200));
    kernel(&t, "softmax_warp_forward", "aten::log_softmax", US(20));
    tiny_close_step(&t);
    return t;
}

START_TEST(tp_megatron_slices)
{
    tiny t = language_model();
    ck_assert_int_eq(makespan(t.graph), US(1385));
    char *notes = apply_notes(t.graph, "tp-allreduce", TP_LINK TP_SHAPE);
    ck_assert_msg(strstr(notes, "found 2 Transformer blocks per step"), "%s", notes);
    ck_assert_msg(strstr(notes, "(2 softmax, 2 activation, 2 dropout)"), "%s", notes);
    ck_assert_msg(strstr(notes, "vocabulary-parallel: 1 embedding and 2 output-layer kernels sliced"), "%s", notes);
    ck_assert_msg(strstr(notes, "inserted 5 all-reduces"), "%s", notes);
    g_free(notes);
    ck_assert_int_eq(makespan(t.graph), US(1230));
    rv_graph_free(t.graph);
    t = language_model();
    apply_ok(t.graph, "tp-allreduce", TP_LINK TP_SHAPE ",embedding=replicated");
    ck_assert_int_eq(makespan(t.graph), US(1255));
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(tp_neutral)
{
    tiny t = two_blocks(NULL);
    apply_ok(t.graph, "tp-allreduce", "degree=1");
    ck_assert_int_eq(makespan(t.graph), US(1065));
    rv_graph_free(t.graph);
    check_neutral(TRANSFORMER, "tp-allreduce", "degree=1");
}
END_TEST

static void expect_failure(rv_graph *graph, const char *text, const char *words)
{
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, "tp-allreduce", text, &error));
    ck_assert(g_error_matches(error, RV_ERROR, RV_ERROR_PLUGIN));
    ck_assert_msg(strstr(error->message, words) != NULL, "%s", error->message);
    g_error_free(error);
}

/* Blocks but no shapes and no batch/seq/hidden: say what to give. */
START_TEST(tp_needs_a_size)
{
    tiny t = two_blocks(NULL);
    expect_failure(t.graph, TP_LINK, "batch=");
    rv_graph_free(t.graph);
}
END_TEST

/* An MLP (no attention GEMM) and a CNN have no Transformer block. */
START_TEST(tp_no_blocks)
{
    tiny t = tiny_new();
    for (int i = 0; i < 12; i++) {
        kernel(&t, "volta_sgemm_128x64_nn", "aten::addmm", US(100));
        kernel(&t, "relu_kernel", "aten::relu", US(10));
    }
    expect_failure(t.graph, TP_LINK TP_SHAPE, "no Transformer block");
    rv_graph_free(t.graph);
    rv_graph *graph = load_trace("hta_resnet50_v100.json.gz");
    expect_failure(graph, TP_LINK TP_SHAPE, "no Transformer block");
    rv_graph_free(graph);
}
END_TEST

static int64_t gemm_time(const rv_graph *graph, uint32_t *allreduces)
{
    int64_t total = 0;
    *allreduces = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        const char *name = rv_strings_get(graph->strings, task->name);
        if (task->kind == RV_TASK_COMM && strstr(name, "tensor parallel")) (*allreduces)++;
        if (task->kind == RV_TASK_KERNEL && strstr(name, "sgemm") && task->phase == RV_PHASE_FORWARD) total += task->duration_ns;
    }
    return total;
}

/*
 * The DDP Transformer trace (V100, no shapes, no module tags) repeats one
 * block four times in each step's forward and backward.  With degree 8 the
 * blocks' forward sgemm time falls by about 7/8 (GEMMs outside the blocks
 * stay), and 4 blocks x 4 all-reduces x 2 steps = 32 all-reduces appear
 * (the project ships the trace's first 2 steps).
 */
START_TEST(tp_real_transformer)
{
    rv_graph *graph = load_trace(TRANSFORMER);
    uint32_t allreduces;
    int64_t before = gemm_time(graph, &allreduces);
    int64_t baseline = step_total(graph);
    char *notes = apply_notes(graph, "tp-allreduce", "degree=8,batch=8,seq=512,hidden=1024");
    ck_assert_msg(strstr(notes, "found 4 Transformer blocks per step in the forward, 4 in the backward (2 steps)"),
                  "%s", notes);
    g_free(notes);
    int64_t after = gemm_time(graph, &allreduces);
    ck_assert_int_eq(allreduces, 32);
    ck_assert_msg(after < before / 4 && after > before / 8, "forward sgemm %lld -> %lld ns", (long long)before,
                  (long long)after);
    int64_t predicted = step_total(graph);
    g_printerr("transformer tp degree 8: %.3f ms -> %.3f ms\n", baseline / 1e6, predicted / 1e6);
    ck_assert(predicted > 0);
    rv_graph_free(graph);
}
END_TEST

/* Slower links cost more: predictions rise as bandwidth falls. */
START_TEST(tp_bandwidth_monotonic)
{
    int64_t previous = 0;
    const char *links[] = { "bandwidth=300GB/s", "bandwidth=25GB/s", "bandwidth=2GB/s" };
    for (int i = 0; i < 3; i++) {
        rv_graph *graph = load_trace(TRANSFORMER);
        char *text = g_strconcat("degree=4,batch=8,seq=512,hidden=1024,", links[i], NULL);
        apply_ok(graph, "tp-allreduce", text);
        int64_t predicted = step_total(graph);
        ck_assert_msg(predicted >= previous, "%s: %lld < %lld", text, (long long)predicted, (long long)previous);
        previous = predicted;
        g_free(text);
        rv_graph_free(graph);
    }
}
END_TEST

static Suite *tp_suite(void)
{
    Suite *suite = suite_create("tp-allreduce");
    TCase *tc = tcase_create("hand-built");
    tcase_add_test(tc, tp_hand_built);
    tcase_add_test(tc, tp_size_from_shapes);
    tcase_add_test(tc, tp_degree_four);
    tcase_add_test(tc, tp_needs_a_size);
    tcase_add_test(tc, tp_megatron_slices);
    suite_add_tcase(suite, tc);
    tc = tcase_create("real");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, tp_neutral);
    tcase_add_test(tc, tp_no_blocks);
    tcase_add_test(tc, tp_real_transformer);
    tcase_add_test(tc, tp_bandwidth_monotonic);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "hta_resnet50_v100.json.gz", "hta_transformer_ddp_v100_rank1.2steps.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(tp_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
