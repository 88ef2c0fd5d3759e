/*
 * zero.c - ZeRO (Rajbhandari et al., the Mlsys memo of seed 004): the
 * model states of data-parallel training sharded over the data-parallel
 * group of N ranks, predicted from one rank's trace.
 *
 *   reverie whatif trace.json.gz --opt ddp:world=8 --opt zero:stage=2
 *   reverie whatif traces/hta_transformer_ddp_v100_rank1.2steps.json.gz --opt zero:stage=3,world=8
 *
 * MODEL.  Each data-parallel all-reduce of the trace (recorded, or inserted
 * by ddp: collectives whose parallelism is data, graph.h) of S bytes
 * becomes a reduce-scatter of S where it was - every rank keeps the
 * reduced 1/N of the gradients it updates - and the optimizer kernels do
 * 1/N of their work (cost model, costmodel.h; 1/N of their time where it
 * cannot re-cost them).  Then, per stage:
 *   1, 2: an all-gather of S after the step's optimizer hands every rank
 *         the updated parameters (stage 2 differs from 1 in memory only);
 *   3:    parameters are sharded too: each weighted layer's share of the
 *         step's S (in proportion to its weights, layers.h) gathered before
 *         its forward and before the backward run that produces its
 *         gradient, back to back on one channel (prefetch); where the
 *         layers are unknown (a compiled model), one gather of S before
 *         the forward and one before the backward.  None after the
 *         optimizer.
 * The collectives are re-costed from the recorded all-reduce with comm.h's
 * model (rv_collective_recost_ns): reduce-scatter = recorded x RS(S)/AR(S),
 * all-gather likewise, on ceil(N / gpus_per_node) nodes.  On a ring an
 * all-reduce moves 2(N-1)/N S per rank and a reduce-scatter or all-gather
 * (N-1)/N S: stages 1 and 2 move what plain data parallelism moves,
 * stage 3 1.5x.  Inserted all-gathers run on a communication stream of
 * their own on the all-reduces' GPU (transform.h: the contention rule and
 * the reports see them), are data-parallel collectives of N ranks, and a
 * free network costs nothing.
 *
 * MEMORY (model states per GPU, mixed-precision Adam, the paper's
 * section 3): P parameters of 2 (fp16 weights) + 2 (fp16 gradients) + 12
 * (fp32 master weights, momentum, variance) bytes: 16P for plain data
 * parallelism; stage 1: 4P + 12P/N; stage 2: 2P + 14P/N; stage 3: 16P/N.
 * P is the weighted layers' weight elements (layers.h), else the step's
 * all-reduced bytes / 4.
 *
 * world=1 (nothing to shard over) leaves the graph unchanged.
 *
 *   reverie whatif trace.json.gz --opt zero:offload=cpu
 *   reverie whatif trace.json.gz --opt ddp:world=8 --opt zero:stage=3,offload=nvme,offload_params=cpu
 *
 * OFFLOAD (ZeRO-Offload, Ren et al., USENIX ATC 2021; ZeRO-Infinity,
 * Rajbhandari et al., SC 2021; the memo's "memory optimizations"): the
 * model states leave the GPU for host memory (cpu) or NVMe, on one GPU
 * too (world=1).  Per step, over each GPU's PCIe link (pcie.d2h and
 * pcie.h2d channels, one direction each):
 *   offload=cpu:  each reduce-scatter's (each all-reduce's, at world 1 the
 *                 step's) gradient shard goes to the host once it is
 *                 reduced; the GPU optimizer kernels and their launches go
 *                 (and the Python loop's host time with them): the
 *                 training thread runs the optimizer on the host
 *                 (DeepSpeed's CPU Adam: 28 bytes of host memory traffic a
 *                 parameter - fp32 weight, momentum, variance and gradient
 *                 read, the first three written back; an upper bound for
 *                 SGD) once all gradients are there,
 *                 then the updated parameters go back to the GPU before
 *                 the step's all-gathers and the next step's forward;
 *   offload=nvme: the same, and the optimizer state (12 bytes a parameter)
 *                 is read from NVMe before the host optimizer and written
 *                 back after it, on one drive's channel;
 *   offload_params=cpu|nvme (stage 3, with offload=): the parameters live
 *                 on the host (or NVMe): each layer's shard comes over
 *                 PCIe (from NVMe first) before its all-gather, in forward
 *                 and backward, and no parameter copy follows the
 *                 optimizer.
 * Bytes: the gradients' and parameters' are what the step's collectives
 * carried, this rank's 1/N of them (at world 1, the weighted layers'
 * bytes); the states', the parameters (as MEMORY below) x 12 / N.  Link
 * speeds: pcie_bandwidth (default half the catalogue's PCIe figure for the
 * trace's GPU, which counts both directions), host_bandwidth (the host
 * memory bandwidth one GPU's optimizer gets: 16 channels of DDR4-3200 in a
 * two-socket host, 409.6 GB/s by JEDEC's 25.6 GB/s a channel, shared by 8
 * GPUs: 50 GB/s), nvme_bandwidth (one PCIe 4.0 x4 drive per GPU: Samsung
 * 980 PRO's datasheet, 7 GB/s sequential read).  The memory model drops
 * what left the GPU (memory.h's OFFLOAD).  What it does not model:
 * ZeRO-Offload's one-step delayed parameter update, pinned-buffer
 * chunking that overlaps the copies with the host optimizer, and the
 * host's other work slowing down.
 */
#include "reverie/plugin.h"
#include "reverie/comm.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/gpus.h"
#include "reverie/layers.h"
#include "reverie/memory.h"
#include "reverie/recost.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <stdlib.h>
#include <string.h>

