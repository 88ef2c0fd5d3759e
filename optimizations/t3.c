/*
 * t3.c - T3 (Pati et al., "T3: Transparent Tracking & Triggering for
 * Fine-grained Overlap of Compute & Collectives", ASPLOS 2024; the T3
 * chapter of the Pati thesis): a tensor-parallel GEMM fused with the
 * reduce-scatter of the all-reduce that follows it.
 *
 *   reverie whatif trace.json.gz --opt tp-allreduce:degree=8 --opt t3
 *   reverie whatif trace.json.gz --opt tp-allreduce:degree=8 --opt t3:variant=mca
 *
 * T3 configures the GEMM's output buffer so that a tracker sees each tile
 * as it is written and triggers a DMA of it to the next GPU of the ring,
 * where near-memory compute adds it in place: the reduce-scatter runs
 * during the GEMM on DMA engines, with no compute units and no separate
 * reduction kernel.  The all-gather half of the all-reduce still follows.
 *
 * THE MODEL, per tensor-parallel all-reduce whose input a GEMM kernel
 * produced (its stream or data predecessor, costmodel.h's gemm class): the
 * ring all-reduce is a reduce-scatter and an all-gather of equal length, A
 * = fixed + RS + AG.  The GEMM becomes the fused GEMM + reduce-scatter,
 *
 *   fused = fixed + pipeline(GEMM - fixed, RS, tiles, (p-1)/p, contention)
 *
 * (overlap.h; tiles of slice_bytes of the all-reduce's payload, a 128x128
 * fp16 tile by default), and the all-reduce becomes its all-gather, fixed +
 * AG.  Contention: the DMA transfers and the GEMM share memory bandwidth.
 * T3 slows the GEMM by compute_slowdown (1.11, contention.h's default: no
 * T3 figure is at hand) and the transfers by comm_slowdown (1.34);
 * variant=mca adds T3's memory-controller arbitration, which gives the
 * GEMM's traffic priority: the GEMM keeps its speed, the transfers take the
 * slowdown.  variant=none changes nothing.
 *
 * A sub-layer is the GEMM and its all-reduce; the notes give their
 * speedups (before / after), as T3 reports them.
 */
#include "reverie/plugin.h"
#include "reverie/comm.h"
#include "reverie/contention.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/overlap.h"
#include "reverie/recost.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <math.h>
#include <string.h>

static const rv_param_spec t3_params[] = {
    { "variant", RV_PARAM_CHOICE, "t3", NULL,
      "t3: track and trigger with near-memory reduction; mca: plus memory-controller arbitration; none: baseline",
      "t3|mca|none" },
    { "slice_bytes", RV_PARAM_BYTES, "32KiB", "bytes", "output tracked per trigger (a 128x128 fp16 GEMM tile)", NULL },
    { "comm_slowdown", RV_PARAM_NUMBER, "1.34", "x", "the transfers' time factor while the GEMM runs", NULL },
    { "compute_slowdown", RV_PARAM_NUMBER, "1.11", "x", "the GEMM's time factor while transfers run (not with mca; as contention: NCCL holds ~8 of 80 SMs on a V100)",
      NULL },
    { NULL }
};

typedef struct {
    int32_t *first, *from;   /* predecessors in compressed rows */
    int64_t fixed_ns, slice_bytes;
    double comm_slowdown, compute_slowdown;
    guint allreduces, fused, no_gemm, no_payload, not_faster;
    double log_speedup_sum, max_speedup;
    int64_t before_ns, after_ns;
} t3_state;

static const char *name_of(const rv_graph *graph, int32_t id) { return id > 0 ? rv_strings_get(graph->strings, id) : ""; }

static void index_predecessors(const rv_graph *graph, t3_state *state)
{
    rv_predecessor_rows(graph, &state->first, &state->from);
}

/* The GEMM kernel whose output the all-reduce (or its arrival) waited
 * for: a live GPU predecessor of the gemm class, the latest recorded. */
