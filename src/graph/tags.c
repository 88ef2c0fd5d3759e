/*
 * tags.c - layer, phase and step tags (Daydream's synchronization-free
 * mapping, DESIGN "Layers and phases").
 *
 * Each CPU task is tagged by the operators and annotations that enclose it
 * in time on its own thread: one sweep per thread with a stack of open
 * scopes.  A GPU task takes the tags of the call that launched it, so no
 * GPU-side timing is needed to know which layer a kernel belongs to.
 *
 * Forward is "inside a step and nothing else".  A trace without
 * ProfilerStep annotations has no steps, so its forward is inferred from
 * what training leaves in the trace instead: iterations end at each
 * Optimizer.step annotation; an iteration's backward begins at its first
 * backward scope (autograd::engine::evaluate_function, *Backward*) or
 * fwdbwd flow end; its forward runs from its first fwdbwd flow start (the
 * first operator autograd recorded; without fwdbwd flows, the iteration's
 * start) to that backward.  Without any backward there is no training
 * evidence, and the phase stays "other".
 */
#include "build.h"
#include <string.h>

enum { SCOPE_OPTIMIZER = 1, SCOPE_DATALOAD = 2, SCOPE_BACKWARD = 4 };

typedef struct {
    int64_t end_ns;
    int32_t module;      /* innermost "nn.Module: ..." */
    /* The outermost cpu_op inside any compiled graph's wrappers (the layer
     * when no module is known) and its Input Dims; has_outer: they are set
     * (an operator may record no dims: -1). */
    int32_t outer_op;
    int32_t outer_dims;
    int32_t outer_args;  /* its scalar arguments (rv_event.op_args), -1 for none */
    gboolean has_outer;
    gboolean compiled;   /* inside a compiled graph's wrapper (RV_TASK_FLAG_COMPILED) */
    int32_t inner_op;    /* innermost cpu_op */
    comm_scope comm;     /* collective metadata of the innermost c10d operators */
    unsigned flags;
} scope;

static unsigned scope_flags(const char *name)
{
    unsigned flags = 0;
    if (strstr(name, "Optimizer.step") != NULL) flags |= SCOPE_OPTIMIZER;
    if (g_str_has_prefix(name, "enumerate(DataLoader)")) flags |= SCOPE_DATALOAD;
    if (strstr(name, "Backward") != NULL || strstr(name, "backward") != NULL) flags |= SCOPE_BACKWARD;
    return flags;
}

/* The operators torch.compile wraps a whole compiled graph in (its region,
 * its autograd Function, the engine's call of its backward): their Input
 * Dims are the graph's inputs, never one kernel's operands, and as a layer
 * they would make the whole graph one.  So a kernel's layer and shapes come
 * from the outermost operator inside them (an aten::addmm, a convolution, a
 * Triton kernel's own record), as in an eager trace. */
static gboolean wraps_compiled_graph(const char *name)
{
    return g_str_has_prefix(name, "Torch-Compiled Region") || strcmp(name, "CompiledFunction") == 0 ||
           strcmp(name, "CompiledFunctionBackward") == 0 ||
           g_str_has_prefix(name, "autograd::engine::evaluate_function: CompiledFunction");
}

/* The 2021 schema records annotations (ProfilerStep#, Optimizer.step#,
 * the DataLoader) as operators; they are scopes, not layers. */
static gboolean is_annotation_name(const char *name)
{
    return g_str_has_prefix(name, "ProfilerStep#") || g_str_has_prefix(name, "Optimizer.") ||
           g_str_has_prefix(name, "enumerate(DataLoader)") || g_str_has_prefix(name, "## ");
}

static scope push_scope(const rv_strings *strings, const scope *outer, const rv_event *event)
{
    scope inner = *outer;
    const char *name = rv_strings_get(strings, event->name);
    inner.end_ns = event->ts_ns + event->dur_ns;
    inner.flags |= scope_flags(name);
    inner.compiled = outer->compiled || wraps_compiled_graph(name);
    if (event->kind == RV_EV_PYTHON_FUNCTION && g_str_has_prefix(name, "nn.Module: "))
        inner.module = event->name;
    if (event->kind == RV_EV_CPU_OP && !is_annotation_name(name)) {
        if (!outer->has_outer && !wraps_compiled_graph(name)) {
            inner.outer_op = event->name;
            inner.outer_dims = event->input_dims;
            inner.outer_args = event->op_args;
            inner.has_outer = TRUE;
        }
        inner.inner_op = event->name;
    }
    if (event->comm >= 0) {
        inner.comm.outer = outer->comm.inner;
        inner.comm.inner = event->comm;
    }
    return inner;
}

static gint compare_scopes(gconstpointer left, gconstpointer right)
{
    const rv_event *a = *(rv_event *const *)left, *c = *(rv_event *const *)right;
    if (a->ts_ns != c->ts_ns) return a->ts_ns < c->ts_ns ? -1 : 1;
    if (a->dur_ns != c->dur_ns) return a->dur_ns > c->dur_ns ? -1 : 1;
    return (int)a->file_index - (int)c->file_index;
}