static const rv_param_spec zero_params[] = {
    { "stage", RV_PARAM_CHOICE, "1", NULL, "what is sharded: 1 optimizer state, 2 + gradients, 3 + parameters", "1|2|3" },
    { "world", RV_PARAM_INTEGER, "0", "GPUs", "data-parallel ranks N; 0: the trace's world size", NULL },
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "GPUs sharing the intra-node link", NULL },
    RV_CLUSTER_LINK_PARAM_SPECS,
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { "offload", RV_PARAM_CHOICE, "none", NULL,
      "optimizer state, gradients and the optimizer step to host memory (cpu: ZeRO-Offload) or NVMe (ZeRO-Infinity)",
      "none|cpu|nvme" },
    { "offload_params", RV_PARAM_CHOICE, "none", NULL, "stage 3 with offload=: the parameters too, fetched a layer at a time",
      "none|cpu|nvme" },
    { "pcie_bandwidth", RV_PARAM_BANDWIDTH, "16GB/s", "B/s",
      "GPU-host link per direction (not given: half the catalogue's PCIe figure for the trace's GPU; this default, PCIe 3.0 x16, "
      "where the GPU is unknown)", NULL },
    { "host_bandwidth", RV_PARAM_BANDWIDTH, "50GB/s", "B/s",
      "host memory bandwidth one GPU's optimizer gets (409.6 GB/s of DDR4-3200 in two sockets, shared by 8 GPUs)", NULL },
    { "nvme_bandwidth", RV_PARAM_BANDWIDTH, "7GB/s", "B/s", "NVMe bandwidth per GPU (a PCIe 4.0 x4 drive: 7 GB/s)", NULL },
    { NULL }
};

typedef enum { OFFLOAD_NONE, OFFLOAD_CPU, OFFLOAD_NVME } offload_target;

typedef struct {
    offload_target states, params;
    double pcie_Bps, host_Bps, nvme_Bps;
    gboolean pcie_from_catalogue;
} offload_plan;

typedef struct {
    int stage, world;
    int gpus_per_node;
    rv_link intra, inter;
    offload_plan offload;
} zero_plan;

/* ---- the optimizer on 1/N of the parameters ------------------------------- */

static gboolean is_optimizer_kernel(const rv_task *task)
{
    return !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) && (task->flags & RV_TASK_FLAG_GPU) &&
           task->phase == RV_PHASE_OPTIMIZER && task->kind != RV_TASK_COMM && task->collective == 0;
}

static gboolean shard_optimizer_task(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost,
                                     rv_cost_change *change, gpointer data)
{
    if (!is_optimizer_kernel(&g_array_index(graph->tasks, rv_task, task)) || cost->cls == RV_COST_COMM) return FALSE;
    change->flops_factor = change->bytes_factor = *(double *)data;
    return TRUE;
}

static gboolean shard_optimizer(rv_graph *graph, const rv_params *params, int world, GString *notes, GError **error)
{
    GError *no_gpu = NULL;
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(&no_gpu);
    const rv_gpu *gpu = catalogue ? rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"),
                                                    "source_gpu", &no_gpu) : NULL;
    double factor = 1.0 / world;
    rv_cost_model *model = gpu ? rv_cost_model_new(graph, gpu, TRUE) : NULL;
    rv_cost_plan *plan = model ? rv_cost_model_plan(model, shard_optimizer_task, &factor) : NULL;
    gboolean ok = TRUE;
    guint tasks = 0;
    int64_t before = 0, after = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph) && ok; id++) {
        rv_task *task = rv_graph_task(graph, id);
        if (!is_optimizer_kernel(task)) continue;
        double planned = plan ? g_array_index(plan->new_ns, double, id) : -1;
        if (planned < 0) planned = (double)task->duration_ns * factor;
        int64_t ns;
        ok = rv_task_duration_from(graph, id, planned, "the world size", &ns, error);
        if (!ok) break;
        before += task->duration_ns;
        after += ns;
        rv_transform_set_duration(graph, id, ns);
        tasks++;
    }
    if (ok) {
        char *b = rv_format_duration(before), *a = rv_format_duration(after);
        g_string_append_printf(notes, "    optimizer: %u kernels on 1/%d of the parameters, %s -> %s (%s)\n", tasks, world,
                               b, a, gpu ? "cost model" : "1/N of their time: no cost model");
        g_free(b); g_free(a);
    }
    if (plan) rv_cost_plan_free(plan);
    if (model) rv_cost_model_free(model);
    if (catalogue) rv_gpu_catalogue_free(catalogue);
    g_clear_error(&no_gpu);
    return ok;
}

/* ---- collectives ------------------------------------------------------------ */

typedef struct {
    rv_graph *graph;
    const zero_plan *plan;
    int32_t channel, channel_tail;
    int64_t *step_bytes;        /* per step + 1: the bytes its all-reduces carried */
    int64_t *step_gather_ns;    /* per step + 1: their all-gathers' time, summed */
    int32_t *step_last;         /* per step + 1: its last reduce-scatter */
    int64_t gathered_bytes;
    guint reduce_scatters, all_gathers;
    guint solved_payloads;      /* all-reduces with no recorded payload: solved from their time */
    guint layered_steps;        /* stage 3: steps whose parameters were gathered layer by layer */
    guint whole_steps;          /* stage 3: steps whose parameters were gathered as a whole */
    GArray *scattered;          /* int32: the reduce-scatters made, in recorded order (offload) */
    int32_t *step_first_gather; /* per step + 1: its first all-gather after the optimizer (stages 1, 2), or -1 */
    GArray *parameter_gathers;  /* int32: stage 3's gathers of parameters (offload_params) */
} rewriter;

/* Recorded all-reduce time -> the time of `wanted` on the same payload, at world N. */
static gboolean recost(const rewriter *r, const rv_task *task, const rv_collective_info *info, rv_collective wanted,
                       int64_t *ns, int64_t *bytes, GError **error)
{
    int recorded_world = info->group_size > 0 ? info->group_size : rv_graph_world_size(r->graph);
    rv_cluster before = rv_cluster_for_ranks(recorded_world, r->plan->gpus_per_node, &r->plan->intra, &r->plan->inter);
    rv_cluster after = rv_cluster_for_ranks(r->plan->world, r->plan->gpus_per_node, &r->plan->intra, &r->plan->inter);
    int64_t t = rv_collective_recost_ns((rv_collective)info->op, wanted, info->bytes, 1, task->duration_ns, &before,
                                        &after, bytes);
    return rv_task_duration_from(r->graph, -1, (double)t, "the zero parameters (world, bandwidth, latency)", ns, error);
}

