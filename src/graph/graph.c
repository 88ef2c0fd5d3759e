/*
 * graph.c - the rv_graph container: creation, growth and names of kinds.
 * The acyclicity check is in cycles.c.
 */
#include "reverie/graph.h"
#include "reverie/compose.h"
#include "index.h"
#include <string.h>
#include <math.h>

static const char *const task_kind_names[RV_TASK_KIND_COUNT] = {
    "cpu", "kernel", "memcpy", "memset", "sync", "comm", "dataload", "marker",
};
static const char *const phase_names[RV_PHASE_COUNT] = {
    "forward", "backward", "optimizer", "dataload", "other",
};
static const char *const edge_kind_names[RV_EDGE_KIND_COUNT] = {
    "thread", "stream", "launch", "sync", "cross_stream", "inter_thread", "comm", "plugin",
};
static const char *const resource_kind_names[RV_RES_KIND_COUNT] = {
    "cpu_thread", "gpu_stream", "channel",
};
static const char *const clock_status_names[RV_CLOCK_STATUS_COUNT] = {
    "no evidence", "consistent", "corrected", "inconsistent",
};
static const char *const estimate_source_names[RV_SOURCE_COUNT] = {
    "none", "measured", "trace-wide", "prior", "bound",
};
static const char *const parallelism_names[RV_PARALLEL_COUNT] = {
    "unknown", "data", "tensor", "pipeline", "expert",
};
static const char *const match_rule_names[RV_MATCH_COUNT] = {
    "unmatched", "process group and sequence number", "order in its process group", "send/receive pairs",
};

const char *rv_task_kind_name(rv_task_kind kind)
{
    return kind < RV_TASK_KIND_COUNT ? task_kind_names[kind] : "?";
}
const char *rv_phase_name(rv_phase phase) { return phase < RV_PHASE_COUNT ? phase_names[phase] : "?"; }
const char *rv_edge_kind_name(rv_edge_kind kind)
{
    return kind < RV_EDGE_KIND_COUNT ? edge_kind_names[kind] : "?";
}
const char *rv_resource_kind_name(rv_resource_kind kind)
{
    return kind < RV_RES_KIND_COUNT ? resource_kind_names[kind] : "?";
}

static int find_name(const char *const *names, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}
const char *rv_clock_status_name(rv_clock_status status)
{
    return status < RV_CLOCK_STATUS_COUNT ? clock_status_names[status] : "?";
}

const char *rv_estimate_source_name(rv_estimate_source source)
{
    return source < RV_SOURCE_COUNT ? estimate_source_names[source] : "?";
}

const char *rv_parallelism_name(rv_parallelism parallelism)
{
    return parallelism < RV_PARALLEL_COUNT ? parallelism_names[parallelism] : "?";
}
const char *rv_match_rule_name(rv_match_rule rule) { return rule < RV_MATCH_COUNT ? match_rule_names[rule] : "?"; }
int rv_parallelism_from_name(const char *name) { return find_name(parallelism_names, RV_PARALLEL_COUNT, name); }

int rv_task_kind_from_name(const char *name) { return find_name(task_kind_names, RV_TASK_KIND_COUNT, name); }
int rv_phase_from_name(const char *name) { return find_name(phase_names, RV_PHASE_COUNT, name); }

rv_graph *rv_graph_new(rv_strings *strings, const char *source)
{
    rv_graph *graph = g_new0(rv_graph, 1);
    graph->source = g_strdup(source ? source : "");
    graph->strings = strings ? rv_strings_ref(strings) : rv_strings_new();
    graph->resources = g_array_new(FALSE, FALSE, sizeof(rv_resource));
    graph->tasks = g_array_new(FALSE, FALSE, sizeof(rv_task));
    graph->edges = g_array_new(FALSE, FALSE, sizeof(rv_edge));
    graph->steps = g_array_new(FALSE, FALSE, sizeof(rv_step));
    graph->device_names = g_ptr_array_new_with_free_func(g_free);
    graph->rank = graph->world_size = -1;
    graph->collectives = g_array_new(FALSE, FALSE, sizeof(rv_collective_info));
    graph->ranks = g_array_new(FALSE, FALSE, sizeof(rv_rank));
    graph->memory = g_array_new(FALSE, FALSE, sizeof(rv_memory_record));
    graph->memory_effects = g_array_new(FALSE, FALSE, sizeof(rv_memory_effect));
    graph->launches = g_array_new(FALSE, TRUE, sizeof(rv_launch));
    graph->duration_ranges = g_array_new(FALSE, FALSE, sizeof(rv_duration_range));
    graph->applied = g_array_new(FALSE, FALSE, sizeof(rv_applied_plugin));
    graph->host_operators = g_array_new(FALSE, TRUE, sizeof(uint32_t));
    graph->kernel_demands = g_array_new(FALSE, FALSE, sizeof(rv_kernel_demand));
    graph->op_args = g_array_new(FALSE, TRUE, sizeof(int32_t));
    return graph;
}

void rv_graph_free(rv_graph *graph)
{
    if (graph == NULL) return;
    g_free(graph->source);
    rv_strings_free(graph->strings);
    g_array_unref(graph->resources);
    g_array_unref(graph->tasks);
    g_array_unref(graph->edges);
    g_array_unref(graph->steps);
    g_ptr_array_free(graph->device_names, TRUE);
    g_free(graph->backend);
    rv_graph_index_free(graph->index);
    g_array_unref(graph->collectives);
    g_array_unref(graph->ranks);
    g_array_unref(graph->memory);
    g_array_unref(graph->memory_effects);
    g_array_unref(graph->launches);
    g_array_unref(graph->duration_ranges);
    g_array_unref(graph->applied);
    g_array_unref(graph->host_operators);
    g_array_unref(graph->kernel_demands);
    g_array_unref(graph->op_args);
    g_free(graph);
}