GPtrArray *builder_scopes_by_thread(builder *b)
{
    GPtrArray *per_thread = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    for (guint r = 0; r < b->graph->resources->len; r++) g_ptr_array_add(per_thread, g_ptr_array_new());
    GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        const rv_event *event = &g_array_index(events, rv_event, i);
        if (event->kind != RV_EV_CPU_OP && event->kind != RV_EV_USER_ANNOTATION &&
            event->kind != RV_EV_PYTHON_FUNCTION)
            continue;
        char key[64];
        g_snprintf(key, sizeof key, "%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, event->pid, event->tid);
        gpointer found = g_hash_table_lookup(b->cpu_resource, key);
        if (found != NULL)
            g_ptr_array_add(g_ptr_array_index(per_thread, GPOINTER_TO_INT(found) - 1), (gpointer)event);
    }
    for (guint r = 0; r < per_thread->len; r++) g_ptr_array_sort(g_ptr_array_index(per_thread, r), compare_scopes);
    return per_thread;
}

static gboolean is_autograd_thread(const builder *b, const GPtrArray *scopes)
{
    for (guint i = 0; i < scopes->len; i++) {
        const rv_event *event = g_ptr_array_index(scopes, i);
        if (g_str_has_prefix(rv_strings_get(b->graph->strings, event->name), "autograd::engine::evaluate_function"))
            return TRUE;
    }
    return FALSE;
}

/* The step whose annotation (same process) contains time t, or -1. */
static int32_t step_at(const builder *b, int64_t pid, int64_t t)
{
    GArray *steps = b->graph->steps;
    int32_t low = 0, high = (int32_t)steps->len;
    while (low < high) { /* last step beginning at or before t */
        int32_t middle = (low + high) / 2;
        if (g_array_index(steps, rv_step, middle).recorded_begin_ns <= t) low = middle + 1;
        else high = middle;
    }
    for (int32_t s = low - 1; s >= 0 && s >= low - 4; s--) {
        const rv_step *step = &g_array_index(steps, rv_step, s);
        int64_t annotation_end = rv_graph_task(b->graph, step->end_marker)->recorded_start_ns;
        if (g_array_index(b->step_pids, int64_t, s) == pid && t <= annotation_end) return s;
    }
    return -1;
}

static rv_phase phase_of(unsigned flags, gboolean autograd_thread, int32_t step, gboolean in_forward)
{
    if (flags & SCOPE_OPTIMIZER) return RV_PHASE_OPTIMIZER;
    if (flags & SCOPE_DATALOAD) return RV_PHASE_DATALOAD;
    if ((flags & SCOPE_BACKWARD) || autograd_thread) return RV_PHASE_BACKWARD;
    return step >= 0 || in_forward ? RV_PHASE_FORWARD : RV_PHASE_OTHER;
}

/* ---- forward without steps ------------------------------------------ */

typedef struct { int64_t begin_ns, end_ns; } interval;

static gint compare_int64(gconstpointer a, gconstpointer b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The first value in sorted values at or after from and before to, or -1. */
static int64_t first_in(const GArray *values, int64_t from, int64_t to)
{
    guint low = 0, high = values->len;
    while (low < high) {
        guint middle = (low + high) / 2;
        if (g_array_index(values, int64_t, middle) < from) low = middle + 1; else high = middle;
    }
    if (low < values->len && g_array_index(values, int64_t, low) < to) return g_array_index(values, int64_t, low);
    return -1;
}

static gboolean starts_backward(const rv_event *event, const char *name)
{
    if (event->kind == RV_EV_FLOW_END) return event->flow_category == RV_FLOW_FWDBWD;
    if (event->kind != RV_EV_CPU_OP && event->kind != RV_EV_USER_ANNOTATION && event->kind != RV_EV_PYTHON_FUNCTION)
        return FALSE;
    return (scope_flags(name) & SCOPE_BACKWARD) || g_str_has_prefix(name, "autograd::engine::evaluate_function");
}

/* The forward windows of a trace without steps, sorted and disjoint. */
static GArray *forward_windows(const builder *b)
{
    GArray *optimizer_ends = g_array_new(FALSE, FALSE, sizeof(int64_t));
    GArray *backward_starts = g_array_new(FALSE, FALSE, sizeof(int64_t));
    GArray *forward_starts = g_array_new(FALSE, FALSE, sizeof(int64_t));
    GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        const rv_event *event = &g_array_index(events, rv_event, i);
        const char *name = rv_strings_get(b->graph->strings, event->name);
        int64_t end = event->ts_ns + event->dur_ns;
        if (event->kind == RV_EV_FLOW_START && event->flow_category == RV_FLOW_FWDBWD)
            g_array_append_val(forward_starts, event->ts_ns);
        else if (starts_backward(event, name))
            g_array_append_val(backward_starts, event->ts_ns);
        else if (event->kind != RV_EV_FLOW_START && event->kind != RV_EV_FLOW_END && strstr(name, "Optimizer.step"))
            g_array_append_val(optimizer_ends, end);
    }
    g_array_sort(optimizer_ends, compare_int64);
    g_array_sort(backward_starts, compare_int64);
    g_array_sort(forward_starts, compare_int64);
    GArray *windows = g_array_new(FALSE, FALSE, sizeof(interval));
    for (guint k = 0; k <= optimizer_ends->len; k++) {
        int64_t from = k ? g_array_index(optimizer_ends, int64_t, k - 1) : G_MININT64;
        int64_t to = k < optimizer_ends->len ? g_array_index(optimizer_ends, int64_t, k) : G_MAXINT64;
        int64_t backward = first_in(backward_starts, from, to);
        if (backward < 0) continue;
        int64_t forward = forward_starts->len ? first_in(forward_starts, from, backward) : from;
        if (forward < 0 && forward_starts->len) continue;
        interval window = { forward, backward };
        g_array_append_val(windows, window);
    }
    g_array_unref(optimizer_ends);
    g_array_unref(backward_starts);
    g_array_unref(forward_starts);
    return windows;
}