static int32_t new_collective(rewriter *r, rv_collective op, int64_t bytes)
{
    rv_collective_info info = { bytes, -1, rv_strings_intern(r->graph->strings, "zero"), r->plan->world, -1, -1, 1,
                                (uint8_t)op, RV_PARALLEL_DATA, RV_MATCH_NONE, 1 };
    return rv_graph_add_collective(r->graph, &info);
}

/* An all-gather of `bytes` on the zero stream, costed like `like` (an
 * all-reduce's recorded time), after `after` (if any) and before `before`. */
static gboolean insert_all_gather(rewriter *r, const rv_task *like, int64_t ns, int64_t bytes, int32_t after,
                                  int32_t before, const char *name, rv_phase phase, GError **error)
{
    rv_task task = *like;
    task.phase = (uint8_t)phase;
    task.kind = RV_TASK_COMM;
    task.flags = 0;
    task.resource = r->channel;
    task.name = rv_strings_intern(r->graph->strings, name);
    task.duration_ns = ns;
    task.host_overhead_ns = 0;
    task.correlation = -1;
    task.bytes = bytes;
    task.collective = new_collective(r, RV_COLL_ALL_GATHER, bytes);
    rv_insert_spec spec = { task, r->channel_tail, -1 };
    int32_t id = rv_transform_insert(r->graph, &spec, error);
    if (id < 0) return FALSE;
    r->channel_tail = id;
    int32_t step = task.step;
    if (phase == RV_PHASE_OPTIMIZER && step >= -1 && step < (int32_t)r->graph->steps->len &&
        r->step_first_gather[step + 1] < 0)
        r->step_first_gather[step + 1] = id;
    if (phase != RV_PHASE_OPTIMIZER) g_array_append_val(r->parameter_gathers, id);
    if (after >= 0) rv_transform_add_edge(r->graph, after, id);
    if (before >= 0) rv_transform_add_edge(r->graph, id, before);
    r->gathered_bytes += bytes;
    r->all_gathers++;
    return TRUE;
}

/* Per step + 1: its earliest GPU task of a phase, or latest (optimizer). */
typedef struct {
    int32_t first_forward, first_backward, last_optimizer;
} step_marks;

static step_marks *mark_steps(rv_graph *graph)
{
    guint slots = graph->steps->len + 1;
    step_marks *marks = g_new(step_marks, slots);
    for (guint s = 0; s < slots; s++) marks[s].first_forward = marks[s].first_backward = marks[s].last_optimizer = -1;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (!(task->flags & RV_TASK_FLAG_GPU) || (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) ||
            task->kind == RV_TASK_COMM || task->step < -1 || task->step >= (int32_t)graph->steps->len)
            continue;
        step_marks *m = &marks[task->step + 1];
        int32_t *first = task->phase == RV_PHASE_FORWARD ? &m->first_forward
                       : task->phase == RV_PHASE_BACKWARD ? &m->first_backward : NULL;
        if (first && (*first < 0 || rv_task_compare_recorded(&id, first, graph) < 0)) *first = id;
        if (task->phase == RV_PHASE_OPTIMIZER &&
            (m->last_optimizer < 0 || rv_task_compare_recorded(&id, &m->last_optimizer, graph) > 0))
            m->last_optimizer = id;
    }
    return marks;
}

/* Every data-parallel all-reduce becomes a reduce-scatter in place; stages
 * 1 and 2 add its all-gather after the step's optimizer. */
static gboolean split_allreduces(rewriter *r, const GArray *allreduces, const step_marks *marks, GError **error)
{
    rv_graph *graph = r->graph;
    for (guint i = 0; i < allreduces->len; i++) {
        int32_t id = g_array_index(allreduces, int32_t, i);
        rv_task *task = rv_graph_task(graph, id);
        rv_collective_info info = *rv_task_collective(graph, task);
        int64_t rs_ns, ag_ns, bytes;
        if (!recost(r, task, &info, RV_COLL_REDUCE_SCATTER, &rs_ns, &bytes, error) ||
            !recost(r, task, &info, RV_COLL_ALL_GATHER, &ag_ns, &bytes, error))
            return FALSE;
        if (info.bytes <= 0) r->solved_payloads++;
        rv_task like = *task;
        rv_transform_set_duration(graph, id, rs_ns);
        task = rv_graph_task(graph, id);
        task->name = rv_strings_intern(graph->strings, "ncclKernel_ReduceScatter (zero)");
        task->bytes = bytes;
        task->collective = new_collective(r, RV_COLL_REDUCE_SCATTER, bytes);
        r->reduce_scatters++;
        g_array_append_val(r->scattered, id);
        int32_t step = task->step;
        if (step >= -1 && step < (int32_t)graph->steps->len) {
            r->step_bytes[step + 1] += bytes;
            r->step_gather_ns[step + 1] += ag_ns;
            r->step_last[step + 1] = id;
        }
        if (r->plan->stage == 3) continue;
        int32_t after = step >= -1 && step < (int32_t)graph->steps->len && marks[step + 1].last_optimizer >= 0
                            ? marks[step + 1].last_optimizer : id;
        int32_t next_forward = step + 2 < (int32_t)graph->steps->len + 1 ? marks[step + 2].first_forward : -1;
        if (!insert_all_gather(r, &like, ag_ns, bytes, after, next_forward, "ncclKernel_AllGather (zero parameters)",
                               RV_PHASE_OPTIMIZER, error))
            return FALSE;
        rv_transform_add_edge(graph, id, r->channel_tail);
    }
    return TRUE;
}

/* Stage 3 where the step's weighted layers are known (layers.h): each
 * layer's parameters gathered before its forward and before the backward
 * run that produces its gradient, its share of the step's bytes and
 * gather time in proportion to its weights; the channel runs the gathers
 * back to back, so a layer's gather is prefetched while earlier layers
 * compute.  FALSE with *done unset when the step has no such layers. */
