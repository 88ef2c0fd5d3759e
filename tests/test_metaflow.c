/*
 * test_metaflow.c - the metaflow plugin (MetaFlow's substitutions,
 * Daydream Algorithm 9) on the shipped traces.
 *
 * conv-bn-relu on the two ResNet-50 traces (with and without shapes): the
 * substitutions are every batch norm that a ReLU follows on its stream
 * (counted here from the kernels themselves), each removing one batch-norm
 * and one ReLU kernel; the step gains no more than the GPU time removed.
 * qkv on Segment-Anything's mask decoder: the two self-attention Q/K/V
 * triples become one GEMM each, slower than one projection and faster than
 * three.  remove and scale on selections; neutral rule files (an empty
 * list, scale:1) give the baseline to the ns; a rule that finds nothing, a
 * trace without the shapes a merge needs and bad rule files are refused
 * with one line naming what is missing or wrong.
 */
#include <check.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include "plugin_harness.h"
#include "reverie/select.h"

#define RESNET "hta_resnet50_v100.json.gz"
#define LEGACY "kineto_legacy_resnet50_v100.2steps.json.gz"
#define TRANSFORMER "hta_transformer_ddp_v100_rank1.2steps.json.gz"
#define LINEAR "param_linear_2080ti.json.gz"
#define SAM "pairs/weights_fp32_vs_bf16_a10g/fp32.json.gz"

static char *folder;

/* A rule file with this text in the test's folder; "rules=PATH" (g_free,
 * with done_with). */
static char *rules_text(const char *name, const char *json)
{
    char *path = g_build_filename(folder, name, NULL);
    ck_assert(g_file_set_contents(path, json, -1, NULL));
    char *text = g_strdup_printf("rules=%s", path);
    g_free(path);
    return text;
}

/* Remove the rule file of "rules=PATH" and free the text. */
static void done_with(char *text)
{
    g_unlink(text + strlen("rules="));
    g_free(text);
}

static guint live_kernels(const rv_graph *graph)
{
    guint count = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        count += !(task->flags & RV_TASK_FLAG_REMOVED) && task->kind == RV_TASK_KERNEL;
    }
    return count;
}

static guint selected(const rv_graph *graph, const char *text)
{
    rv_selection *sel = rv_selection_parse(text, NULL);
    ck_assert(sel != NULL);
    GArray *picked = rv_select(graph, sel);
    guint count = picked->len;
    g_array_unref(picked);
    rv_selection_free(sel);
    return count;
}

static int64_t selected_ns(const rv_graph *graph, const char *text)
{
    rv_selection *sel = rv_selection_parse(text, NULL);
    GArray *picked = rv_select(graph, sel);
    int64_t total = 0;
    for (guint i = 0; i < picked->len; i++) total += g_array_index(graph->tasks, rv_task, g_array_index(picked, int32_t, i)).duration_ns;
    g_array_unref(picked);
    rv_selection_free(sel);
    return total;
}

static gboolean kernel_named(const rv_graph *graph, const rv_task *task, const char *word)
{
    return task->kind == RV_TASK_KERNEL && strstr(rv_strings_get(graph->strings, task->name), word) != NULL;
}

/* Forward batch-norm kernels (cuDNN bn_fw) whose next kernel on the stream
 * is a ReLU's (clamp_min, launch_clamp_scalar): in ResNet-50 exactly the conv-bn-relu chains. */
static guint bn_then_relu(const rv_graph *graph)
{
    GArray *kernels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (task->kind == RV_TASK_KERNEL && !(task->flags & RV_TASK_FLAG_REMOVED)) g_array_append_val(kernels, id);
    }
    rv_tasks_sort_recorded(graph, kernels);
    guint count = 0;
    for (guint i = 0; i + 1 < kernels->len; i++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, g_array_index(kernels, int32_t, i));
        const rv_task *next = &g_array_index(graph->tasks, rv_task, g_array_index(kernels, int32_t, i + 1));
        count += task->phase == RV_PHASE_FORWARD && kernel_named(graph, task, "bn_fw") && kernel_named(graph, next, "clamp");
    }
    g_array_unref(kernels);
    return count;
}

