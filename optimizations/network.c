/*
 * network.c - a faster (or slower) network: re-cost every communication
 * task of the trace.
 *
 *   reverie whatif ddp_rank1.json.gz --opt 'network:bandwidth_factor=2'
 *   reverie whatif ddp_rank1.json.gz --opt 'network:bandwidth_factor=0.5,fixed_latency=20us,added_latency=5us'
 *
 * Communication tasks are those of kind comm (NCCL kernels) and the
 * collectives other plugins inserted (ddp's all-reduces, zero's gathers:
 * tasks of a collective, graph.h), wherever they run; other transfers on
 * channels (vdnn's PCIe copies, dataloader's workers) are not the network's.
 * In a job of several ranks (job.h) a collective's time is its transfer,
 * after every participant arrived; the arrivals and the meeting point are
 * not communication and are left alone.  In one rank's trace alone a
 * kernel's recorded time also holds that rank's wait for the others, which
 * this scales too.
 * A recorded duration d is read as fixed_latency + a bandwidth part; the
 * trace does not say which bandwidth produced it, so the split is the
 * user's (default: all of it is bandwidth time).  The new duration is
 *
 *   min(d, fixed_latency) + (d - min(d, fixed_latency)) / bandwidth_factor + added_latency
 *
 * so bandwidth_factor=1 with no added latency reproduces the baseline.
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/checked.h"
#include "reverie/validate.h"
#include <math.h>

static const rv_param_spec network_params[] = {
    { "bandwidth_factor", RV_PARAM_NUMBER, "1", "x", "multiply the link bandwidth by this (2: twice as fast)", NULL },
    { "fixed_latency", RV_PARAM_DURATION, "0us", "ns", "part of each recorded collective that is latency, not bandwidth (0: all bandwidth, the optimistic bound)", NULL },
    { "added_latency", RV_PARAM_DURATION, "0us", "ns", "extra latency per collective (a longer path, a slower switch)", NULL },
    { NULL }
};

static gboolean network_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    double factor = rv_params_number(params, "bandwidth_factor");
    int64_t fixed = rv_params_duration_ns(params, "fixed_latency");
    int64_t added = rv_params_duration_ns(params, "added_latency");
    if (!(factor > 0)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "bandwidth_factor must be > 0, not %g", factor);
        return FALSE;
    }
    char *cause = g_strdup_printf("bandwidth_factor=%s, added_latency=%s", rv_params_string(params, "bandwidth_factor"),
                                  rv_params_string(params, "added_latency"));
    guint count = 0;
    int64_t before = 0, after = 0, bytes = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        rv_task *task = rv_graph_task(graph, id);
        if (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) continue;
        if (task->kind != RV_TASK_COMM && task->collective <= 0) continue;
        int64_t d = task->duration_ns, latency = MIN(d, fixed), now;
        /* In double: a tiny factor or a long added latency must be refused, not wrap. */
        if (!rv_task_duration_from(graph, id, (double)latency + (double)(d - latency) / factor + (double)added, cause,
                                   &now, error)) {
            g_free(cause);
            return FALSE;
        }
        /* The totals are only reported; payloads come from the trace. */
        before = rv_saturating_add(before, d);
        rv_transform_set_duration(graph, id, now);
        after = rv_saturating_add(after, task->duration_ns);
        bytes = rv_saturating_add(bytes, task->bytes);
        count++;
    }
    g_free(cause);
    if (count == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no communication tasks (no NCCL kernels, no collectives inserted by an earlier --opt) to re-cost");
        return FALSE;
    }
    char *b = rv_format_duration(before), *a = rv_format_duration(after);
    g_string_append_printf(output->notes, "    re-costed %u communication tasks: %s -> %s in all", count, b, a);
    if (bytes > 0) {
        char *size = rv_format_bytes(bytes);
        g_string_append_printf(output->notes, " (%s known payload)", size);
        g_free(size);
    }
    g_string_append_c(output->notes, '\n');
    g_free(b); g_free(a);
    return TRUE;
}

/* The composition law (compose.h): every collective re-priced from its duration (a latency part and a bandwidth
 * part: not a plain factor). */
static const rv_plugin_effects network_effects = {
    .reads = RV_ASPECT_COMM,
    .reads_time = RV_ASPECT_COMM,
    .scales = 0,
    .reprices = RV_ASPECT_COMM,
    .rewrites = 0,
    .order = RV_ORDER(RV_STAGE_CLUSTER, 20),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "network", "re-cost every collective / transfer for a faster or slower network",
    network_params, network_apply, &network_effects,
};