static gboolean gather_per_layer(rewriter *r, guint slot, const GArray *layers, GArray *backward, int32_t after,
                                 gboolean *done, GError **error)
{
    rv_graph *graph = r->graph;
    GArray *kept = g_array_new(FALSE, FALSE, sizeof(rv_weighted_layer));
    int64_t weights = 0;
    for (guint i = 0; i < layers->len; i++) {
        const rv_weighted_layer *layer = &g_array_index(layers, rv_weighted_layer, i);
        if (layer->weight_bytes <= 0 || layer->first_gpu < 0) continue;
        g_array_append_val(kept, *layer);
        weights += layer->weight_bytes;
    }
    GArray *runs = kept->len && backward->len ? rv_weighted_backward_runs(graph, backward) : NULL;
    *done = runs != NULL;
    gboolean ok = TRUE;
    guint n = kept->len;
    int64_t *bytes = g_new0(int64_t, MAX(n, 1)), *ns = g_new0(int64_t, MAX(n, 1)), bytes_left = r->step_bytes[slot],
            ns_left = r->step_gather_ns[slot];
    for (guint i = 0; i < n && *done; i++) {  /* shares that add up exactly: the last takes what is left */
        double share = (double)g_array_index(kept, rv_weighted_layer, i).weight_bytes / (double)weights;
        bytes[i] = i + 1 == n ? bytes_left : MIN(bytes_left, (int64_t)(share * (double)r->step_bytes[slot]));
        ns[i] = i + 1 == n ? ns_left : MIN(ns_left, (int64_t)(share * (double)r->step_gather_ns[slot]));
        bytes_left -= bytes[i];
        ns_left -= ns[i];
    }
    rv_task model = *rv_graph_task(graph, r->step_last[slot]);
    for (guint i = 0; i < n && *done && ok; i++)
        ok = insert_all_gather(r, &model, ns[i], bytes[i], i == 0 ? after : -1,
                               g_array_index(kept, rv_weighted_layer, i).first_gpu,
                               "ncclKernel_AllGather (zero layer parameters, forward)", RV_PHASE_FORWARD, error);
    /* where each backward run starts: the task after the previous run's end */
    guint *run_start = runs ? g_new0(guint, runs->len) : NULL;
    for (guint i = 0, j = 0; runs && i < backward->len && j < runs->len; i++)
        if (g_array_index(backward, int32_t, i) == g_array_index(runs, int32_t, j)) {
            if (j + 1 < runs->len) run_start[j + 1] = i + 1;
            j++;
        }
    for (guint k = 0; k < n && *done && ok; k++) {  /* k = 0: the last forward layer, whose gradient comes first */
        guint run = rv_gradient_run(k, n, runs->len);
        int32_t first = g_array_index(backward, int32_t, MIN(run_start[run], backward->len - 1));
        ok = insert_all_gather(r, &model, ns[n - 1 - k], bytes[n - 1 - k], -1, first,
                               "ncclKernel_AllGather (zero layer parameters, backward)", RV_PHASE_BACKWARD, error);
    }
    g_free(run_start);
    if (runs) g_array_unref(runs);
    g_free(bytes);
    g_free(ns);
    g_array_unref(kept);
    return ok;
}

/* Stage 3: each step's parameters (its all-reduced bytes) gathered before
 * its forward and again before its backward: per layer where the layers
 * are known, else in one gather each as long as the step's all-reduces'
 * all-gathers together. */
static gboolean gather_parameters(rewriter *r, const step_marks *marks, GError **error)
{
    rv_graph *graph = r->graph;
    GPtrArray *layers = rv_weighted_layers_by_step(graph), *backward = rv_backward_gpu_tasks_by_step(graph);
    gboolean ok = TRUE;
    for (guint slot = 0; slot <= graph->steps->len && ok; slot++) {
        if (r->step_bytes[slot] == 0 || r->step_last[slot] < 0) continue;
        int32_t previous_optimizer = slot > 0 ? marks[slot - 1].last_optimizer : -1;
        gboolean done = FALSE;
        ok = gather_per_layer(r, slot, g_ptr_array_index(layers, slot), g_ptr_array_index(backward, slot),
                              previous_optimizer, &done, error);
        if (!ok || done) {
            r->layered_steps += done;
            continue;
        }
        r->whole_steps++;
        rv_task model = *rv_graph_task(graph, r->step_last[slot]);
        int32_t targets[2] = { marks[slot].first_forward, marks[slot].first_backward };
        const char *names[2] = { "ncclKernel_AllGather (zero forward parameters)",
                                 "ncclKernel_AllGather (zero backward parameters)" };
        for (int k = 0; k < 2 && ok; k++)
            ok = insert_all_gather(r, &model, r->step_gather_ns[slot], r->step_bytes[slot],
                                   k == 0 ? previous_optimizer : -1, targets[k], names[k],
                                   k == 0 ? RV_PHASE_FORWARD : RV_PHASE_BACKWARD, error);
    }
    g_ptr_array_unref(layers);
    g_ptr_array_unref(backward);
    return ok;
}

/* ---- memory ----------------------------------------------------------------- */

/* The model's parameters: from the first step's weighted layers' shapes
 * (4 bytes an element, layers.h), else a step's all-reduced bytes / 4;
 * *from says which. */
static double parameter_count(rv_graph *graph, int64_t step_bytes, const char **from)
{
    GPtrArray *by_step = rv_weighted_layers_by_step(graph);
    GArray *sizes = rv_weight_sizes_of_first_step(by_step);
    g_ptr_array_unref(by_step);
    int64_t weight_bytes = 0;
    for (guint i = 0; i < sizes->len; i++) weight_bytes += g_array_index(sizes, int64_t, i);
    g_array_unref(sizes);
    *from = weight_bytes > 0 ? "the weighted layers' shapes" : "the all-reduced bytes / 4";
    return (double)(weight_bytes > 0 ? weight_bytes : step_bytes) / 4.0;
}

