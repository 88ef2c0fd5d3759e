/*
 * test_distributed.c - the distributed what-ifs of issue 16 built as
 * plugins: pipeline (stages, micro-batches, GPipe and 1F1B) and zero
 * (sharded optimizer, gradients and parameters), blueconnect (hierarchical
 * all-reduce) and dgc (gradient compression).  ZeRO-3's 1.5x the bytes
 * of plain data parallelism is counted from the graph's collectives.
 *
 * The pipeline's bubble is checked two ways.  On a hand-built model of
 * identical layers the stages come out equal, and the replayed pipeline
 * must take exactly (M+D-1)(f+b): a bubble of (D-1)/(D-1+M) of it.  On a
 * generated trace and on a real one the stages are balanced by time but
 * not equal (kernels are not divisible), so the replay must match, to the
 * nanosecond, the schedule worked out here from the stage times alone.
 */
#include "plugin_harness.h"
#include "reverie/comm.h"
#include "reverie/job.h"
#include "reverie/validate.h"
#include <check.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a generated trace (tests/gen) ---------------------------------------- */

static rv_graph *generated_trace(const char *const *extra)
{
    const char *generator = g_getenv("REVERIE_GENTRACE");
    ck_assert_msg(generator != NULL, "REVERIE_GENTRACE is not set (run through meson test)");
    char *dir = g_dir_make_tmp("rv-dist-XXXXXX", NULL);
    char *path = g_build_filename(dir, "trace.json.gz", NULL);
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (char *)generator);
    for (int i = 0; extra[i]; i++) g_ptr_array_add(argv, (char *)extra[i]);
    g_ptr_array_add(argv, "-o");
    g_ptr_array_add(argv, path);
    g_ptr_array_add(argv, NULL);
    int status = -1;
    ck_assert(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                           &status, NULL));
    ck_assert_int_eq(status, 0);
    rv_graph *graph = load_trace_file(path);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    g_ptr_array_unref(argv);
    return graph;
}

/* ---- the schedule, worked out from stage times alone ----------------------- */

/* Stage s's order: +m+1 forward m, -(m+1) backward m (GPipe, or 1F1B's
 * warm-up of D-1-s forwards, alternation, cool-down). */
static GArray *order_of(int s, int D, int M, gboolean one_f_one_b)
{
    GArray *order = g_array_new(FALSE, FALSE, sizeof(int));
    int f = 0, b = 0, warmup = one_f_one_b ? MIN(D - 1 - s, M) : M;
    for (; f < warmup; f++) { int v = f + 1; g_array_append_val(order, v); }
    for (; f < M; f++, b++) {
        int vf = f + 1, vb = -(b + 1);
        g_array_append_val(order, vf);
        g_array_append_val(order, vb);
    }
    for (; b < M; b++) { int v = -(b + 1); g_array_append_val(order, v); }
    return order;
}

/* The span of the pipeline with free transfers: each stage runs its order,
 * a forward after the previous stage's same forward, a backward after the
 * next stage's same backward (the last stage's after its own forward). */
static int64_t schedule_span(int D, int M, gboolean one_f_one_b, const int64_t *f, const int64_t *b)
{
    int64_t *fe = g_new(int64_t, (gsize)D * M), *be = g_new(int64_t, (gsize)D * M), *free_at = g_new0(int64_t, D);
    for (int i = 0; i < D * M; i++) fe[i] = be[i] = -1;
    GArray **orders = g_new(GArray *, D);
    guint *next = g_new0(guint, D);
    for (int s = 0; s < D; s++) orders[s] = order_of(s, D, M, one_f_one_b);
    gboolean moved = TRUE;
    while (moved) {
        moved = FALSE;
        for (int s = 0; s < D; s++) {
            while (next[s] < orders[s]->len) {
                int v = g_array_index(orders[s], int, next[s]), m = abs(v) - 1;
                int64_t ready = v > 0 ? (s > 0 ? fe[(s - 1) * M + m] : 0)
                                      : (s + 1 < D ? be[(s + 1) * M + m] : fe[s * M + m]);
                if (ready < 0) break;
                int64_t end = MAX(ready, free_at[s]) + (v > 0 ? f[s] : b[s]);
                (v > 0 ? fe : be)[s * M + m] = free_at[s] = end;
                next[s]++;
                moved = TRUE;
            }
        }
    }
    int64_t span = 0;
    for (int s = 0; s < D; s++) {
        ck_assert_uint_eq(next[s], orders[s]->len);
        span = MAX(span, free_at[s]);
        g_array_unref(orders[s]);
    }
    g_free(orders); g_free(next); g_free(fe); g_free(be); g_free(free_at);
    return span;
}

