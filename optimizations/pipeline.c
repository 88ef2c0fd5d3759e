/*
 * pipeline.c - pipeline parallelism (GPipe, 1F1B) predicted from one GPU's
 * trace: the model's layers split into D stages on D GPUs, the batch into M
 * micro-batches.
 *
 *   reverie whatif trace.json.gz --opt 'pipeline:stages=4,microbatches=8'
 *   reverie whatif trace.json.gz --opt 'pipeline:stages=4,microbatches=8,schedule=1f1b,transfers=free'
 *
 * MODEL.  Per step, the forward-phase GPU work (kernels, copies, memsets;
 * collectives stay where they are) in recorded order is cut into D
 * contiguous stages at layer boundaries (where the layer tag changes), each
 * cut at the boundary nearest to k/D of the forward time: stages balanced
 * by time.  Where the tags cannot balance them within 1.25x of what cuts
 * between any two kernels give (a compiled model is one operator), the
 * cuts fall between kernels.  The backward-phase GPU work is cut the same way, its first part
 * (the gradients of the last layers) going to the last stage.  Each stage
 * is a GPU stream of its own ("pipeline stage s"), as ranks are resources
 * of their own in a joint graph (job.h).  A micro-batch's kernel is the
 * recorded kernel with 1/M of its FLOPs and bytes through the kernel cost
 * model (costmodel.h: its fixed cost stays); kernels the model cannot
 * re-cost (unknown class, or a GPU the catalogue lacks) take 1/M of their
 * time.  Between stages s and s+1 each micro-batch sends its activations
 * forward and its activation gradients backward, on a channel per link
 * and direction, costed as a point-to-point message by comm.h (a
 * broadcast to one peer: latency + bytes / bandwidth); the payload is the
 * first input of the next stage's first operator (Input Dims) / M, or
 * activation_bytes.  These are collectives of pipeline parallelism
 * (graph.h), so later what-ifs know them.  transfers=free makes them
 * zero-length.
 *
 * SCHEDULE.  The order of each stage's micro-batches on its stream:
 *   gpipe: F0 .. F(M-1), then B0 .. B(M-1) (all forwards, then a flush);
 *   1f1b:  min(D-1-s, M) warm-up forwards, then one forward and one
 *          backward in turn, then the remaining backwards (PipeDream-Flush).
 * F(s,m) waits for F(s-1,m)'s activations, B(s,m) for B(s+1,m)'s gradients
 * and, on the last stage, for F(D-1,m).  With free transfers and stages of
 * equal time f + b per micro-batch both give the step (M+D-1)(f+b): a bubble
 * of (D-1)/(D-1+M) of it.  With unequal stages GPipe gives sum_s(f_s+b_s) +
 * (M-1)(max f + max b).
 *
 * The recorded forward and backward GPU tasks are removed, with every host
 * call of those two phases (launches, syncs and the Python time before
 * them): each stage's host is taken to keep ahead of its GPU.
 * MEMORY.  Each recorded call is told to the memory model as running on
 * its stage, on 1/M of the batch, keeping the activations of all M
 * micro-batches (GPipe) or of min(D - s, M) (1F1B) at once: whatif's peak
 * is the busiest stage's GPU.  What fed
 * them feeds the pipeline's first task, what waited for them waits for
 * every stage (remove_region below); the step's optimizer waits for every
 * stage too.  Optimizer, data loading and the host's other work stay as
 * recorded.  stages=1 and microbatches=1 leave the graph unchanged.
 */
#include "reverie/plugin.h"
#include "reverie/comm.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/gpus.h"
#include "reverie/memory.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <math.h>
#include <string.h>

static const rv_param_spec pipeline_params[] = {
    { "stages", RV_PARAM_INTEGER, "4", "GPUs", "pipeline stages D (one GPU each)", NULL },
    { "microbatches", RV_PARAM_INTEGER, "8", "x", "micro-batches M per step (each 1/M of the batch)", NULL },
    { "schedule", RV_PARAM_CHOICE, "gpipe", NULL, "micro-batch order on each stage", "gpipe|1f1b" },
    { "transfers", RV_PARAM_CHOICE, "modelled", NULL, "activation and gradient transfers: costed by comm.h, or free",
      "modelled|free" },
    { "activation_bytes", RV_PARAM_BYTES, "0B", "bytes",
      "activation bytes per micro-batch at every stage boundary; 0: from the Input Dims", NULL },
    { "bandwidth", RV_PARAM_BANDWIDTH, "150GB/s", "B/s", "stage-to-stage bandwidth per direction (NVLink V100)", NULL },
    { "latency", RV_PARAM_DURATION, "2us", "ns", "stage-to-stage per-message latency (the nvlink-v100 link preset)", NULL },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { NULL }
};

typedef struct {
    int stages, microbatches;
    gboolean one_f_one_b, free_transfers;
    int64_t activation_bytes;  /* 0: from shapes */
    rv_link link;
} pipeline_plan;

/* One direction of one stage: tasks (int32 ids of recorded tasks) and the
 * time of one micro-batch of them. */