static void describe_memory(rv_graph *graph, const zero_plan *plan, int64_t step_bytes, GString *notes)
{
    const char *from;
    double P = parameter_count(graph, step_bytes, &from), N = plan->world;
    double dp = 16 * P;
    double zero = plan->stage == 1 ? 4 * P + 12 * P / N : plan->stage == 2 ? 2 * P + 14 * P / N : 16 * P / N;
    char *a = rv_format_bytes((int64_t)dp), *b = rv_format_bytes((int64_t)zero);
    g_string_append_printf(notes, "    model states per GPU (16 B/param, mixed-precision Adam; %.4g M params from %s): "
                           "data parallel %s, ZeRO-%d over %d: %s (%.2fx less)\n", P / 1e6, from, a, plan->stage,
                           plan->world, b, dp / zero);
    g_free(a); g_free(b);
}

/* ---- offload ---------------------------------------------------------------- */

#define HOST_OPTIMIZER_BYTES_PER_PARAM 28.0  /* Adam on the host: fp32 weight, momentum, variance, gradient read; three written */
#define OPTIMIZER_STATE_BYTES_PER_PARAM 12.0 /* fp32 master weight, momentum and variance (the 16 B/param model's 12) */

/* What offloading works with: the channels and their tails, the speeds. */
typedef struct {
    rv_graph *graph;
    const zero_plan *plan;
    int32_t d2h, h2d, nvme;        /* channels */
    int32_t d2h_tail, h2d_tail, nvme_tail;
    int32_t *step_optimizer;       /* per step + 1: the host optimizer task, or -1 */
    int64_t to_host, to_gpu, nvme_bytes;
    int64_t host_ns;               /* the host optimizer's time, summed */
    guint steps, sized;            /* steps offloaded; steps whose gradients have a size */
    GArray *removed;               /* int32: the GPU optimizer kernels */
} offloader;

/* A copy of `bytes` on `channel` after its tail (*tail moves to it), shaped like task `like`. */
static int32_t insert_transfer(offloader *o, int32_t like, int32_t channel, int32_t *tail, const char *name,
                               int64_t bytes, double Bps, GError **error)
{
    rv_task task = *rv_graph_task(o->graph, like);
    task.kind = RV_TASK_MEMCPY;
    task.flags = 0;
    task.resource = channel;
    task.name = rv_strings_intern(o->graph->strings, name);
    task.host_overhead_ns = 0;
    task.correlation = -1;
    task.collective = 0;
    task.bytes = bytes;
    if (!rv_task_duration_from(o->graph, -1, (double)bytes * 1e9 / Bps,
                               "the zero offload parameters (pcie_bandwidth, nvme_bandwidth)", &task.duration_ns, error))
        return -1;
    rv_insert_spec spec = { task, *tail, -1 };
    int32_t id = rv_transform_insert(o->graph, &spec, error);
    if (id >= 0) *tail = id;
    return id;
}

/* The step's gradient producers and this rank's bytes of each: its
 * reduce-scatters (1/N of what they carry), or at world 1 its last
 * backward GPU task (the step's weighted layers' bytes). */
static void gradient_producers(const offloader *o, const rewriter *r, guint slot, const GArray *backward,
                               int64_t layer_bytes, GArray *producers, GArray *bytes)
{
    for (guint i = 0; i < r->scattered->len; i++) {
        int32_t id = g_array_index(r->scattered, int32_t, i);
        if ((guint)(rv_graph_task(o->graph, id)->step + 1) != slot) continue;
        int64_t share = rv_graph_task(o->graph, id)->bytes / o->plan->world;
        g_array_append_val(producers, id);
        g_array_append_val(bytes, share);
    }
    if (producers->len == 0 && backward->len > 0 && layer_bytes > 0) {
        g_array_append_val(producers, g_array_index(backward, int32_t, backward->len - 1));
        g_array_append_val(bytes, layer_bytes);
    }
}

/* The host optimizer of one step: a call on the thread that launched its
 * first GPU optimizer kernel, in that launch's place, lasting the Adam
 * traffic of this rank's parameters at the host's bandwidth. */
static int32_t insert_host_optimizer(offloader *o, int32_t first_kernel, double parameters, GError **error)
{
    int32_t launch = rv_graph_launch_of(o->graph, first_kernel);
    int32_t anchor = launch >= 0 ? rv_graph_resource_previous(o->graph, launch) : -1;
    if (anchor < 0) return -2;  /* no place on a thread: the step is left as it is */
    rv_insert_spec spec = { *rv_graph_task(o->graph, anchor), anchor, -1 };
    spec.task.kind = RV_TASK_CPU;
    spec.task.flags = 0;
    spec.task.name = rv_strings_intern(o->graph->strings, "ZeRO-Offload: the optimizer step on the host");
    spec.task.phase = RV_PHASE_OPTIMIZER;
    spec.task.step = rv_graph_task(o->graph, first_kernel)->step;
    spec.task.host_overhead_ns = 0;
    spec.task.correlation = -1;
    spec.task.collective = 0;
    spec.task.bytes = 0;
    if (!rv_task_duration_from(o->graph, -1, parameters * HOST_OPTIMIZER_BYTES_PER_PARAM * 1e9 / o->plan->offload.host_Bps,
                               "the zero offload parameters (host_bandwidth)", &spec.task.duration_ns, error))
        return -1;
    int32_t id = rv_transform_insert(o->graph, &spec, error);
    if (id >= 0) o->host_ns += spec.task.duration_ns;
    return id;
}

/* The step's GPU optimizer kernels (recorded order), into o->removed; the first of them. */
static int32_t step_optimizer_kernels(offloader *o, guint slot)
{
    int32_t first = -1;
    for (int32_t id = 0; id < rv_graph_task_count(o->graph); id++) {
        const rv_task *task = rv_graph_task(o->graph, id);
        if (!is_optimizer_kernel(task) || (guint)(task->step + 1) != slot) continue;
        g_array_append_val(o->removed, id);
        if (first < 0 || rv_task_compare_recorded(&id, &first, o->graph) < 0) first = id;
    }
    return first;
}