/* What the replay shows of one step's pipeline: per stage its forward and
 * backward time per micro-batch (its tasks' durations / M), and the span
 * from the first stage task's start to the last one's end. */
typedef struct {
    int64_t f[16], b[16];
    int64_t span;
} replayed_pipeline;

static gboolean stage_of(const rv_graph *graph, const rv_task *task, int *stage)
{
    const rv_resource *r = &g_array_index(graph->resources, rv_resource, task->resource);
    return sscanf(rv_strings_get(graph->strings, r->name), "pipeline stage %d", stage) == 1;
}

static void replayed(const rv_graph *graph, const rv_sim_result *sim, int32_t step, int D, int M,
                     replayed_pipeline *out)
{
    memset(out, 0, sizeof *out);
    int64_t first = INT64_MAX, last = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        int s;
        if ((task->flags & RV_TASK_FLAG_REMOVED) || task->step != step || !stage_of(graph, task, &s)) continue;
        ck_assert_int_lt(s, D);
        (task->phase == RV_PHASE_FORWARD ? out->f : out->b)[s] += task->duration_ns;
        first = MIN(first, sim->start_ns[id]);
        last = MAX(last, sim->end_ns[id]);
    }
    for (int s = 0; s < D; s++) {
        ck_assert_msg(out->f[s] % M == 0 && out->b[s] % M == 0, "stage %d: micro-batches differ", s);
        out->f[s] /= M;
        out->b[s] /= M;
        ck_assert_int_gt(out->f[s] + out->b[s], 0);
    }
    ck_assert_int_lt(first, last);
    out->span = last - first;
}

/* Apply the pipeline with free transfers and check every step against the schedule. */
static void check_schedule(rv_graph *graph, int D, int M, gboolean one_f_one_b, const char *what)
{
    char *text = g_strdup_printf("stages=%d,microbatches=%d,schedule=%s,transfers=free", D, M,
                                 one_f_one_b ? "1f1b" : "gpipe");
    rv_sim_result sim = { 0 };
    apply_and_replay(graph, "pipeline", text, &sim, NULL);
    guint steps = 0;
    for (int32_t step = -1; step < (int32_t)graph->steps->len; step++) {
        gboolean any = FALSE;
        for (int32_t id = 0; id < rv_graph_task_count(graph) && !any; id++) {
            int s;
            const rv_task *task = rv_graph_task(graph, id);
            any = task->step == step && !(task->flags & RV_TASK_FLAG_REMOVED) && stage_of(graph, task, &s);
        }
        if (!any) continue;
        replayed_pipeline p;
        replayed(graph, &sim, step, D, M, &p);
        int64_t want = schedule_span(D, M, one_f_one_b, p.f, p.b);
        g_printerr("%s %s step %d: pipelined %.3f ms, schedule %.3f ms\n", what, text, step, p.span / 1e6, want / 1e6);
        ck_assert_msg(p.span == want, "%s %s step %d: replayed %" G_GINT64_FORMAT " ns, schedule %" G_GINT64_FORMAT,
                      what, text, step, p.span, want);
        steps++;
    }
    ck_assert_uint_gt(steps, 0);
    rv_sim_result_clear(&sim);
    g_free(text);
}

/* ---- pipeline ------------------------------------------------------------- */

/* A step of `layers` identical layers: a forward kernel of fwd_ns and a
 * backward kernel of bwd_ns each, every layer its own tag, then an
 * optimizer kernel. */
