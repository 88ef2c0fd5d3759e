/*
 * cuda_graphs.c - CUDA Graphs (torch.cuda.CUDAGraph / make_graphed_callables):
 * a captured region is replayed by one graph launch instead of the Python
 * and the launch calls that issued its kernels one by one.
 *
 *   reverie whatif trace.json.gz --opt cuda-graphs
 *   reverie whatif trace.json.gz --opt cuda-graphs:region=forward,static=assume
 *
 * WHICH ITERATIONS.  Capture needs static shapes: a graph replays fixed
 * pointers and sizes.  With static=check (the default) each step's
 * signature is the sequence of its GPU tasks' (kernel name, operator Input
 * Dims) in recorded order; a step qualifies when another step has the same
 * signature (or when the graph has one step only: nothing to compare).  A
 * step whose shapes differ from every other is left as it is, and the notes
 * name it.  A trace without Input Dims (record_shapes=False) is refused:
 * static=assume captures every step without the check, on the user's word.
 *
 * WHICH CALLS.  In each qualifying step, the CPU calls of the region
 * (region=step: every phase but data loading; forward, backward,
 * optimizer: that phase), on every thread, in recorded order, are cut into
 * segments, one graph each.  A segment ends at anything capture cannot
 * hold: a blocking call (synchronize, a blocking copy, .item()), memory
 * management (cudaMalloc, cudaFree, host allocation: they stay as
 * recorded, even where a replay would not make them), a call
 * that launches a collective (left to its stream: capturing NCCL needs its
 * own setup), a call outside the region, a thread's first call (nothing to
 * anchor the graph launch after), and, with region=step, at the start of
 * a new iteration (a forward call after backward or optimizer calls, so a
 * whole-trace step of many iterations makes one graph per iteration).  A
 * segment with fewer than two GPU tasks is left alone.
 *
 * THE GRAPH LAUNCH.  A segment's calls are removed with the host overhead
 * before them (replay runs none of that Python) except the first call's,
 * which stays on the new call: it is the time before the region began.
 * One "cudaGraphLaunch" call is inserted where the first call was, costing
 * launch_cost (0: the trace's median kernel launch call: a graph launch is
 * one driver call, taken to cost what one kernel launch does) plus
 * node_cost per GPU task.  Its end releases the segment's GPU tasks,
 * which follow each other on their streams.  These are plugin edges, not
 * launch edges: the launch-queue rule (graph.h) holds back a call per
 * kernel it launches, which a graph launch does not do; so the stream's
 * launch latency (0 to 3 us on the shipped traces) is not added, once per
 * graph.
 *
 * THE GAPS.  Inside a graph the GPU starts each kernel as the previous ends
 * plus the device's minimum inter-kernel gap.  The minimum is the trace's
 * own: the 5th percentile, per stream, of the gaps between back-to-back
 * GPU tasks whose launch call had ended before the previous task ended
 * (queued work, held back by nothing but the stream), at most the stream's
 * typical gap; gap= sets it instead.  The gap is a per-stream value in the
 * timing model (graph.h), so uncaptured GPU tasks on such a stream get it
 * too: the notes count them.
 */
#include "reverie/error.h"
#include "reverie/plugin.h"
#include "reverie/stats.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec cuda_graphs_params[] = {
    { "region", RV_PARAM_CHOICE, "step", NULL, "what one graph captures: a whole iteration, or one phase of it",
      "step|forward|backward|optimizer" },
    { "static", RV_PARAM_CHOICE, "check", NULL,
      "check: only steps whose Input Dims match another step's; assume: every step (traces without shapes)",
      "check|assume" },
    { "launch_cost", RV_PARAM_DURATION, "0us", "us", "CPU time of one cudaGraphLaunch (0: the trace's median kernel launch)",
      NULL },
    { "node_cost", RV_PARAM_DURATION, "0us", "us", "extra launch CPU time per GPU task in the graph (0: one graph launch replaces all; measure yours if the graph is large)", NULL },
    { "gap", RV_PARAM_DURATION, "0us", "us",
      "inter-kernel gap inside a graph (0: per stream, the 5th percentile of the trace's back-to-back gaps)", NULL },
    { NULL }
};

