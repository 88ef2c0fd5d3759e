/*
 * info.c - `reverie info`: what a trace or saved graph holds - tasks by kind
 * and phase, resources, edges by type, steps, what the importer skipped, and
 * the timing model's estimates: the clock offset, each stream's launch
 * latency, idle gap and launch-queue depth, which rule resolved how many
 * waits, and how much recorded time the rules leave unexplained.
 */
#include "cli.h"
#include "reverie/explain.h"
#include "reverie/job.h"
#include "reverie/comm.h"
#include "reverie/report.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

typedef struct {
    uint64_t by_kind_phase[RV_TASK_KIND_COUNT][RV_PHASE_COUNT];
    uint64_t by_kind[RV_TASK_KIND_COUNT];
    uint64_t by_phase[RV_PHASE_COUNT];
    uint64_t edges_by_kind[RV_EDGE_KIND_COUNT];
    uint64_t *tasks_per_resource;
    uint64_t live_tasks;
} graph_counts;

static void count_graph(const rv_graph *graph, graph_counts *counts)
{
    memset(counts, 0, sizeof *counts);
    counts->tasks_per_resource = g_new0(uint64_t, graph->resources->len);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        counts->by_kind_phase[task->kind][task->phase]++;
        counts->by_kind[task->kind]++;
        counts->by_phase[task->phase]++;
        counts->tasks_per_resource[task->resource]++;
        counts->live_tasks++;
    }
    for (guint e = 0; e < graph->edges->len; e++)
        counts->edges_by_kind[g_array_index(graph->edges, rv_edge, e).kind]++;
}

static void print_tasks(const graph_counts *counts)
{
    printf("tasks: %" G_GUINT64_FORMAT "\n  %-10s", counts->live_tasks, "kind");
    for (int p = 0; p < RV_PHASE_COUNT; p++) printf(" %10s", rv_phase_name(p));
    printf(" %10s\n", "total");
    for (int k = 0; k < RV_TASK_KIND_COUNT; k++) {
        if (counts->by_kind[k] == 0) continue;
        printf("  %-10s", rv_task_kind_name(k));
        for (int p = 0; p < RV_PHASE_COUNT; p++) printf(" %10" G_GUINT64_FORMAT, counts->by_kind_phase[k][p]);
        printf(" %10" G_GUINT64_FORMAT "\n", counts->by_kind[k]);
    }
}

static void print_resources(const rv_graph *graph, const graph_counts *counts)
{
    printf("resources: %u\n", graph->resources->len);
    for (guint r = 0; r < graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        printf("  %-32s %-10s %10" G_GUINT64_FORMAT " tasks", rv_cli_shown(rv_strings_get(graph->strings, resource->name)),
               rv_resource_kind_name(resource->kind), counts->tasks_per_resource[r]);
        if (resource->kind == RV_RES_GPU_STREAM)
            printf("   launch latency %.3f us, idle gap %.3f us, queue %d", resource->launch_latency_ns / 1e3,
                   resource->idle_gap_ns / 1e3, resource->queue_depth);
        printf("\n");
    }
}

static void print_edges_and_steps(const rv_graph *graph, const graph_counts *counts)
{
    printf("edges: %u\n", graph->edges->len);
    for (int k = 0; k < RV_EDGE_KIND_COUNT; k++)
        if (counts->edges_by_kind[k]) printf("  %-14s %10" G_GUINT64_FORMAT "\n", rv_edge_kind_name(k), counts->edges_by_kind[k]);
    printf("steps: %u%s\n", graph->steps->len, graph->whole_trace_step ? " (no ProfilerStep annotations: the whole trace is one step)" : "");
    GArray *windows = rv_step_windows(graph, NULL);
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        const rv_window *window = &g_array_index(windows, rv_window, s);
        int32_t rank = rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task, step->begin_marker));
        if (rv_cli_is_job(graph) && rank >= 0)
            printf("  rank %-4" G_GINT64_FORMAT " %-20s recorded %12.3f ms\n", g_array_index(graph->ranks, rv_rank, rank).rank,
                   rv_cli_shown(rv_strings_get(graph->strings, step->name)), (window->end_ns - window->begin_ns) / 1e6);
        else
            printf("  %-20s recorded %12.3f ms\n", rv_cli_shown(rv_strings_get(graph->strings, step->name)),
                   (window->end_ns - window->begin_ns) / 1e6);
    }
    g_array_unref(windows);
}

