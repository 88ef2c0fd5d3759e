/*
 * critical_path.c - each step's critical path, re-derived after a replay
 * from the graph and the start/end times (see critical_path.h for the rule).
 *
 * The simulator's hot loop stays as it is: only the tasks on the walk are
 * examined, through an index of incoming edges built once.
 */
#include "reverie/critical_path.h"
#include "reverie/report.h"
#include <string.h>

static const char *const via_names[RV_VIA_COUNT] = { "start", "resource order", "edge", "launch queue" };
static const char *const wait_names[RV_WAIT_KIND_COUNT] = { "host overhead", "launch latency", "idle gap" };

const char *rv_via_name(rv_via via) { return via < RV_VIA_COUNT ? via_names[via] : "?"; }
const char *rv_wait_kind_name(rv_wait_kind kind) { return kind < RV_WAIT_KIND_COUNT ? wait_names[kind] : "?"; }

/* What the walk needs to ask "why did this task start then?". */
typedef struct {
    const rv_graph *graph;
    const rv_sim_result *sim;
    const rv_task *tasks;
    const rv_resource *resources;
    int32_t *first_in;       /* incoming live edges of t: edge ids in_edges[first_in[t] .. first_in[t + 1]) */
    int32_t *in_edges;
    int32_t *launched;       /* per CPU call: the GPU task it launched, or -1 */
    GPtrArray *by_resource;  /* per resource: task ids in timeline order */
    int32_t *position;       /* per task: its index there */
} walker;

typedef struct {
    int32_t predecessor;
    uint8_t via, edge_kind;
    int64_t release_ns;      /* when the predecessor let the task go */
    int64_t constraint_ns;   /* the earliest start that release allows, before host overhead */
} binding;

static gboolean live(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_REMOVED) == 0;
}

/* An order edge within one resource only sequences; the resource's previous
 * task on the timeline stands for it. */
static gboolean order_only(const rv_task *tasks, const rv_edge *edge)
{
    return (edge->kind == RV_EDGE_THREAD || edge->kind == RV_EDGE_STREAM) &&
           tasks[edge->from].resource == tasks[edge->to].resource;
}

static void index_edges(walker *w)
{
    int32_t n = rv_graph_task_count(w->graph);
    const rv_edge *edges = (const rv_edge *)w->graph->edges->data;
    guint count = w->graph->edges->len;
    w->first_in = g_new0(int32_t, n + 1);
    w->launched = g_new(int32_t, n);
    for (int32_t t = 0; t < n; t++) w->launched[t] = -1;
    for (guint e = 0; e < count; e++) {
        const rv_edge *edge = &edges[e];
        if (!live(&w->tasks[edge->from]) || !live(&w->tasks[edge->to]) || order_only(w->tasks, edge)) continue;
        w->first_in[edge->to + 1]++;
        if (edge->kind == RV_EDGE_LAUNCH && (w->tasks[edge->to].flags & RV_TASK_FLAG_GPU) && w->launched[edge->from] < 0)
            w->launched[edge->from] = edge->to;
    }
    for (int32_t t = 0; t < n; t++) w->first_in[t + 1] += w->first_in[t];
    w->in_edges = g_new(int32_t, w->first_in[n] + 1);
    int32_t *fill = g_memdup2(w->first_in, sizeof(int32_t) * (gsize)n);
    for (guint e = 0; e < count; e++) {
        const rv_edge *edge = &edges[e];
        if (!live(&w->tasks[edge->from]) || !live(&w->tasks[edge->to]) || order_only(w->tasks, edge)) continue;
        w->in_edges[fill[edge->to]++] = (int32_t)e;
    }
    g_free(fill);
}

static void walker_init(walker *w, const rv_graph *graph, const rv_sim_result *sim)
{
    w->graph = graph;
    w->sim = sim;
    w->tasks = (const rv_task *)graph->tasks->data;
    w->resources = (const rv_resource *)graph->resources->data;
    index_edges(w);
    w->by_resource = rv_tasks_by_resource(graph, sim);
    w->position = g_new0(int32_t, rv_graph_task_count(graph));
    for (guint r = 0; r < w->by_resource->len; r++) {
        GArray *order = g_ptr_array_index(w->by_resource, r);
        for (guint k = 0; k < order->len; k++) w->position[g_array_index(order, int32_t, k)] = (int32_t)k;
    }
}