/* conv-bn-relu: each chain loses its batch-norm and ReLU kernels; the step
 * gains, by at most the GPU time removed. */
static void check_conv_bn_relu(const char *trace)
{
    rv_graph *graph = load_trace(trace);
    guint chains = bn_then_relu(graph), kernels = live_kernels(graph);
    guint norms = selected(graph, "kind=kernel phase=forward op~batch_norm");
    guint relus = selected(graph, "kind=kernel phase=forward layer~relu");
    int64_t fused_ns = selected_ns(graph, "kind=kernel phase=forward op~batch_norm,relu,clamp_min");
    guint backward_norms = selected(graph, "kind=kernel phase=backward op~batch_norm");
    int64_t base = step_total(graph), predicted;
    ck_assert_uint_gt(chains, 0);
    apply_and_simulate(graph, "metaflow", "rules=conv-bn-relu", NULL, &predicted);
    ck_assert_uint_eq(kernels - live_kernels(graph), 2 * chains);
    ck_assert_uint_eq(norms - selected(graph, "kind=kernel phase=forward op~batch_norm"), chains);
    ck_assert_uint_eq(relus - selected(graph, "kind=kernel phase=forward layer~relu"), chains);
    ck_assert_uint_eq(selected(graph, "kind=kernel phase=backward op~batch_norm"), backward_norms); /* backward kept */
    ck_assert_msg(predicted < base && base - predicted <= fused_ns, "%s: %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT, trace,
                  base, predicted);
    rv_graph_free(graph);
}

START_TEST(conv_bn_relu_fuses_forward_chains)
{
    check_conv_bn_relu(RESNET);  /* no shapes: the convolutions keep their time */
    check_conv_bn_relu(LEGACY);  /* shapes: the convolutions do the epilogue's FLOPs too */
    rv_graph *graph = load_trace(LEGACY);
    char *notes = apply_notes(graph, "metaflow", "rules=conv-bn-relu");
    ck_assert_msg(strstr(notes, "66 substitutions (66 forward, 0 backward)") && strstr(notes, "66 re-costed"), "%s", notes);
    g_free(notes);
    rv_graph_free(graph);
}
END_TEST

/* backward=fuse: each fused chain's backward loses its batch-norm and ReLU
 * backward kernels too (one each per forward chain), for a larger gain. */
static void check_backward(const char *trace, const char *text)
{
    int64_t base, forward_only, both;
    predict_trace(trace, "metaflow", "rules=conv-bn-relu", &base, &forward_only);
    predict_trace(trace, "metaflow", text, &base, &both);
    ck_assert(both < forward_only);
    rv_graph *graph = load_trace(trace);
    guint chains = bn_then_relu(graph);
    guint norms = selected(graph, "kind=kernel phase=backward op~batch_norm");
    guint relus = selected(graph, "kind=kernel phase=backward layer~relu");
    apply_ok(graph, "metaflow", text);
    ck_assert_uint_eq(norms - selected(graph, "kind=kernel phase=backward op~batch_norm"), chains);
    ck_assert_uint_eq(relus - selected(graph, "kind=kernel phase=backward layer~relu"), chains);
    rv_graph_free(graph);
}

START_TEST(conv_bn_relu_backward)
{
    check_backward(RESNET, "rules=conv-bn-relu-train");
    check_backward(LEGACY, "rules=conv-bn-relu-train");
}
END_TEST