typedef struct {
    GArray *tasks;
    int64_t microbatch_ns;
} stage_part;

/* ---- micro-batch durations ---------------------------------------------- */

typedef struct {
    double factor;
    guint picked;
} microbatch_scale;

static gboolean is_pipelined(const rv_task *task)
{
    return !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) && (task->flags & RV_TASK_FLAG_GPU) &&
           task->kind != RV_TASK_COMM && task->collective == 0 &&
           (task->phase == RV_PHASE_FORWARD || task->phase == RV_PHASE_BACKWARD);
}

static gboolean scale_microbatch(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                                 gpointer data)
{
    microbatch_scale *scale = data;
    if (!is_pipelined(&g_array_index(graph->tasks, rv_task, task)) || cost->cls == RV_COST_COMM) return FALSE;
    change->flops_factor = change->bytes_factor = scale->factor;
    scale->picked++;
    return TRUE;
}

/* Per task id: one micro-batch's duration (ns), -1 for tasks not pipelined.
 * Through the cost model where the trace's GPU is known, else 1/M. */
static int64_t *microbatch_durations(rv_graph *graph, const rv_params *params, int microbatches, GString *notes,
                                     GError **error)
{
    int32_t count = rv_graph_task_count(graph);
    int64_t *ns = g_new(int64_t, MAX(count, 1));
    GError *no_gpu = NULL;
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(&no_gpu);
    const rv_gpu *gpu = catalogue ? rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu",
                                                    &no_gpu) : NULL;
    rv_cost_plan *plan = NULL;
    rv_cost_model *model = NULL;
    if (gpu && microbatches > 1) {
        microbatch_scale scale = { 1.0 / microbatches, 0 };
        model = rv_cost_model_new(graph, gpu, TRUE);
        plan = rv_cost_model_plan(model, scale_microbatch, &scale);
        g_string_append_printf(notes, "    micro-batch kernels: 1/%d of the FLOPs and bytes on %s (cost model)\n",
                               microbatches, gpu->id);
        rv_cost_plan_describe(plan, "      ", notes);
    } else if (microbatches > 1) {
        g_string_append_printf(notes, "    micro-batch kernels: 1/%d of their time (no cost model: %s)\n", microbatches,
                               no_gpu ? no_gpu->message : "no GPU");
    }
    gboolean ok = TRUE;
    for (int32_t id = 0; id < count && ok; id++) {
        const rv_task *task = rv_graph_task(graph, id);
        ns[id] = -1;
        if (!is_pipelined(task)) continue;
        double planned = plan ? g_array_index(plan->new_ns, double, id) : -1;
        if (planned < 0) planned = (double)task->duration_ns / microbatches;
        ok = rv_task_duration_from(graph, id, planned, "the micro-batch count", &ns[id], error);
    }
    if (plan) rv_cost_plan_free(plan);
    if (model) rv_cost_model_free(model);
    if (catalogue) rv_gpu_catalogue_free(catalogue);
    g_clear_error(&no_gpu);
    if (!ok) { g_free(ns); return NULL; }
    return ns;
}

/* ---- stages balanced by time -------------------------------------------- */

/* The cuts among `candidates` (positions i: tasks [0, i) before) nearest to
 * k/parts of the time, in order, each leaving enough candidates for the
 * cuts after it; chosen[0] = 0, chosen[parts] = n.  The largest part's
 * time is returned. */
static int64_t choose_cuts(const int64_t *prefix, guint n, const GArray *candidates, int parts, guint *chosen)
{
    chosen[0] = 0;
    chosen[parts] = n;
    guint next = 0;  /* first candidate still free */
    for (int k = 1; k < parts; k++) {
        double target = (double)prefix[n] * k / parts;
        guint last_allowed = candidates->len - (guint)(parts - 1 - k) - 1, best = next;
        for (guint c = next; c <= last_allowed; c++)
            if (fabs((double)prefix[g_array_index(candidates, guint, c)] - target) <
                fabs((double)prefix[g_array_index(candidates, guint, best)] - target))
                best = c;
        chosen[k] = g_array_index(candidates, guint, best);
        next = best + 1;
    }
    int64_t largest = 0;
    for (int k = 0; k < parts; k++) largest = MAX(largest, prefix[chosen[k + 1]] - prefix[chosen[k]]);
    return largest;
}

/* Cut `tasks` (recorded order) into `parts` contiguous runs balanced by
 * time, at layer boundaries (where the layer tag changes); between any two
 * kernels instead (*between_kernels set) when the tags change fewer than
 * parts - 1 times, or their boundaries leave a part over 1.25x the largest
 * that kernel boundaries give (a compiled model is one operator).  FALSE
 * when there are fewer tasks than parts. */