static void walker_clear(walker *w)
{
    g_free(w->first_in);
    g_free(w->in_edges);
    g_free(w->launched);
    g_ptr_array_unref(w->by_resource);
    g_free(w->position);
}

static void consider(binding *best, int32_t from, uint8_t via, uint8_t edge_kind, int64_t release, int64_t constraint)
{
    if (constraint <= best->constraint_ns) return; /* first found wins a tie: edges come first */
    *best = (binding){ from, via, edge_kind, release, constraint };
}

/* The GPU task whose end let a launch call through a full queue: on the
 * stream of the task the call launched, earlier in the stream's order,
 * ending exactly when the call started. */
static int32_t queue_holder(const walker *w, int32_t call)
{
    int32_t gpu = w->launched[call];
    if (gpu < 0) return -1;
    const rv_task *task = &w->tasks[gpu];
    GArray *order = g_ptr_array_index(w->by_resource, task->resource);
    int32_t depth = w->resources[task->resource].queue_depth, at = w->position[gpu];
    int64_t start = w->sim->start_ns[call];
    if (depth > 0 && at - depth >= 0 && w->sim->end_ns[g_array_index(order, int32_t, at - depth)] == start)
        return g_array_index(order, int32_t, at - depth);
    for (int32_t k = at - 1; k >= 0; k--)
        if (w->sim->end_ns[g_array_index(order, int32_t, k)] == start) return g_array_index(order, int32_t, k);
    return -1;
}

/* Which constraint set the task's start (graph.h's timing model). */
static binding find_binding(const walker *w, int32_t t)
{
    const rv_sim_result *sim = w->sim;
    const rv_task *task = &w->tasks[t];
    const rv_resource *resource = &w->resources[task->resource];
    binding best = { -1, RV_VIA_NOTHING, 0, 0, 0 };
    const rv_edge *edges = (const rv_edge *)w->graph->edges->data;
    for (int32_t slot = w->first_in[t]; slot < w->first_in[t + 1]; slot++) {
        const rv_edge *edge = &edges[w->in_edges[slot]];
        int64_t release = edge->from_start ? sim->start_ns[edge->from] : sim->end_ns[edge->from];
        int64_t constraint = release;
        if (edge->kind == RV_EDGE_LAUNCH && !edge->from_start && (task->flags & RV_TASK_FLAG_GPU))
            constraint += resource->launch_latency_ns;
        consider(&best, edge->from, RV_VIA_EDGE, edge->kind, release, constraint);
    }
    int32_t at = w->position[t];
    if (at > 0) {
        int32_t previous = g_array_index((GArray *)g_ptr_array_index(w->by_resource, task->resource), int32_t, at - 1);
        consider(&best, previous, RV_VIA_RESOURCE, 0, sim->end_ns[previous], sim->end_ns[previous] + resource->idle_gap_ns);
    }
    if (sim->start_ns[t] > best.constraint_ns + task->host_overhead_ns) {
        int32_t holder = queue_holder(w, t);
        if (holder >= 0) best = (binding){ holder, RV_VIA_QUEUE, 0, sim->end_ns[holder], sim->end_ns[holder] };
    }
    return best;
}

static gboolean ends_later(const rv_graph *graph, const rv_sim_result *sim, int32_t candidate, int32_t best)
{
    if (best < 0 || sim->end_ns[candidate] > sim->end_ns[best]) return TRUE;
    return sim->end_ns[candidate] == sim->end_ns[best] &&
           (g_array_index(graph->tasks, rv_task, candidate).flags & RV_TASK_FLAG_GPU) &&
           !(g_array_index(graph->tasks, rv_task, best).flags & RV_TASK_FLAG_GPU);
}

/* Per window, the task whose end is its end: the latest-ending GPU task of
 * the step or its end marker (the GPU task on a tie: it is what the marker
 * waited for).  Without steps: the latest-ending task. */