/* What each CPU call launched, in compressed rows (call c's GPU tasks are
 * gpu[first[c] .. first[c + 1]), in id order), and whether one is a
 * collective: flat arrays, not a list per call (a 1M-task graph has half
 * a million calls). */
typedef struct {
    int32_t *first;
    int32_t *gpu;
    int32_t *launcher;  /* per task: the call that launched it (live GPU tasks), else -1 */
    guint8 *collective;
    guint calls;        /* how many launched something */
    GByteArray *forbidden; /* by name id: forbidden_name's verdicts */
} launches;

static void launches_init(launches *l, const rv_graph *graph)
{
    int32_t n = rv_graph_task_count(graph);
    int32_t *launcher = rv_graph_launch_calls(graph);
    l->first = g_new0(int32_t, n + 1);
    l->collective = g_new0(guint8, MAX(n, 1));
    l->calls = 0;
    l->forbidden = g_byte_array_sized_new((guint)rv_strings_count(graph->strings));
    g_byte_array_set_size(l->forbidden, (guint)rv_strings_count(graph->strings));
    memset(l->forbidden->data, 0, l->forbidden->len);
    for (int32_t id = 0; id < n; id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) launcher[id] = -1;
        if (launcher[id] < 0) continue;
        l->calls += l->first[launcher[id] + 1]++ == 0;
        if (task->kind == RV_TASK_COMM || task->collective > 0 || (task->flags & RV_TASK_FLAG_RENDEZVOUS))
            l->collective[launcher[id]] = 1;
    }
    for (int32_t c = 0; c < n; c++) l->first[c + 1] += l->first[c];
    l->gpu = g_new(int32_t, MAX(l->first[n], 1));
    int32_t *fill = g_memdup2(l->first, sizeof(int32_t) * (gsize)(n + 1));
    for (int32_t id = 0; id < n; id++)
        if (launcher[id] >= 0) l->gpu[fill[launcher[id]]++] = id;
    g_free(fill);
    l->launcher = launcher;
}

static void launches_clear(launches *l)
{
    g_free(l->first);
    g_free(l->gpu);
    g_free(l->launcher);
    g_free(l->collective);
    g_byte_array_unref(l->forbidden);
}

/* ---- which steps are static ------------------------------------------- */

static gboolean graph_has_shapes(const rv_graph *graph)
{
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++)
        if (g_array_index(graph->tasks, rv_task, id).input_dims >= 0) return TRUE;
    return FALSE;
}

/* A step's signature: its GPU tasks' (name, Input Dims) string ids in
 * recorded order, folded into 64 bits, with their count. */
typedef struct {
    guint64 hash;
    guint count;
} signature;