static gboolean split_balanced(const rv_graph *graph, const GArray *tasks, const int64_t *ns, int parts,
                               GArray **out, gboolean *between_kernels)
{
    guint n = tasks->len;
    if (n < (guint)parts) return FALSE;
    int64_t *prefix = g_new(int64_t, n + 1);
    GArray *layer_cuts = g_array_new(FALSE, FALSE, sizeof(guint)), *kernel_cuts = g_array_new(FALSE, FALSE, sizeof(guint));
    prefix[0] = 0;
    for (guint i = 0; i < n; i++) {
        int32_t id = g_array_index(tasks, int32_t, i);
        prefix[i + 1] = prefix[i] + ns[id];
        if (i == 0) continue;
        g_array_append_val(kernel_cuts, i);
        if (rv_graph_task((rv_graph *)graph, id)->layer !=
            rv_graph_task((rv_graph *)graph, g_array_index(tasks, int32_t, i - 1))->layer)
            g_array_append_val(layer_cuts, i);
    }
    guint *chosen = g_new(guint, parts + 1), *by_layer = g_new(guint, parts + 1);
    int64_t kernel_largest = choose_cuts(prefix, n, kernel_cuts, parts, chosen);
    if (layer_cuts->len + 1 >= (guint)parts &&
        (double)choose_cuts(prefix, n, layer_cuts, parts, by_layer) <= 1.25 * (double)kernel_largest)
        memcpy(chosen, by_layer, sizeof(guint) * (parts + 1));
    else
        *between_kernels = TRUE;
    for (int k = 0; k < parts; k++) {
        out[k] = g_array_new(FALSE, FALSE, sizeof(int32_t));
        g_array_append_vals(out[k], &g_array_index(tasks, int32_t, chosen[k]), chosen[k + 1] - chosen[k]);
    }
    g_free(chosen);
    g_free(by_layer);
    g_free(prefix);
    g_array_unref(layer_cuts);
    g_array_unref(kernel_cuts);
    return TRUE;
}

static int64_t summed_ns(const GArray *tasks, const int64_t *ns)
{
    int64_t sum = 0;
    for (guint i = 0; i < tasks->len; i++) sum += ns[g_array_index(tasks, int32_t, i)];
    return sum;
}

/* ---- the schedule --------------------------------------------------------- */

typedef struct {
    int32_t first, last;
} block;  /* one stage's tasks of one micro-batch in one direction */

/* Stage s's order: +m+1 for forward m, -(m+1) for backward m. */
static GArray *stage_order(int s, int stages, int microbatches, gboolean one_f_one_b)
{
    GArray *order = g_array_new(FALSE, FALSE, sizeof(int));
    int forward = 0, backward = 0;
    int warmup = one_f_one_b ? MIN(stages - 1 - s, microbatches) : microbatches;
    for (; forward < warmup; forward++) { int v = forward + 1; g_array_append_val(order, v); }
    while (forward < microbatches) {
        int f = forward + 1, b = -(backward + 1);
        g_array_append_val(order, f);
        g_array_append_val(order, b);
        forward++, backward++;
    }
    for (; backward < microbatches; backward++) { int v = -(backward + 1); g_array_append_val(order, v); }
    return order;
}

typedef struct {
    rv_graph *graph;
    const pipeline_plan *plan;
    const int64_t *ns;
    int32_t *stage_stream;     /* per stage */
    int32_t *stream_tail;      /* per stage: last task inserted on it */
    int32_t *activation_link;  /* per boundary s -> s+1 */
    int32_t *gradient_link;    /* per boundary s+1 -> s */
    int32_t *link_tail[2];
    guint inserted, transfers;
    guint cut_between_kernels;
    guint unsized;              /* stage boundaries with no Input Dims: latency-only transfers */  /* passes whose layer tags gave too few boundaries */
    int64_t transfer_bytes;
} builder;

/*
 * Insert `task` last on its resource, after `tail` (the last task there, or
 * -1): what rv_transform_insert does with `after` = tail - the same task,
 * the same order edge, in the same order - without asking the edge index
 * what follows the tail.  Nothing does: the stage streams and links are
 * the builder's own and fill in order.  Asking made the index catch up with
 * every task inserted, a fifth of the rewrite.
 */
static int32_t insert_last(rv_graph *graph, rv_task task, int32_t tail, GError **error)
{
    if (task.recorded_start_ns == 0 && tail >= 0) task.recorded_start_ns = rv_graph_task(graph, tail)->recorded_start_ns;
    rv_insert_spec spec = { task, -1, -1 };
    int32_t id = rv_transform_insert(graph, &spec, error);
    if (id >= 0 && tail >= 0)
        rv_graph_add_edge(graph, tail, id, (rv_graph_task(graph, tail)->flags & RV_TASK_FLAG_GPU) ? RV_EDGE_STREAM : RV_EDGE_THREAD,
                          FALSE);
    return id;
}

/* One micro-batch of a stage part on the stage's stream, in recorded order. */
static gboolean insert_block(builder *b, int s, const GArray *tasks, block *out, GError **error)
{
    out->first = out->last = -1;
    for (guint i = 0; i < tasks->len; i++) {
        int32_t original = g_array_index(tasks, int32_t, i);
        rv_task task = *rv_graph_task(b->graph, original);
        task.resource = b->stage_stream[s];
        task.duration_ns = b->ns[original];
        task.host_overhead_ns = 0;
        task.correlation = -1;
        task.bytes = task.bytes / b->plan->microbatches;
        task.flags = 0;
        task.collective = 0;
        int32_t id = insert_last(b->graph, task, b->stream_tail[s], error);
        if (id < 0) return FALSE;
        if (out->first < 0) out->first = id;
        out->last = b->stream_tail[s] = id;
        b->inserted++;
    }
    return TRUE;
}