static int32_t *step_end_tasks(const rv_graph *graph, const rv_sim_result *sim, guint windows)
{
    int32_t *best = g_new(int32_t, windows);
    for (guint s = 0; s < windows; s++)
        best[s] = graph->steps->len ? g_array_index(graph->steps, rv_step, s).end_marker : -1;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (sim->start_ns[id] < 0 || !live(task)) continue;
        int32_t s = 0;
        if (graph->steps->len) {
            if (task->step < 0 || (guint)task->step >= windows || !(task->flags & RV_TASK_FLAG_GPU)) continue;
            s = task->step;
        }
        if (ends_later(graph, sim, id, best[s])) best[s] = id;
    }
    return best;
}

static int64_t overlap(int64_t from, int64_t to, int64_t begin, int64_t end)
{
    return MAX(0, MIN(to, end) - MAX(from, begin));
}

/* One link: the task's run up to `until`, its host overhead and the wait
 * before it, each clipped to the window.  Returns the binding. */
static binding add_link(const walker *w, rv_step_path *path, int32_t t, int64_t until)
{
    const rv_task *task = &w->tasks[t];
    int64_t start = w->sim->start_ns[t];
    binding b = find_binding(w, t);
    int64_t release = b.predecessor >= 0 ? b.release_ns : start - task->host_overhead_ns;
    int64_t gap = MAX(0, start - release);
    int64_t host = b.via == RV_VIA_QUEUE ? 0 : MIN(task->host_overhead_ns, gap);
    rv_path_link link = { t, b.predecessor, b.via, b.edge_kind, 0, 0, 0, RV_WAIT_IDLE_GAP };
    link.run_ns = overlap(start, MIN(until, w->sim->end_ns[t]), path->begin_ns, path->end_ns);
    link.host_overhead_ns = overlap(start - host, start, path->begin_ns, path->end_ns);
    link.wait_ns = overlap(release, start - host, path->begin_ns, path->end_ns);
    if (b.via == RV_VIA_EDGE && b.edge_kind == RV_EDGE_LAUNCH && (task->flags & RV_TASK_FLAG_GPU))
        link.wait_kind = RV_WAIT_LAUNCH_LATENCY;
    g_array_append_val(path->links, link);
    if (b.predecessor < 0) path->before_chain_ns = MAX(0, release - path->begin_ns);
    return b;
}

static void walk_step(const walker *w, rv_step_path *path, int32_t end_task)
{
    int32_t t = end_task, guard = rv_graph_task_count(w->graph) + 1;
    int64_t until = path->end_ns;
    while (t >= 0 && guard-- > 0) {
        binding b = add_link(w, path, t, until);
        if (b.predecessor < 0 || b.release_ns <= path->begin_ns) break;
        until = b.release_ns;
        t = b.predecessor;
    }
    /* earliest first */
    for (guint i = 0, j = path->links->len ? path->links->len - 1 : 0; i < j; i++, j--) {
        rv_path_link swap = g_array_index(path->links, rv_path_link, i);
        g_array_index(path->links, rv_path_link, i) = g_array_index(path->links, rv_path_link, j);
        g_array_index(path->links, rv_path_link, j) = swap;
    }
}

rv_critical_path *rv_critical_path_find(const rv_graph *graph, const rv_sim_result *sim)
{
    rv_critical_path *result = g_new0(rv_critical_path, 1);
    result->steps = g_array_new(FALSE, TRUE, sizeof(rv_step_path));
    walker w;
    walker_init(&w, graph, sim);
    GArray *windows = rv_step_windows(graph, sim);
    int32_t *end_tasks = step_end_tasks(graph, sim, windows->len);
    for (guint s = 0; s < windows->len; s++) {
        const rv_window *window = &g_array_index(windows, rv_window, s);
        rv_step_path path = { window->begin_ns, window->end_ns, 0, g_array_new(FALSE, FALSE, sizeof(rv_path_link)) };
        if (end_tasks[s] >= 0 && window->end_ns > window->begin_ns) walk_step(&w, &path, end_tasks[s]);
        g_array_append_val(result->steps, path);
    }
    g_free(end_tasks);
    g_array_unref(windows);
    walker_clear(&w);
    return result;
}

void rv_critical_path_free(rv_critical_path *path)
{
    if (path == NULL) return;
    for (guint s = 0; s < path->steps->len; s++) g_array_unref(g_array_index(path->steps, rv_step_path, s).links);
    g_array_unref(path->steps);
    g_free(path);
}

