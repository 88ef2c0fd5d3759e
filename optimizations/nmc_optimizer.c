/*
 * nmc_optimizer.c - the optimizer step in near-memory compute (Pati's
 * thesis, ch. 6: compute units beside the DRAM banks update the weights
 * where they are stored).
 *
 *   reverie whatif trace.json.gz --opt nmc-optimizer
 *   reverie whatif trace.json.gz --opt nmc-optimizer:bandwidth_factor=8
 *
 * An optimizer step reads and writes every parameter, gradient and state
 * once, with a handful of operations per element: it is bound by the
 * memory bandwidth the GPU gets through its memory interface.  Units inside
 * the memory see the banks' own bandwidth, several times more, and move
 * nothing across the interface.
 *
 * MODEL.  Each memory-bound GPU kernel of the optimizer phase (elementwise,
 * reductions, norms, copies: Adam, LAMB, SGD with momentum, their foreach
 * and fused forms) runs on the GPU's memory-side compute instead: a
 * resource of its own per GPU ("near-memory compute"), off the GPU's
 * streams, so the sharing and contention rules (contention.h) no longer
 * count it against the GPU's bandwidth.  Its time keeps the kernel's fixed
 * cost (the trace's shortest kernels, costmodel.h: issue and completion)
 * and its variable time scales by the ratio of the bandwidths:
 *     t' = fixed + (t - fixed) x B_gpu / B_internal,
 * the unit reaching the same share of its bandwidth as the kernel reached
 * of the GPU's.  A run of such kernels on a stream moves as one, waiting
 * for what came before it there, and what came after waits for it
 * (transform.h's move); their launch calls stay (the host issues the
 * commands).  Matmul and unknown kernels of the optimizer stay on the GPU.
 *
 * B_internal: bandwidth_factor x the GPU's memory bandwidth (catalogue;
 * the notes give the figure).  The default 4x is the all-bank bandwidth HBM
 * processing-in-memory reports over the external interface (Samsung's
 * HBM-PIM: 4x, Lee et al., ISCA 2021); the thesis's 3.8x on the optimizer
 * phase is what such a ratio gives once fixed costs count.  A unit no
 * faster than the GPU (factor 1) gains nothing: the graph is left as it
 * was; a slower one is refused.
 */
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec nmc_params[] = {
    { "bandwidth_factor", RV_PARAM_NUMBER, "4", "x",
      "the memory-side units' internal bandwidth, as a multiple of the GPU's memory bandwidth (catalogue; HBM-PIM's "
      "all-bank mode: 4x; 1: no faster, graph unchanged)", NULL },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows",
      NULL },
    { NULL }
};

/* A kernel the memory-side units take: memory-bound work of the optimizer. */
static gboolean moves(const rv_graph *graph, const rv_cost_model *model, int32_t t)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
    if (task->phase != RV_PHASE_OPTIMIZER || task->kind != RV_TASK_KERNEL || !(task->flags & RV_TASK_FLAG_GPU) ||
        (task->flags & RV_TASK_FLAG_REMOVED) || task->collective != 0)
        return FALSE;
    const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
    return cost && !rv_cost_class_is_matmul((rv_cost_class)cost->cls) && cost->cls != RV_COST_UNKNOWN &&
           cost->cls != RV_COST_COMM && cost->cls != RV_COST_HOST_COPY;
}

/* The memory-side compute of the GPU that runs `like`: a channel per
 * rank and device, in that rank. */
static int32_t memory_side_of(rv_graph *graph, int32_t like)
{
    const rv_resource *res = &g_array_index(graph->resources, rv_resource, rv_graph_task(graph, like)->resource);
    int32_t rank = res->rank_index;
    char *name = g_strdup_printf("rank %d gpu %" G_GINT64_FORMAT " near-memory compute", rank, res->process);
    int32_t channel = rv_transform_add_channel(graph, name);
    g_free(name);
    g_array_index(graph->resources, rv_resource, channel).rank_index = rank;
    return channel;
}

typedef struct {
    guint moved, kept, runs;
    int64_t before_ns, after_ns;
} nmc_tally;

/* Re-cost the run's kernels and move it onto the memory side. */
static gboolean move_run(rv_graph *graph, const GArray *run, double ratio, int64_t fixed, GHashTable *tails,
                         nmc_tally *tally, GError **error)
{
    int32_t first = g_array_index(run, int32_t, 0), last = g_array_index(run, int32_t, run->len - 1);
    for (guint i = 0; i < run->len; i++) {
        int32_t t = g_array_index(run, int32_t, i);
        int64_t ns = rv_graph_task(graph, t)->duration_ns;
        double planned = ns > fixed ? (double)fixed + (double)(ns - fixed) * ratio : (double)ns;
        int64_t after;
        if (!rv_task_duration_from(graph, t, planned, "the nmc-optimizer bandwidth", &after, error)) return FALSE;
        tally->before_ns += ns;
        tally->after_ns += after;
        rv_transform_set_duration(graph, t, after);
    }
    int32_t channel = memory_side_of(graph, first);
    gpointer tail = g_hash_table_lookup(tails, GINT_TO_POINTER(channel + 1));
    if (!rv_transform_move_run(graph, first, last, channel, tail ? GPOINTER_TO_INT(tail) - 1 : -1, -1, -1, error))
        return FALSE;
    g_hash_table_insert(tails, GINT_TO_POINTER(channel + 1), GINT_TO_POINTER(last + 1));
    tally->moved += run->len;
    tally->runs++;
    return TRUE;
}