static rv_graph *identical_layers(int layers, int64_t fwd_ns, int64_t bwd_ns)
{
    tiny t = tiny_new();
    for (int d = 0; d < 2; d++)
        for (int l = 0; l < layers; l++) {
            char *layer = g_strdup_printf("%s%d", d == 0 ? "layer" : "layerBackward", d == 0 ? l : layers - 1 - l);
            int32_t id = tiny_launch(&t, d == 0 ? "fwd_kernel" : "bwd_kernel", US(5), d == 0 ? fwd_ns : bwd_ns,
                                     d == 0 ? RV_PHASE_FORWARD : RV_PHASE_BACKWARD, RV_TASK_KERNEL);
            rv_graph_task(t.graph, id)->layer = rv_strings_intern(t.graph->strings, layer);
            g_free(layer);
        }
    tiny_launch(&t, "adam_kernel", US(5), US(50), RV_PHASE_OPTIMIZER, RV_TASK_KERNEL);
    tiny_close_one_step(&t);
    return t.graph;
}

/* Equal stages, free transfers: the pipeline takes (M+D-1)(f+b) and its
 * bubble is (D-1)/(D-1+M) of that, exactly, for both schedules. */
START_TEST(pipeline_bubble_formula_on_equal_stages)
{
    static const int cases[][2] = { { 4, 8 }, { 2, 1 }, { 4, 4 }, { 8, 3 }, { 3, 16 } };
    for (gsize c = 0; c < G_N_ELEMENTS(cases); c++)
        for (int schedule = 0; schedule < 2; schedule++) {
            int D = cases[c][0], M = cases[c][1];
            rv_graph *graph = identical_layers(2 * D, US(96), US(192));
            check_schedule(graph, D, M, schedule, "identical layers");
            rv_sim_result sim = { 0 };
            ck_assert(rv_simulate(graph, NULL, &sim, NULL));
            replayed_pipeline p;
            replayed(graph, &sim, 0, D, M, &p);
            int64_t f = p.f[0], b = p.b[0];
            for (int s = 0; s < D; s++) ck_assert(p.f[s] == f && p.b[s] == b);
            ck_assert_int_eq(f, 2 * US(96) / M);
            ck_assert_int_eq(p.span, (int64_t)(M + D - 1) * (f + b));
            int64_t bubble = p.span - (int64_t)M * (f + b);
            /* bubble / span == (D-1) / (D-1+M), cross-multiplied in integers */
            ck_assert_int_eq(bubble * (D - 1 + M), (int64_t)(D - 1) * p.span);
            g_printerr("D=%d M=%d %s: bubble %.3f%% of the step, formula %.3f%%\n", D, M, schedule ? "1f1b" : "gpipe",
                       100.0 * bubble / p.span, 100.0 * (D - 1) / (D - 1 + M));
            rv_sim_result_clear(&sim);
            rv_graph_free(graph);
        }
}
END_TEST

/* A generated trace (unequal layers, jittered kernels): the replay is the
 * schedule of its stage times, to the nanosecond. */
START_TEST(pipeline_schedule_on_a_generated_trace)
{
    static const char *const options[] = { "--single-gpu", "--layers", "12", "--steps", "2", NULL };
    for (int schedule = 0; schedule < 2; schedule++) {
        rv_graph *graph = generated_trace(options);
        check_schedule(graph, 4, 8, schedule, "generated");
        rv_graph_free(graph);
    }
}
END_TEST

START_TEST(pipeline_schedule_on_real_traces)
{
    static const char *const traces[] = { "kineto_legacy_resnet50_v100.2steps.json.gz",
                                          "hta_transformer_ddp_v100_rank1.2steps.json.gz" };
    for (gsize t = 0; t < G_N_ELEMENTS(traces); t++)
        for (int schedule = 0; schedule < 2; schedule++) {
            rv_graph *graph = load_trace(traces[t]);
            check_schedule(graph, 4, 8, schedule, traces[t]);
            rv_graph_free(graph);
        }
}
END_TEST

/* Costed transfers: pipeline collectives of the payload given, each
 * latency + bytes / bandwidth, and a longer pipeline than free ones. */