/* What the trace says about its collectives (a job: also how they were matched). */
static void print_collectives(const rv_graph *graph)
{
    if (rv_cli_is_job(graph)) {
        rv_cli_print_job_summary(graph);
        return;
    }
    if (graph->collectives->len == 0) return;
    uint64_t by_parallelism[RV_PARALLEL_COUNT] = { 0 }, sized = 0;
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        by_parallelism[info->parallelism]++;
        sized += info->bytes > 0;
    }
    printf("collectives: %u NCCL kernels (%" G_GUINT64_FORMAT " with a known payload), by parallelism:",
           graph->collectives->len, sized);
    for (int p = 0; p < RV_PARALLEL_COUNT; p++)
        if (by_parallelism[p]) printf(" %s %" G_GUINT64_FORMAT, rv_parallelism_name(p), by_parallelism[p]);
    GArray *waits = rv_peer_waits_by_step(graph);
    int64_t waited = 0;
    for (guint s = 0; s < waits->len; s++) waited += g_array_index(waits, int64_t, s);
    g_array_unref(waits);
    uint64_t split = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        split += task->kind == RV_TASK_SYNC && (task->flags & RV_TASK_FLAG_RENDEZVOUS) && !(task->flags & RV_TASK_FLAG_REMOVED);
    }
    if (graph->world_size == 1 || (split == 0 && graph->world_size <= 0))
        printf("; one process: no peers to wait for\n");
    else
        printf("\n  one rank alone: %" G_GUINT64_FORMAT " kernels split into a wait for the peers (%.3f ms recorded, kept "
               "as it was) and a transfer (their collective's fastest recorded instance); the other %" G_GUINT64_FORMAT
               " are all transfer (payload unknown, recorded once, or never faster)\n",
               split, waited / 1e6, (uint64_t)graph->collectives->len - split);
}

static void print_skipped(const rv_graph *graph)
{
    const rv_trace_stats *t = &graph->trace_stats;
    const rv_build_stats *b = &graph->build_stats;
    printf("import: %" G_GUINT64_FORMAT " events, %" G_GUINT64_FORMAT " used, %.1f MB of JSON%s\n",
           t->events_total, t->events_used, t->bytes_uncompressed / 1e6, graph->legacy_schema ? " (2021 legacy schema)" : "");
    printf("skipped: %" G_GUINT64_FORMAT " without duration, %" G_GUINT64_FORMAT " without phase, %"
           G_GUINT64_FORMAT " of unused categories (%" G_GUINT64_FORMAT " of device backends not modelled), %"
           G_GUINT64_FORMAT " metadata/instant, %" G_GUINT64_FORMAT " GPU-side annotations\n", t->skipped_no_duration,
           t->skipped_no_ph, t->ignored_category, t->unmodelled_backend, t->ignored_phase, t->gpu_annotations);
    printf("build: %" G_GUINT64_FORMAT " nested runtime calls merged, %" G_GUINT64_FORMAT
           " GPU tasks without a launch, %" G_GUINT64_FORMAT " overlapping GPU tasks, %" G_GUINT64_FORMAT
           " edges the recording contradicts dropped\n",
           b->nested_runtime_calls, b->unmatched_gpu_tasks, b->overlapping_gpu_tasks, b->dropped_edges);
    printf("waits: %" G_GUINT64_FORMAT " blocking calls split: %" G_GUINT64_FORMAT " by cuda_sync records, %"
           G_GUINT64_FORMAT " by the API's semantics (%" G_GUINT64_FORMAT " device, %" G_GUINT64_FORMAT " stream, %"
           G_GUINT64_FORMAT " event synchronize, %" G_GUINT64_FORMAT " blocking copies, %" G_GUINT64_FORMAT
           " staged copies), %" G_GUINT64_FORMAT " by time window (fallback)\n",
           b->blocking_calls_split, b->sync_events_used, b->syncs_by_api, b->syncs_device, b->syncs_stream,
           b->syncs_event, b->syncs_copy, b->syncs_staged_copy, b->implicit_waits);
    printf("       stream waits: %" G_GUINT64_FORMAT " by cuda_sync records, %" G_GUINT64_FORMAT " from launch order, %"
           G_GUINT64_FORMAT " unresolved; %" G_GUINT64_FORMAT " launches blocked by a full queue; %" G_GUINT64_FORMAT
           " inter-thread waits inferred\n", b->waits_by_cuda_sync, b->waits_by_call_order, b->waits_unresolved,
           b->queue_blocked_launches, b->inter_thread_inferred);
}