static signature step_signature(const rv_graph *graph, GArray *gpu_tasks)
{
    signature s = { 1469598103934665603ull, gpu_tasks->len };
    for (guint i = 0; i < gpu_tasks->len; i++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, g_array_index(gpu_tasks, int32_t, i));
        guint64 pair = ((guint64)(guint32)task->name << 32) | (guint32)task->input_dims;
        for (int b = 0; b < 8; b++) s.hash = (s.hash ^ ((pair >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
    return s;
}

/* Inside a step; with no ProfilerStep the whole trace (step -1) is one. */
static gboolean in_a_step(const rv_graph *graph, const rv_task *task)
{
    return task->step >= 0 || graph->steps->len == 0;
}

/* A live GPU task inside a step: list 0 (rv_step_lists). */
static int gpu_in_step(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)id;
    (void)data;
    return !(task->flags & RV_TASK_FLAG_REMOVED) && (task->flags & RV_TASK_FLAG_GPU) && in_a_step(graph, task) ? 0 : -1;
}

/* The steps that qualify: a flag by step + 1 (as rv_step_lists), and how many. */
typedef struct {
    guint8 *steps;
    guint count;
} qualified_steps;

/* The steps that qualify; the others are named in `left`.  With
 * static=assume every step with GPU work does: no signature (nor the sort
 * it needs) is worked out, since none is compared. */
static qualified_steps static_steps(const rv_graph *graph, gboolean check, GString *left)
{
    rv_step_lists by_step = rv_step_lists_new(graph, 1, gpu_in_step, NULL);
    guint slots = by_step.slots, steps = 0;
    for (guint s = 0; s < slots; s++) steps += rv_step_lists_get(&by_step, (int32_t)s - 1, 0)->len > 0;
    signature *sigs = g_new0(signature, slots);
    for (guint s = 0; check && s < slots; s++) {
        GArray *tasks = rv_step_lists_get(&by_step, (int32_t)s - 1, 0);
        if (tasks->len == 0) continue;
        rv_tasks_sort_recorded(graph, tasks);
        sigs[s] = step_signature(graph, tasks);
    }
    qualified_steps qualified = { g_new0(guint8, slots), 0 };
    for (guint s = 0; s < slots; s++) {
        if (rv_step_lists_get(&by_step, (int32_t)s - 1, 0)->len == 0) continue;
        gboolean twin = !check || steps == 1;
        for (guint j = 0; j < slots && !twin; j++)
            twin = j != s && rv_step_lists_get(&by_step, (int32_t)j - 1, 0)->len > 0 && sigs[j].hash == sigs[s].hash &&
                   sigs[j].count == sigs[s].count;
        int32_t step = (int32_t)s - 1;
        if (twin) {
            qualified.steps[s] = 1;
            qualified.count++;
        } else if (step >= 0) {
            const rv_step *info = &g_array_index(graph->steps, rv_step, step);
            g_string_append_printf(left, "%s%s", left->len ? ", " : "", rv_strings_get(graph->strings, info->name));
        }
    }
    g_free(sigs);
    rv_step_lists_free(&by_step);
    return qualified;
}

/* ---- segments ----------------------------------------------------------- */

typedef struct {
    GArray *calls; /* CPU calls to remove, recorded order */
    GArray *gpu;   /* the GPU tasks they launched */
} segment;

static void segment_free(gpointer data)
{
    segment *s = data;
    g_array_unref(s->calls);
    g_array_unref(s->gpu);
    g_free(s);
}

static gboolean in_region(const char *region, rv_phase phase)
{
    if (strcmp(region, "step") == 0) return phase != RV_PHASE_DATALOAD;
    return strcmp(region, rv_phase_name(phase)) == 0;
}

/* Memory management and synchronization: illegal while a stream is being
 * captured (they would invalidate the capture), so they stay as recorded. */
static gboolean forbidden_in_capture(const char *name)
{
    static const char *const words[] = { "Malloc", "Free", "Synchronize", "HostAlloc", "HostRegister", "MemcpyToSymbol", NULL };
    for (int i = 0; words[i]; i++)
        if (strstr(name, words[i])) return TRUE;
    return FALSE;
}

/* forbidden_in_capture of a name id, worked out once per distinct name
 * (by id: 0 not yet, 1 allowed, 2 forbidden): six substring searches per
 * CPU task were a tenth of the apply, over a few hundred distinct names. */
static gboolean forbidden_name(const rv_graph *graph, GByteArray *verdicts, int32_t name)
{
    if (name < 0 || (guint)name >= verdicts->len) return forbidden_in_capture(rv_strings_get(graph->strings, name));
    if (verdicts->data[name] == 0)
        verdicts->data[name] = forbidden_in_capture(rv_strings_get(graph->strings, name)) ? 2 : 1;
    return verdicts->data[name] == 2;
}

/* Can this CPU task go into a graph? */
static gboolean capturable(const rv_graph *graph, const launches *l, const char *region, int32_t id)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    if (task->kind != RV_TASK_CPU || (task->flags & (RV_TASK_FLAG_BLOCKING | RV_TASK_FLAG_INSERTED))) return FALSE;
    if (forbidden_name(graph, l->forbidden, task->name)) return FALSE;
    if (!in_region(region, (rv_phase)task->phase)) return FALSE;
    if (l->collective[id]) return FALSE;
    return rv_graph_resource_previous(graph, id) >= 0;
}

/* A run of capturable calls, cpu_tasks[start ..) of one step, and the GPU
 * tasks they launched. */
typedef struct {
    gboolean open, past_forward;
    guint start, gpu;
} run;

/* End the run at cpu_tasks[end]: a segment if it launched two GPU tasks
 * or more.  Its arrays are sized once and copied into, not appended to
 * call by call (an append per call and per launch was a tenth of the
 * apply). */
static void close_run(const launches *l, const int32_t *ids, guint end, run *r, GPtrArray *out)
{
    if (!r->open) return;
    r->open = FALSE;
    if (r->gpu < 2) return;
    segment *s = g_new0(segment, 1);
    s->calls = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), end - r->start);
    g_array_append_vals(s->calls, ids + r->start, end - r->start);
    s->gpu = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), r->gpu);
    g_array_set_size(s->gpu, r->gpu);
    int32_t *at = (int32_t *)s->gpu->data;
    for (guint k = r->start; k < end; k++) {
        int32_t id = ids[k], launched = l->first[id + 1] - l->first[id];
        memcpy(at, l->gpu + l->first[id], sizeof(int32_t) * (gsize)launched);
        at += launched;
    }
    g_ptr_array_add(out, s);
}