START_TEST(pipeline_transfers_are_pipeline_collectives)
{
    rv_graph *graph = identical_layers(4, US(96), US(192));
    apply_ok(graph, "pipeline", "stages=2,microbatches=4,activation_bytes=1MB,bandwidth=1GB/s,latency=2us");
    guint transfers = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (info == NULL) continue;
        ck_assert_int_eq(info->parallelism, RV_PARALLEL_PIPELINE);
        ck_assert_int_eq(info->bytes, 1000000);
        ck_assert_int_eq(task->duration_ns, US(2) + 1000000);  /* 1 MB at 1 GB/s: 1 ms */
        transfers++;
    }
    ck_assert_uint_eq(transfers, 2 * 4);  /* one boundary, 4 micro-batches, both ways */
    int64_t costed = makespan(graph);
    rv_graph_free(graph);
    graph = identical_layers(4, US(96), US(192));
    apply_ok(graph, "pipeline", "stages=2,microbatches=4,transfers=free");
    ck_assert_int_gt(costed, makespan(graph) + 2 * US(1000));
    rv_graph_free(graph);
}
END_TEST

/* The stage streams and links the pipeline fills: each a single chain, in
 * the order its tasks were put there, of the order edges a stream (a
 * stream edge) or a channel (a thread edge) has - what inserting each
 * after the last one there gives - and each task marked inserted. */
START_TEST(pipeline_stages_and_links_are_chained_in_order)
{
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    guint resources_before = graph->resources->len;
    apply_ok(graph, "pipeline", "stages=3,microbatches=4,activation_bytes=1MB");
    guint chained = 0;
    for (guint r = resources_before; r < graph->resources->len; r++) {
        gboolean stream = g_array_index(graph->resources, rv_resource, r).kind == RV_RES_GPU_STREAM;
        int32_t previous = -1;
        for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
            const rv_task *task = rv_graph_task(graph, id);
            if (task->resource != (int32_t)r || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
            ck_assert(task->flags & RV_TASK_FLAG_INSERTED);
            ck_assert_int_eq(rv_graph_resource_previous(graph, id), previous);
            if (previous >= 0) {
                ck_assert_int_eq(rv_graph_resource_next(graph, previous), id);
                gboolean found = FALSE;
                for (guint e = 0; e < graph->edges->len && !found; e++) {
                    const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
                    found = edge->from == previous && edge->to == id &&
                            edge->kind == (stream ? RV_EDGE_STREAM : RV_EDGE_THREAD) && !edge->from_start;
                }
                ck_assert_msg(found, "no order edge %d -> %d on resource %u", previous, id, r);
                chained++;
            }
            previous = id;
        }
        ck_assert_int_eq(rv_graph_resource_next(graph, previous), -1);
    }
    ck_assert_uint_gt(chained, 1000);
    rv_graph_free(graph);
}
END_TEST

START_TEST(pipeline_neutral_is_the_baseline)
{
    check_neutral("kineto_legacy_resnet50_v100.2steps.json.gz", "pipeline", "stages=1,microbatches=1");
    check_neutral("hta_transformer_ddp_v100_rank1.2steps.json.gz", "pipeline", "stages=1,microbatches=1,schedule=1f1b");
}
END_TEST

static void expect_refusal(rv_graph *graph, const char *plugin, const char *text, const char *want)
{
    GError *error = NULL;
    ck_assert(!apply_plugin(graph, plugin, text, &error));
    ck_assert(error != NULL);
    ck_assert_msg(strstr(error->message, want) != NULL, "\"%s\" lacks \"%s\"", error->message, want);
    ck_assert_msg(strchr(error->message, '\n') == NULL, "not one line: %s", error->message);
    g_error_free(error);
}

START_TEST(pipeline_refuses_what_it_cannot_split)
{
    rv_graph *graph = load_trace("hta_simple_add_a100.json.gz");
    expect_refusal(graph, "pipeline", "stages=2", "no step has both forward- and backward-phase GPU work");
    rv_graph_free(graph);
    graph = identical_layers(3, US(96), US(192));
    expect_refusal(graph, "pipeline", "stages=4", "fewer than 4 GPU tasks");
    rv_graph_free(graph);
    graph = identical_layers(3, US(96), US(192));
    expect_refusal(graph, "pipeline", "stages=0", "1 <= stages");
    rv_graph_free(graph);
}
END_TEST

/* ---- zero ------------------------------------------------------------------- */

/* Bytes the data-parallel collectives move per rank, times N/(N-1): a ring
 * all-reduce 2S, a reduce-scatter or an all-gather S (comm.h). */