/* "measured: median of 163, IQR 0.5 us" and the like: where a value comes
 * from, for the text report (unit_ns: 1e3 for us, 0 for a count). */
static char *evidence_text(const rv_estimate *e, double unit_ns, const char *unit)
{
    switch ((rv_estimate_source)e->source) {
    case RV_SOURCE_MEASURED:
        if (unit_ns > 0)
            return g_strdup_printf("measured: median of %" G_GUINT64_FORMAT ", IQR %.3f %s", e->samples,
                                   e->spread / unit_ns, unit);
        return g_strdup_printf("measured: %" G_GUINT64_FORMAT " samples agree", e->samples);
    case RV_SOURCE_TRACE_WIDE:
        return g_strdup_printf("the trace's value: %" G_GUINT64_FORMAT " samples of its own", e->samples);
    case RV_SOURCE_PRIOR:
        return g_strdup_printf("prior: %" G_GUINT64_FORMAT " samples are too few", e->samples);
    case RV_SOURCE_BOUND:
        return g_strdup("bound by what the trace shows");
    case RV_SOURCE_NONE:
    default:
        return g_strdup("not estimated");
    }
}

static void print_estimate(const char *label, const rv_estimate *e)
{
    char *why = evidence_text(e, 1e3, "us");
    printf("%s %.3f us (%s)", label, e->value / 1e3, why);
    g_free(why);
}

static void print_queue(const rv_timing *t)
{
    if (t->queue_depth.source == RV_SOURCE_MEASURED)
        printf("launch queue %" G_GINT64_FORMAT " launches (measured: %" G_GUINT64_FORMAT " long launch calls agree)",
               t->queue_depth.value, t->queue_depth.samples);
    else if (t->queue_depth.source == RV_SOURCE_BOUND)
        printf("launch queue unbounded (bound: %" G_GUINT64_FORMAT " launches in flight on one stream without a call "
               "blocking, more than the driver's usual depth)", t->queue_unblocked_in_flight);
    else if (t->queue_depth.value == 0)
        printf("launch queue unbounded (prior: ROCm queues launches in software; %" G_GUINT64_FORMAT
               " long launch calls, %" G_GUINT64_FORMAT " launches at most seen in flight)",
               t->queue_depth.samples, t->queue_unblocked_in_flight);
    else
        printf("launch queue %" G_GINT64_FORMAT " launches (prior: CUDA's driver; %" G_GUINT64_FORMAT
               " long launch calls do not agree on a depth)", t->queue_depth.value, t->queue_depth.samples);
}

/* The profiler's own share of the host time: a bound, with what it rests on. */
static void print_profiler_cost(const rv_graph *graph)
{
    const rv_timing *t = &graph->timing;
    if (t->profiler_op_cost.source != RV_SOURCE_BOUND) {
        printf("        profiler overhead not bounded (%" G_GUINT64_FORMAT " gaps between sibling operators, too few)\n",
               t->profiler_op_cost.samples);
        return;
    }
    printf("        profiler overhead at most %.3f us per operator (10th percentile of %" G_GUINT64_FORMAT
           " gaps between sibling operators, IQR %.3f us): %" G_GUINT64_FORMAT " operators, at most %.3f ms of the "
           "host time (whatif --opt unprofiled takes it out)\n",
           t->profiler_op_cost.value / 1e3, t->profiler_op_cost.samples, t->profiler_op_cost.spread / 1e3,
           t->profiled_operators, rv_graph_profiler_overhead_ns(graph) / 1e6);
}