/* The segments of one step's CPU tasks (all threads, recorded order). */
static void step_segments(const rv_graph *graph, const launches *l, const char *region, GArray *cpu_tasks,
                          GPtrArray *out)
{
    rv_tasks_sort_recorded(graph, cpu_tasks);
    const int32_t *ids = (const int32_t *)cpu_tasks->data;
    run r = { FALSE, FALSE, 0, 0 };
    gboolean whole_step = strcmp(region, "step") == 0;
    for (guint i = 0; i < cpu_tasks->len; i++) {
        int32_t id = ids[i];
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!capturable(graph, l, region, id)) {
            /* a zero-length marker or data loading on another thread breaks
             * nothing the graph holds, but we stay simple: every task that
             * cannot be captured ends the graph */
            close_run(l, ids, i, &r, out);
            continue;
        }
        if (whole_step && task->phase == RV_PHASE_FORWARD && r.past_forward) close_run(l, ids, i, &r, out);
        if (!r.open) r = (run){ TRUE, FALSE, i, 0 };
        if (task->phase == RV_PHASE_BACKWARD || task->phase == RV_PHASE_OPTIMIZER) r.past_forward = TRUE;
        r.gpu += (guint)(l->first[id + 1] - l->first[id]);
    }
    close_run(l, ids, cpu_tasks->len, &r, out);
}

/* ---- the gaps ------------------------------------------------------------ */

/* The recorded gap before GPU task `id` on its stream when it was queued
 * back to back behind the previous one (its launch call had ended before
 * that one did), else -1. */
static int64_t queued_gap(const rv_graph *graph, const launches *l, int32_t id)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    if ((task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED)) || !(task->flags & RV_TASK_FLAG_GPU)) return -1;
    int32_t previous = rv_graph_resource_previous(graph, id), call = l->launcher[id];
    if (previous < 0 || call < 0) return -1;
    const rv_task *before = &g_array_index(graph->tasks, rv_task, previous);
    const rv_task *launch = &g_array_index(graph->tasks, rv_task, call);
    if (before->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_INSERTED | RV_TASK_FLAG_RENDEZVOUS)) return -1;
    int64_t before_end = before->recorded_start_ns + before->duration_ns;
    if (launch->recorded_start_ns + launch->duration_ns > before_end) return -1; /* not queued */
    int64_t gap = task->recorded_start_ns - before_end;
    return gap < 0 ? -1 : gap;
}

/* Per stream (resource index + 1 -> GArray of int64 ns, or absent): the
 * recorded gaps between back-to-back queued GPU tasks, in id order, for
 * their 5th percentile.  Each task's launch call is the one launches_init
 * found (the graph is as it was).  Counted first and written in place: an
 * append per GPU task was a twentieth of the apply. */
static GHashTable *minimum_gaps(const rv_graph *graph, const launches *l)
{
    int32_t n = rv_graph_task_count(graph);
    guint streams = graph->resources->len;
    int64_t *gap = g_new(int64_t, MAX(n, 1));
    guint *count = g_new0(guint, MAX(streams, 1));
    for (int32_t id = 0; id < n; id++) {
        gap[id] = queued_gap(graph, l, id);
        if (gap[id] >= 0) count[g_array_index(graph->tasks, rv_task, id).resource]++;
    }
    GHashTable *samples = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
    int64_t **fill = g_new0(int64_t *, MAX(streams, 1));
    for (guint r = 0; r < streams; r++) {
        if (count[r] == 0) continue;
        GArray *list = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), count[r]);
        g_array_set_size(list, count[r]);
        fill[r] = (int64_t *)list->data;
        g_hash_table_insert(samples, GINT_TO_POINTER((int32_t)r + 1), list);
    }
    for (int32_t id = 0; id < n; id++)
        if (gap[id] >= 0) *fill[g_array_index(graph->tasks, rv_task, id).resource]++ = gap[id];
    g_free(fill);
    g_free(count);
    g_free(gap);
    return samples;
}

