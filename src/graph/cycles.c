/*
 * cycles.c - is the dependency graph acyclic?  Over the graph's own arrays,
 * with no lock: any number of threads may check their own graphs at once.
 *
 * THE WHOLE GRAPH (rv_cycles_check_all, rv_graph_check_acyclic): Kahn's
 * algorithm.  Successor rows are built from the edge array, tasks with no
 * predecessor left are peeled off; what is left lies on a cycle or behind
 * one, and one of those cycles is reported.  An edge from a task to itself
 * is reported first, as such.  O(V + E) time, 12 bytes per task and 4 per
 * edge of scratch.
 *
 * AFTER A PLUGIN (rv_cycles_check_changed).  If no edge changed, nothing
 * can have closed a cycle.  Otherwise, where the graph remembers an order
 * (a witness, rv_graph_remember_order), only the edges that differ from
 * the witness's are looked at: any cycle passes through one of them, since
 * the witness's edges have a topological order.  They are inserted one at
 * a time into that order, Pearce and Kelly's dynamic topological sort ("A
 * dynamic topological sort algorithm for directed acyclic graphs", ACM
 * JEA 11, 2006): an edge u -> v with key(u) < key(v) keeps the order as it
 * is; otherwise the tasks v reaches with keys below u's (forward) and those
 * that reach u with keys above v's (backward) are found - v reaching u is
 * a cycle - and their keys are dealt out again, the backward ones first,
 * each group in its old order.  Keys are the witness's positions times
 * KEY_GAP; a task a plugin inserted is keyed just after its latest
 * predecessor, inside that gap, so inserting a task between two it is
 * ordered by searches nothing.  The witness's order is the recorded order
 * wherever the edges allow it (recorded starts are nearly topological),
 * so an edge a plugin adds against it spans little recorded time, and its
 * search stays small.  Past a budget of tasks and edges searched (a
 * quarter of the graph), when most edges changed, or when a gap is full,
 * the whole graph is checked instead: never much slower than that.
 *
 * The searches read the transform API's edge index (index.h).  Edges a
 * plugin rewrote through the API are in it; for each changed edge the
 * check confirms that the index lists it where it now starts and ends,
 * and rebuilds the index if not.  An edge in a list it no longer belongs
 * to is skipped.  (One case is not seen: an edge moved through the API and
 * then written back by hand to what the witness had.  A cycle made that
 * way is still refused by the replay's own deadlock detection, sim.h.)
 */
#define _GNU_SOURCE /* qsort_r */
#include "cycles.h"
#include "index.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/validate.h"
#include <stdlib.h>
#include <string.h>

struct rv_order_witness {
    gint refs;
    int32_t tasks;     /* tasks when it was made */
    guint edge_count;
    rv_edge *edges;    /* the edges the keys are an order of */
    int64_t *keys;     /* per task: its position in that order times KEY_GAP */
    gboolean edges_valid; /* every edge named tasks below `tasks`, with a known kind */
};

/* Room for this many tasks inserted between two consecutive tasks of the
 * witness's order. */
#define KEY_GAP ((int64_t)1 << 20)

/* ---- reporting ---------------------------------------------------------- */

/* "the dependency graph has a cycle: #a name -> #b name ..." */
static void set_cycle_error(const rv_graph *graph, const GArray *cycle, GError **error)
{
    GString *text = g_string_new(NULL);
    for (guint i = 0; i < cycle->len && i < 12; i++) {
        int32_t id = g_array_index(cycle, int32_t, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        g_string_append_printf(text, "%s#%d ", i ? " -> " : "", id);
        rv_escape_append(text, rv_strings_get(graph->strings, task->name)); /* one line, whatever the name */
    }
    if (cycle->len > 12) g_string_append_printf(text, " -> ... (%u tasks)", cycle->len);
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "the dependency graph has a cycle: %s", text->str);
    g_string_free(text, TRUE);
}

/* An edge from a task to itself: a cycle of one, which the replay would
 * wait on forever. */
