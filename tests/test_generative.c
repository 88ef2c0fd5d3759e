/*
 * test_generative.c - expert-parallel (a mixture of experts) and decode
 * (generative inference's token step) on shipped real traces, and
 * tp-allreduce's Megatron split of a model with an embedding: what each
 * inserts and re-costs, the sizes the seeds' models give, the neutral
 * settings and the one-line refusals.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plugin_harness.h"
#include "reverie/comm.h"
#include "reverie/memory.h"

#define TIMESFORMER "pairs/gpu_h100_vs_mi300x_timesformer/h100.json.gz"
#define BERT "pairs/gpu_h100_vs_mi300x_bert_small/h100.json.gz"
#define TRANSFORMER "hta_transformer_ddp_v100_rank1.2steps.json.gz"

static gboolean named(const rv_graph *graph, const rv_task *task, const char *words)
{
    return strstr(rv_strings_get(graph->strings, task->name), words) != NULL;
}

/* Live GPU time of the kernels whose name holds `words` (NULL: every kernel
 * and collective), and their count. */
static int64_t kernel_time(const rv_graph *graph, const char *words, guint *count)
{
    int64_t total = 0;
    guint n = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || (task->kind != RV_TASK_KERNEL && (words || task->kind != RV_TASK_COMM)))
            continue;
        if (words && !named(graph, task, words)) continue;
        total += task->duration_ns;
        n++;
    }
    if (count) *count = n;
    return total;
}

/* The inserted collectives of one op: how many, and the bytes and time of the first. */
static guint inserted_collectives(const rv_graph *graph, rv_collective op, int64_t *bytes, int64_t *ns)
{
    guint n = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (!info || !info->inserted || info->op != op || task->kind != RV_TASK_COMM) continue;
        if (n++ == 0) { *bytes = info->bytes; *ns = task->duration_ns; }
    }
    return n;
}

/*
 * TimeSformer on an H100 (12 blocks of bf16 inference, shapes recorded):
 * each FFN becomes 8 experts over 8 GPUs, top-2 at capacity 1.25.  The
 * expert work is 2.5x the tokens: the FFN's GEMMs grow by at most 2.5x
 * (their fixed cost stays) and by more than 2x (these GEMMs are hundreds
 * of microseconds, far above it).  A dispatch and a combine all-to-all
 * per block (24), each T x H x 2.5 x 4 bytes (fp32 activations, the
 * default), costed by comm.h's all-to-all on NVLink (one node).
 */
START_TEST(experts_on_timesformer)
{
    rv_graph *graph = load_trace(TIMESFORMER);
    char *notes = apply_notes(graph, "expert-parallel", "experts=8,gpus=8");
    ck_assert_msg(strstr(notes, "found 12 Transformer blocks per step in the forward"), "%s", notes);
    ck_assert_msg(strstr(notes, "each FFN becomes 8 experts over 8 GPUs (1 each), top-2, capacity 1.25"), "%s", notes);
    ck_assert_msg(strstr(notes, "24 all-to-alls"), "%s", notes);
    /* F and T x H from the FFNs' shapes (each distinct Input Dims parsed once) */
    ck_assert_msg(strstr(notes, "; F = 3072, on H100-SXM") && strstr(notes, "all-to-alls of 183.76 MiB"), "%s", notes);
    /* the FFNs' GEMMs, as the cost plan reports them: "gemm  36 tasks  4.416 ms -> 10.877 ms" */
    const char *line = strstr(notes, "      gemm");
    guint tasks = 0;
    double before = 0, after = 0;
    ck_assert_msg(line && sscanf(line, " gemm %u tasks %lf ms -> %lf ms", &tasks, &before, &after) == 3, "%s", notes);
    ck_assert_msg(after > 2.0 * before && after <= 2.5 * before, "FFN GEMMs %.3f -> %.3f ms", before, after);
    g_free(notes);
    int64_t bytes = 0, ns = 0;
    ck_assert_uint_eq(inserted_collectives(graph, RV_COLL_ALL_TO_ALL, &bytes, &ns), 24);
    rv_link nvlink = rv_link_make(150e9, US(2), 1.0);
    ck_assert_int_eq(ns, rv_collective_time_ns(RV_COLL_ALL_TO_ALL, bytes, 8, &nvlink));
    ck_assert_int_eq(bytes % 10, 0); /* T x H x 2.5 x 4 */
    guint routers;
    kernel_time(graph, "moe router", &routers);
    ck_assert_uint_eq(routers, 12);
    /* the combine follows FC2: fused-collective fuses it as GEMM + all-to-all */
    notes = apply_notes(graph, "fused-collective", "");
    ck_assert_msg(strstr(notes, "12 GEMM + all-to-all"), "%s", notes);
    g_free(notes);
    rv_graph_free(graph);
}
END_TEST