/* One step: gradients out, the optimizer on the host (with NVMe's state
 * around it), parameters back unless they live off the GPU.  *done FALSE
 * when the step has nothing to offload. */
static gboolean offload_step(offloader *o, const rewriter *r, const step_marks *marks, guint slot, const GArray *backward,
                             int64_t layer_bytes, gboolean *done, GError **error)
{
    const offload_plan *plan = &o->plan->offload;
    GArray *producers = g_array_new(FALSE, FALSE, sizeof(int32_t)), *bytes = g_array_new(FALSE, FALSE, sizeof(int64_t));
    gradient_producers(o, r, slot, backward, layer_bytes, producers, bytes);
    o->sized += producers->len > 0;
    int32_t first_kernel = producers->len ? step_optimizer_kernels(o, slot) : -1;
    int64_t gradients = 0;
    for (guint i = 0; i < bytes->len; i++) gradients += g_array_index(bytes, int64_t, i);
    double parameters = (double)gradients / 4.0;  /* this rank's: fp32 gradients, 4 bytes each */
    int32_t host = first_kernel >= 0 ? insert_host_optimizer(o, first_kernel, parameters, error) : -2;
    gboolean ok = host != -1;
    *done = host >= 0;
    for (guint i = 0; *done && ok && i < producers->len; i++) {
        int32_t copy = insert_transfer(o, g_array_index(producers, int32_t, i), o->d2h, &o->d2h_tail,
                                       "ZeRO-Offload: gradients to the host (DtoH)", g_array_index(bytes, int64_t, i),
                                       plan->pcie_Bps, error);
        ok = copy >= 0;
        if (ok) rv_transform_add_edge(o->graph, g_array_index(producers, int32_t, i), copy);
        if (ok) rv_transform_add_edge(o->graph, copy, host);
    }
    int64_t state = (int64_t)(parameters * OPTIMIZER_STATE_BYTES_PER_PARAM);
    if (*done && ok && plan->states == OFFLOAD_NVME) {
        int32_t read = insert_transfer(o, host, o->nvme, &o->nvme_tail, "ZeRO-Infinity: optimizer state from NVMe", state,
                                       plan->nvme_Bps, error);
        int32_t write = read >= 0 ? insert_transfer(o, host, o->nvme, &o->nvme_tail, "ZeRO-Infinity: optimizer state to NVMe",
                                                    state, plan->nvme_Bps, error) : -1;
        ok = write >= 0;
        if (ok) rv_transform_add_edge(o->graph, read, host);
        if (ok) rv_transform_add_edge(o->graph, host, write);
        o->nvme_bytes += 2 * state;
    }
    if (*done && ok && plan->params == OFFLOAD_NONE) {
        int32_t back = insert_transfer(o, host, o->h2d, &o->h2d_tail, "ZeRO-Offload: parameters to the GPU (HtoD)", gradients,
                                       plan->pcie_Bps, error);
        ok = back >= 0;
        int32_t waiters[2] = { r->step_first_gather[slot], slot + 1 <= o->graph->steps->len ? marks[slot + 1].first_forward : -1 };
        if (ok) rv_transform_add_edge(o->graph, host, back);
        for (int k = 0; ok && k < 2; k++)
            if (waiters[k] >= 0) rv_transform_add_edge(o->graph, back, waiters[k]);
        o->to_gpu += gradients;
    }
    if (*done) {
        o->to_host += gradients;
        o->step_optimizer[slot] = host;
        o->steps++;
    }
    g_array_unref(producers);
    g_array_unref(bytes);
    return ok;
}

/* offload_params: each of stage 3's parameter gathers first fetches this
 * rank's shard (from NVMe, then) over PCIe, once the previous step's host
 * optimizer has updated it. */
static gboolean fetch_parameters(offloader *o, const rewriter *r, GError **error)
{
    const offload_plan *plan = &o->plan->offload;
    for (guint i = 0; i < r->parameter_gathers->len; i++) {
        int32_t gather = g_array_index(r->parameter_gathers, int32_t, i);
        int64_t bytes = rv_graph_task(o->graph, gather)->bytes / o->plan->world;
        int32_t step = rv_graph_task(o->graph, gather)->step;
        int32_t updated = step >= 0 ? o->step_optimizer[step] : -1; /* slot `step`: the previous step's */
        int32_t from = -1;
        if (plan->params == OFFLOAD_NVME) {
            from = insert_transfer(o, gather, o->nvme, &o->nvme_tail, "ZeRO-Infinity: parameters from NVMe", bytes,
                                   plan->nvme_Bps, error);
            if (from < 0) return FALSE;
            o->nvme_bytes += bytes;
        }
        int32_t copy = insert_transfer(o, gather, o->h2d, &o->h2d_tail, "ZeRO-Offload: parameters to the GPU (HtoD)", bytes,
                                       plan->pcie_Bps, error);
        if (copy < 0) return FALSE;
        if (from >= 0) rv_transform_add_edge(o->graph, from, copy);
        if (updated >= 0) rv_transform_add_edge(o->graph, updated, from >= 0 ? from : copy);
        rv_transform_add_edge(o->graph, copy, gather);
        o->to_gpu += bytes;
    }
    return TRUE;
}

static void describe_offload(const offloader *o, GString *notes)
{
    const offload_plan *plan = &o->plan->offload;
    char *out = rv_format_bytes(o->to_host), *in = rv_format_bytes(o->to_gpu), *host = rv_format_duration(o->host_ns);
    char *pcie = rv_format_bandwidth(plan->pcie_Bps), *hbw = rv_format_bandwidth(plan->host_Bps);
    g_string_append_printf(notes, "    offload to %s in %u steps: %s of gradients to the host and %s of parameters back at "
                           "%s a direction (%s); the optimizer on the host, %s in all (%.0f bytes a parameter at %s)\n",
                           plan->states == OFFLOAD_NVME ? "NVMe" : "host memory", o->steps, out, in, pcie,
                           plan->pcie_from_catalogue ? "half the catalogue's PCIe figure" : "pcie_bandwidth", host,
                           HOST_OPTIMIZER_BYTES_PER_PARAM, hbw);
    if (o->nvme_bytes) {
        char *nvme = rv_format_bytes(o->nvme_bytes), *nbw = rv_format_bandwidth(plan->nvme_Bps);
        g_string_append_printf(notes, "    NVMe: %s of optimizer state%s read and written at %s\n", nvme,
                               plan->params == OFFLOAD_NVME ? " and parameters" : "", nbw);
        g_free(nvme); g_free(nbw);
    }
    g_free(out); g_free(in); g_free(host); g_free(pcie); g_free(hbw);
}

