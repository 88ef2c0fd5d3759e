/*
 * world_size.c - reuse one recording for another GPU count: every
 * collective re-costed for its new group size with the communication model
 * (recost.h, comm.h).
 *
 *   reverie whatif traces/param_dlrm_v100_8ranks --opt world-size:world=64
 *   reverie whatif job/ --opt 'world-size:world=128,bandwidth=400Gbps,algorithm=hierarchical'
 *
 * Weak scaling, as data-parallel jobs grow: each rank keeps its batch, so
 * its buffers keep their size, and every group that spanned the recorded
 * world (data parallel, the default group, an embedding or expert
 * all-to-all across all ranks) spans the new one.  Smaller groups (tensor
 * or pipeline parallel, point-to-point pairs) keep their size.  The ranks
 * the recording does not have behave like the ones it has (rank r + k*W
 * like rank r), so the job's step is still the slowest recorded rank's,
 * now with collectives that cost what `world` ranks on
 * ceil(world / gpus_per_node) nodes cost.  The recording is taken to have
 * run on the same kind of nodes and links.
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
    { "gpus_per_node", RV_PARAM_INTEGER, "8", "GPUs", "GPUs sharing the intra-node link", NULL },
    { "bandwidth", RV_PARAM_BANDWIDTH, "100Gbps", "B/s", "inter-node link bandwidth per GPU and direction (IB EDR)", NULL },
    { "latency", RV_PARAM_DURATION, "5us", "ns", "inter-node per-message latency", NULL },
    { "intra_bandwidth", RV_PARAM_BANDWIDTH, "150GB/s", "B/s", "intra-node bandwidth (NVLink V100: 6 links x 25 GB/s)", NULL },
    { "intra_latency", RV_PARAM_DURATION, "2us", "ns", "intra-node per-message latency", NULL },
    { "algorithm", RV_PARAM_CHOICE, "recorded", NULL,
      "all-reduce algorithm at the new size: as recorded (ring or tree, from the kernel), or another",
      "recorded|ring|tree|hierarchical" },
    { "efficiency", RV_PARAM_NUMBER, "1", "x", "bandwidth derating in (0,1]", NULL },
    { "parallelism", RV_PARAM_CHOICE, "all", NULL, "which collectives grow with the world: all, or one kind",
      "all|data|expert|unknown" },
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

static gboolean plan_from_params(const rv_params *params, rv_recost_plan *plan, GError **error)
{
    int64_t world = rv_params_integer(params, "world"), gpn = rv_params_integer(params, "gpus_per_node");
    double efficiency = rv_params_number(params, "efficiency");
    if (world < 1 || world > (1 << 24) || gpn < 1 || gpn > 4096 || !(efficiency > 0 && efficiency <= 1)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 1 <= world <= 16777216, 1 <= gpus_per_node <= 4096 and "
                    "0 < efficiency <= 1");
        return FALSE;
    }
    plan->world = (int)world;
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

static void describe(GString *notes, const rv_graph *graph, const rv_recost_plan *plan, const rv_recost_summary *summary)
{
    rv_cluster after = rv_cluster_for_ranks(plan->world, plan->gpus_per_node, &plan->intra, &plan->inter);
    char *inter = rv_format_bandwidth(plan->inter.bandwidth_Bps), *intra = rv_format_bandwidth(plan->intra.bandwidth_Bps);
    char *before = rv_format_duration(summary->before_ns), *now = rv_format_duration(summary->after_ns);
    g_string_append_printf(notes, "    world %d -> %d ranks (%d nodes x %d GPUs, inter %s, intra %s); re-costed %u "
                           "collectives (%u transfers): %s -> %s\n", summary->recorded_world, plan->world, after.nodes,
                           after.gpus_per_node, inter, intra, summary->collectives, summary->tasks, before, now);
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

static gboolean world_size_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    rv_recost_plan plan;
    if (!plan_from_params(params, &plan, error)) return FALSE;
    rv_recost_summary summary;
    char *cause = g_strdup_printf("world=%d and the links", plan.world);
    gboolean ok = rv_graph_recost_collectives(graph, &plan, cause, &summary, error);
    g_free(cause);
    if (!ok) return FALSE;
    if (summary.collectives == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no collective to re-cost (no NCCL kernel of a kind the model costs%s)",
                    strcmp(rv_params_string(params, "parallelism"), "all") ? " in that parallelism" : "");
        return FALSE;
    }
    describe(output->notes, graph, &plan, &summary);
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
    "another GPU count: every collective re-costed for its new group size (ring, tree, hierarchical)",
    world_size_params, world_size_apply, &world_size_effects,
};