/* The payload that crosses boundary s -> s+1 per micro-batch: the first
 * input (elements x dtype bytes) of the first of stage s+1's first forward
 * tasks whose operator has Input Dims; 0 when none of them has. */
static int64_t boundary_bytes(const rv_graph *graph, const pipeline_plan *plan, const GArray *next_stage)
{
    if (plan->activation_bytes > 0) return plan->activation_bytes;
    for (guint i = 0; i < next_stage->len && i < 16; i++) {
        int32_t task = g_array_index(next_stage, int32_t, i);
        rv_shapes shapes;
        int64_t elements = rv_shapes_of_task(graph, task, &shapes) ? rv_shapes_elements(&shapes, 0) : 0;
        rv_shapes_clear(&shapes);  /* parsing allocates even when it fails */
        if (elements <= 0) continue;
        const char *kernel = rv_strings_get(graph->strings, g_array_index(graph->tasks, rv_task, task).name);
        int element = rv_cost_element_bytes_of_name(kernel, 4);
        return elements * element / plan->microbatches;
    }
    return 0;
}

/* A point-to-point transfer on link `link` (direction d) between two blocks. */
static gboolean insert_transfer(builder *b, int d, int boundary, int64_t bytes, int32_t from, int32_t to,
                                int32_t step, GError **error)
{
    int32_t *link = d == 0 ? b->activation_link : b->gradient_link;
    int64_t ns = b->plan->free_transfers ? 0 : rv_collective_time_ns(RV_COLL_BROADCAST, bytes, 2, &b->plan->link);
    int64_t checked;
    if (!rv_task_duration_from(b->graph, -1, (double)ns, "the pipeline link (bandwidth, latency, activation_bytes)",
                               &checked, error))
        return FALSE;
    rv_task task = { 0 };
    task.kind = RV_TASK_COMM;
    task.resource = link[boundary];
    task.name = rv_strings_intern(b->graph->strings, d == 0 ? "pipeline send activations" : "pipeline send gradients");
    task.duration_ns = checked;
    task.correlation = -1;
    task.bytes = bytes;
    task.input_dims = -1;
    task.step = step;
    task.phase = d == 0 ? RV_PHASE_FORWARD : RV_PHASE_BACKWARD;
    rv_collective_info info = { bytes, -1, rv_strings_intern(b->graph->strings, "pipeline"), 2,
                                d == 0 ? boundary + 1 : boundary, -1, 1, RV_COLL_BROADCAST, RV_PARALLEL_PIPELINE,
                                RV_MATCH_NONE, 1 };
    task.collective = rv_graph_add_collective(b->graph, &info);
    int32_t id = insert_last(b->graph, task, b->link_tail[d][boundary], error);
    if (id < 0) return FALSE;
    b->link_tail[d][boundary] = id;
    rv_transform_add_edge(b->graph, from, id);
    rv_transform_add_edge(b->graph, id, to);
    b->transfers++;
    b->transfer_bytes += bytes;
    return TRUE;
}

/* ---- one step ------------------------------------------------------------- */

typedef struct {
    GArray *forward, *backward;  /* pipelined GPU tasks in recorded order */
    GArray *host;                /* the CPU calls of the forward and backward phases */
    int32_t optimizer;           /* the step's earliest optimizer GPU task, -1 if none */
} step_work;

/* Micro-batches whose activations a stage holds at once: all M in GPipe
 * (every forward before the first backward); in 1F1B the warm-up forwards
 * and the one in flight, min(D - s, M). */
static int in_flight(const pipeline_plan *plan, int stage)
{
    return plan->one_f_one_b ? MIN(plan->stages - stage, plan->microbatches) : plan->microbatches;
}

/* Tell the memory model (memory.h) where each recorded call went: stage s
 * runs its calls on micro-batches of 1/M and keeps in_flight(s) of them. */
static void tell_memory_model(rv_graph *graph, const pipeline_plan *plan, stage_part *parts[2])
{
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < plan->stages; s++) {
            guint calls = rv_memory_effect_add_for_tasks(graph, parts[d][s].tasks, RV_MEM_EFFECT_STAGE, 1.0, s);
            /* A STAGE effect is always recorded, so the last `calls` effects
             * name the part's launch calls, each once, in order: the other
             * two effects go on the same calls without finding them again
             * (the same effects, in the same order, as two more
             * rv_memory_effect_add_for_tasks calls would add). */
            guint first = graph->memory_effects->len - calls;
            for (guint i = first; i < first + calls; i++)
                rv_memory_effect_add(graph, g_array_index(graph->memory_effects, rv_memory_effect, i).call,
                                     RV_MEM_EFFECT_ACTIVATION_SCALE, 1.0 / plan->microbatches, 0);
            for (guint i = first; i < first + calls; i++)
                rv_memory_effect_add(graph, g_array_index(graph->memory_effects, rv_memory_effect, i).call,
                                     RV_MEM_EFFECT_KEPT_SCALE, (double)in_flight(plan, s), 0);
        }
}