/* The paper's GEMM + all-to-all: 12% less on average, up to 20%, for
 * an expert's FC2 and its combine.  Here the all-to-all is a tenth of the
 * GEMM, so fusing hides at most that tenth: each pair gains in (0, 12%]. */
START_TEST(experts_fused_gain)
{
    rv_graph *graph = load_trace(TIMESFORMER);
    apply_ok(graph, "expert-parallel", "experts=8,gpus=8");
    int64_t bytes, ns;
    inserted_collectives(graph, RV_COLL_ALL_TO_ALL, &bytes, &ns);
    int64_t separate = kernel_time(graph, NULL, NULL);
    apply_ok(graph, "fused-collective", "");
    int64_t fused = kernel_time(graph, NULL, NULL);
    double saved = (double)(separate - fused) / (12.0 * (double)ns);
    ck_assert_msg(saved > 0.0 && saved <= 1.0, "fusing saved %.2f of each combine", saved);
    rv_graph_free(graph);
}
END_TEST

START_TEST(experts_neutral_and_refusals)
{
    check_neutral(TIMESFORMER, "expert-parallel", "experts=1,gpus=1,top_k=1");
    rv_graph *graph = load_trace(TIMESFORMER);
    assert_apply_fails(graph, "expert-parallel", "experts=6,gpus=4", RV_ERROR_USAGE, "multiple of the GPUs");
    assert_apply_fails(graph, "expert-parallel", "top_k=9", RV_ERROR_USAGE, "top_k <= experts");
    rv_graph_free(graph);
    graph = load_trace(TRANSFORMER);
    assert_apply_fails(graph, "expert-parallel", "", RV_ERROR_PLUGIN, "give batch=, seq= and hidden=");
    rv_graph_free(graph);
    graph = load_trace("hta_resnet50_v100.json.gz");
    assert_apply_fails(graph, "expert-parallel", "", RV_ERROR_PLUGIN, "no Transformer block found");
    rv_graph_free(graph);
}
END_TEST

/* More experts per GPU hold more weights: the memory model's peak grows
 * with experts / gpus (the Transformer rank gets its sizes as parameters). */
START_TEST(experts_memory)
{
    rv_graph *graph = load_trace(TIMESFORMER);
    rv_memory_estimate before, after;
    GError *error = NULL;
    ck_assert(rv_memory_estimate_graph(graph, &before, &error));
    apply_ok(graph, "expert-parallel", "experts=64,gpus=8");
    ck_assert(rv_memory_estimate_graph(graph, &after, &error));
    ck_assert_msg(after.bytes[after.peak_phase][RV_MEM_WEIGHTS] > before.bytes[before.peak_phase][RV_MEM_WEIGHTS] * 3,
                  "weights %lld -> %lld", (long long)before.bytes[before.peak_phase][RV_MEM_WEIGHTS],
                  (long long)after.bytes[after.peak_phase][RV_MEM_WEIGHTS]);
    rv_graph_free(graph);
}
END_TEST

/*
 * decode on a small BERT's prefill (H100, bf16, 4 blocks, S = 141, B = 1,
 * H = 512): one token a step.  Its linear GEMMs read the same weights for
 * one token instead of 141, so their FLOPs fall 141x but their time falls
 * only to the weights' traffic and the fixed cost (these kernels are 5-10
 * us, mostly the fixed cost): GEMM time falls, by less than half.  The
 * host launches the same kernels: the step stays host-bound, within 10% of
 * the prefill's.  The KV cache of S + N tokens is resident:
 * 2 x 4 x 1 x (141 + 64) x 512 x 2 bytes.
 */