/* qkv: each Q/K/V triple becomes one GEMM of three times the width. */
START_TEST(qkv_merges_projections)
{
    rv_graph *graph = load_trace(SAM);
    guint kernels = live_kernels(graph);
    int64_t base = step_total(graph), predicted;
    int64_t linear_before = selected_ns(graph, "kind=kernel layer=aten::linear");
    apply_and_simulate(graph, "metaflow", "rules=qkv", NULL, &predicted);
    ck_assert_uint_eq(kernels - live_kernels(graph), 4); /* two triples, two kernels removed from each */
    int64_t linear_after = selected_ns(graph, "kind=kernel layer=aten::linear");
    ck_assert(linear_after < linear_before);
    ck_assert(predicted < base);
    rv_graph_free(graph);
    /* the merged kernel: longer than one projection, shorter than the three */
    graph = load_trace(SAM);
    char *notes = apply_notes(graph, "metaflow", "rules=qkv");
    ck_assert_msg(strstr(notes, "2 substitutions (2 forward, 0 backward), 4 kernels removed") && strstr(notes, "2 re-costed"),
                  "%s", notes);
    g_free(notes);
    /* the anchors are the kernels whose time changed; their two successors were removed */
    rv_graph *original = load_trace(SAM);
    guint anchors = 0;
    for (int32_t id = 0; id < rv_graph_task_count(original); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        int64_t one = rv_graph_task(original, id)->duration_ns;
        if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_KERNEL || task->duration_ns == one) continue;
        int32_t k = rv_graph_resource_next(original, id), v = rv_graph_resource_next(original, k);
        ck_assert(rv_graph_task(graph, k)->flags & rv_graph_task(graph, v)->flags & RV_TASK_FLAG_REMOVED);
        int64_t three = one + rv_graph_task(original, k)->duration_ns + rv_graph_task(original, v)->duration_ns;
        ck_assert_msg(task->duration_ns > one && task->duration_ns < three, "%" G_GINT64_FORMAT " not in (%" G_GINT64_FORMAT
                      ", %" G_GINT64_FORMAT ")", task->duration_ns, one, three);
        anchors++;
    }
    ck_assert_uint_eq(anchors, 2);
    rv_graph_free(original);
    rv_graph_free(graph);
}
END_TEST

/* Algorithm 9's primitives: remove takes exactly the selected kernels;
 * scale makes the selected work grow or shrink. */
START_TEST(remove_and_scale_layers)
{
    rv_graph *graph = load_trace(LEGACY);
    guint relus = selected(graph, "kind=kernel layer~relu"), kernels = live_kernels(graph);
    int64_t base = step_total(graph), predicted;
    char *text = rules_text("remove.json", "{\"rules\": [{\"name\": \"no-relu\", \"action\": \"remove\", \"match\": \"layer~relu\"}]}");
    apply_and_simulate(graph, "metaflow", text, NULL, &predicted);
    ck_assert_uint_eq(kernels - live_kernels(graph), relus);
    ck_assert(predicted < base);
    rv_graph_free(graph);
    done_with(text);
    int64_t larger, smaller;
    text = rules_text("wider.json", "{\"rules\": [{\"action\": \"scale:2\", \"match\": \"kind=kernel op~cudnn_convolution\"}]}");
    predict_trace(RESNET, "metaflow", text, &base, &larger);
    done_with(text);
    text = rules_text("narrower.json", "{\"rules\": [{\"action\": \"scale:0.5\", \"match\": \"kind=kernel op~cudnn_convolution\"}]}");
    predict_trace(RESNET, "metaflow", text, &base, &smaller);
    done_with(text);
    ck_assert(smaller < base && base < larger);
}
END_TEST