/* One step's pipeline; *start is its first task, tails[s] stage s's last. */
static gboolean pipeline_step(builder *b, const step_work *work, int32_t step, int32_t *start, int32_t *tails,
                              GString *notes, GError **error)
{
    const pipeline_plan *plan = b->plan;
    int D = plan->stages, M = plan->microbatches;
    stage_part *parts[2] = { g_new0(stage_part, D), g_new0(stage_part, D) };
    GArray **cut = g_new0(GArray *, D);
    gboolean ok = TRUE;
    for (int d = 0; d < 2 && ok; d++) {
        gboolean between_kernels = FALSE;
        ok = split_balanced(b->graph, d == 0 ? work->forward : work->backward, b->ns, D, cut, &between_kernels);
        if (between_kernels) b->cut_between_kernels++;
        if (!ok) {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "stages=%d: step %d's %s pass has fewer than %d GPU tasks to cut",
                        D, step, d == 0 ? "forward" : "backward", D);
            break;
        }
        /* backward: its first part (the last layers' gradients) is the last stage's */
        for (int k = 0; k < D; k++) {
            stage_part *part = &parts[d][d == 0 ? k : D - 1 - k];
            part->tasks = cut[k];
            part->microbatch_ns = summed_ns(cut[k], b->ns);
        }
    }
    g_free(cut);
    if (ok) tell_memory_model(b->graph, plan, parts);
    /* every stage's blocks, in its schedule's order */
    block *blocks = g_new(block, 2 * (gsize)D * M);  /* [d][s][m] */
#define BLOCK(d, s, m) blocks[((gsize)(d) * D + (s)) * M + (m)]
    for (int s = 0; s < D && ok; s++) {
        GArray *order = stage_order(s, D, M, plan->one_f_one_b);
        for (guint i = 0; i < order->len && ok; i++) {
            int v = g_array_index(order, int, i), d = v > 0 ? 0 : 1, m = abs(v) - 1;
            ok = insert_block(b, s, parts[d][s].tasks, &BLOCK(d, s, m), error);
        }
        g_array_unref(order);
    }
    if (ok) *start = BLOCK(0, 0, 0).first;
    /* the transfers, in micro-batch order on each link */
    for (int s = 0; s + 1 < D && ok; s++) {
        int64_t bytes = boundary_bytes(b->graph, plan, parts[0][s + 1].tasks);
        if (bytes == 0) b->unsized++;
        for (int m = 0; m < M && ok; m++)
            ok = insert_transfer(b, 0, s, bytes, BLOCK(0, s, m).last, BLOCK(0, s + 1, m).first, step, error) &&
                 insert_transfer(b, 1, s, bytes, BLOCK(1, s + 1, m).last, BLOCK(1, s, m).first, step, error);
    }
    for (int m = 0; m < M && ok; m++) rv_transform_add_edge(b->graph, BLOCK(0, D - 1, m).last, BLOCK(1, D - 1, m).first);
    int32_t waiter = work->optimizer >= 0 ? work->optimizer
                   : step >= 0 ? g_array_index(b->graph->steps, rv_step, step).end_marker : -1;
    for (int s = 0; s < D && ok; s++) {
        tails[s] = b->stream_tail[s];
        if (waiter >= 0) rv_transform_add_edge(b->graph, tails[s], waiter);
    }
#undef BLOCK
    if (ok) {
        g_string_append_printf(notes, "    step %d: per micro-batch, stage forward/backward", step);
        for (int s = 0; s < D; s++) {
            char *f = rv_format_duration(parts[0][s].microbatch_ns), *bw = rv_format_duration(parts[1][s].microbatch_ns);
            g_string_append_printf(notes, " %s%s/%s (%u+%u kernels)", s ? "| " : "", f, bw, parts[0][s].tasks->len,
                                   parts[1][s].tasks->len);
            g_free(f); g_free(bw);
        }
        g_string_append_c(notes, '\n');
    }
    g_free(blocks);
    for (int d = 0; d < 2; d++) {
        for (int s = 0; s < D; s++) if (parts[d][s].tasks) g_array_unref(parts[d][s].tasks);
        g_free(parts[d]);
    }
    return ok;
}

/* ---- the recorded forward and backward out of the way ------------------- */