static gboolean report_self_loop(const rv_graph *graph, guint e, GError **error)
{
    const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
    GString *name = g_string_new(NULL);
    rv_escape_append(name, rv_strings_get(graph->strings, g_array_index(graph->tasks, rv_task, edge->from).name));
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "the dependency graph has a cycle: edge %u makes #%d %s wait for itself",
                e, edge->from, name->str);
    g_string_free(name, TRUE);
    return FALSE;
}

static gboolean names_tasks(const rv_edge *edge, int32_t tasks)
{
    return edge->from >= 0 && edge->from < tasks && edge->to >= 0 && edge->to < tasks;
}

/* ---- the whole graph ----------------------------------------------------- */

/* Successors in compressed rows: those of t are to[first[t] .. first[t + 1]).
 * indegree[t] counts t's predecessors.  Edges naming no task are left out
 * (rv_graph_validate reports them). */
typedef struct {
    int32_t *first;
    int32_t *to;
    int32_t *indegree;
} rows;

static void rows_build(const rv_graph *graph, rows *r)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_edge *edges = (const rv_edge *)graph->edges->data;
    guint m = graph->edges->len;
    /* counts go to first[t + 2], so that after the sums first[t + 1] is
     * where t's row starts and filling moves it to where the row ends */
    r->first = g_new0(int32_t, n + 2);
    r->indegree = g_new0(int32_t, MAX(n, 1));
    for (guint e = 0; e < m; e++) {
        if (!names_tasks(&edges[e], n)) continue;
        r->first[edges[e].from + 2]++;
        r->indegree[edges[e].to]++;
    }
    for (int32_t t = 0; t < n; t++) r->first[t + 2] += r->first[t + 1];
    r->to = g_new(int32_t, r->first[n + 1] + 1);
    for (guint e = 0; e < m; e++)
        if (names_tasks(&edges[e], n)) r->to[r->first[edges[e].from + 1]++] = edges[e].to;
}

static void rows_clear(rows *r)
{
    g_free(r->first);
    g_free(r->to);
    g_free(r->indegree);
}

/* A task left over after peeling has a predecessor left over: follow those
 * backwards until a task repeats; that loop is a cycle. */
static GArray *find_cycle(const rv_graph *graph, const int32_t *left_over)
{
    int32_t n = rv_graph_task_count(graph);
    GArray *cycle = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int32_t *pred = g_new(int32_t, n);
    for (int32_t i = 0; i < n; i++) pred[i] = -1;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (names_tasks(edge, n) && left_over[edge->from] && left_over[edge->to]) pred[edge->to] = edge->from;
    }
    int32_t start = -1;
    for (int32_t i = 0; i < n && start < 0; i++) if (left_over[i]) start = i;
    uint8_t *seen = g_new0(uint8_t, n);
    int32_t v = start;
    while (v >= 0 && !seen[v]) { seen[v] = 1; v = pred[v]; }
    if (v >= 0) {
        int32_t first = v;
        do { g_array_prepend_val(cycle, v); v = pred[v]; } while (v != first && v >= 0);
    }
    g_free(seen);
    g_free(pred);
    return cycle;
}

gboolean rv_cycles_check_all(const rv_graph *graph, GError **error)
{
    int32_t n = rv_graph_task_count(graph);
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->from == edge->to && names_tasks(edge, n)) return report_self_loop(graph, e, error);
    }
    rows r;
    rows_build(graph, &r);
    int32_t *queue = g_new(int32_t, MAX(n, 1)), head = 0, tail = 0;
    for (int32_t t = 0; t < n; t++)
        if (r.indegree[t] == 0) queue[tail++] = t;
    while (head < tail) {
        int32_t t = queue[head++];
        for (int32_t k = r.first[t]; k < r.first[t + 1]; k++)
            if (--r.indegree[r.to[k]] == 0) queue[tail++] = r.to[k];
    }
    gboolean ok = tail == n;
    if (!ok) {
        GArray *cycle = find_cycle(graph, r.indegree); /* left over: a predecessor never peeled */
        set_cycle_error(graph, cycle, error);
        g_array_unref(cycle);
    }
    g_free(queue);
    rows_clear(&r);
    return ok;
}