/* remove needs no cost model, so no GPU; the actions that cost kernels need the trace's GPU. */
START_TEST(remove_needs_no_gpu)
{
    tiny t = tiny_new();
    tiny_launch(&t, "relu_kernel", US(5), US(10), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_launch(&t, "gemm_kernel", US(5), US(50), RV_PHASE_FORWARD, RV_TASK_KERNEL);
    tiny_close_step(&t);
    char *text = rules_text("scale.json", "{\"rules\": [{\"action\": \"scale:2\", \"match\": \"name~gemm\"}]}");
    assert_apply_fails(t.graph, "metaflow", text, RV_ERROR_USAGE, "give source_gpu=NAME");
    done_with(text);
    text = rules_text("remove.json", "{\"rules\": [{\"action\": \"remove\", \"match\": \"name~relu\"}]}");
    guint kernels = live_kernels(t.graph);
    apply_ok(t.graph, "metaflow", text);
    ck_assert_uint_eq(live_kernels(t.graph), kernels - 1);
    ck_assert_int_eq(rv_graph_live_task_count(t.graph), 2); /* the gemm and its launch */
    done_with(text);
    rv_graph_free(t.graph);
}
END_TEST

START_TEST(neutral_rules_are_the_baseline)
{
    char *text = rules_text("empty.json", "{\"description\": \"nothing\", \"rules\": []}");
    check_neutral(LEGACY, "metaflow", text);
    check_neutral(RESNET, "metaflow", text);
    done_with(text);
    text = rules_text("one.json", "{\"rules\": [{\"action\": \"scale:1\", \"match\": \"kind=kernel\"}]}");
    check_neutral(LEGACY, "metaflow", text);
    check_neutral(RESNET, "metaflow", text);
    done_with(text);
}
END_TEST

/* What a trace lacks: the operators a rule names, or the shapes a merge needs. */
START_TEST(refuses_what_it_cannot_substitute)
{
    rv_graph *graph = load_trace(TRANSFORMER);
    assert_apply_fails(graph, "metaflow", "rules=conv-bn-relu", RV_ERROR_PLUGIN,
                       "rule 1 (\"conv-bn-relu\", fuse) found nothing: no chain of those operators");
    rv_graph_free(graph);
    graph = load_trace(RESNET);
    assert_apply_fails(graph, "metaflow", "rules=qkv", RV_ERROR_PLUGIN, "rule 1 (\"qkv\", merge-parallel) found nothing");
    rv_graph_free(graph);
    /* linear layers side by side (the ReLUs skipped) in a trace without Input Dims */
    char *text = rules_text("unshaped.json", "{\"rules\": [{\"action\": \"merge-parallel\", \"match\": \"op=aten::addmm\", "
                                             "\"skip\": [\"layer~relu\"]}]}");
    graph = load_trace(LINEAR);
    assert_apply_fails(graph, "metaflow", text, RV_ERROR_PLUGIN, "no Input Dims (record with record_shapes=True)");
    rv_graph_free(graph);
    done_with(text);
    /* of two rules, the one that found nothing is named */
    text = rules_text("two.json", "{\"rules\": [{\"name\": \"a\", \"action\": \"remove\", \"match\": \"layer~relu\"},"
                                  " {\"name\": \"b\", \"action\": \"remove\", \"match\": \"layer~dropout\"}]}");
    graph = load_trace(LEGACY);
    assert_apply_fails(graph, "metaflow", text, RV_ERROR_PLUGIN, "rule 2 (\"b\", remove) found nothing: no GPU kernel matches");
    rv_graph_free(graph);
    done_with(text);
}
END_TEST

typedef struct {
    const char *json;
    const char *words;
} bad_file;

START_TEST(bad_rule_files)
{
    static const bad_file bad[] = {
        { "{\"rules\": [\n  {\"action\": \"fuse\",\n   \"match\": [\"layer~conv\" \"op~x\"]}]}", "line 3, column" },
        { "[1, 2]", "not a rule file: the top level must be an object with a \"rules\" list" },
        { "{\"rules\": [], \"extra\": 1}", "unknown top-level key \"extra\"" },
        { "{\"rules\": [{\"match\": \"layer~x\"}]}", "rule 1: no \"action\"" },
        { "{\"rules\": [{\"action\": \"remove\", \"match\": \"layer~x\"}, {\"name\": \"z\", \"action\": \"squash\", "
          "\"match\": \"layer~x\"}]}",
          "rule 2 (\"z\"): \"action\" must be" },
        { "{\"rules\": [{\"action\": \"fuse\", \"match\": [\"layer~conv\"]}]}", "rule 1: \"match\" must list 2 to 8 selections" },
        { "{\"rules\": [{\"action\": \"fuse\", \"match\": \"layer~conv\"}]}", "fuse needs \"match\" to list the chain" },
        { "{\"rules\": [{\"action\": \"remove\", \"match\": [\"layer~a\", \"layer~b\"]}]}", "remove needs \"match\" to be one" },
        { "{\"rules\": [{\"action\": \"scale:0\", \"match\": \"layer~x\"}]}", "the factor must be a number in (0, 10000]" },
        { "{\"rules\": [{\"action\": \"remove\", \"match\": \"colour=red\"}]}", "unknown selection key \"colour\"" },
        { "{\"rules\": [{\"action\": \"remove\", \"match\": \"layer~x\", \"count\": 3}]}", "\"count\" does not apply to action remove" },
        { "{\"rules\": [{\"action\": \"merge-parallel\", \"match\": \"layer~x\", \"count\": 1}]}", "\"count\" must be an integer" },
        { "{\"rules\": [{\"action\": \"fuse\", \"match\": [\"layer~a\", \"layer~b\"], \"backward\": \"maybe\"}]}",
          "\"backward\" must be \"keep\" or \"fuse\"" },
        { "{\"rules\": [{\"action\": \"remove\", \"match\": \"layer~x\", \"colour\": 1}]}", "unknown key \"colour\"" },
        { "{\"rules\": [{\"action\": \"remove\", \"match\": \"layer~x\", \"name\": \"a\", \"name\": \"b\"}]}", "duplicate" },
    };
    rv_graph *graph = load_trace("hta_simple_add_a100.json.gz");
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        char *name = g_strdup_printf("bad%zu.json", i);
        char *text = rules_text(name, bad[i].json);
        assert_apply_fails(graph, "metaflow", text, RV_ERROR_USAGE, bad[i].words);
        assert_apply_fails(graph, "metaflow", text, RV_ERROR_USAGE, name); /* the file is named */
        done_with(text);
        g_free(name);
    }
    assert_apply_fails(graph, "metaflow", "rules=no-such-rules", RV_ERROR_USAGE, "bundled: conv-bn-relu, conv-bn-relu-train, conv-relu, qkv");
    assert_apply_fails(graph, "metaflow", "rules=/no/such/file.json", RV_ERROR_USAGE, "no such file");
    rv_graph_free(graph);
}
END_TEST