/* Every GPU stream's runs of optimizer kernels the memory side takes, in
 * stream order, each moved as one. */
static gboolean move_optimizer(rv_graph *graph, const rv_cost_model *model, double ratio, nmc_tally *tally,
                               GError **error)
{
    GArray *kernels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = rv_graph_task(graph, t);
        if (task->phase == RV_PHASE_OPTIMIZER && task->kind == RV_TASK_KERNEL && !(task->flags & RV_TASK_FLAG_REMOVED))
            g_array_append_val(kernels, t);
    }
    rv_tasks_sort_recorded(graph, kernels);
    GHashTable *tails = g_hash_table_new(g_direct_hash, g_direct_equal);
    GHashTable *taken = g_hash_table_new(g_direct_hash, g_direct_equal);
    GArray *run = g_array_new(FALSE, FALSE, sizeof(int32_t));
    gboolean ok = TRUE;
    int64_t fixed = rv_cost_model_fixed_ns(model);
    for (guint i = 0; i < kernels->len && ok; i++) {
        int32_t t = g_array_index(kernels, int32_t, i);
        if (g_hash_table_contains(taken, GINT_TO_POINTER(t + 1))) continue;
        if (!moves(graph, model, t)) {
            tally->kept++;
            continue;
        }
        /* the run that starts here: the following tasks on its stream the memory side takes */
        g_array_set_size(run, 0);
        for (int32_t k = t; k >= 0 && moves(graph, model, k); k = rv_graph_resource_next(graph, k)) {
            g_array_append_val(run, k);
            g_hash_table_add(taken, GINT_TO_POINTER(k + 1));
        }
        ok = move_run(graph, run, ratio, fixed, tails, tally, error);
    }
    g_array_unref(run);
    g_hash_table_destroy(taken);
    g_hash_table_destroy(tails);
    g_array_unref(kernels);
    return ok;
}

/* B_internal / B_gpu from the parameters; FALSE with a usage error. */
static gboolean bandwidth_ratio(const rv_params *params, const rv_gpu *gpu, double *factor, GError **error)
{
    *factor = rv_params_number(params, "bandwidth_factor");
    if (!(*factor >= 1) || !(*factor <= 1e6)) {
        char *gpu_bw = rv_format_bandwidth(gpu->memory_Bps);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "the memory-side bandwidth must be at least the GPU's (%s on %s) "
                    "and at most 10^6 times it: a slower unit would not be used (bandwidth_factor=%g)", gpu_bw, gpu->id,
                    *factor);
        g_free(gpu_bw);
        return FALSE;
    }
    return TRUE;
}

static void describe(const nmc_tally *tally, const rv_gpu *gpu, double factor, GString *notes)
{
    char *internal = rv_format_bandwidth(gpu->memory_Bps * factor), *own = rv_format_bandwidth(gpu->memory_Bps);
    char *before = rv_format_duration(tally->before_ns), *after = rv_format_duration(tally->after_ns);
    g_string_append_printf(notes, "    near-memory compute at %s (%.3gx %s's %s): %u optimizer kernels in %u runs moved off "
                           "the GPU, %s -> %s (%.2fx)", internal, factor, gpu->id, own, tally->moved, tally->runs, before,
                           after, tally->after_ns > 0 ? (double)tally->before_ns / (double)tally->after_ns : 0.0);
    if (tally->kept) g_string_append_printf(notes, "; %u kept on the GPU (matmul or unknown class)", tally->kept);
    g_string_append(notes, "\n");
    g_free(internal); g_free(own); g_free(before); g_free(after);
}

static gboolean nmc_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", error);
    double factor = 1;
    gboolean ok = gpu != NULL && bandwidth_ratio(params, gpu, &factor, error);
    rv_cost_model *model = ok ? rv_cost_model_new(graph, gpu, TRUE) : NULL;
    nmc_tally tally = { 0, 0, 0, 0, 0 };
    if (ok) {
        for (int32_t t = 0; t < rv_graph_task_count(graph); t++) tally.moved += moves(graph, model, t);
        if (tally.moved == 0) {
            g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no memory-bound GPU kernel in an optimizer phase "
                        "(Optimizer.step launching elementwise work): nothing to run in memory");
            ok = FALSE;
        }
        tally.moved = 0;
    }
    if (ok && factor == 1) {
        g_string_append(output->notes, "    memory-side units as fast as the GPU: nothing to gain, graph unchanged\n");
    } else if (ok) {
        ok = move_optimizer(graph, model, 1.0 / factor, &tally, error);
        if (ok) describe(&tally, gpu, factor, output->notes);
    }
    rv_cost_model_free(model);
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

/* The composition law (compose.h): the optimizer's kernels re-priced from their own time and moved off the GPU's
 * streams; a device what-if, after the GPU itself. */
static const rv_plugin_effects nmc_effects = {
    .reads = RV_ASPECT_OPTIMIZER | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_OPTIMIZER,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_OPTIMIZER,
    .order = RV_ORDER(RV_STAGE_DEVICE, 20),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "nmc-optimizer",
    "the optimizer's memory-bound kernels in near-memory compute: off the GPU, at the memory's internal bandwidth",
    nmc_params, nmc_apply, &nmc_effects,
};