static int32_t gemm_before(rv_graph *graph, const t3_state *state, int32_t entry)
{
    int32_t best = -1;
    for (int32_t i = state->first[entry]; i < state->first[entry + 1]; i++) {
        int32_t from = state->from[i];
        const rv_task *task = rv_graph_task(graph, from);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_KERNEL) continue;
        if (rv_cost_classify_name(name_of(graph, task->name), name_of(graph, task->op), RV_TASK_KERNEL) != RV_COST_GEMM)
            continue;
        if (best < 0 || rv_graph_task(graph, best)->recorded_start_ns < task->recorded_start_ns) best = from;
    }
    return best;
}

/* On a job the transfer follows its arrival: the task that entered the collective. */
static int32_t entry_of(rv_graph *graph, const t3_state *state, int32_t transfer)
{
    const rv_task *task = rv_graph_task(graph, transfer);
    const rv_collective_info *info = rv_task_collective(graph, task);
    for (int32_t i = state->first[transfer]; info && info->rendezvous >= 0 && i < state->first[transfer + 1]; i++) {
        const rv_task *before = rv_graph_task(graph, state->from[i]);
        if ((before->flags & RV_TASK_FLAG_RENDEZVOUS) && before->collective == task->collective &&
            state->from[i] != info->rendezvous)
            return state->from[i];
    }
    return transfer;
}

/* Fuse one GEMM with its all-reduce's reduce-scatter. */
static gboolean fuse(rv_graph *graph, t3_state *state, int32_t gemm, int32_t allreduce, GError **error)
{
    rv_task *ar = rv_graph_task(graph, allreduce);
    const rv_collective_info *info = rv_task_collective(graph, ar);
    int ranks = info->group_size > 0 ? info->group_size : rv_graph_world_size(graph);
    int64_t bytes = info->bytes > 0 ? info->bytes : ar->bytes;
    if (bytes <= 0) { state->no_payload++; return TRUE; }
    double fixed = (double)state->fixed_ns;
    double gemm_ns = (double)rv_graph_task(graph, gemm)->duration_ns, ar_ns = (double)ar->duration_ns;
    double half = MAX(0.0, ar_ns - fixed) / 2; /* reduce-scatter = all-gather */
    rv_overlap model = { MAX(0.0, gemm_ns - fixed), half, 0, fixed, 0,
                         MIN((bytes + state->slice_bytes - 1) / state->slice_bytes, RV_OVERLAP_MAX_SLICES),
                         ranks > 1 ? (double)(ranks - 1) / ranks : 0, state->comm_slowdown, state->compute_slowdown };
    double fused = rv_overlap_time_ns(&model), gather = fixed + half;
    if (fused + gather >= gemm_ns + ar_ns) { state->not_faster++; return TRUE; }
    int64_t fused_ns, gather_ns;
    if (!rv_task_duration_from(graph, gemm, fused, "the t3 parameters", &fused_ns, error) ||
        !rv_task_duration_from(graph, allreduce, gather, "the t3 parameters", &gather_ns, error))
        return FALSE;
    double speedup = (gemm_ns + ar_ns) / (double)(fused_ns + gather_ns);
    state->log_speedup_sum += log(speedup);
    state->max_speedup = MAX(state->max_speedup, speedup);
    state->before_ns += (int64_t)(gemm_ns + ar_ns);
    state->after_ns += fused_ns + gather_ns;
    rv_transform_set_duration(graph, gemm, fused_ns);
    rv_transform_set_duration(graph, allreduce, gather_ns);
    char *gemm_name = g_strdup_printf("T3 GEMM + reduce-scatter: %s", name_of(graph, rv_graph_task(graph, gemm)->name));
    rv_graph_task(graph, gemm)->name = rv_strings_intern(graph->strings, gemm_name);
    g_free(gemm_name);
    ar->name = rv_strings_intern(graph->strings, "all-gather (the all-reduce's half after T3's reduce-scatter)");
    state->fused++;
    return TRUE;
}