/*
 * Remove the pipelined tasks, their launch calls and their phases' host
 * calls (victims) with rv_transform_replace_regions, each step's as one
 * region that its pipeline stands for.  Not with rv_transform_remove_many:
 * that bypasses a region, joining each live task before it to each live
 * task it reached through it, which would also order a task that both fed
 * and waited for victims (a collective in the middle of the backward pass)
 * before everything after the pass; here the region is replaced by the
 * pipeline, and the edges go to and from it:
 *   - each resource stays chained;
 *   - a live task that fed a victim (by a data, launch or sync edge, or on
 *     a GPU stream) runs before that step's pipeline starts;
 *   - a live task that waited for a victim (the same kinds) waits for all
 *     of that step's stages.
 * A task that both fed and waited for victims (a collective in the middle
 * of the backward pass) only waits: it cannot run before the pipeline.
 */
typedef struct {
    int32_t start;     /* the step's first pipeline task, -1: not pipelined */
    int32_t *tails;    /* its stages' last tasks */
} step_ends;

/* Mark in `waits` every live task that depends on a victim of its own
 * step (or of none): directly, or through other tasks of that step - the
 * host's calls between two backward kernels (a hipFree that waits for one
 * and comes before the launch of the next), a kernel of another phase on
 * the stream (an optimizer's multi_tensor_apply in the middle of
 * backward).  Such a task cannot feed the pipeline's start: it comes after
 * the stages that replace the victims. */
static void mark_waiting(const rv_graph *graph, const guint8 *victim, guint8 *waits)
{
    int32_t count = rv_graph_task_count(graph);
    const rv_edge *edges = (const rv_edge *)graph->edges->data;
    int32_t *first = g_new0(int32_t, count + 1), *to = g_new(int32_t, graph->edges->len + 1);
    for (guint e = 0; e < graph->edges->len; e++) first[edges[e].from + 1]++;
    for (int32_t t = 0; t < count; t++) first[t + 1] += first[t];
    int32_t *fill = g_memdup2(first, sizeof(int32_t) * (gsize)(count + 1));
    for (guint e = 0; e < graph->edges->len; e++) to[fill[edges[e].from]++] = edges[e].to;
    GArray *queue = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < count; t++) {
        if (!victim[t]) continue;
        for (int32_t k = first[t]; k < first[t + 1]; k++)
            if (!victim[to[k]] && !waits[to[k]]) { waits[to[k]] = 1; g_array_append_val(queue, to[k]); }
    }
    for (guint i = 0; i < queue->len; i++) {
        int32_t u = g_array_index(queue, int32_t, i);
        int32_t step = g_array_index(graph->tasks, rv_task, u).step;
        for (int32_t k = first[u]; k < first[u + 1]; k++) {
            int32_t v = to[k], next_step = g_array_index(graph->tasks, rv_task, v).step;
            if (victim[v] || waits[v] || (next_step != step && next_step != -1)) continue;
            waits[v] = 1;
            g_array_append_val(queue, v);
        }
    }
    g_array_unref(queue);
    g_free(fill);
    g_free(to);
    g_free(first);
}

static void remove_region(rv_graph *graph, const GArray *victims, const step_ends *ends, guint slots, int stages)
{
    int32_t count = rv_graph_task_count(graph);
    guint8 *victim = g_new0(guint8, count), *waits = g_new0(guint8, count);
    for (guint i = 0; i < victims->len; i++) victim[g_array_index(victims, int32_t, i)] = 1;
    mark_waiting(graph, victim, waits);
    /* one region per step slot (step + 1), and one, standing for nothing,
     * for victims outside the steps the ends know */
    rv_region *regions = g_new0(rv_region, slots + 1);
    for (guint slot = 0; slot < slots; slot++)
        regions[slot] = (rv_region){ ends[slot].start, ends[slot].start >= 0 ? ends[slot].tails : NULL,
                                     ends[slot].start >= 0 ? stages : 0, FALSE };
    regions[slots] = (rv_region){ -1, NULL, 0, FALSE };
    GArray *region_of = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), victims->len);
    for (guint i = 0; i < victims->len; i++) {
        int32_t step = rv_graph_task(graph, g_array_index(victims, int32_t, i))->step;
        int32_t r = step >= -1 && step + 1 < (int32_t)slots ? step + 1 : (int32_t)slots;
        g_array_append_val(region_of, r);
    }
    rv_transform_replace_regions(graph, victims, region_of, regions, waits, RV_REMOVE_DROP_OVERHEAD);
    g_array_unref(region_of);
    g_free(regions);
    g_free(victim);
    g_free(waits);
}

/* Which list of its step a task joins (collect_steps): rv_step_lists'
 * list index, or -1. */
enum { JOINS_FORWARD, JOINS_BACKWARD, JOINS_HOST, JOINS_COUNT };

/* A task's list; the step's earliest optimizer GPU task is noted in
 * work (indexed step + 1) on the way. */
static int joins(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    if (is_pipelined(task)) return task->phase == RV_PHASE_FORWARD ? JOINS_FORWARD : JOINS_BACKWARD;
    if (!(task->flags & (RV_TASK_FLAG_GPU | RV_TASK_FLAG_REMOVED)) && (task->kind == RV_TASK_CPU || task->kind == RV_TASK_SYNC) &&
        (task->phase == RV_PHASE_FORWARD || task->phase == RV_PHASE_BACKWARD))
        return JOINS_HOST;
    step_work *w = &((step_work *)data)[task->step + 1];
    if (task->phase == RV_PHASE_OPTIMIZER && (task->flags & RV_TASK_FLAG_GPU) &&
        !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) &&
        (w->optimizer < 0 || rv_task_compare_recorded(&id, &w->optimizer, (gpointer)graph) < 0))
        w->optimizer = id;
    return -1;
}