gboolean rv_graph_check_acyclic(const rv_graph *graph, GError **error)
{
    GError *failure = NULL;
    if (rv_cycles_check_all(graph, &failure)) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %s", graph->source, failure->message);
    g_error_free(failure);
    return FALSE;
}

/* ---- the witness ---------------------------------------------------------- */

rv_order_witness *rv_order_witness_ref(rv_order_witness *witness)
{
    if (witness) g_atomic_int_inc(&witness->refs);
    return witness;
}

void rv_order_witness_unref(rv_order_witness *witness)
{
    if (witness == NULL || !g_atomic_int_dec_and_test(&witness->refs)) return;
    g_free(witness->edges);
    g_free(witness->keys);
    g_free(witness);
}

static int compare_recorded(const void *a, const void *b, void *data)
{
    const rv_task *tasks = data;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int64_t sx = tasks[x].recorded_start_ns, sy = tasks[y].recorded_start_ns;
    if (sx != sy) return sx < sy ? -1 : 1;
    return (x > y) - (x < y);
}

/*
 * Kahn's algorithm that takes tasks in recorded order wherever it can:
 * tasks are visited in recorded order, and one whose predecessors are not
 * all placed yet is passed over and placed as soon as the last of them is.
 * NULL if the graph has a cycle.
 */
static int64_t *recorded_topological_keys(const rv_graph *graph)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_task *tasks = (const rv_task *)graph->tasks->data;
    int32_t *by_time = g_new(int32_t, MAX(n, 1)), *stack = g_new(int32_t, MAX(n, 1));
    for (int32_t t = 0; t < n; t++) by_time[t] = t;
    qsort_r(by_time, (size_t)n, sizeof(int32_t), compare_recorded, (void *)tasks);
    rows r;
    rows_build(graph, &r);
    uint8_t *passed = g_new0(uint8_t, MAX(n, 1));
    int64_t *keys = g_new(int64_t, MAX(n, 1)), placed = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = by_time[i];
        if (r.indegree[t] > 0) {
            passed[t] = 1;
            continue;
        }
        int32_t depth = 0;
        stack[depth++] = t;
        while (depth > 0) {
            int32_t u = stack[--depth];
            keys[u] = placed++ * KEY_GAP;
            for (int32_t k = r.first[u]; k < r.first[u + 1]; k++)
                if (--r.indegree[r.to[k]] == 0 && passed[r.to[k]]) stack[depth++] = r.to[k];
        }
    }
    g_free(by_time);
    g_free(stack);
    g_free(passed);
    rows_clear(&r);
    if (placed == n) return keys;
    g_free(keys);
    return NULL;
}

void rv_graph_remember_order(rv_graph *graph)
{
    rv_graph_index *index = rv_graph_index_get(graph);
    rv_order_witness_unref(index->witness);
    index->witness = NULL;
    int64_t *keys = recorded_topological_keys(graph);
    if (keys == NULL) return; /* a cycle: every later check looks at the whole graph */
    rv_order_witness *witness = g_new0(rv_order_witness, 1);
    witness->refs = 1;
    witness->tasks = rv_graph_task_count(graph);
    witness->edge_count = graph->edges->len;
    witness->edges = g_memdup2(graph->edges->data, sizeof(rv_edge) * (gsize)graph->edges->len);
    witness->keys = keys;
    witness->edges_valid = TRUE;
    for (guint e = 0; e < witness->edge_count; e++) {
        const rv_edge *edge = &witness->edges[e];
        if (edge->from < 0 || edge->from >= witness->tasks || edge->to < 0 || edge->to >= witness->tasks ||
            edge->kind >= RV_EDGE_KIND_COUNT)
            witness->edges_valid = FALSE;
    }
    index->witness = witness;
}

/* ---- what changed ---------------------------------------------------------- */

struct rv_edges_before {
    rv_order_witness *witness; /* or, without one: */
    rv_edge *edges;
    guint edge_count;
};