START_TEST(decode_on_bert)
{
    rv_graph *graph = load_trace(BERT);
    int64_t prefill_step = step_total(graph);
    int64_t prefill_gemm = kernel_time(graph, "gemm", NULL);
    char *notes = apply_notes(graph, "decode", "tokens=64");
    ck_assert_msg(strstr(notes, "prompt S = 141, batch B = 1, hidden H = 512"), "%s", notes);
    ck_assert_msg(strstr(notes, "context L = 173.5"), "%s", notes);
    ck_assert_msg(strstr(notes, "4 cache appends"), "%s", notes);
    g_free(notes);
    guint gemvs;
    int64_t decode_gemm = kernel_time(graph, "gemm", NULL);  /* renamed GEMVs keep their names inside */
    kernel_time(graph, "gemv (decode", &gemvs);
    ck_assert_uint_eq(gemvs, 26);
    ck_assert_msg(decode_gemm < prefill_gemm && decode_gemm > prefill_gemm / 2, "GEMMs %lld -> %lld ns",
                  (long long)prefill_gemm, (long long)decode_gemm);
    int64_t token_step = step_total(graph);
    ck_assert_msg(llabs(token_step - prefill_step) < prefill_step / 10, "step %lld -> %lld ns", (long long)prefill_step,
                  (long long)token_step);
    rv_memory_estimate estimate;
    GError *error = NULL;
    ck_assert(rv_memory_estimate_graph(graph, &estimate, &error));
    ck_assert_int_eq(estimate.resident, 2LL * 4 * 1 * (141 + 64) * 512 * 2);
    rv_graph_free(graph);
}
END_TEST

/* Attention reads the cache: the last token's attention costs more than the first's. */
START_TEST(decode_cache_grows)
{
    int64_t attention[2];
    const char *at[2] = { "tokens=2048,at=first", "tokens=2048,at=last" };
    for (int i = 0; i < 2; i++) {
        rv_graph *graph = load_trace(BERT);
        apply_ok(graph, "decode", at[i]);
        attention[i] = kernel_time(graph, "flash", NULL);
        rv_graph_free(graph);
    }
    ck_assert_msg(attention[1] > attention[0], "attention at the first token %lld ns, at the last %lld ns",
                  (long long)attention[0], (long long)attention[1]);
}
END_TEST

/* The fused-collective paper's token phase: decode, then 4-way tensor
 * parallelism (its all-reduces move one token's B x H), then GEMV +
 * all-reduce fused: the 8 all-reduces after the blocks' row-parallel GEMVs. */
START_TEST(decode_gemv_allreduce)
{
    rv_graph *graph = load_trace(BERT);
    apply_ok(graph, "decode", "tokens=128");
    apply_ok(graph, "tp-allreduce", "degree=4,batch=1,seq=1,hidden=512,dtype_bytes=2");
    char *notes = apply_notes(graph, "fused-collective", "");
    ck_assert_msg(strstr(notes, "8 GEMV + all-reduce"), "%s", notes);
    g_free(notes);
    rv_graph_free(graph);
}
END_TEST

START_TEST(decode_neutral_and_refusals)
{
    check_neutral(BERT, "decode", "tokens=0");
    rv_graph *graph = load_trace(TRANSFORMER);
    assert_apply_fails(graph, "decode", "", RV_ERROR_PLUGIN, "the trace trains");
    rv_graph_free(graph);
    graph = load_trace(BERT);
    assert_apply_fails(graph, "decode", "tokens=-1", RV_ERROR_USAGE, "tokens");
    rv_graph_free(graph);
}
END_TEST

/* Megatron's vocabulary split on the BERT (its word, position and type
 * embeddings are torch.nn.Embedding lookups): the lookups and the layer
 * after the blocks divide, and one more all-reduce follows the lookups. */
START_TEST(tp_vocabulary)
{
    rv_graph *graph = load_trace(BERT);
    char *notes = apply_notes(graph, "tp-allreduce", "degree=4");
    ck_assert_msg(strstr(notes, "vocabulary-parallel: 3 embedding and 1 output-layer kernels sliced"), "%s", notes);
    ck_assert_msg(strstr(notes, "inserted 9 all-reduces"), "%s", notes);
    g_free(notes);
    rv_graph_free(graph);
    graph = load_trace(BERT);
    notes = apply_notes(graph, "tp-allreduce", "degree=4,embedding=replicated");
    ck_assert_msg(strstr(notes, "inserted 8 all-reduces"), "%s", notes);
    g_free(notes);
    rv_graph_free(graph);
}
END_TEST

static Suite *generative_suite(void)
{
    Suite *suite = suite_create("generative");
    TCase *tc = tcase_create("experts");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, experts_on_timesformer);
    tcase_add_test(tc, experts_fused_gain);
    tcase_add_test(tc, experts_neutral_and_refusals);
    tcase_add_test(tc, experts_memory);
    suite_add_tcase(suite, tc);
    tc = tcase_create("decode");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, decode_on_bert);
    tcase_add_test(tc, decode_cache_grows);
    tcase_add_test(tc, decode_gemv_allreduce);
    tcase_add_test(tc, decode_neutral_and_refusals);
    tcase_add_test(tc, tp_vocabulary);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { TIMESFORMER, BERT, TRANSFORMER, "hta_resnet50_v100.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(generative_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