static gint compare_keys(gconstpointer a, gconstpointer b)
{
    return GPOINTER_TO_INT(a) - GPOINTER_TO_INT(b);
}

/* Set the captured streams' gaps; a line per stream in notes. */
static void shrink_gaps(rv_graph *graph, GHashTable *samples, GHashTable *captured_streams, int64_t gap_given,
                        GString *notes)
{
    GList *streams = g_hash_table_get_keys(captured_streams);
    streams = g_list_sort(streams, compare_keys);
    for (GList *s = streams; s; s = s->next) {
        int32_t resource = GPOINTER_TO_INT(s->data) - 1;
        rv_resource *stream = &g_array_index(graph->resources, rv_resource, resource);
        GArray *list = g_hash_table_lookup(samples, s->data);
        int64_t minimum = stream->idle_gap_ns;
        const char *how = "no back-to-back sample: the stream's typical gap kept";
        char *why = NULL;
        if (gap_given > 0) {
            minimum = gap_given;
            how = "gap= as given";
        } else if (list && list->len > 0) {
            minimum = MIN(stream->idle_gap_ns, rv_quantile_int64(list, 0.05, stream->idle_gap_ns));
            why = g_strdup_printf("5th percentile of %u back-to-back gaps", list->len);
            how = why;
        }
        guint uncaptured = GPOINTER_TO_UINT(g_hash_table_lookup(captured_streams, s->data)) - 1;
        char *was = rv_format_duration(stream->idle_gap_ns), *now = rv_format_duration(minimum);
        g_string_append_printf(notes, "    %s: inter-kernel gap %s -> %s (%s); %u uncaptured GPU tasks there get it too\n",
                               rv_strings_get(graph->strings, stream->name), was, now, how, uncaptured);
        stream->idle_gap_ns = minimum;
        g_free(was);
        g_free(now);
        g_free(why);
    }
    g_list_free(streams);
}

/* ---- the transformation -------------------------------------------------- */

/* The last task before `task` on its resource that is not one of segment
 * `segment`'s calls (segment_of: per task, its segment or -1).  A call of an
 * earlier segment is one: the launch goes after it, so that launches on one
 * thread keep the order of their segments. */
static int32_t previous_survivor(const rv_graph *graph, int32_t task, const int32_t *segment_of, int32_t segment)
{
    int32_t previous = rv_graph_resource_previous(graph, task);
    while (previous >= 0 && segment_of[previous] == segment) previous = rv_graph_resource_previous(graph, previous);
    return previous;
}

/* The graph launch that replaces one segment, inserted where its first
 * call was; the CPU time removed goes to *removed_ns.  -1 on error. */
static int32_t graph_launch(rv_graph *graph, const segment *s, const int32_t *segment_of, int32_t index,
                            int64_t launch_ns, int64_t node_ns, int64_t *removed_ns, GError **error)
{
    int32_t first = g_array_index(s->calls, int32_t, 0);
    rv_task call = *rv_graph_task(graph, first);
    for (guint i = 0; i < s->calls->len; i++) {
        const rv_task *old = rv_graph_task(graph, g_array_index(s->calls, int32_t, i));
        *removed_ns += old->duration_ns + (i > 0 ? old->host_overhead_ns : 0);
    }
    call.name = rv_strings_intern(graph->strings, "cudaGraphLaunch");
    call.kind = RV_TASK_CPU;
    call.flags = 0;
    call.correlation = -1;
    call.bytes = 0;
    double ns = (double)launch_ns + (double)node_ns * s->gpu->len;
    if (!rv_task_duration_from(graph, -1, ns, "the cuda-graphs launch_cost and node_cost", &call.duration_ns, error))
        return -1;
    *removed_ns -= call.duration_ns;
    rv_insert_spec spec = { call, previous_survivor(graph, first, segment_of, index), -1 };
    return rv_transform_insert(graph, &spec, error);
}