rv_edges_before *rv_edges_before_take(const rv_graph *graph)
{
    rv_edges_before *before = g_new0(rv_edges_before, 1);
    rv_order_witness *witness = graph->index ? graph->index->witness : NULL;
    if (witness != NULL && witness->tasks <= rv_graph_task_count(graph)) {
        before->witness = rv_order_witness_ref(witness);
    } else {
        before->edge_count = graph->edges->len;
        before->edges = g_memdup2(graph->edges->data, sizeof(rv_edge) * (gsize)graph->edges->len);
    }
    return before;
}

void rv_edges_before_free(rv_edges_before *before)
{
    if (before == NULL) return;
    rv_order_witness_unref(before->witness);
    g_free(before->edges);
    g_free(before);
}

/* The edges whose ends differ from `then`'s (a kind alone changes no
 * order) - or with any_byte, whose bytes differ - and those past its end,
 * by index: compared a block at a time. */
static GArray *differing_edges(const rv_graph *graph, const rv_edge *then, guint then_count, gboolean any_byte)
{
    enum { BLOCK = 256 };
    GArray *changed = g_array_new(FALSE, FALSE, sizeof(guint));
    const rv_edge *now = (const rv_edge *)graph->edges->data;
    guint count = graph->edges->len, common = MIN(count, then_count);
    for (guint b = 0; b < common; b += BLOCK) {
        guint end = MIN(common, b + BLOCK);
        if (memcmp(now + b, then + b, sizeof(rv_edge) * (end - b)) == 0) continue;
        for (guint e = b; e < end; e++)
            if (any_byte ? memcmp(&now[e], &then[e], sizeof(rv_edge)) != 0
                         : now[e].from != then[e].from || now[e].to != then[e].to)
                g_array_append_val(changed, e);
    }
    for (guint e = common; e < count; e++) g_array_append_val(changed, e);
    return changed;
}

static GArray *changed_edges(const rv_graph *graph, const rv_edge *then, guint then_count)
{
    return differing_edges(graph, then, then_count, FALSE);
}

/* ---- inserting the changed edges into the witness's order ------------------ */

typedef enum { INSERTED, CYCLE, GIVE_UP } outcome;

typedef struct {
    const rv_graph *graph;
    const rv_edge *edges;
    rv_graph_index *index;
    int64_t *keys;         /* per task, updated as edges go in */
    uint8_t *pending;      /* per edge: changed, not in the order yet (the searches pass it by) */
    int64_t budget;        /* tasks and edges the searches may still visit */
    GArray *forward, *backward, *stack, *pool;
} insertion;

/* Keys for the tasks added since the witness (ids from `first_new`): each
 * just after its latest predecessor, in its gap; new tasks with no
 * predecessor before every old one. */