int32_t rv_graph_live_task_count(const rv_graph *graph)
{
    int32_t live = 0;
    for (guint id = 0; id < graph->tasks->len; id++)
        if (!(g_array_index(graph->tasks, rv_task, id).flags & RV_TASK_FLAG_REMOVED)) live++;
    return live;
}

static void assign_array(GArray *target, const GArray *source)
{
    g_array_set_size(target, 0);
    g_array_append_vals(target, source->data, source->len);
}

void rv_graph_copy_metadata(rv_graph *target, const rv_graph *source)
{
    g_ptr_array_set_size(target->device_names, 0);
    for (guint d = 0; d < source->device_names->len; d++)
        g_ptr_array_add(target->device_names, g_strdup(g_ptr_array_index(source->device_names, d)));
    target->rank = source->rank;
    target->world_size = source->world_size;
    g_free(target->backend);
    target->backend = g_strdup(source->backend);
    target->legacy_schema = source->legacy_schema;
    target->whole_trace_step = source->whole_trace_step;
    target->trace_stats = source->trace_stats;
    target->build_stats = source->build_stats;
    target->timing = source->timing;
}

void rv_graph_assign(rv_graph *target, const rv_graph *source)
{
    if (target == source) return;
    if (target->strings != source->strings) {
        rv_strings_free(target->strings);
        target->strings = rv_strings_ref(source->strings);
    }
    g_free(target->source);
    target->source = g_strdup(source->source);
    assign_array(target->resources, source->resources);
    assign_array(target->tasks, source->tasks);
    assign_array(target->edges, source->edges);
    assign_array(target->steps, source->steps);
    rv_graph_copy_metadata(target, source);
    assign_array(target->collectives, source->collectives);
    assign_array(target->ranks, source->ranks);
    target->contention = source->contention;
    assign_array(target->memory, source->memory);
    assign_array(target->memory_effects, source->memory_effects);
    assign_array(target->launches, source->launches);
    assign_array(target->duration_ranges, source->duration_ranges);
    assign_array(target->applied, source->applied);
    assign_array(target->host_operators, source->host_operators);
    target->sharing = source->sharing;
    assign_array(target->kernel_demands, source->kernel_demands);
    assign_array(target->op_args, source->op_args);
    /* same arrays, new contents: the index must not trust what it saw; the
     * order the source remembers holds for the copy (cycles.c compares) */
    rv_graph_index_reset(target);
    rv_graph_index_share_witness(target, source);
}

void rv_task_set_op_args(rv_graph *graph, int32_t task, int32_t op_args)
{
    if (task < 0 || (op_args == 0 && (guint)task >= graph->op_args->len)) return;
    if ((guint)task >= graph->op_args->len) g_array_set_size(graph->op_args, (guint)task + 1); /* zeroed */
    g_array_index(graph->op_args, int32_t, task) = op_args;
}

int64_t rv_task_profiler_overhead_ns(const rv_graph *graph, int32_t task)
{
    const rv_estimate *cost = &graph->timing.profiler_op_cost;
    if (cost->source != RV_SOURCE_BOUND || cost->value <= 0) return 0;
    uint32_t operators = rv_task_host_operators(graph, task);
    if (operators == 0) return 0;
    int64_t overhead = g_array_index(graph->tasks, rv_task, task).host_overhead_ns;
    /* in double: a forged count times a forged cost must not wrap */
    return (int64_t)MIN((double)overhead, (double)operators * (double)cost->value);
}

int64_t rv_profiler_op_cost_ns(const rv_graph *graph, double whole_cost)
{
    const rv_estimate *bound = &graph->timing.profiler_op_cost;
    if (bound->source != RV_SOURCE_BOUND) return -1;
    return llround((double)bound->value * whole_cost);
}

int64_t rv_graph_profiler_overhead_ns(const rv_graph *graph)
{
    int64_t total = 0;
    for (guint t = 0; t < graph->host_operators->len && t < graph->tasks->len; t++)
        if (!(g_array_index(graph->tasks, rv_task, t).flags & RV_TASK_FLAG_REMOVED))
            total += rv_task_profiler_overhead_ns(graph, (int32_t)t);
    return total;
}

rv_graph *rv_graph_copy(const rv_graph *graph)
{
    rv_graph *copy = rv_graph_new(graph->strings, graph->source);
    rv_graph_assign(copy, graph);
    return copy;
}

int32_t rv_graph_add_resource(rv_graph *graph, rv_resource_kind kind, int64_t process,
                              int64_t thread, const char *name)
{
    /* Timing values start at zero (no latency, no gap, no launch queue
     * limit); the builder sets a trace's own on its GPU streams. */
    rv_resource resource = { 0 };
    resource.process = process;
    resource.thread = thread;
    resource.name = rv_strings_intern(graph->strings, name);
    resource.kind = (uint8_t)kind;
    g_array_append_val(graph->resources, resource);
    return (int32_t)graph->resources->len - 1;
}

int32_t rv_graph_add_task(rv_graph *graph, const rv_task *task)
{
    g_array_append_val(graph->tasks, *task);
    return (int32_t)graph->tasks->len - 1;
}

int32_t rv_graph_add_collective(rv_graph *graph, const rv_collective_info *info)
{
    g_array_append_val(graph->collectives, *info);
    return (int32_t)graph->collectives->len;
}

void rv_graph_add_edge(rv_graph *graph, int32_t from, int32_t to, rv_edge_kind kind,
                       gboolean from_start)
{
    rv_edge edge = { from, to, (uint8_t)kind, (uint8_t)(from_start ? 1 : 0) };
    g_array_append_val(graph->edges, edge);
}