static gboolean in_windows(const GArray *windows, int64_t t)
{
    if (windows == NULL) return FALSE;
    guint low = 0, high = windows->len;
    while (low < high) { /* first window ending after t */
        guint middle = (low + high) / 2;
        if (g_array_index(windows, interval, middle).end_ns <= t) low = middle + 1; else high = middle;
    }
    return low < windows->len && g_array_index(windows, interval, low).begin_ns <= t;
}

static void tag_thread(builder *b, int32_t resource, const GPtrArray *scopes, const GArray *forward)
{
    const rv_resource *thread = &g_array_index(b->graph->resources, rv_resource, resource);
    gboolean autograd_thread = is_autograd_thread(b, scopes);
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(scope));
    scope root = { G_MAXINT64, 0, 0, -1, -1, FALSE, FALSE, 0, { -1, -1 }, 0 };
    g_array_append_val(stack, root);
    guint next_scope = 0;
    GArray *tasks = builder_resource_tasks(b, resource);
    for (guint k = 0; k < tasks->len; k++) {
        rv_task *task = rv_graph_task(b->graph, g_array_index(tasks, int32_t, k));
        int64_t t = task->recorded_start_ns;
        while (stack->len > 1 && g_array_index(stack, scope, stack->len - 1).end_ns < t)
            g_array_set_size(stack, stack->len - 1);
        while (next_scope < scopes->len) {
            const rv_event *event = g_ptr_array_index(scopes, next_scope);
            if (event->ts_ns > t) break;
            next_scope++;
            while (stack->len > 1 && g_array_index(stack, scope, stack->len - 1).end_ns < event->ts_ns)
                g_array_set_size(stack, stack->len - 1);
            if (event->ts_ns + event->dur_ns < t) continue;
            scope inner = push_scope(b->graph->strings, &g_array_index(stack, scope, stack->len - 1), event);
            g_array_append_val(stack, inner);
        }
        const scope *top = &g_array_index(stack, scope, stack->len - 1);
        if (task->kind != RV_TASK_MARKER) task->step = step_at(b, thread->process, t);
        task->op = top->inner_op;
        task->layer = top->module ? top->module : top->outer_op;
        task->input_dims = top->outer_dims;
        rv_task_set_op_args(b->graph, g_array_index(tasks, int32_t, k), top->outer_args > 0 ? top->outer_args : 0);
        if (top->compiled) task->flags |= RV_TASK_FLAG_COMPILED;
        g_array_index(b->task_comm, comm_scope, g_array_index(tasks, int32_t, k)) = top->comm;
        if (task->kind == RV_TASK_DATALOAD) task->phase = RV_PHASE_DATALOAD;
        else if (task->kind != RV_TASK_MARKER) task->phase = (uint8_t)phase_of(top->flags, autograd_thread, task->step,
                                                                 in_windows(forward, t));
    }
    g_array_unref(stack);
}

static void tag_gpu_tasks(builder *b)
{
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        rv_task *task = rv_graph_task(b->graph, id);
        int32_t launch = g_array_index(b->task_launch, int32_t, id);
        if (!builder_is_gpu_task(task) || launch < 0) continue;
        const rv_task *call = rv_graph_task(b->graph, launch);
        task->op = call->op;
        task->layer = call->layer;
        task->input_dims = call->input_dims;
        rv_task_set_op_args(b->graph, id, rv_task_op_args(b->graph, launch));
        task->flags |= call->flags & RV_TASK_FLAG_COMPILED;
        task->phase = call->phase;
        task->step = call->step;
    }
}

void rv_build_tags(builder *b)
{
    GPtrArray *per_thread = builder_scopes_by_thread(b);
    GArray *forward = b->graph->steps->len == 0 ? forward_windows(b) : NULL;
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        if (resource->kind == RV_RES_CPU_THREAD)
            tag_thread(b, (int32_t)r, g_ptr_array_index(per_thread, r), forward);
    }
    if (forward) g_array_unref(forward);
    g_ptr_array_free(per_thread, TRUE);
    tag_gpu_tasks(b);
}