/*
 * Replace every segment by a graph launch.  The calls go in one
 * rv_transform_replace_regions, each segment a region its launch stands
 * for: what a captured call waited for, the launch waits for; what waited
 * for one (its kernels, the calls after it), waits for the launch.  The
 * edges to the kernels are plugin edges, not launch edges: the
 * launch-queue rule (graph.h) holds a call per kernel it launches, which a
 * graph launch does not do.  (Bypassing the calls instead - joining each
 * task before them to every task after them - joined a thread whose calls
 * are all captured, the backward thread with region=step, to every later
 * step's kernels: edges quadratic in the steps.)
 */
static gboolean collapse_all(rv_graph *graph, const GPtrArray *segments, int64_t launch_ns, int64_t node_ns,
                             int64_t *removed_ns, GError **error)
{
    /* room for the launches too (one task each), which previous_survivor may pass */
    int32_t n = rv_graph_task_count(graph) + (int32_t)segments->len, *segment_of = g_new(int32_t, MAX(n, 1));
    for (int32_t t = 0; t < n; t++) segment_of[t] = -1;
    GArray *victims = g_array_new(FALSE, FALSE, sizeof(int32_t)), *region_of = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint i = 0; i < segments->len; i++) {
        const segment *s = g_ptr_array_index(segments, i);
        for (guint k = 0; k < s->calls->len; k++) {
            int32_t call = g_array_index(s->calls, int32_t, k), region = (int32_t)i;
            segment_of[call] = region;
            g_array_append_val(victims, call);
            g_array_append_val(region_of, region);
        }
    }
    int32_t *launches = g_new(int32_t, MAX(segments->len, 1));
    rv_region *regions = g_new(rv_region, MAX(segments->len, 1));
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < segments->len; i++) {
        launches[i] = graph_launch(graph, g_ptr_array_index(segments, i), segment_of, (int32_t)i, launch_ns, node_ns,
                                   removed_ns, error);
        regions[i] = (rv_region){ launches[i], &launches[i], 1, TRUE };
        ok = launches[i] >= 0;
    }
    if (ok) rv_transform_replace_regions(graph, victims, region_of, regions, NULL, RV_REMOVE_DROP_OVERHEAD);
    g_free(regions);
    g_free(launches);
    g_array_unref(victims);
    g_array_unref(region_of);
    g_free(segment_of);
    return ok;
}

/* A live CPU task in a qualifying step: list 0 (rv_step_lists). */
static int cpu_in_qualified(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    const qualified_steps *qualified = data;
    (void)id;
    return !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_GPU)) && in_a_step(graph, task) &&
                   qualified->steps[task->step + 1]
               ? 0
               : -1;
}

/* Every qualifying step's segments, step by step. */
static GPtrArray *find_segments(const rv_graph *graph, const launches *l, const char *region,
                                const qualified_steps *qualified)
{
    rv_step_lists cpu_by_step = rv_step_lists_new(graph, 1, cpu_in_qualified, (gpointer)qualified);
    GPtrArray *segments = g_ptr_array_new_with_free_func(segment_free);
    for (guint s = 0; s < cpu_by_step.slots; s++) {
        GArray *calls = rv_step_lists_get(&cpu_by_step, (int32_t)s - 1, 0);
        if (calls->len) step_segments(graph, l, region, calls, segments);
    }
    rv_step_lists_free(&cpu_by_step);
    return segments;
}

/* Streams that hold captured GPU tasks -> 1 + how many of their GPU tasks
 * are not captured.  A flag per task and a count per stream: hash tables
 * of every captured task were an eighth of the apply. */