static gboolean offload_states(rv_graph *graph, const zero_plan *plan, const rewriter *r, const step_marks *marks,
                               GString *notes, GError **error)
{
    guint slots = graph->steps->len + 1;
    gboolean nvme = plan->offload.states == OFFLOAD_NVME || plan->offload.params == OFFLOAD_NVME;
    offloader o = { graph, plan, rv_transform_add_channel(graph, "pcie.d2h"), rv_transform_add_channel(graph, "pcie.h2d"),
                    nvme ? rv_transform_add_channel(graph, "nvme") : -1, -1, -1, -1, g_new(int32_t, slots), 0, 0, 0, 0, 0, 0,
                    g_array_new(FALSE, FALSE, sizeof(int32_t)) };
    for (guint s = 0; s < slots; s++) o.step_optimizer[s] = -1;
    GPtrArray *layers = rv_weighted_layers_by_step(graph), *backward = rv_backward_gpu_tasks_by_step(graph);
    gboolean ok = TRUE;
    for (guint slot = 0; slot < slots && ok; slot++) {
        int64_t layer_bytes = 0;
        const GArray *step_layers = g_ptr_array_index(layers, slot);
        for (guint l = 0; l < step_layers->len; l++) layer_bytes += g_array_index(step_layers, rv_weighted_layer, l).weight_bytes;
        gboolean done = FALSE;
        ok = offload_step(&o, r, marks, slot, g_ptr_array_index(backward, slot), layer_bytes, &done, error);
    }
    if (ok && o.steps == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "nothing to offload: %s", o.sized == 0
                    ? "no step's gradients can be sized (no weight shapes: record_shapes=True; no data-parallel collectives)"
                    : "no step with gradients has GPU optimizer kernels launched from a CPU thread");
        ok = FALSE;
    }
    if (ok && plan->offload.params != OFFLOAD_NONE) ok = fetch_parameters(&o, r, error);
    if (ok) rv_transform_remove_many(graph, o.removed, RV_REMOVE_DROP_OVERHEAD);
    if (ok) describe_offload(&o, notes);
    if (ok) {
        int states = RV_SHARD_OPTIMIZER_STATE | RV_SHARD_GRADIENTS |
                     (plan->offload.params != OFFLOAD_NONE ? RV_SHARD_WEIGHTS : 0);
        rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_OFFLOAD, 0, states);
    }
    g_ptr_array_unref(layers);
    g_ptr_array_unref(backward);
    g_array_unref(o.removed);
    g_free(o.step_optimizer);
    return ok;
}

static offload_target offload_target_of(const char *name)
{
    return strcmp(name, "cpu") == 0 ? OFFLOAD_CPU : strcmp(name, "nvme") == 0 ? OFFLOAD_NVME : OFFLOAD_NONE;
}

/* The offload parameters; the PCIe figure from the catalogue unless given. */
static gboolean read_offload(rv_graph *graph, const rv_params *params, int stage, int world, offload_plan *plan,
                             GError **error)
{
    plan->states = offload_target_of(rv_params_string(params, "offload"));
    plan->params = offload_target_of(rv_params_string(params, "offload_params"));
    plan->pcie_Bps = rv_params_bandwidth(params, "pcie_bandwidth");
    plan->host_Bps = rv_params_bandwidth(params, "host_bandwidth");
    plan->nvme_Bps = rv_params_bandwidth(params, "nvme_bandwidth");
    plan->pcie_from_catalogue = FALSE;
    if (plan->params != OFFLOAD_NONE && (stage != 3 || plan->states == OFFLOAD_NONE || world < 2)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "offload_params needs stage=3 over 2 ranks or more (each layer's shard "
                    "comes before its all-gather) and offload= (the optimizer updates the parameters where they live)");
        return FALSE;
    }
    if (plan->states == OFFLOAD_NONE || rv_params_given(params, "pcie_bandwidth")) return TRUE;
    GError *unknown = NULL;
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(&unknown);
    const rv_gpu *gpu = catalogue ? rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu",
                                                    &unknown) : NULL;
    if (gpu && gpu->pcie_Bps > 0) {
        plan->pcie_Bps = gpu->pcie_Bps / 2;  /* the datasheet counts both directions */
        plan->pcie_from_catalogue = TRUE;
    }
    g_clear_error(&unknown);
    if (catalogue) rv_gpu_catalogue_free(catalogue);
    return TRUE;
}

/* ---- apply ------------------------------------------------------------------ */

static gboolean read_plan(rv_graph *graph, const rv_params *params, zero_plan *plan, GError **error)
{
    plan->stage = atoi(rv_params_string(params, "stage"));
    int64_t world = rv_params_integer(params, "world"), gpn = rv_params_integer(params, "gpus_per_node");
    if (world < 0 || world > 1000000 || gpn < 1 || gpn > 1000000) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 0 <= world <= 1000000 and gpus_per_node >= 1");
        return FALSE;
    }
    plan->world = world > 0 ? (int)world : rv_graph_world_size(graph);
    plan->gpus_per_node = (int)gpn;
    return rv_params_cluster_links(params, &plan->intra, &plan->inter, error) &&
           read_offload(graph, params, plan->stage, plan->world, &plan->offload, error);
}

static GArray *data_allreduces(rv_graph *graph)
{
    GArray *list = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
        if (rv_task_is_data_allreduce(graph, rv_graph_task(graph, id))) g_array_append_val(list, id);
    rv_tasks_sort_recorded(graph, list);
    return list;
}