static outcome key_new_tasks(insertion *ins, const GArray *changed, int32_t first_new)
{
    int32_t n = rv_graph_task_count(ins->graph), count = n - first_new;
    if (count == 0) return INSERTED;
    int64_t *latest = g_new(int64_t, count);
    int32_t *waiting = g_new0(int32_t, count), *first = g_new0(int32_t, count + 2), *queue = g_new(int32_t, count);
    for (int32_t i = 0; i < count; i++) latest[i] = -KEY_GAP; /* the gap before the first old task */
    for (guint i = 0; i < changed->len; i++) {
        const rv_edge *edge = &ins->edges[g_array_index(changed, guint, i)];
        if (edge->to < first_new) continue;
        if (edge->from < first_new) latest[edge->to - first_new] = MAX(latest[edge->to - first_new], ins->keys[edge->from]);
        else { waiting[edge->to - first_new]++; first[edge->from - first_new + 2]++; }
    }
    for (int32_t i = 0; i < count; i++) first[i + 2] += first[i + 1];
    int32_t *next = g_new(int32_t, first[count + 1] + 1);
    for (guint i = 0; i < changed->len; i++) {
        const rv_edge *edge = &ins->edges[g_array_index(changed, guint, i)];
        if (edge->to >= first_new && edge->from >= first_new) next[first[edge->from - first_new + 1]++] = edge->to - first_new;
    }
    GHashTable *used = g_hash_table_new(g_int64_hash, g_int64_equal); /* gap -> next free key in it */
    GArray *boxes = g_array_new(FALSE, FALSE, sizeof(int64_t *));
    int32_t head = 0, tail = 0;
    outcome result = INSERTED;
    for (int32_t i = 0; i < count; i++) if (waiting[i] == 0) queue[tail++] = i;
    while (head < tail && result == INSERTED) {
        int32_t i = queue[head++];
        int64_t gap = latest[i] >= 0 ? latest[i] / KEY_GAP : -1;
        int64_t *slot = g_hash_table_lookup(used, &gap);
        if (slot == NULL) {
            slot = g_new(int64_t, 2);
            slot[0] = gap;
            slot[1] = latest[i] + 1;
            g_hash_table_insert(used, &slot[0], slot);
            g_array_append_val(boxes, slot);
        }
        int64_t key = MAX(latest[i] + 1, slot[1]);
        if (key >= (gap + 1) * KEY_GAP) { result = GIVE_UP; break; } /* the gap is full */
        slot[1] = key + 1;
        ins->keys[first_new + i] = key;
        for (int32_t k = first[i]; k < first[i + 1]; k++) {
            latest[next[k]] = MAX(latest[next[k]], key);
            if (--waiting[next[k]] == 0) queue[tail++] = next[k];
        }
    }
    if (result == INSERTED && tail < count) result = GIVE_UP; /* a cycle among new tasks: the whole check names it */
    for (guint b = 0; b < boxes->len; b++) g_free(g_array_index(boxes, int64_t *, b));
    g_array_unref(boxes);
    g_hash_table_destroy(used);
    g_free(latest); g_free(waiting); g_free(first); g_free(queue); g_free(next);
    return result;
}

/* Is edge e in the index's lists of the tasks it now joins? */
static gboolean indexed_where_it_is(const rv_graph_index *index, const rv_edge *edge, int32_t e)
{
    gboolean out = FALSE, in = FALSE;
    for (int32_t f = rv_graph_index_first(index, edge->from, TRUE); f >= 0 && !out; f = rv_graph_index_next(index, f, TRUE))
        out = f == e;
    for (int32_t f = rv_graph_index_first(index, edge->to, FALSE); f >= 0 && !in; f = rv_graph_index_next(index, f, FALSE))
        in = f == e;
    return out && in;
}

/* The index, with every changed edge where it now is (rebuilt if not). */
static rv_graph_index *index_of_changed(const rv_graph *graph, const GArray *changed)
{
    rv_graph_index *index = rv_graph_index_sync(graph);
    for (guint i = 0; i < changed->len; i++) {
        int32_t e = (int32_t)g_array_index(changed, guint, i);
        if (indexed_where_it_is(index, &g_array_index(graph->edges, rv_edge, e), e)) continue;
        rv_graph_index_reset(graph);
        return rv_graph_index_sync(graph);
    }
    return index;
}

/* The cycle u -> v -> ... -> w -> u that the forward search found (w's
 * edge to u closed it; marks hold the edge each task was reached by). */
static void report_found_cycle(const insertion *ins, const rv_task_marks *reached, int32_t v, int32_t w, int32_t u,
                               GError **error)
{
    GArray *cycle = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_val(cycle, u);
    for (int32_t t = w; ; t = ins->edges[rv_task_marks_get(reached, t, -1)].from) {
        g_array_insert_val(cycle, 1, t);
        if (t == v) break;
    }
    set_cycle_error(ins->graph, cycle, error);
    g_array_unref(cycle);
}

/* One search from `start`, forward (out-edges, keys below `bound`) or
 * backward (in-edges, keys above it), collecting what it reaches in
 * `found`.  Forward, reaching `target` is a cycle. */