static GHashTable *captured_streams(const rv_graph *graph, const GPtrArray *segments)
{
    guint8 *captured = g_new0(guint8, MAX(rv_graph_task_count(graph), 1));
    guint *uncaptured = g_new0(guint, MAX(graph->resources->len, 1));
    guint8 *holds = g_new0(guint8, MAX(graph->resources->len, 1));
    for (guint i = 0; i < segments->len; i++) {
        const segment *s = g_ptr_array_index(segments, i);
        for (guint j = 0; j < s->gpu->len; j++) {
            int32_t id = g_array_index(s->gpu, int32_t, j);
            captured[id] = 1;
            holds[g_array_index(graph->tasks, rv_task, id).resource] = 1;
        }
    }
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED) && (task->flags & RV_TASK_FLAG_GPU) && !captured[id] && holds[task->resource])
            uncaptured[task->resource]++;
    }
    GHashTable *streams = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint r = 0; r < graph->resources->len; r++)
        if (holds[r]) g_hash_table_insert(streams, GINT_TO_POINTER((int32_t)r + 1), GUINT_TO_POINTER(uncaptured[r] + 1));
    g_free(captured);
    g_free(uncaptured);
    g_free(holds);
    return streams;
}

static gboolean cuda_graphs_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    const char *region = rv_params_string(params, "region");
    gboolean check = strcmp(rv_params_string(params, "static"), "check") == 0;
    launches l;
    launches_init(&l, graph);
    if (l.calls == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the trace has no kernel launch calls (no GPU task with its launching CPU call), so there is nothing to capture");
        launches_clear(&l);
        return FALSE;
    }
    if (check && !graph_has_shapes(graph)) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace records no operator shapes (Input Dims, record_shapes=True) to tell static iterations; "
                    "give static=assume to capture every step anyway");
        launches_clear(&l);
        return FALSE;
    }
    GString *left = g_string_new(NULL);
    qualified_steps qualified = static_steps(graph, check, left);
    GPtrArray *segments = find_segments(graph, &l, region, &qualified);
    gboolean ok = TRUE;
    if (segments->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no %s region to capture: %s",
                    strcmp(region, "step") == 0 ? "step" : region,
                    qualified.count == 0 ? "no step has static shapes (each step's Input Dims differ from every other's)"
                                                      : "no run of two or more GPU tasks launched by calls capture can hold");
        ok = FALSE;
    }
    GHashTable *gaps = ok ? minimum_gaps(graph, &l) : NULL;
    GHashTable *streams = ok ? captured_streams(graph, segments) : NULL;
    int64_t launch_ns = rv_params_duration_ns(params, "launch_cost");
    if (launch_ns == 0) launch_ns = rv_graph_typical_launch_ns(graph);
    int64_t removed_ns = 0;
    guint kernels = 0, calls = 0;
    for (guint i = 0; ok && i < segments->len; i++) {
        const segment *s = g_ptr_array_index(segments, i);
        kernels += s->gpu->len;
        calls += s->calls->len;
    }
    if (ok) ok = collapse_all(graph, segments, launch_ns, rv_params_duration_ns(params, "node_cost"), &removed_ns, error);
    if (ok) {
        char *each = rv_format_duration(launch_ns), *saved = rv_format_duration(removed_ns);
        g_string_append_printf(output->notes,
                               "    region=%s: %u graphs in %u steps replace %u CPU calls launching %u GPU tasks; "
                               "graph launch %s each; CPU time removed %s\n",
                               region, segments->len, qualified.count, calls, kernels, each, saved);
        if (left->len) g_string_append_printf(output->notes, "    left alone (shapes differ from every other step): %s\n", left->str);
        if (!check) g_string_append(output->notes, "    static=assume: shapes not checked\n");
        g_free(each);
        g_free(saved);
        shrink_gaps(graph, gaps, streams, rv_params_duration_ns(params, "gap"), output->notes);
    }
    if (gaps) g_hash_table_destroy(gaps);
    if (streams) g_hash_table_destroy(streams);
    g_ptr_array_unref(segments);
    g_free(qualified.steps);
    g_string_free(left, TRUE);
    launches_clear(&l);
    return ok;
}

/* The composition law (compose.h): launch calls and their Python replaced by graph launches; the streams' gaps
 * set to the device minimum. */
static const rv_plugin_effects cuda_graphs_effects = {
    .reads = RV_ASPECT_HOST | RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .reads_time = 0,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_HOST | RV_ASPECT_GPU_WORK,
    .order = RV_ORDER(RV_STAGE_EXECUTION, 20),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "cuda-graphs",
    "CUDA Graphs: each static iteration's (or phase's) launch calls and their Python become one graph launch; "
    "kernels inside run at the device's minimum gap",
    cuda_graphs_params, cuda_graphs_apply, &cuda_graphs_effects,
};