static gboolean is_tensor_allreduce(const rv_graph *graph, const rv_task *task)
{
    const rv_collective_info *info = rv_task_collective(graph, task);
    return info && task->kind == RV_TASK_COMM && !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) &&
           info->parallelism == RV_PARALLEL_TENSOR &&
           (info->op == RV_COLL_ALLREDUCE_RING || info->op == RV_COLL_ALLREDUCE_TREE);
}

static void write_notes(const t3_state *state, const char *variant, GString *notes)
{
    char *before = rv_format_duration(state->before_ns), *after = rv_format_duration(state->after_ns);
    g_string_append_printf(notes, "    %s: fused %u of %u tensor-parallel all-reduces' reduce-scatters with the GEMM "
                           "before them; their all-gathers follow\n", variant, state->fused, state->allreduces);
    g_string_append_printf(notes, "    sub-layers (GEMM + all-reduce): %s -> %s, speedup %.2fx geomean (max %.2fx)\n",
                           before, after, exp(state->log_speedup_sum / state->fused), state->max_speedup);
    if (state->no_gemm)
        g_string_append_printf(notes, "    left alone: %u all-reduces whose input no GEMM kernel produced\n", state->no_gemm);
    if (state->no_payload)
        g_string_append_printf(notes, "    left alone: %u all-reduces of unknown payload (no tiles to track)\n",
                               state->no_payload);
    if (state->not_faster)
        g_string_append_printf(notes, "    left alone: %u all-reduces that fused would not be faster\n", state->not_faster);
    g_free(before);
    g_free(after);
}

static gboolean t3_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    const char *variant = rv_params_string(params, "variant");
    t3_state state = { 0 };
    state.slice_bytes = rv_params_bytes(params, "slice_bytes");
    state.comm_slowdown = rv_params_number(params, "comm_slowdown");
    state.compute_slowdown = strcmp(variant, "mca") == 0 ? 1.0 : rv_params_number(params, "compute_slowdown");
    if (!rv_contention_check(state.comm_slowdown, rv_params_number(params, "compute_slowdown"), error)) return FALSE;
    if (state.slice_bytes < 1) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "slice_bytes must be at least 1 byte");
        return FALSE;
    }
    if (strcmp(variant, "none") == 0) {
        g_string_append(output->notes, "    variant=none: nothing fused, graph unchanged\n");
        return TRUE;
    }
    index_predecessors(graph, &state);
    state.fixed_ns = rv_overlap_kernel_fixed_ns(graph);
    gboolean ok = TRUE;
    for (int32_t t = 0; ok && t < rv_graph_task_count(graph); t++) {
        if (!is_tensor_allreduce(graph, rv_graph_task(graph, t))) continue;
        state.allreduces++;
        int32_t gemm = gemm_before(graph, &state, entry_of(graph, &state, t));
        if (gemm < 0) state.no_gemm++;
        else ok = fuse(graph, &state, gemm, t, error);
    }
    if (ok && state.allreduces == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no tensor-parallel all-reduce: give a trace that has them, "
                    "or insert them first with --opt tp-allreduce");
        ok = FALSE;
    } else if (ok && state.fused == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "none of the %u tensor-parallel all-reduces can be fused: %u follow "
                    "no GEMM kernel, %u have no known payload, %u would not be faster", state.allreduces,
                    state.no_gemm, state.no_payload, state.not_faster);
        ok = FALSE;
    }
    if (ok) write_notes(&state, strcmp(variant, "mca") == 0 ? "T3-MCA" : "T3", output->notes);
    g_free(state.first);
    g_free(state.from);
    return ok;
}

/* The composition law (compose.h): GEMMs fused with the reduce-scatter of their tensor-parallel all-reduce. */
static const rv_plugin_effects t3_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_TENSOR_COMM,
    .reads_time = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_TENSOR_COMM,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_TENSOR_COMM,
    .order = RV_ORDER(RV_STAGE_PARALLEL, 90),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "t3",
    "tensor-parallel GEMM fused with its all-reduce's reduce-scatter by tracking and triggering (T3, Pati et al.)",
    t3_params, t3_apply, &t3_effects,
};