static int64_t data_parallel_traffic(const rv_graph *graph)
{
    int64_t traffic = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (info == NULL || (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) ||
            info->parallelism != RV_PARALLEL_DATA)
            continue;
        ck_assert_int_gt(info->bytes, 0);
        int weight = info->op == RV_COLL_REDUCE_SCATTER || info->op == RV_COLL_ALL_GATHER ? 1 : 2;
        ck_assert(weight == 1 || info->op == RV_COLL_ALLREDUCE_RING || info->op == RV_COLL_ALLREDUCE_TREE);
        traffic += weight * info->bytes;
    }
    return traffic;
}

static int64_t optimizer_kernel_ns(const rv_graph *graph)
{
    int64_t sum = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED) && (task->flags & RV_TASK_FLAG_GPU) &&
            task->phase == RV_PHASE_OPTIMIZER && task->kind != RV_TASK_COMM)
            sum += task->duration_ns;
    }
    return sum;
}

/* ZeRO-1 and -2 move the bytes of plain data parallelism, ZeRO-3 exactly
 * 1.5x; the optimizer does less.  On ResNet-50 with ddp's all-reduces, and
 * on a generated DDP trace with its recorded ones. */
static void check_traffic(rv_graph *(*load)(void), const char *before_text, const char *what)
{
    for (int stage = 1; stage <= 3; stage++) {
        rv_graph *graph = load();
        if (before_text) apply_ok(graph, "ddp", before_text);
        int64_t dp = data_parallel_traffic(graph), optimizer = optimizer_kernel_ns(graph);
        ck_assert_int_gt(dp, 0);
        char *text = g_strdup_printf("stage=%d,world=8", stage);
        apply_ok(graph, "zero", text);
        int64_t zero = data_parallel_traffic(graph);
        g_printerr("%s zero:%s: data-parallel bytes x N/(N-1) %" G_GINT64_FORMAT " -> %" G_GINT64_FORMAT
                   " (%.3fx); optimizer kernels %.3f -> %.3f ms\n", what, text, dp, zero, (double)zero / dp,
                   optimizer / 1e6, optimizer_kernel_ns(graph) / 1e6);
        if (stage == 3) ck_assert_int_eq(2 * zero, 3 * dp);
        else ck_assert_int_eq(zero, dp);
        ck_assert_int_lt(optimizer_kernel_ns(graph), optimizer);
        int64_t end;
        apply_and_simulate(graph, "scale", "factor=1", NULL, &end);  /* it replays */
        ck_assert_int_gt(end, 0);
        g_free(text);
        rv_graph_free(graph);
    }
}

static rv_graph *resnet(void) { return load_trace("kineto_legacy_resnet50_v100.2steps.json.gz"); }
static rv_graph *generated_ddp(void)
{
    static const char *const options[] = { "--layers", "8", "--steps", "2", NULL };
    return generated_trace(options);
}

START_TEST(zero_moves_one_and_a_half_times_the_bytes_at_stage_3)
{
    check_traffic(resnet, "world=8", "resnet50 + ddp");
    check_traffic(generated_ddp, NULL, "generated DDP");
}
END_TEST

/* Gathers that a forward or backward GPU task waits for: [0] forward, [1] backward. */
static void count_gathers(const rv_graph *graph, guint *gathers)
{
    gathers[0] = gathers[1] = 0;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        const rv_task *from = rv_graph_task((rv_graph *)graph, edge->from), *to = rv_graph_task((rv_graph *)graph, edge->to);
        const rv_collective_info *info = rv_task_collective(graph, from);
        if (info && info->op == RV_COLL_ALL_GATHER && (to->flags & RV_TASK_FLAG_GPU) && to->kind != RV_TASK_COMM &&
            (to->phase == RV_PHASE_FORWARD || to->phase == RV_PHASE_BACKWARD))
            gathers[to->phase == RV_PHASE_BACKWARD]++;
    }
}

/* Stage 3 gathers each layer's parameters before its forward and before
 * its backward (the generated MLP: 8 Linear layers a step); a compiled
 * model without layer tags (the Transformer rank) gets one gather before
 * each step's forward and one before its backward. */