static void print_timing(const rv_graph *graph)
{
    const rv_timing *t = &graph->timing;
    printf("timing: clock offset %+.3f ms (%s; %" G_GUINT64_FORMAT " launch and %" G_GUINT64_FORMAT
           " blocking-call pairs, %" G_GUINT64_FORMAT " contradict it; equally good from %+.3f to %+.3f ms)\n",
           t->clock_offset.value / 1e6, rv_clock_status_name(t->clock_status), t->offset_launch_pairs,
           t->offset_sync_pairs, t->offset_contradicted, t->offset_low_ns == G_MININT64 ? -INFINITY : t->offset_low_ns / 1e6,
           t->offset_high_ns == G_MAXINT64 ? INFINITY : t->offset_high_ns / 1e6);
    print_estimate("        launch latency", &t->launch_latency);
    print_estimate(", idle gap", &t->idle_gap);
    printf("\n        ");
    print_queue(t);
    print_estimate(", blocking calls return", &t->sync_return);
    printf(" after what they waited for\n");
    rv_explanation *x = rv_explain(graph, 0);
    printf("        unexplained GPU wait %.3f ms (%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
           " GPU tasks over 2 us late; see simulate --explain)\n", x->total_ns / 1e6, x->late_tasks,
           x->gpu_tasks);
    printf("        unexplained CPU wait %.3f ms (blocking calls returning later than what they waited for)\n",
           x->cpu_total_ns / 1e6);
    printf("        suspect host time %.3f ms in %" G_GUINT64_FORMAT " gaps ending just after a GPU task (%.0f expected "
           "by chance)\n", x->suspect_host_ns / 1e6, x->suspect_host_gaps, x->suspect_by_chance);
    rv_explanation_free(x);
    print_profiler_cost(graph);
}