static outcome search(insertion *ins, int32_t start, gboolean forward, int64_t bound, int32_t target, GArray *found,
                      rv_task_marks *reached, GError **error)
{
    rv_task_marks_begin(reached, rv_graph_task_count(ins->graph));
    rv_task_marks_set(reached, start, -1);
    g_array_set_size(found, 0);
    g_array_set_size(ins->stack, 0);
    g_array_append_val(ins->stack, start);
    while (ins->stack->len > 0) {
        int32_t t = g_array_index(ins->stack, int32_t, ins->stack->len - 1);
        g_array_set_size(ins->stack, ins->stack->len - 1);
        g_array_append_val(found, t);
        for (int32_t e = rv_graph_index_first(ins->index, t, forward); e >= 0; e = rv_graph_index_next(ins->index, e, forward)) {
            if (--ins->budget < 0) return GIVE_UP;
            const rv_edge *edge = &ins->edges[e];
            if (ins->pending[e] || (forward ? edge->from : edge->to) != t) continue; /* not in yet, or a stale entry */
            int32_t next = forward ? edge->to : edge->from;
            if (forward && next == target) {
                report_found_cycle(ins, reached, start, t, target, error);
                return CYCLE;
            }
            if ((forward ? ins->keys[next] >= bound : ins->keys[next] <= bound) || rv_task_marks_has(reached, next))
                continue;
            rv_task_marks_set(reached, next, e);
            g_array_append_val(ins->stack, next);
        }
    }
    return INSERTED;
}

static int compare_by_key(const void *a, const void *b, void *keys)
{
    int64_t x = ((const int64_t *)keys)[*(const int32_t *)a], y = ((const int64_t *)keys)[*(const int32_t *)b];
    return (x > y) - (x < y);
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Deal the keys of the backward and forward tasks out again: the backward
 * ones first, each group in its own order. */
static void reorder(insertion *ins)
{
    GArray *pool = ins->pool;
    g_array_set_size(pool, 0);
    GArray *groups[2] = { ins->backward, ins->forward };
    for (int g = 0; g < 2; g++) {
        qsort_r(groups[g]->data, groups[g]->len, sizeof(int32_t), compare_by_key, ins->keys);
        for (guint i = 0; i < groups[g]->len; i++) g_array_append_val(pool, ins->keys[g_array_index(groups[g], int32_t, i)]);
    }
    qsort(pool->data, pool->len, sizeof(int64_t), compare_int64);
    guint next = 0;
    for (int g = 0; g < 2; g++)
        for (guint i = 0; i < groups[g]->len; i++) ins->keys[g_array_index(groups[g], int32_t, i)] = g_array_index(pool, int64_t, next++);
}

/* Put edge e (u -> v) into the order. */
static outcome insert_edge(insertion *ins, guint e, GError **error)
{
    ins->pending[e] = 0;
    int32_t u = ins->edges[e].from, v = ins->edges[e].to;
    if (ins->keys[u] < ins->keys[v]) return INSERTED;
    outcome found = search(ins, v, TRUE, ins->keys[u], u, ins->forward, &ins->index->check_marks[0], error);
    if (found != INSERTED) return found;
    found = search(ins, u, FALSE, ins->keys[v], -1, ins->backward, &ins->index->check_marks[1], error);
    if (found != INSERTED) return found;
    reorder(ins);
    return INSERTED;
}

static outcome insert_changed(const rv_graph *graph, const rv_order_witness *witness, const GArray *changed,
                              rv_cycles_how *how, GError **error)
{
    int32_t n = rv_graph_task_count(graph);
    insertion ins = { graph, (const rv_edge *)graph->edges->data, index_of_changed(graph, changed), g_new(int64_t, n),
                      g_new0(uint8_t, graph->edges->len + 1), ((int64_t)n + graph->edges->len) / 4 + 4096,
                      g_array_new(FALSE, FALSE, sizeof(int32_t)), g_array_new(FALSE, FALSE, sizeof(int32_t)),
                      g_array_new(FALSE, FALSE, sizeof(int32_t)), g_array_new(FALSE, FALSE, sizeof(int64_t)) };
    memcpy(ins.keys, witness->keys, sizeof(int64_t) * (gsize)witness->tasks);
    outcome result = key_new_tasks(&ins, changed, witness->tasks);
    GArray *against = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = 0; result == INSERTED && i < changed->len; i++) {
        guint e = g_array_index(changed, guint, i);
        if (ins.keys[ins.edges[e].from] < ins.keys[ins.edges[e].to]) continue;
        ins.pending[e] = 1;
        g_array_append_val(against, e);
    }
    int64_t budget = ins.budget;
    for (guint i = 0; result == INSERTED && i < against->len; i++) result = insert_edge(&ins, g_array_index(against, guint, i), error);
    how->against = against->len;
    how->searched = budget - ins.budget;
    g_array_unref(against);
    g_free(ins.keys);
    g_free(ins.pending);
    g_array_unref(ins.forward);
    g_array_unref(ins.backward);
    g_array_unref(ins.stack);
    g_array_unref(ins.pool);
    return result;
}