START_TEST(zero_3_gathers_before_forward_and_backward)
{
    rv_graph *graph = generated_ddp();
    apply_ok(graph, "zero", "stage=3,world=4");
    guint gathers[2];
    count_gathers(graph, gathers);
    ck_assert_uint_eq(gathers[0], 8 * graph->steps->len);
    ck_assert_uint_eq(gathers[1], 8 * graph->steps->len);
    rv_graph_free(graph);
    graph = load_trace("hta_transformer_ddp_v100_rank1.2steps.json.gz");
    apply_ok(graph, "zero", "stage=3,world=4");
    count_gathers(graph, gathers);
    ck_assert_uint_eq(gathers[0], graph->steps->len);
    ck_assert_uint_eq(gathers[1], graph->steps->len);
    rv_graph_free(graph);
}
END_TEST

START_TEST(zero_memory_per_gpu)
{
    static const char *const want[] = { NULL, "(2.91x less)", "(4.27x less)", "(8.00x less)" };
    for (int stage = 1; stage <= 3; stage++) {
        rv_graph *graph = resnet();
        apply_ok(graph, "ddp", "world=8");
        char *text = g_strdup_printf("stage=%d", stage);
        char *notes = apply_notes(graph, "zero", text);
        /* 16P over (4P + 12P/8), (2P + 14P/8) and 16P/8 */
        ck_assert_msg(strstr(notes, want[stage]) != NULL, "%s: %s", text, notes);
        g_free(notes);
        g_free(text);
        rv_graph_free(graph);
    }
}
END_TEST

START_TEST(zero_neutral_is_the_baseline)
{
    check_neutral("hta_transformer_ddp_v100_rank1.2steps.json.gz", "zero", "stage=3,world=1");
    check_neutral("hta_transformer_ddp_v100_rank1.2steps.json.gz", "zero", "stage=1,world=1");
}
END_TEST

START_TEST(zero_refuses_a_trace_without_data_parallelism)
{
    rv_graph *graph = resnet();
    expect_refusal(graph, "zero", "stage=2", "no data-parallel all-reduce to shard");
    rv_graph_free(graph);
}
END_TEST

/* ---- blueconnect ------------------------------------------------------------ */

typedef struct {
    guint tasks;
    int64_t ns;
} collective_sum;

/* Live data-parallel collective tasks whose name holds `tag`. */
static collective_sum sum_collectives(const rv_graph *graph, const char *tag)
{
    collective_sum sum = { 0, 0 };
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task((rv_graph *)graph, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (info == NULL || (task->flags & RV_TASK_FLAG_REMOVED) || info->parallelism != RV_PARALLEL_DATA) continue;
        if (tag && strstr(rv_strings_get(graph->strings, task->name), tag) == NULL) continue;
        sum.tasks++;
        sum.ns += task->duration_ns;
    }
    return sum;
}

/* On one node the four parts add up to the recorded all-reduce (comm.h: a
 * ring all-reduce is a reduce-scatter plus an all-gather). */
START_TEST(blueconnect_on_one_node_adds_up_to_the_allreduce)
{
    rv_graph *graph = resnet();
    apply_ok(graph, "ddp", "world=8");
    collective_sum before = sum_collectives(graph, NULL);
    apply_ok(graph, "blueconnect", "world=8,gpus_per_node=8");
    collective_sum after = sum_collectives(graph, "blueconnect");
    ck_assert_uint_eq(after.tasks, 4 * before.tasks);
    /* each part is rounded to the ns on its own */
    ck_assert_msg(llabs(after.ns - before.ns) <= 4 * (int64_t)before.tasks, "%" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT,
                  after.ns, before.ns);
    rv_graph_free(graph);
}
END_TEST

/* Across nodes only 1/gpus_per_node of the payload crosses the slow link:
 * less transfer time than a flat ring of the same world, and parts of
 * S, S/8, S/8, S bytes over groups of 8, 4, 4, 8. */