/*
 * Each step's pipelined forward and backward GPU tasks (recorded order),
 * its host calls (id order), and its first optimizer GPU task; index
 * step + 1.
 */
static step_work *collect_steps(rv_graph *graph, guint *slots)
{
    *slots = graph->steps->len + 1;
    step_work *work = g_new0(step_work, *slots);
    for (guint s = 0; s < *slots; s++) work[s].optimizer = -1;
    rv_step_lists lists = rv_step_lists_new(graph, JOINS_COUNT, joins, work);
    for (guint s = 0; s < *slots; s++) {
        int32_t step = (int32_t)s - 1;
        work[s].forward = g_array_ref(rv_step_lists_get(&lists, step, JOINS_FORWARD));
        work[s].backward = g_array_ref(rv_step_lists_get(&lists, step, JOINS_BACKWARD));
        work[s].host = g_array_ref(rv_step_lists_get(&lists, step, JOINS_HOST));
        rv_tasks_sort_recorded(graph, work[s].forward);
        rv_tasks_sort_recorded(graph, work[s].backward);
    }
    rv_step_lists_free(&lists);
    return work;
}

static void free_steps(step_work *work, guint slots)
{
    for (guint s = 0; s < slots; s++) {
        g_array_unref(work[s].forward);
        g_array_unref(work[s].backward);
        g_array_unref(work[s].host);
    }
    g_free(work);
}

static gboolean read_plan(const rv_params *params, pipeline_plan *plan, GError **error)
{
    int64_t stages = rv_params_integer(params, "stages"), microbatches = rv_params_integer(params, "microbatches");
    if (stages < 1 || stages > 1024 || microbatches < 1 || microbatches > 4096) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 1 <= stages <= 1024 and 1 <= microbatches <= 4096");
        return FALSE;
    }
    plan->stages = (int)stages;
    plan->microbatches = (int)microbatches;
    plan->one_f_one_b = strcmp(rv_params_string(params, "schedule"), "1f1b") == 0;
    plan->free_transfers = strcmp(rv_params_string(params, "transfers"), "free") == 0;
    plan->activation_bytes = rv_params_bytes(params, "activation_bytes");
    plan->link = rv_link_make(rv_params_bandwidth(params, "bandwidth"), rv_params_duration_ns(params, "latency"), 1.0);
    return rv_link_check(&plan->link, error);
}

static void builder_init(builder *b, rv_graph *graph, const pipeline_plan *plan, const int64_t *ns)
{
    int D = plan->stages;
    memset(b, 0, sizeof *b);
    b->graph = graph;
    b->plan = plan;
    b->ns = ns;
    b->stage_stream = g_new(int32_t, D);
    b->stream_tail = g_new(int32_t, D);
    b->activation_link = g_new(int32_t, D);
    b->gradient_link = g_new(int32_t, D);
    b->link_tail[0] = g_new(int32_t, D);
    b->link_tail[1] = g_new(int32_t, D);
    for (int s = 0; s < D; s++) {
        char *name = g_strdup_printf("pipeline stage %d", s);
        b->stage_stream[s] = rv_graph_add_resource(graph, RV_RES_GPU_STREAM, -2 - s, 0, name);
        g_free(name);
        b->stream_tail[s] = b->link_tail[0][s] = b->link_tail[1][s] = -1;
        if (s + 1 < D) {
            name = g_strdup_printf("pipeline %d->%d activations", s, s + 1);
            b->activation_link[s] = rv_transform_add_channel(graph, name);
            g_free(name);
            name = g_strdup_printf("pipeline %d->%d gradients", s + 1, s);
            b->gradient_link[s] = rv_transform_add_channel(graph, name);
            g_free(name);
        }
    }
}

static void builder_clear(builder *b)
{
    g_free(b->stage_stream); g_free(b->stream_tail);
    g_free(b->activation_link); g_free(b->gradient_link);
    g_free(b->link_tail[0]); g_free(b->link_tail[1]);
}

/* `ids` (task ids below `tasks`) in ascending order, each once: by a flag
 * per task and one pass over them, where sorting a million ids cost more
 * than the pass (the same list as a sort and a dedup would give). */
static void ids_sorted_once(GArray *ids, int32_t tasks)
{
    guint8 *listed = g_new0(guint8, MAX(tasks, 1));
    for (guint i = 0; i < ids->len; i++) listed[g_array_index(ids, int32_t, i)] = 1;
    g_array_set_size(ids, 0);
    for (int32_t t = 0; t < tasks; t++)
        if (listed[t]) g_array_append_val(ids, t);
    g_free(listed);
}