static void describe_sharding(const rewriter *r, GString *notes)
{
    const zero_plan *plan = r->plan;
    guint slots = r->graph->steps->len + 1;
    int64_t total = 0, first = 0;
    for (guint s = 0; s < slots; s++) {
        total += r->step_bytes[s];
        if (first == 0) first = r->step_bytes[s];
    }
    char *rs = rv_format_bytes(total), *ag = rv_format_bytes(r->gathered_bytes);
    g_string_append_printf(notes, "    ZeRO-%d over %d ranks: %u all-reduces -> reduce-scatters (%s), %u "
                           "all-gathers inserted (%s): %s the bytes of plain data parallelism\n", plan->stage,
                           plan->world, r->reduce_scatters, rs, r->all_gathers, ag, plan->stage == 3 ? "1.5x" : "1x");
    g_free(rs); g_free(ag);
    if (plan->stage == 3)
        g_string_append_printf(notes, "    parameters gathered before the forward and the backward: layer "
                               "by layer in %u steps, whole in %u (no layer shapes)\n", r->layered_steps, r->whole_steps);
    if (r->solved_payloads)
        g_string_append_printf(notes, "    %u all-reduces have no recorded payload: solved from their recorded "
                               "time, which in a rank alone holds its wait for the others (an upper bound)\n",
                               r->solved_payloads);
    describe_memory(r->graph, plan, first, notes);
}

/* Shard over the data-parallel group (world > 1): all-reduces split, the
 * optimizer on 1/N unless it leaves the GPU, gathers inserted. */
static gboolean shard(rewriter *r, const rv_params *params, const GArray *allreduces, const step_marks *marks,
                      GString *notes, GError **error)
{
    const zero_plan *plan = r->plan;
    gboolean ok = (plan->offload.states != OFFLOAD_NONE || shard_optimizer(r->graph, params, plan->world, notes, error)) &&
                  split_allreduces(r, allreduces, marks, error) && (plan->stage < 3 || gather_parameters(r, marks, error));
    if (!ok) return FALSE;
    describe_sharding(r, notes);
    /* the memory model shards the states it counts (memory.h) */
    int shards = plan->stage == 1   ? RV_SHARD_OPTIMIZER_STATE
                 : plan->stage == 2 ? RV_SHARD_OPTIMIZER_STATE | RV_SHARD_GRADIENTS
                                    : RV_SHARD_OPTIMIZER_STATE | RV_SHARD_GRADIENTS | RV_SHARD_WEIGHTS;
    rv_memory_effect_add(r->graph, -1, RV_MEM_EFFECT_SHARD, 1.0 / plan->world, shards);
    return TRUE;
}

static gboolean zero_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    zero_plan plan;
    if (!read_plan(graph, params, &plan, error)) return FALSE;
    if (graph->ranks->len > 1) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "zero shards one rank's trace; this job has %u ranks - give it one rank's trace", graph->ranks->len);
        return FALSE;
    }
    gboolean offload = plan.offload.states != OFFLOAD_NONE;
    GArray *allreduces = data_allreduces(graph);
    if (allreduces->len == 0 && (plan.world > 1 || !offload)) {
        g_array_unref(allreduces);
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no data-parallel all-reduce to shard: record with DDP, or run ddp first%s",
                    offload ? " (or give world=1 to offload one GPU's states)" : "");
        return FALSE;
    }
    if (plan.world == 1 && !offload) {
        g_array_unref(allreduces);
        g_string_append(output->notes, "    world=1: nothing to shard over, graph unchanged\n");
        return TRUE;
    }
    step_marks *marks = mark_steps(graph);
    guint slots = graph->steps->len + 1;
    /* NCCL's all-gathers on a stream of their own on the all-reduces' GPU */
    gboolean sharded = plan.world > 1;
    int32_t stream = sharded ? rv_transform_add_comm_stream(graph, g_array_index(allreduces, int32_t, 0),
                                                            "nccl stream (zero all-gather)") : -1;
    rewriter r = { graph, &plan, stream >= 0 || !sharded ? stream : rv_transform_add_channel(graph, "zero all-gather"), -1,
                   g_new0(int64_t, slots), g_new0(int64_t, slots), g_new(int32_t, slots), 0, 0, 0, 0, 0, 0,
                   g_array_new(FALSE, FALSE, sizeof(int32_t)), g_new(int32_t, slots),
                   g_array_new(FALSE, FALSE, sizeof(int32_t)) };
    for (guint s = 0; s < slots; s++) r.step_last[s] = r.step_first_gather[s] = -1;
    gboolean ok = !sharded || shard(&r, params, allreduces, marks, output->notes, error);
    if (ok && offload) ok = offload_states(graph, &plan, &r, marks, output->notes, error);
    g_free(r.step_bytes);
    g_free(r.step_gather_ns);
    g_free(r.step_last);
    g_free(r.step_first_gather);
    g_array_unref(r.scattered);
    g_array_unref(r.parameter_gathers);
    g_free(marks);
    g_array_unref(allreduces);
    return ok;
}

/* The composition law (compose.h): data-parallel all-reduces become reduce-scatters and gathers; optimizer work
 * divided; model states sharded; offloaded, the optimizer's kernels and launches replaced by a host call and copies. */
static const rv_plugin_effects zero_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_OPTIMIZER | RV_ASPECT_STEPS | RV_ASPECT_CLUSTER |
             RV_ASPECT_WEIGHTS | RV_ASPECT_DATA_COMM | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_DATA_COMM | RV_ASPECT_OPTIMIZER,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_OPTIMIZER,
    .rewrites = RV_ASPECT_DATA_COMM | RV_ASPECT_WEIGHTS | RV_ASPECT_MEMORY | RV_ASPECT_OPTIMIZER | RV_ASPECT_HOST,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 40),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "zero",
    "ZeRO stage 1-3: optimizer state, gradients and parameters sharded over the data-parallel group, or offloaded to host memory or NVMe",
    zero_params, zero_apply, &zero_effects,
};