/* rv_cycles_check_changed with the changed edges found (freed here). */
static gboolean check_changed(const rv_graph *graph, rv_edges_before *before, GArray *changed, rv_cycles_how *how_out,
                              GError **error);

gboolean rv_cycles_check_changed(const rv_graph *graph, rv_edges_before *before, rv_cycles_how *how_out,
                                 GError **error)
{
    const rv_order_witness *witness = before->witness;
    GArray *changed = witness ? changed_edges(graph, witness->edges, witness->edge_count)
                              : changed_edges(graph, before->edges, before->edge_count);
    return check_changed(graph, before, changed, how_out, error);
}

gboolean rv_edges_check_after_plugin(const rv_graph *graph, rv_edges_before *before, GError **error)
{
    const rv_order_witness *witness = before->witness;
    if (witness == NULL || !witness->edges_valid || graph->ranks->len > 1 || rv_graph_task_count(graph) < witness->tasks) {
        if (!rv_graph_check_edges(graph, error)) {
            rv_edges_before_free(before);
            return FALSE;
        }
        return rv_cycles_check_changed(graph, before, NULL, error);
    }
    /* Relied on: the witness's edges were valid (edges_valid) among its
     * tasks, tasks are only ever appended (ids keep naming the same slots;
     * fewer tasks than the witness's is checked in full above), and with
     * one rank no edge crosses ranks: an edge whose bytes are the
     * witness's needs no check. */
    GArray *differing = differing_edges(graph, witness->edges, witness->edge_count, TRUE);
    for (guint i = 0; i < differing->len; i++)
        if (!rv_graph_check_edge(graph, g_array_index(differing, guint, i), error)) {
            g_array_unref(differing);
            rv_edges_before_free(before);
            return FALSE;
        }
    /* the cycle check's changed edges: those whose ends moved, and the new */
    const rv_edge *now = (const rv_edge *)graph->edges->data;
    guint kept = 0;
    for (guint i = 0; i < differing->len; i++) {
        guint e = g_array_index(differing, guint, i);
        if (e >= witness->edge_count || now[e].from != witness->edges[e].from || now[e].to != witness->edges[e].to)
            g_array_index(differing, guint, kept++) = e;
    }
    g_array_set_size(differing, kept);
    return check_changed(graph, before, differing, NULL, error);
}

static gboolean check_changed(const rv_graph *graph, rv_edges_before *before, GArray *changed, rv_cycles_how *how_out,
                              GError **error)
{
    rv_cycles_how how = { 0 };
    const rv_order_witness *witness = before->witness;
    int32_t n = rv_graph_task_count(graph);
    gboolean ok = TRUE;
    how.changed = changed->len;
    for (guint i = 0; ok && i < changed->len; i++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, g_array_index(changed, guint, i));
        if (edge->from == edge->to && names_tasks(edge, n)) ok = report_self_loop(graph, g_array_index(changed, guint, i), error);
    }
    if (ok && changed->len > 0) {
        outcome result = GIVE_UP;
        if (witness != NULL && n >= witness->tasks && changed->len <= graph->edges->len / 2)
            result = insert_changed(graph, witness, changed, &how, error);
        if (result == CYCLE) ok = FALSE;
        else if (result == GIVE_UP) {
            how.whole_graph = TRUE;
            ok = rv_cycles_check_all(graph, error);
        }
    }
    g_array_unref(changed);
    rv_edges_before_free(before);
    if (how_out) *how_out = how;
    return ok;
}