/* Replace every step's forward and backward by its pipeline; returns the steps done, -1 on error. */
static int pipeline_steps(rv_graph *graph, const pipeline_plan *plan, const int64_t *ns, GString *notes,
                          GError **error)
{
    guint slots;
    step_work *work = collect_steps(graph, &slots);
    builder b;
    builder_init(&b, graph, plan, ns);
    GArray *replaced = g_array_new(FALSE, FALSE, sizeof(int32_t)), *host = g_array_new(FALSE, FALSE, sizeof(int32_t));
    step_ends *ends = g_new(step_ends, slots);
    for (guint slot = 0; slot < slots; slot++) { ends[slot].start = -1; ends[slot].tails = NULL; }
    int done = 0;
    for (guint slot = 0; slot < slots && done >= 0; slot++) {
        if (work[slot].forward->len == 0 || work[slot].backward->len == 0) continue;
        ends[slot].tails = g_new(int32_t, plan->stages);
        if (!pipeline_step(&b, &work[slot], (int32_t)slot - 1, &ends[slot].start, ends[slot].tails, notes, error)) {
            done = -1;
            break;
        }
        g_array_append_vals(replaced, work[slot].forward->data, work[slot].forward->len);
        g_array_append_vals(replaced, work[slot].backward->data, work[slot].backward->len);
        g_array_append_vals(host, work[slot].host->data, work[slot].host->len);
        done++;
    }
    if (done > 0) {
        guint gpu_tasks = replaced->len;
        for (guint i = 0; i < gpu_tasks; i++) {
            int32_t launch = rv_graph_launch_of(graph, g_array_index(replaced, int32_t, i));
            if (launch >= 0) g_array_append_val(replaced, launch);
        }
        g_array_append_vals(replaced, host->data, host->len);
        ids_sorted_once(replaced, rv_graph_task_count(graph)); /* a launch is also a host call of its phase */
        remove_region(graph, replaced, ends, slots, plan->stages);
        char *bytes = rv_format_bytes(b.transfer_bytes);
        g_string_append_printf(notes, "    %d stages x %d micro-batches (%s) in %d steps: %u kernels inserted, %u "
                               "transfers (%s, %s), %u recorded GPU tasks and %u host calls removed\n",
                               plan->stages, plan->microbatches, plan->one_f_one_b ? "1f1b" : "gpipe", done, b.inserted,
                               b.transfers, plan->free_transfers ? "free" : "comm.h point-to-point", bytes,
                               gpu_tasks, replaced->len - gpu_tasks);
        g_free(bytes);
        if (b.unsized && !plan->free_transfers)
            g_string_append_printf(notes, "    %u stage boundaries have no Input Dims: their transfers cost the latency "
                                   "alone (give activation_bytes=)\n", b.unsized);
        if (b.cut_between_kernels)
            g_string_append_printf(notes, "    %u passes cut between kernels: their layer tags change too seldom to "
                                   "balance the stages (one compiled operator?)\n", b.cut_between_kernels);
    }
    g_array_unref(replaced);
    g_array_unref(host);
    for (guint slot = 0; slot < slots; slot++) g_free(ends[slot].tails);
    g_free(ends);
    builder_clear(&b);
    free_steps(work, slots);
    return done;
}

static gboolean pipeline_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    pipeline_plan plan;
    if (!read_plan(params, &plan, error)) return FALSE;
    if (plan.stages == 1 && plan.microbatches == 1) {
        g_string_append(output->notes, "    stages=1, microbatches=1: one GPU, one batch: graph unchanged\n");
        return TRUE;
    }
    if (graph->ranks->len > 1) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "pipeline splits one GPU's trace into stages; this job has %u ranks - give it one trace",
                    graph->ranks->len);
        return FALSE;
    }
    int64_t *ns = microbatch_durations(graph, params, plan.microbatches, output->notes, error);
    if (ns == NULL) return FALSE;
    int done = pipeline_steps(graph, &plan, ns, output->notes, error);
    g_free(ns);
    if (done == 0)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no step has both forward- and backward-phase GPU work to split into stages");
    if (done > 0 && plan.free_transfers)
        g_string_append_printf(output->notes, "    free transfers, equal stages: bubble (D-1)/(D-1+M) = %d/%d of the "
                               "pipelined step\n", plan.stages - 1, plan.stages - 1 + plan.microbatches);
    return done > 0;
}

/* The composition law (compose.h): the step rebuilt as stages of micro-batches with transfers between them. */
static const rv_plugin_effects pipeline_effects = {
    .reads = RV_ASPECT_TASKS | RV_ASPECT_STEPS | RV_ASPECT_WEIGHTS | RV_ASPECT_CLUSTER,
    .reads_time = RV_ASPECT_TASKS,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_TASKS | RV_ASPECT_STEPS | RV_ASPECT_WEIGHTS | RV_ASPECT_MEMORY | RV_ASPECT_SCHEDULE | RV_ASPECT_CLUSTER,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 20),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "pipeline",
    "pipeline parallelism: layers in D stages balanced by time, M micro-batches, GPipe or 1F1B schedule",
    pipeline_params, pipeline_apply, &pipeline_effects,
};