static void print_text(const rv_graph *graph, const graph_counts *counts)
{
    printf("source: %s\n", graph->source);
    printf("devices: %u", graph->device_names->len);
    if (graph->device_names->len) printf(" (%s)", rv_cli_shown(g_ptr_array_index(graph->device_names, 0)));
    /* -1 means the trace did not record it (no distributedInfo): say so, not "rank -1 of -1" */
    if (rv_cli_is_job(graph)) printf("\ndistributed: %u ranks of %" G_GINT64_FORMAT " in one graph", graph->ranks->len, graph->world_size);
    else if (graph->rank < 0) printf("\ndistributed: not recorded (no distributedInfo: one process)");
    else if (graph->world_size < 0) printf("\ndistributed: rank %" G_GINT64_FORMAT " (world size not recorded)", graph->rank);
    else printf("\ndistributed: rank %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT, graph->rank, graph->world_size);
    printf("%s%s\n", graph->backend ? ", backend " : "", graph->backend ? rv_cli_shown(graph->backend) : "");
    print_tasks(counts);
    print_resources(graph, counts);
    print_edges_and_steps(graph, counts);
    print_collectives(graph);
    print_skipped(graph);
    print_timing(graph);
}

static json_t *json_counts(const char *(*name_of)(int), const uint64_t *values, int count)
{
    json_t *object = json_object();
    for (int i = 0; i < count; i++)
        if (values[i]) json_object_set_new(object, name_of(i), json_integer((json_int_t)values[i]));
    return object;
}

static const char *task_kind_name_int(int k) { return rv_task_kind_name(k); }
static const char *phase_name_int(int p) { return rv_phase_name(p); }
static const char *edge_kind_name_int(int k) { return rv_edge_kind_name(k); }

/* {"value": .., "unit": .., "source": .., "samples": .., "spread": ..} */
static json_t *json_estimate(const rv_estimate *e, double unit_ns, const char *unit)
{
    double scale = unit_ns > 0 ? unit_ns : 1;
    return json_pack("{s:f,s:s,s:s,s:I,s:f}", "value", e->value / scale, "unit", unit, "source",
                     rv_estimate_source_name(e->source), "samples", (json_int_t)e->samples, "spread", e->spread / scale);
}

static json_t *json_timing(const rv_graph *graph)
{
    const rv_timing *t = &graph->timing;
    rv_explanation *x = rv_explain(graph, 0);
    json_t *estimates = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "clock_offset", json_estimate(&t->clock_offset, 1e3, "us"),
                                  "launch_latency", json_estimate(&t->launch_latency, 1e3, "us"), "idle_gap",
                                  json_estimate(&t->idle_gap, 1e3, "us"), "queue_depth",
                                  json_estimate(&t->queue_depth, 0, "launches (0: unbounded)"), "sync_return",
                                  json_estimate(&t->sync_return, 1e3, "us"), "profiler_op_cost",
                                  json_estimate(&t->profiler_op_cost, 1e3, "us per operator, between sibling operators (not its cost inside them)"));
    json_t *timing = json_pack("{s:f,s:s,s:o,s:o,s:I,s:I,s:I,s:f,s:f,s:I,s:b,s:I,s:f,s:f,s:I,s:f,s:o}",
                               "clock_offset_us", t->clock_offset.value / 1e3,
                               "clock_status", rv_clock_status_name(t->clock_status),
                               "offset_low_us", t->offset_low_ns == G_MININT64 ? json_null() : json_real(t->offset_low_ns / 1e3),
                               "offset_high_us", t->offset_high_ns == G_MAXINT64 ? json_null() : json_real(t->offset_high_ns / 1e3),
                               "offset_launch_pairs", (json_int_t)t->offset_launch_pairs,
                               "offset_sync_pairs", (json_int_t)t->offset_sync_pairs,
                               "offset_contradicted", (json_int_t)t->offset_contradicted,
                               "launch_latency_us", t->launch_latency.value / 1e3, "idle_gap_us", t->idle_gap.value / 1e3,
                               "queue_depth", (json_int_t)t->queue_depth.value,
                               "queue_measured", t->queue_depth.source == RV_SOURCE_MEASURED,
                               "queue_unblocked_in_flight", (json_int_t)t->queue_unblocked_in_flight,
                               "unexplained_us", x->total_ns / 1e3, "unexplained_cpu_us", x->cpu_total_ns / 1e3,
                               "profiled_operators", (json_int_t)t->profiled_operators,
                               "profiler_overhead_bound_us", rv_graph_profiler_overhead_ns(graph) / 1e3,
                               "estimates", estimates);
    rv_explanation_free(x);
    return timing;
}

static json_t *json_build(const rv_build_stats *b)
{
    json_t *by_api = json_pack("{s:I,s:I,s:I,s:I,s:I}", "device", (json_int_t)b->syncs_device, "stream",
                               (json_int_t)b->syncs_stream, "event", (json_int_t)b->syncs_event, "copy",
                               (json_int_t)b->syncs_copy, "staged_copy", (json_int_t)b->syncs_staged_copy);
    return json_pack("{s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "syncs_by_api_rule", by_api,
                     "stream_waits_by_cuda_sync", (json_int_t)b->waits_by_cuda_sync,
                     "nested_runtime_calls", (json_int_t)b->nested_runtime_calls,
                     "gpu_tasks_without_launch", (json_int_t)b->unmatched_gpu_tasks,
                     "blocking_calls_split", (json_int_t)b->blocking_calls_split,
                     "dropped_edges", (json_int_t)b->dropped_edges,
                     "overlapping_gpu_tasks", (json_int_t)b->overlapping_gpu_tasks,
                     "inter_thread_waits", (json_int_t)b->inter_thread_inferred,
                     "syncs_by_cuda_sync", (json_int_t)b->sync_events_used,
                     "syncs_by_api", (json_int_t)b->syncs_by_api,
                     "stream_waits_by_call_order", (json_int_t)b->waits_by_call_order,
                     "stream_waits_unresolved", (json_int_t)b->waits_unresolved,
                     "queue_blocked_launches", (json_int_t)b->queue_blocked_launches,
                     "syncs_by_time_window", (json_int_t)b->implicit_waits);
}