int main(void)
{
    static const char *const traces[] = { RESNET, LEGACY, TRANSFORMER, LINEAR, SAM, "hta_simple_add_a100.json.gz", NULL };
    require_project_traces(traces);
    folder = g_dir_make_tmp("test_metaflow_XXXXXX", NULL);
    if (folder == NULL) return 1;
    Suite *suite = suite_create("metaflow");
    TCase *substitutions = tcase_create("substitutions");
    tcase_set_timeout(substitutions, 300);
    tcase_add_test(substitutions, conv_bn_relu_fuses_forward_chains);
    tcase_add_test(substitutions, conv_bn_relu_backward);
    tcase_add_test(substitutions, qkv_merges_projections);
    tcase_add_test(substitutions, remove_and_scale_layers);
    tcase_add_test(substitutions, neutral_rules_are_the_baseline);
    tcase_add_test(substitutions, remove_needs_no_gpu);
    suite_add_tcase(suite, substitutions);
    TCase *refusals = tcase_create("refusals");
    tcase_set_timeout(refusals, 300);
    tcase_add_test(refusals, refuses_what_it_cannot_substitute);
    tcase_add_test(refusals, bad_rule_files);
    suite_add_tcase(suite, refusals);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    g_rmdir(folder); /* each test removed its files */
    g_free(folder);
    return failed == 0 ? 0 : 1;
}
