/*
 * world_size.c - reuse one recording for another GPU count: every
 * collective re-costed for its new group size with the communication model
 * (recost.h, comm.h).
 *
 *   reverie whatif traces/param_dlrm_v100_8ranks --opt world-size:world=64
 *   reverie whatif job/ --opt 'world-size:world=128,bandwidth=400Gbps,algorithm=hierarchical'
 *
 * Weak scaling, as data-parallel jobs grow: each rank keeps its batch, so
 * its buffers keep their size.  The world is data x tensor x pipeline
 * ranks; the recorded degrees come from the collectives' groups
 * (recost.h: rv_graph_parallel_sizes; a process group with any
 * tensor-parallel collective is tensor parallel).  Unless told otherwise
 * only the data-parallel degree changes: data' = world / (tensor' x
 * pipeline'), where tensor' and pipeline' are the recorded degrees, or
 * tensor= and pipeline= when given.  The data-parallel groups (every
 * group that is neither tensor nor pipeline parallel: gradients'
 * all-reduces, the default group, an embedding or expert all-to-all
 * across the data-parallel ranks) take data' ranks; tensor-parallel groups
 * take tensor' ranks (their payload, the activations, keeps its size);
 * point-to-point pipeline transfers keep their cost.  The ranks the
 * recording does not have behave like the ones it has (rank r + k*W
 * like rank r), so the job's step is still the slowest recorded rank's,
 * now with collectives that cost what their groups cost on
 * ceil(group / gpus_per_node) nodes.  The recording is taken to have run
 * on the same kind of nodes and links.  tensor= re-prices the
 * tensor-parallel collectives only: the share of each GEMM a rank
 * computes is tp-allreduce's question.
 *
 * In a job of several ranks each collective's transfer (the part after the
 * rendezvous) is re-costed; in one rank's trace alone, the whole kernel,
 * whose recorded time also holds that rank's wait for the others.
 */
#include "reverie/plugin.h"
#include "reverie/comm.h"
#include "reverie/error.h"
#include "reverie/recost.h"
#include "reverie/units.h"
#include <string.h>

static const rv_param_spec world_size_params[] = {
    { "world", RV_PARAM_INTEGER, NULL, "GPUs", "the new number of ranks (required)", NULL },
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "GPUs sharing the intra-node link (an 8-GPU DGX/HGX node)", NULL },
    { "bandwidth", RV_PARAM_BANDWIDTH, "100Gbps", "B/s", "inter-node link bandwidth per GPU and direction (IB EDR)", NULL },
    { "latency", RV_PARAM_DURATION, "5us", "ns", "inter-node per-message latency (the ib-edr link preset: NCCL's per-step cost over InfiniBand, a few us)", NULL },
    { "intra_bandwidth", RV_PARAM_BANDWIDTH, "150GB/s", "B/s", "intra-node bandwidth (NVLink V100: 6 links x 25 GB/s)", NULL },
    { "intra_latency", RV_PARAM_DURATION, "2us", "ns", "intra-node per-message latency (the nvlink-v100 link preset: NCCL's per-step cost over NVLink)", NULL },
    { "algorithm", RV_PARAM_CHOICE, "recorded", NULL,
      "all-reduce algorithm at the new size: as recorded (ring or tree, from the kernel), or another",
      "recorded|ring|tree|hierarchical" },
    { "efficiency", RV_PARAM_NUMBER, "1", "x", "bandwidth derating in (0,1]", NULL },
    { "tensor", RV_PARAM_INTEGER, "0", "GPUs", "the new tensor-parallel degree (0: as recorded)", NULL },
    { "pipeline", RV_PARAM_INTEGER, "0", "stages", "the new pipeline-parallel degree (0: as recorded)", NULL },
    { "parallelism", RV_PARAM_CHOICE, "all", NULL, "which collectives are re-priced: all, or one kind",
      "all|data|tensor|expert|unknown" },
    { NULL }
};

static int all_reduce_algorithm(const char *name)
{
    if (strcmp(name, "ring") == 0) return RV_COLL_ALLREDUCE_RING;
    if (strcmp(name, "tree") == 0) return RV_COLL_ALLREDUCE_TREE;
    if (strcmp(name, "hierarchical") == 0) return RV_COLL_ALLREDUCE_HIER;
    return -1;
}

static uint32_t parallelism_mask(const char *name)
{
    if (strcmp(name, "all") == 0) return ~0u;
    int parallelism = rv_parallelism_from_name(name);
    return parallelism >= 0 ? 1u << parallelism : 0;
}

/* The recorded degrees and the new ones: data' = world / (tensor' x pipeline'). */
typedef struct {
    int data, tensor, pipeline;   /* recorded */
    int new_data, new_tensor, new_pipeline;
} degrees;

static gboolean plan_degrees(const rv_graph *graph, const rv_params *params, int64_t world, degrees *d, GError **error)
{
    rv_graph_parallel_sizes(graph, &d->data, &d->tensor);
    d->pipeline = MAX(1, rv_graph_world_size(graph) / (d->data * d->tensor));
    int64_t tensor = rv_params_integer(params, "tensor"), pipeline = rv_params_integer(params, "pipeline");
    if (tensor < 0 || tensor > (1 << 24) || pipeline < 0 || pipeline > (1 << 24)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 0 <= tensor, pipeline <= 16777216 (0: as recorded)");
        return FALSE;
    }
    d->new_tensor = tensor > 0 ? (int)tensor : d->tensor;
    d->new_pipeline = pipeline > 0 ? (int)pipeline : d->pipeline;
    int64_t model = (int64_t)d->new_tensor * d->new_pipeline;
    if (world % model != 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "world=%" G_GINT64_FORMAT " is not a whole number of model replicas of tensor %d x pipeline %d GPUs "
                    "(%s); give world as a multiple of %" G_GINT64_FORMAT ", or tensor= and pipeline=", world,
                    d->new_tensor, d->new_pipeline, tensor > 0 || pipeline > 0 ? "as given" : "as recorded", model);
        return FALSE;
    }
    d->new_data = (int)(world / model);
    return TRUE;
}