static void print_json(const rv_graph *graph, const graph_counts *counts, gboolean as_csv)
{
    json_t *root = json_object();
    json_object_set_new(root, "source", json_string(graph->source));
    json_object_set_new(root, "tasks", json_integer((json_int_t)counts->live_tasks));
    json_object_set_new(root, "tasks_by_kind", json_counts(task_kind_name_int, counts->by_kind, RV_TASK_KIND_COUNT));
    json_object_set_new(root, "tasks_by_phase", json_counts(phase_name_int, counts->by_phase, RV_PHASE_COUNT));
    json_object_set_new(root, "edges", json_integer(graph->edges->len));
    json_object_set_new(root, "edges_by_kind", json_counts(edge_kind_name_int, counts->edges_by_kind, RV_EDGE_KIND_COUNT));
    json_t *resources = json_array();
    for (guint r = 0; r < graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        json_array_append_new(resources, json_pack("{s:s,s:s,s:I}", "name", rv_strings_get(graph->strings, resource->name),
                                                   "kind", rv_resource_kind_name(resource->kind),
                                                   "tasks", (json_int_t)counts->tasks_per_resource[r]));
    }
    json_object_set_new(root, "resources", resources);
    json_t *steps = json_array();
    GArray *windows = rv_step_windows(graph, NULL);
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        const rv_window *window = &g_array_index(windows, rv_window, s);
        json_t *item = json_pack("{s:s,s:f}", "name", rv_strings_get(graph->strings, step->name), "recorded_us",
                                 (window->end_ns - window->begin_ns) / 1e3);
        int32_t rank = rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task, step->begin_marker));
        if (rv_cli_is_job(graph) && rank >= 0)
            json_object_set_new(item, "rank", json_integer((json_int_t)g_array_index(graph->ranks, rv_rank, rank).rank));
        json_array_append_new(steps, item);
    }
    g_array_unref(windows);
    json_object_set_new(root, "steps", steps);
    if (rv_cli_is_job(graph)) json_object_set_new(root, "job", rv_cli_json_job_summary(graph));
    json_object_set_new(root, "timing", json_timing(graph));
    json_object_set_new(root, "build", json_build(&graph->build_stats));
    const rv_trace_stats *t = &graph->trace_stats;
    json_object_set_new(root, "skipped", json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "events_total", (json_int_t)t->events_total,
                        "no_duration", (json_int_t)t->skipped_no_duration, "no_phase", (json_int_t)t->skipped_no_ph,
                        "unused_category", (json_int_t)t->ignored_category,
                        "unmodelled_backend", (json_int_t)t->unmodelled_backend,
                        "metadata_or_instant", (json_int_t)t->ignored_phase,
                        "gpu_annotations", (json_int_t)t->gpu_annotations));
    if (as_csv) rv_cli_print_json_as_csv(root);
    else rv_cli_print_json(root);
}

int rv_cmd_info(int argc, char **argv)
{
    gboolean as_json = FALSE, as_csv = FALSE;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &as_csv, "print the JSON's fields as CSV rows: field,value", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH|FOLDER... - what the dependency graph holds");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "Tasks by kind and phase, resources (each GPU stream with its launch latency, idle gap\n"
        "and launch-queue depth), edges by kind, steps, what the import skipped, how many waits\n"
        "each rule resolved, the CPU/GPU clock offset, and the recorded time the timing rules\n"
        "do not explain. Several traces, or a folder, are the ranks of one job: also each rank's\n"
        "clock offset and how many collectives were matched across ranks, and by which rule.\n\n"
        "Example:\n  reverie info traces/hta_resnet50_v100.json.gz\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc < 2) { status = rv_cli_usage("info", "give a trace or graph, or several (the ranks of one job)"); goto out; }
    if (as_json && as_csv) { status = rv_cli_usage("info", "give --json or --csv, not both"); goto out; }
    GError *error = NULL;
    rv_graph *graph = rv_cli_load_job(argv + 1, argc - 1, FALSE, &error);
    if (graph == NULL) { status = rv_cli_fail(error); goto out; }
    graph_counts counts;
    count_graph(graph, &counts);
    if (as_json || as_csv) print_json(graph, &counts, as_csv);
    else print_text(graph, &counts);
    g_free(counts.tasks_per_resource);
    rv_graph_free(graph);
out:
    g_option_context_free(context);
    return status;
}