void rv_critical_path_host_share(const rv_critical_path *path, const rv_graph *graph, int64_t *path_ns,
                                 int64_t *host_ns)
{
    *path_ns = *host_ns = 0;
    for (guint s = 0; s < path->steps->len; s++) {
        const GArray *links = g_array_index(path->steps, rv_step_path, s).links;
        for (guint l = 0; l < links->len; l++) {
            const rv_path_link *link = &g_array_index(links, rv_path_link, l);
            *path_ns += rv_path_link_ns(link);
            const rv_task *task = &g_array_index(graph->tasks, rv_task, link->task);
            if (g_array_index(graph->resources, rv_resource, task->resource).kind == RV_RES_CPU_THREAD)
                *host_ns += link->run_ns + link->host_overhead_ns;
        }
    }
}

guint8 *rv_critical_path_members(const rv_critical_path *path, int32_t task_count)
{
    guint8 *members = g_new0(guint8, task_count);
    for (guint s = 0; s < path->steps->len; s++) {
        GArray *links = g_array_index(path->steps, rv_step_path, s).links;
        for (guint i = 0; i < links->len; i++) {
            int32_t task = g_array_index(links, rv_path_link, i).task;
            if (task >= 0 && task < task_count) members[task] = 1;
        }
    }
    return members;
}

void rv_path_totals_init(rv_path_totals *totals)
{
    memset(totals, 0, sizeof *totals);
    totals->by_layer_ns = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
}

void rv_path_totals_clear(rv_path_totals *totals)
{
    if (totals->by_layer_ns) g_hash_table_destroy(totals->by_layer_ns);
    memset(totals, 0, sizeof *totals);
}

static void add_to_layer(GHashTable *layers, int32_t layer, int64_t ns)
{
    int64_t *sum = g_hash_table_lookup(layers, GINT_TO_POINTER(layer));
    if (sum == NULL) {
        sum = g_new0(int64_t, 1);
        g_hash_table_insert(layers, GINT_TO_POINTER(layer), sum);
    }
    *sum += ns;
}

void rv_path_totals_add(rv_path_totals *totals, const rv_graph *graph, const rv_step_path *step)
{
    for (guint i = 0; i < step->links->len; i++) {
        const rv_path_link *link = &g_array_index(step->links, rv_path_link, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, link->task);
        int64_t ns = rv_path_link_ns(link);
        totals->total_ns += ns;
        totals->links++;
        totals->by_kind_ns[task->kind < RV_TASK_KIND_COUNT ? task->kind : RV_TASK_CPU] += link->run_ns;
        totals->by_wait_ns[RV_WAIT_HOST_OVERHEAD] += link->host_overhead_ns;
        totals->by_wait_ns[link->wait_kind] += link->wait_ns;
        totals->by_phase_ns[task->phase < RV_PHASE_COUNT ? task->phase : RV_PHASE_OTHER] += ns;
        add_to_layer(totals->by_layer_ns, task->layer, ns);
    }
}

int64_t rv_path_totals_layer_ns(const rv_path_totals *totals, int32_t layer)
{
    const int64_t *sum = g_hash_table_lookup(totals->by_layer_ns, GINT_TO_POINTER(layer));
    return sum ? *sum : 0;
}

static gint larger_layer_first(gconstpointer left, gconstpointer right, gpointer data)
{
    int64_t a = rv_path_totals_layer_ns(data, *(const int32_t *)left);
    int64_t b = rv_path_totals_layer_ns(data, *(const int32_t *)right);
    if (a != b) return a > b ? -1 : 1;
    return *(const int32_t *)left - *(const int32_t *)right;
}

GArray *rv_path_totals_layers(const rv_path_totals *totals)
{
    GArray *layers = g_array_new(FALSE, FALSE, sizeof(int32_t));
    GHashTableIter iter;
    gpointer key;
    g_hash_table_iter_init(&iter, totals->by_layer_ns);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        int32_t layer = GPOINTER_TO_INT(key);
        g_array_append_val(layers, layer);
    }
    g_array_sort_with_data(layers, larger_layer_first, (gpointer)totals);
    return layers;
}