static gboolean plan_from_params(const rv_graph *graph, const rv_params *params, rv_recost_plan *plan, degrees *d,
                                 GError **error)
{
    int64_t world = rv_params_integer(params, "world"), gpn = rv_params_integer(params, "gpus_per_node");
    double efficiency = rv_params_number(params, "efficiency");
    if (world < 1 || world > (1 << 24) || gpn < 1 || gpn > 4096 || !(efficiency > 0 && efficiency <= 1)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 1 <= world <= 16777216, 1 <= gpus_per_node <= 4096 and "
                    "0 < efficiency <= 1");
        return FALSE;
    }
    if (!plan_degrees(graph, params, world, d, error)) return FALSE;
    plan->world = d->new_data;
    plan->tensor = rv_params_integer(params, "tensor") > 0 ? d->new_tensor : 0;
    plan->gpus_per_node = (int)gpn;
    plan->inter = rv_link_make(rv_params_bandwidth(params, "bandwidth"), rv_params_duration_ns(params, "latency"),
                               efficiency);
    plan->intra = rv_link_make(rv_params_bandwidth(params, "intra_bandwidth"),
                               rv_params_duration_ns(params, "intra_latency"), efficiency);
    plan->all_reduce = all_reduce_algorithm(rv_params_string(params, "algorithm"));
    plan->parallelism = parallelism_mask(rv_params_string(params, "parallelism"));
    plan->payload_divisor = 1;
    GError *link_error = NULL;
    if (rv_link_check(&plan->inter, &link_error) && rv_link_check(&plan->intra, &link_error)) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s", link_error->message);
    g_error_free(link_error);
    return FALSE;
}

static void describe(GString *notes, const rv_graph *graph, const rv_recost_plan *plan, const degrees *d,
                     const rv_recost_summary *summary)
{
    char *inter = rv_format_bandwidth(plan->inter.bandwidth_Bps), *intra = rv_format_bandwidth(plan->intra.bandwidth_Bps);
    char *before = rv_format_duration(summary->before_ns), *now = rv_format_duration(summary->after_ns);
    g_string_append_printf(notes, "    world %d -> %" G_GINT64_FORMAT " ranks: data parallel %d -> %d, tensor parallel %d -> %d, pipeline "
                           "%d -> %d (inter %s, intra %s, %d GPUs a node)\n", summary->recorded_world, graph->world_size,
                           d->data, d->new_data, d->tensor, d->new_tensor, d->pipeline, d->new_pipeline, inter, intra,
                           plan->gpus_per_node);
    if (summary->collectives > 0)
        g_string_append_printf(notes, "    re-costed %u collectives (%u transfers): %s -> %s\n", summary->collectives,
                               summary->tasks, before, now);
    else
        g_string_append(notes, "    no collective of a group that changes size: the step keeps its time\n");
    if (summary->inferred_payloads)
        g_string_append_printf(notes, "    %u collectives have no recorded payload: solved from their recorded time on "
                               "the recorded world's links%s\n", summary->inferred_payloads,
                               graph->ranks->len > 1 ? "" : " (a rank alone: that time also holds its wait for the "
                                                            "others, so the payload is an upper bound)");
    if (summary->unknown_operation)
        g_string_append_printf(notes, "    %u collectives the model cannot cost (unknown operation) kept their time\n",
                               summary->unknown_operation);
    g_free(inter); g_free(intra); g_free(before); g_free(now);
}

/* Collectives of the kinds selected, live (whatever their group). */
static guint selected_collectives(const rv_graph *graph, uint32_t mask)
{
    guint count = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        const rv_collective_info *info = rv_task_collective(graph, task);
        if (info && !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) &&
            info->op != RV_COLLECTIVE_OP_UNKNOWN && (mask & (1u << info->parallelism)))
            count++;
    }
    return count;
}

static gboolean world_size_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    rv_recost_plan plan;
    degrees d;
    if (!plan_from_params(graph, params, &plan, &d, error)) return FALSE;
    if (selected_collectives(graph, plan.parallelism) == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no collective to re-cost (no NCCL kernel of a kind the model costs%s)",
                    strcmp(rv_params_string(params, "parallelism"), "all") ? " in that parallelism" : "");
        return FALSE;
    }
    rv_recost_summary summary;
    char *cause = g_strdup_printf("world=%" G_GINT64_FORMAT " and the links", rv_params_integer(params, "world"));
    gboolean ok = rv_graph_recost_collectives(graph, &plan, cause, &summary, error);
    g_free(cause);
    if (!ok) return FALSE;
    graph->world_size = rv_params_integer(params, "world");
    describe(output->notes, graph, &plan, &d, &summary);
    return TRUE;
}

/* The composition law (compose.h): collectives re-priced for their new group sizes. */
static const rv_plugin_effects world_size_effects = {
    .reads = RV_ASPECT_COMM | RV_ASPECT_CLUSTER,
    .reads_time = RV_ASPECT_COMM,
    .scales = 0,
    .reprices = RV_ASPECT_COMM,
    .rewrites = RV_ASPECT_CLUSTER,
    .order = RV_ORDER(RV_STAGE_CLUSTER, 10),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "world-size",
    "another GPU count: the data-parallel groups (and tensor= / pipeline= if given) re-costed for their new size",
    world_size_params, world_size_apply, &world_size_effects,
};