START_TEST(blueconnect_across_nodes_beats_a_flat_ring)
{
    rv_graph *flat = resnet();
    apply_ok(flat, "ddp", "world=32");
    collective_sum ring = sum_collectives(flat, NULL);
    rv_graph *graph = resnet();
    apply_ok(graph, "ddp", "world=32");
    apply_ok(graph, "blueconnect", "world=32,gpus_per_node=8");
    collective_sum parts = sum_collectives(graph, "blueconnect");
    g_printerr("resnet50 ddp:world=32 all-reduces %.3f ms (flat ring), blueconnect %.3f ms\n", ring.ns / 1e6,
               parts.ns / 1e6);
    ck_assert_int_lt(parts.ns, ring.ns);
    guint checked = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (info == NULL || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
        gboolean inter = strstr(rv_strings_get(graph->strings, task->name), "inter") != NULL;
        ck_assert_int_eq(info->group_size, inter ? 4 : 8);
        if (info->op == RV_COLL_REDUCE_SCATTER && !inter) {
            /* the chain that follows: S/8, S/8, then S */
            int32_t next = id;
            int64_t want[3] = { info->bytes / 8, info->bytes / 8, info->bytes };
            for (int k = 0; k < 3; k++) {
                int32_t found = -1;
                for (guint e = 0; e < graph->edges->len && found < 0; e++) {
                    const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
                    if (edge->from == next && edge->kind == RV_EDGE_PLUGIN && strstr(rv_strings_get(graph->strings, rv_graph_task(graph, edge->to)->name),
                                                     "blueconnect"))
                        found = edge->to;
                }
                ck_assert_int_ge(found, 0);
                ck_assert_int_eq(rv_task_collective(graph, rv_graph_task(graph, found))->bytes, want[k]);
                next = found;
            }
            checked++;
        }
    }
    ck_assert_uint_gt(checked, 0);
    rv_graph_free(graph);
    rv_graph_free(flat);
}
END_TEST

START_TEST(blueconnect_neutral_and_refusal)
{
    check_neutral("hta_transformer_ddp_v100_rank1.2steps.json.gz", "blueconnect", "world=1");
    rv_graph *graph = resnet();
    expect_refusal(graph, "blueconnect", "", "no data-parallel all-reduce to decompose");
    apply_ok(graph, "ddp", "world=12");
    expect_refusal(graph, "blueconnect", "world=12,gpus_per_node=8", "not a whole number of nodes");
    rv_graph_free(graph);
}
END_TEST

/* ---- dgc -------------------------------------------------------------------- */

/* Density 0.001 on 8 ranks: every all-reduce of S bytes becomes an
 * all-gather of 8 x 2 x 0.001 x S between a compression and a
 * decompression kernel, and the transfers shrink. */
START_TEST(dgc_sparse_allgather_between_its_kernels)
{
    rv_graph *graph = resnet();
    apply_ok(graph, "ddp", "world=8");
    GArray *allreduces = g_array_new(FALSE, FALSE, sizeof(int32_t));
    GArray *payloads = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_collective_info *info = rv_task_collective(graph, rv_graph_task(graph, id));
        if (info == NULL) continue;
        g_array_append_val(allreduces, id);
        g_array_append_val(payloads, info->bytes);
    }
    collective_sum dense = sum_collectives(graph, NULL);
    apply_ok(graph, "dgc", "density=0.001");
    collective_sum sparse = sum_collectives(graph, NULL);
    g_printerr("resnet50 ddp:world=8 dgc: transfers %.3f -> %.3f ms\n", dense.ns / 1e6, sparse.ns / 1e6);
    ck_assert_int_lt(sparse.ns, dense.ns);
    for (guint i = 0; i < allreduces->len; i++) {
        int32_t id = g_array_index(allreduces, int32_t, i);
        const rv_collective_info *info = rv_task_collective(graph, rv_graph_task(graph, id));
        ck_assert_int_eq(info->op, RV_COLL_ALL_GATHER);
        ck_assert_int_eq(info->bytes, (int64_t)(8 * 2 * 0.001 * (double)g_array_index(payloads, int64_t, i)));
        int32_t compress = -1, decompress = -1;
        for (guint e = 0; e < graph->edges->len; e++) {
            const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
            if (edge->to == id && strstr(rv_strings_get(graph->strings, rv_graph_task(graph, edge->from)->name), "dgc top-k"))
                compress = edge->from;
            if (edge->from == id && strstr(rv_strings_get(graph->strings, rv_graph_task(graph, edge->to)->name), "dgc decomp"))
                decompress = edge->to;
        }
        ck_assert(compress >= 0 && decompress >= 0);
        ck_assert_int_gt(rv_graph_task(graph, compress)->duration_ns, 0);
        ck_assert_int_gt(rv_graph_task(graph, decompress)->duration_ns, 0);
    }
    g_array_unref(allreduces);
    g_array_unref(payloads);
    rv_graph_free(graph);
}
END_TEST

/* Sparse moves less than dense only below density 1/N: at 1 and at 1/N
 * the gradients stay dense and the prediction is the baseline. */
START_TEST(dgc_neutral_at_density_one_and_one_over_n)
{
    check_neutral("hta_transformer_ddp_v100_rank1.2steps.json.gz", "dgc", "density=1");
    check_neutral("hta_transformer_ddp_v100_rank1.2steps.json.gz", "dgc", "density=0.125,world=8");
    rv_graph *graph = load_trace("hta_transformer_ddp_v100_rank1.2steps.json.gz");
    collective_sum dense = sum_collectives(graph, NULL);
    apply_ok(graph, "dgc", "density=0.124,world=8");
    ck_assert_int_ne(sum_collectives(graph, NULL).ns, dense.ns);
    rv_graph_free(graph);
}
END_TEST

START_TEST(dgc_refusals)
{
    rv_graph *graph = resnet();
    expect_refusal(graph, "dgc", "", "no data-parallel all-reduce to compress");
    expect_refusal(graph, "dgc", "density=0", "0 < density <= 1");
    rv_graph_free(graph);
    static const char *const options[] = { "--layers", "4", "--steps", "1", NULL };
    graph = generated_trace(options);
    expect_refusal(graph, "dgc", "world=8", "give source_gpu=");
    apply_ok(graph, "dgc", "world=8,source_gpu=A100-40GB");
    rv_graph_free(graph);
}
END_TEST

static Suite *distributed_suite(void)
{
    Suite *suite = suite_create("distributed");
    TCase *pipeline = tcase_create("pipeline");
    tcase_set_timeout(pipeline, 300);
    tcase_add_test(pipeline, pipeline_bubble_formula_on_equal_stages);
    tcase_add_test(pipeline, pipeline_schedule_on_a_generated_trace);
    tcase_add_test(pipeline, pipeline_schedule_on_real_traces);
    tcase_add_test(pipeline, pipeline_transfers_are_pipeline_collectives);
    tcase_add_test(pipeline, pipeline_stages_and_links_are_chained_in_order);
    tcase_add_test(pipeline, pipeline_neutral_is_the_baseline);
    tcase_add_test(pipeline, pipeline_refuses_what_it_cannot_split);
    suite_add_tcase(suite, pipeline);
    TCase *zero = tcase_create("zero");
    tcase_set_timeout(zero, 300);
    tcase_add_test(zero, zero_moves_one_and_a_half_times_the_bytes_at_stage_3);
    tcase_add_test(zero, zero_3_gathers_before_forward_and_backward);
    tcase_add_test(zero, zero_memory_per_gpu);
    tcase_add_test(zero, zero_neutral_is_the_baseline);
    tcase_add_test(zero, zero_refuses_a_trace_without_data_parallelism);
    suite_add_tcase(suite, zero);
    TCase *blueconnect = tcase_create("blueconnect");
    tcase_set_timeout(blueconnect, 300);
    tcase_add_test(blueconnect, blueconnect_on_one_node_adds_up_to_the_allreduce);
    tcase_add_test(blueconnect, blueconnect_across_nodes_beats_a_flat_ring);
    tcase_add_test(blueconnect, blueconnect_neutral_and_refusal);
    suite_add_tcase(suite, blueconnect);
    TCase *dgc = tcase_create("dgc");
    tcase_set_timeout(dgc, 300);
    tcase_add_test(dgc, dgc_sparse_allgather_between_its_kernels);
    tcase_add_test(dgc, dgc_neutral_at_density_one_and_one_over_n);
    tcase_add_test(dgc, dgc_refusals);
    suite_add_tcase(suite, dgc);
    return suite;
}

int main(void)
{
    static const char *const traces[] = { "kineto_legacy_resnet50_v100.2steps.json.gz",
                                          "hta_transformer_ddp_v100_rank1.2steps.json.gz",
                                          "hta_simple_add_a100.json.gz", NULL };
    require_project_traces(traces);
    SRunner *runner = srunner_create(distributed_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
