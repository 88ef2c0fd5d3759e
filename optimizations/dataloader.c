/*
 * dataloader.c - a faster input pipeline.
 *
 *   reverie whatif trace.json.gz --opt dataloader:workers=4
 *   reverie whatif trace.json.gz --opt 'dataloader:remaining=1ms'
 *
 * The loading work of a step is what the recording shows in the training
 * process: the duration and host overhead of its data-loading tasks (the
 * "enumerate(DataLoader)" annotation's task and the CPU calls inside it).
 *
 * workers=N (a DataLoader with N worker processes; the recording used
 * num_workers=0).  What moves and what stays, as PyTorch does it:
 *   - each step's loading work runs on one of N worker channels, batch i on
 *     worker i mod N, a worker at most `prefetch` batches ahead of the
 *     training loop (prefetch_factor): the training process waits for its
 *     batch only when the workers cannot keep up; in a job of several ranks
 *     each rank has N workers of its own, on its rank;
 *   - the training process keeps a hand-off per batch (`handoff`: getting
 *     it from the queue and unpickling its tensors out of shared memory,
 *     which connects to the worker for each tensor's file descriptor: a
 *     near-fixed cost, measured by tests/bench/dataloader_handoff.py);
 *   - with pin_memory=True (the recording's batch copies read pinned
 *     memory, or pin_memory=on) that hand-off runs on the training
 *     process's pin_memory thread, one batch after another, and the
 *     training loop only takes the pinned batch from that thread's queue
 *     (`pinned_get`); the recorded pinning stays in the batch's load, which
 *     comes before it either way;
 *   - the batch arrives in shared memory the training process has never
 *     touched, so the first copy that reads it (its pageable host-to-device
 *     copy) pays a minor page fault per 4 KiB page (`page_fault`; none with
 *     pin_memory, whose thread touches the pages as it pins them);
 *   - the window is a sample of a long run (start=steady): the workers have
 *     been loading since before it, each one batch further through its
 *     cycle than the one before, so worker w's first batch in the window has
 *     (w + 1) / N of its loading left and batches arrive every load / N
 *     from the start, as they do once the pipeline has filled.  A trace
 *     cannot show where the workers stood when it began; start=cold starts
 *     all N at the window's first instant (a freshly made iterator);
 *   - each worker runs with one intra-op thread (PyTorch's worker loop calls
 *     torch.set_num_threads(1)), while the recorded process may have run
 *     its transform's larger operators on several: a batch can take a
 *     worker longer than it took the recording (`worker_slowdown`, 1 by
 *     default: the trace cannot show how much the threads helped), and
 *     each worker's batch carries a range up to `worker_slowdown_high`
 *     times that (range.h), so that reports give the step at both ends;
 *   - the recorded process ran its loading under the profiler, which
 *     costs each operator it records (graph.h's profiler_op_cost x
 *     profiler_whole_cost); workers made before the profiler started do
 *     not pay it.  Its share of a batch is the range's low end, not the
 *     point: on record.py's tensor transform the two effects offset (an
 *     H100 batch: 209 ms profiled, 140 ms without the profiler's estimated
 *     share, 204 ms on each of 4 one-thread workers, measured);
 *   - the workers' loading runs beside the training process on the same
 *     host and slows its host work (CPU calls and host overheads) by
 *     `interference` while they load: by interference x the fraction of
 *     the step that workers are loading (loading time / the rest of the
 *     step, at most 1).  The recordings show the slowdown barely growing
 *     from 2 to 8 workers, so it is taken while workers load, not per
 *     worker.  How much (shared cores, caches, memory bandwidth, turbo
 *     bins) is a property of the host that a num_workers=0 trace cannot
 *     show, so the default is a prior: the median over the variants the
 *     project recorded with 2-8 workers on H100 and H200 hosts, each
 *     against its own run's num_workers=0 recording
 *     (tests/bench/dataloader_interference.py, which the accuracy suite
 *     runs to keep this figure its median).  The notes give the effect of
 *     the recordings' quartiles and of each 0.1.
 * remaining=T (workers=0): the loading work of each step shrinks to T, in
 * the training process (a cache, a faster decoder).
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/range.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <math.h>
#include <string.h>

#define PAGE_BYTES 4096

/* How much slower the training loop ran while workers loaded, over the 13
 * variants traces/recorded/ holds (ResNet-18 with 2, 4 and 8 workers, five
 * runs on one H100 and one H200 host, each against its own run's
 * num_workers=0 recording): the median and quartiles that
 * tests/bench/dataloader_interference.py prints.  The accuracy suite runs
 * that script and fails when the median is no longer INTERFERENCE_MEDIAN. */
#define INTERFERENCE_MEDIAN "0.218"
#define INTERFERENCE_LOW "0.136"
#define INTERFERENCE_HIGH "0.349"
/* The most workers those recordings had: beyond it the prior is unmeasured. */
#define INTERFERENCE_WORKERS_MEASURED 8

static const rv_param_spec dataloader_params[] = {
    { "workers", RV_PARAM_INTEGER, "0", NULL,
      "DataLoader worker processes (0: keep loading in the training process, shrunk to `remaining`)", NULL },
    { "remaining", RV_PARAM_DURATION, "1ms", "ns", "workers=0: data-loading CPU time left per step (an example: give yours)", NULL },
    { "prefetch", RV_PARAM_INTEGER, "2", NULL, "batches each worker loads ahead (PyTorch's prefetch_factor)", NULL },
    { "handoff", RV_PARAM_DURATION, "1850us", "ns",
      "training-process time per batch to take it from a worker (queue get, receiving its tensors' shared "
      "memory); a workers=0 trace cannot show it: measured with tests/bench/dataloader_handoff.py (PyTorch "
      "1.13, 4 workers, 18.4 MiB batches: median 1.83-1.86 ms); measure yours", NULL },
    { "page_fault", RV_PARAM_DURATION, "250ns", "ns",
      "first touch of each 4 KiB page of a batch in shared memory, paid by its pageable host-to-device copy "
      "(Linux minor fault on x86, 0.1-0.5 us measured)", NULL },
    { "start", RV_PARAM_CHOICE, "steady", NULL,
      "where the workers stand when the window begins: steady (a sample of a long run: batches arrive every load / N "
      "from the start) or cold (all N start loading at the window's first instant, as a fresh iterator does)",
      "steady|cold" },
    { "worker_slowdown", RV_PARAM_NUMBER, "1", "x",
      "how much longer a batch takes a worker than it took the recorded process: workers run with one intra-op "
      "thread (torch.set_num_threads(1)), the recorded process with several; 1 assumes the threads did not help "
      "(a num_workers=0 trace cannot show it: tests/bench/dataloader_threads.py measures it for your dataset)",
      NULL },
    { "worker_slowdown_high", RV_PARAM_NUMBER, "1.5", "x",
      "the high end of a worker's batch time, as a multiple of worker_slowdown: reports replay both ends and print "
      "the range (1: none). 1.5 from tests/bench/dataloader_threads.py on record.py's tensor transform: 1.10-1.53 "
      "with 2 and 4 workers on H200 hosts, 1.55-1.62 on an H100 host (2.08 once with 8 workers on 16 CPUs)", NULL },
    { "profiler_whole_cost", RV_PARAM_NUMBER, RV_PROFILER_WHOLE_COST, "x",
      "the profiler's cost per operator recorded in the loading, over the trace's bound (as unprofiled's "
      "whole_cost): that share of a batch, which workers do not pay, is the range's low end (0: none)", NULL },
    { "pin_memory", RV_PARAM_CHOICE, "auto", NULL,
      "auto: as the recording's batch copies show (from pinned memory: PyTorch's pin_memory=True), on or off; "
      "with it the hand-off runs on the pin_memory thread and the training loop takes the batch from its queue",
      "auto|on|off" },
    { "pinned_get", RV_PARAM_DURATION, "54us", "ns",
      "pin_memory: training-process time per batch to take it from the pin_memory thread's queue; the median of "
      "the 10th percentiles of a ready batch's next() in the 13 variants traces/recorded/ holds (PyTorch 2.11, "
      "0.040-0.074 ms; tests/bench/dataloader_interference.py); measure yours", NULL },
    { "interference", RV_PARAM_NUMBER, INTERFERENCE_MEDIAN, "x",
      "slowdown of the training process's host work while workers load, a host property the trace cannot show: "
      "the median of 13 variants recorded with 2-8 workers on H100 and H200 hosts (quartiles " INTERFERENCE_LOW "-"
      INTERFERENCE_HIGH ", tests/bench/dataloader_interference.py); give your host's (0: free cores)", NULL },
    { NULL }
};

/* One step's loading in one rank: its tasks and their total time. */
typedef struct {
    int32_t step;
    int32_t rank;           /* rank index (graph->ranks), -1 where the graph names none */
    GArray *tasks;          /* data-loading CPU tasks of the step */
    int32_t handoff_task;   /* the DATALOAD task that becomes the hand-off, or -1 */
    int64_t work_ns;        /* duration + host overhead of the tasks */
    uint64_t operators;     /* operators the profiler recorded in the loading */
} step_loading;

static gboolean is_loading(const rv_task *task)
{
    if (task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_GPU)) return FALSE;
    return task->kind == RV_TASK_DATALOAD || (task->kind == RV_TASK_CPU && task->phase == RV_PHASE_DATALOAD);
}

/* A loading task's list (rv_step_lists): its rank index + 1, or 0 where
 * the graph names no rank of it (a graph built by hand). */
static int loading_list(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)id;
    (void)data;
    if (!is_loading(task)) return -1;
    int32_t rank = rv_task_rank_index(graph, task);
    return rank >= 0 && (guint)rank < graph->ranks->len ? rank + 1 : 0;
}

/* A step's loading in one rank, from its loading tasks. */
static step_loading loading_of(rv_graph *graph, int32_t step, int32_t rank, GArray *tasks)
{
    step_loading loading = { step, rank, g_array_ref(tasks), -1, 0, 0 };
    rv_tasks_sort_recorded(graph, loading.tasks);
    /* The loader task's own host overhead is the training loop's Python
     * before next(): not loading, nor are the operators recorded there.
     * The calls inside the loader are. */
    for (guint i = 0; i < loading.tasks->len; i++) {
        const rv_task *task = rv_graph_task(graph, g_array_index(loading.tasks, int32_t, i));
        gboolean first_loader = task->kind == RV_TASK_DATALOAD && loading.handoff_task < 0;
        loading.work_ns += task->duration_ns + (first_loader ? 0 : task->host_overhead_ns);
        if (!first_loader) loading.operators += rv_task_host_operators(graph, g_array_index(loading.tasks, int32_t, i));
        if (first_loader) loading.handoff_task = g_array_index(loading.tasks, int32_t, i);
    }
    return loading;
}

/* The loading of every rank and step that has some, rank by rank, each
 * rank's in step order (free with free_loadings). */
static GArray *collect_loadings(rv_graph *graph)
{
    rv_step_lists by_step = rv_step_lists_new(graph, graph->ranks->len + 1, loading_list, NULL);
    GArray *loadings = g_array_new(FALSE, TRUE, sizeof(step_loading));
    for (guint list = 0; list < by_step.list_count; list++)
        for (int32_t step = -1; step < (int32_t)by_step.slots - 1; step++) {
            GArray *tasks = rv_step_lists_get(&by_step, step, list);
            if (tasks->len == 0) continue;
            step_loading loading = loading_of(graph, step, (int32_t)list - 1, tasks);
            g_array_append_val(loadings, loading);
        }
    rv_step_lists_free(&by_step);
    return loadings;
}

static void free_loadings(GArray *loadings)
{
    for (guint i = 0; i < loadings->len; i++) g_array_unref(g_array_index(loadings, step_loading, i).tasks);
    g_array_unref(loadings);
}

/* ---- workers=0: shrink in place ----------------------------------------- */

static void shrink_to(rv_graph *graph, const step_loading *loading, int64_t remaining, int64_t *after)
{
    if (loading->work_ns <= remaining) {
        *after += loading->work_ns;
        return;
    }
    double factor = (double)remaining / (double)loading->work_ns;
    rv_transform_scale(graph, loading->tasks, factor);
    rv_transform_scale_host_overhead(graph, loading->tasks, factor);
    for (guint i = 0; i < loading->tasks->len; i++) {
        const rv_task *task = rv_graph_task(graph, g_array_index(loading->tasks, int32_t, i));
        *after += task->duration_ns + task->host_overhead_ns;
    }
}

static void apply_remaining(rv_graph *graph, GArray *loadings, int64_t remaining, rv_plugin_output *output)
{
    int64_t before = 0, after = 0;
    guint shrunk = 0;
    for (guint i = 0; i < loadings->len; i++) {
        const step_loading *loading = &g_array_index(loadings, step_loading, i);
        before += loading->work_ns;
        int64_t was = after;
        shrink_to(graph, loading, remaining, &after);
        if (after - was < loading->work_ns) shrunk++;
    }
    char *b = rv_format_duration(before / loadings->len), *a = rv_format_duration(after / loadings->len);
    g_string_append_printf(output->notes, "    data loading per step %s -> %s (%u of %u steps shortened)\n", b, a,
                           shrunk, loadings->len);
    g_free(b);
    g_free(a);
}

/* ---- workers=N ----------------------------------------------------------- */

typedef struct {
    int64_t workers, prefetch, handoff_ns, page_fault_ns;
    double worker_slowdown;     /* a batch's time on a one-thread worker over its recorded time */
    double worker_slowdown_high;    /* the high end of that, as a multiple of it (range.h) */
    int64_t profiler_op_ns;     /* the profiler's cost per recorded operator; 0: none known */
    double interference;
    gboolean steady;        /* start=steady: the workers' cycles staggered at the window's start */
    gboolean pinned;        /* pin_memory=True: the hand-off runs on a pin_memory thread */
    int64_t pinned_get_ns;  /* then the training loop's take from that thread's queue */
    const char *pin_memory_said;    /* why pinned is what it is, for the notes */
} worker_model;

/* What stays in the training loop for each batch. */
static int64_t loop_handoff_ns(const worker_model *model)
{
    return model->pinned ? model->pinned_get_ns : model->handoff_ns;
}

/* The profiler's estimated share of a batch's recorded loading, at most
 * 0.9 (a range's low end must stay above 0). */
static double profiler_share(const step_loading *loading, const worker_model *model)
{
    if (loading->work_ns <= 0 || model->profiler_op_ns <= 0) return 0.0;
    return MIN(0.9, (double)loading->operators * (double)model->profiler_op_ns / (double)loading->work_ns);
}

/* A task of the DataLoader's on one of its channels, after `after` there:
 * the hand-off task's step, phase and rank, its own duration and name. */
static int32_t insert_loader_task(rv_graph *graph, int32_t channel, int32_t after, const step_loading *loading,
                                  int64_t duration_ns, const char *name, GError **error)
{
    rv_insert_spec spec = { { 0 }, after, -1 };
    spec.task = *rv_graph_task(graph, loading->handoff_task);
    spec.task.resource = channel;
    spec.task.duration_ns = duration_ns;
    spec.task.host_overhead_ns = 0;
    spec.task.correlation = -1;
    spec.task.flags = 0;
    spec.task.name = rv_strings_intern(graph->strings, name);
    return rv_transform_insert(graph, &spec, error);
}

/* The loading of one batch on its worker, after that worker's previous batch. */
static int32_t insert_worker_load(rv_graph *graph, int32_t channel, int32_t after, const step_loading *loading,
                                  double share_left, const worker_model *model, GError **error)
{
    int64_t duration_ns = (int64_t)llround((double)loading->work_ns * model->worker_slowdown * share_left);
    int32_t load = insert_loader_task(graph, channel, after, loading, duration_ns,
                                      "DataLoader worker: load and collate a batch", error);
    /* How much the recorded process's intra-op threads helped, and whether
     * the workers paid the profiler, are what the trace cannot show: the
     * range carries them to the reports. */
    double low = 1.0 - profiler_share(loading, model);
    if (load >= 0 && (low < 1.0 || model->worker_slowdown_high > 1.0))
        rv_duration_range_set(graph, load, low, model->worker_slowdown_high);
    return load;
}

/* A channel of the DataLoader's on a rank, named by it in a job of several. */
static int32_t loader_channel(rv_graph *graph, int32_t rank, const char *what)
{
    char *name = rank < 0 || graph->ranks->len <= 1
                     ? g_strdup_printf("dataloader %s", what)
                     : g_strdup_printf("rank %" G_GINT64_FORMAT " dataloader %s",
                                       g_array_index(graph->ranks, rv_rank, rank).rank, what);
    int32_t channel = rv_transform_add_channel(graph, name);
    g_array_index(graph->resources, rv_resource, channel).rank_index = rank;
    g_free(name);
    return channel;
}

/* The N worker channels of a rank, on that rank. */
static int32_t *worker_channels(rv_graph *graph, int32_t rank, int64_t workers)
{
    int32_t *channel = g_new(int32_t, workers);
    for (int64_t w = 0; w < workers; w++) {
        char *what = g_strdup_printf("worker %" G_GINT64_FORMAT, w);
        channel[w] = loader_channel(graph, rank, what);
        g_free(what);
    }
    return channel;
}

/* pin_memory: the batch received (unpickled out of shared memory) on the
 * pin_memory thread, after its load and that thread's previous batch. */
static int32_t insert_pin(rv_graph *graph, int32_t channel, int32_t after, int32_t load, const step_loading *loading,
                          const worker_model *model, GError **error)
{
    int32_t pin = insert_loader_task(graph, channel, after, loading, model->handoff_ns,
                                     "DataLoader pin_memory thread: receive and pin a batch", error);
    if (pin >= 0) rv_transform_add_edge(graph, load, pin);
    return pin;
}

/* Batches go to a rank's workers round-robin; the training process's
 * hand-off of a batch waits for its load; a worker may not start batch i
 * before the hand-off of batch i - prefetch x workers (its queue slots are
 * full).  With start=steady the first batch of worker w is (w + 1) / N
 * loaded already: the phases a pipeline that has been running keeps
 * (batches every load / N), not N batches arriving together after one
 * whole load.  `mine` holds the rank's `count` loadings, in step order. */
static gboolean move_rank_to_workers(rv_graph *graph, const step_loading *mine, guint count, const worker_model *model,
                                     GError **error)
{
    int32_t *channel = worker_channels(graph, mine[0].rank, model->workers), *last = g_new(int32_t, model->workers);
    int32_t pin_channel = model->pinned ? loader_channel(graph, mine[0].rank, "pin_memory thread") : -1, pin = -1;
    for (int64_t w = 0; w < model->workers; w++) last[w] = -1;
    gboolean ok = TRUE;
    int64_t window = model->prefetch * model->workers;
    for (guint i = 0; i < count && ok; i++) {
        const step_loading *loading = &mine[i];
        if (loading->handoff_task < 0) continue;
        int64_t w = (int64_t)i % model->workers;
        double share_left = model->steady && last[w] < 0 ? (double)(w + 1) / (double)model->workers : 1.0;
        int32_t load = insert_worker_load(graph, channel[w], last[w], loading, share_left, model, error);
        if (load < 0) { ok = FALSE; break; }
        last[w] = load;
        if ((int64_t)i >= window) {
            const step_loading *earlier = &mine[i - (guint)window];
            if (earlier->handoff_task >= 0) rv_transform_add_edge(graph, earlier->handoff_task, load);
        }
        int32_t ready = load;
        if (model->pinned) {
            pin = insert_pin(graph, pin_channel, pin, load, loading, model, error);
            if (pin < 0) { ok = FALSE; break; }
            ready = pin;
        }
        rv_transform_add_edge(graph, ready, loading->handoff_task);
        /* What stays in the training process's loop: the hand-off (or the
         * take from the pin_memory thread's queue), after its own Python. */
        int64_t loop_python = rv_graph_task(graph, loading->handoff_task)->host_overhead_ns;
        rv_transform_scale(graph, loading->tasks, 0.0);
        rv_transform_scale_host_overhead(graph, loading->tasks, 0.0);
        rv_graph_task(graph, loading->handoff_task)->host_overhead_ns = loop_python;
        rv_transform_set_duration(graph, loading->handoff_task, loop_handoff_ns(model));
    }
    g_free(channel);
    g_free(last);
    return ok;
}

/* Each rank's loadings to its own workers: a rank's DataLoader feeds that
 * rank alone.  collect_loadings put each rank's together. */
static gboolean move_to_workers(rv_graph *graph, GArray *loadings, const worker_model *model, GError **error)
{
    gboolean ok = TRUE;
    for (guint from = 0, to; from < loadings->len && ok; from = to) {
        const step_loading *first = &g_array_index(loadings, step_loading, from);
        for (to = from + 1; to < loadings->len && g_array_index(loadings, step_loading, to).rank == first->rank; to++)
            ;
        ok = move_rank_to_workers(graph, first, to - from, model, error);
    }
    return ok;
}

typedef enum { HOST_COPY_OTHER, HOST_COPY_PINNED, HOST_COPY_PAGEABLE } host_copy_source;

/* Where a host-to-device copy reads from, by CUPTI's and ROCm's names
 * ("Memcpy HtoD (Pinned -> Device)"); HOST_COPY_OTHER for any other task. */
static host_copy_source host_to_device_source(const rv_graph *graph, const rv_task *task)
{
    if (task->kind != RV_TASK_MEMCPY) return HOST_COPY_OTHER;
    const char *name = rv_strings_get(graph->strings, task->name);
    if (strstr(name, "HtoD") == NULL) return HOST_COPY_OTHER;
    if (strstr(name, "Pinned") != NULL) return HOST_COPY_PINNED;
    return strstr(name, "Pageable") != NULL ? HOST_COPY_PAGEABLE : HOST_COPY_OTHER;
}

/* Whether the recording pinned its batches (PyTorch's pin_memory=True): its
 * steps' host-to-device copies read more bytes from pinned memory than
 * from pageable memory (a copy whose size the trace does not give counts
 * as one byte). */
static gboolean recorded_pinned(rv_graph *graph)
{
    int64_t pinned = 0, pageable = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *copy = rv_graph_task(graph, id);
        if (copy->step < 0 || (copy->flags & RV_TASK_FLAG_REMOVED)) continue;
        host_copy_source source = host_to_device_source(graph, copy);
        if (source == HOST_COPY_PINNED) pinned += MAX(copy->bytes, 1);
        else if (source == HOST_COPY_PAGEABLE) pageable += MAX(copy->bytes, 1);
    }
    return pinned > pageable;
}

/* The first touch of each batch's pages: added to the calls that issue the
 * steps' pageable host-to-device copies.  Returns the bytes touched.  With
 * pin_memory the pin_memory thread touches them, copying them into pinned
 * memory: none. */
static int64_t add_page_faults(rv_graph *graph, const worker_model *model)
{
    int64_t bytes = 0;
    if (model->pinned) return 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *copy = rv_graph_task(graph, id);
        if (copy->step < 0 || (copy->flags & RV_TASK_FLAG_REMOVED)) continue;
        if (host_to_device_source(graph, copy) != HOST_COPY_PAGEABLE) continue;
        int32_t call = rv_graph_launch_of(graph, id);
        if (call < 0) continue;
        int64_t pages = (copy->bytes + PAGE_BYTES - 1) / PAGE_BYTES;
        rv_graph_task(graph, call)->duration_ns += pages * model->page_fault_ns;
        bytes += copy->bytes;
    }
    return bytes;
}

/* The recorded steps' loading and the rest of them (the training loop's
 * own time), summed over the steps with loading. */
static void split_recorded_steps(const rv_graph *graph, GArray *loadings, int64_t *loading_ns, int64_t *rest_ns)
{
    *loading_ns = *rest_ns = 0;
    for (guint i = 0; i < loadings->len; i++) {
        const step_loading *loading = &g_array_index(loadings, step_loading, i);
        if (loading->step < 0 || (guint)loading->step >= graph->steps->len) continue;
        const rv_step *step = &g_array_index(graph->steps, rv_step, loading->step);
        int64_t from = loading->step ? g_array_index(graph->steps, rv_step, loading->step - 1).recorded_end_ns
                                     : step->recorded_begin_ns;
        *loading_ns += loading->work_ns;
        *rest_ns += MAX(0, step->recorded_end_ns - from - loading->work_ns);
    }
}

/* The average number of busy workers: loading time over the time a step
 * takes, the longer of the training loop's own time and a batch's delivery
 * (load / N); never more than N. */
static double busy_workers(int64_t loading_ns, int64_t rest_ns, int64_t workers)
{
    double delivery_ns = (double)loading_ns / (double)workers;
    double step_ns = MAX((double)rest_ns, delivery_ns);
    return step_ns > 0 ? (double)loading_ns / step_ns : 0.0;
}

/* The training process's host work slows while workers load beside it. */
static void slow_host_work(rv_graph *graph, double factor)
{
    GArray *host = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, task->resource);
        if (resource->kind == RV_RES_CPU_THREAD && !(task->flags & RV_TASK_FLAG_REMOVED)) g_array_append_val(host, id);
    }
    rv_transform_scale(graph, host, factor);
    rv_transform_scale_host_overhead(graph, host, factor);
    g_array_unref(host);
}

/* What bounds the step once the pipeline has filled: the workers' delivery
 * (a batch every load x worker_slowdown / N) or the training loop's own
 * time.  While the workers bound it, each 0.1 of worker_slowdown adds
 * load / N / 10 to every step: printed, since the trace cannot show it. */
static void append_pipeline_bound(rv_plugin_output *output, guint steps, int64_t loading_ns, int64_t rest_ns,
                                  double host_factor, const worker_model *model)
{
    if (steps == 0) return;
    int64_t recorded_delivery_ns = loading_ns / (int64_t)steps / model->workers;
    int64_t delivery_ns = (int64_t)llround((double)recorded_delivery_ns * model->worker_slowdown);
    int64_t loop_ns = (int64_t)llround((double)(rest_ns / (int64_t)steps) * host_factor) + loop_handoff_ns(model);
    char *delivery = rv_format_duration(delivery_ns), *loop = rv_format_duration(loop_ns);
    char *tenth = rv_format_duration(recorded_delivery_ns / 10);
    g_string_append_printf(output->notes,
                           "    %" G_GINT64_FORMAT " workers deliver a batch every %s (worker_slowdown %.2f, range up "
                           "to %.2f: one intra-op thread each; each 0.1 more adds %s while they bound the step); the "
                           "training loop takes %s a step (its recorded time x%.3f beside the workers, with its "
                           "hand-off): %s the step (start=%s)\n",
                           model->workers, delivery, model->worker_slowdown,
                           model->worker_slowdown * model->worker_slowdown_high, tenth, loop, host_factor,
                           delivery_ns > loop_ns ? "the workers bound" : "the training loop bounds",
                           model->steady ? "steady" : "cold");
    g_free(delivery);
    g_free(loop);
    g_free(tenth);
}

/* The profiler's share of the recorded loading: the low end of the
 * workers' range, printed with its evidence. */
static void append_profiler_share(rv_plugin_output *output, const GArray *loadings, int64_t work_ns,
                                  const worker_model *model)
{
    uint64_t operators = 0;
    for (guint i = 0; i < loadings->len; i++) operators += g_array_index(loadings, step_loading, i).operators;
    if (operators == 0 || model->profiler_op_ns <= 0 || work_ns <= 0) {
        g_string_append(output->notes, "    the profiler's share of the loading: none known (no operators recorded in "
                                       "it, or no bound on their cost): the range's low end is the recorded batch\n");
        return;
    }
    int64_t share_ns = (int64_t)MIN((double)work_ns, (double)operators * (double)model->profiler_op_ns);
    char *cost = rv_format_duration(model->profiler_op_ns), *share = rv_format_duration(share_ns / loadings->len);
    g_string_append_printf(output->notes,
                           "    the profiler recorded %.0f operators a batch in the loading: up to %s of it (%.0f%%; "
                           "%s each), which workers made before the profiler started do not pay: the range's low end\n",
                           (double)operators / loadings->len, share, 100.0 * (double)share_ns / (double)work_ns, cost);
    g_free(cost);
    g_free(share);
}

/* Where each batch is received, and what the training loop keeps of it. */
static void append_handoff(rv_plugin_output *output, int64_t bytes_touched, const worker_model *model)
{
    char *handoff = rv_format_duration(model->handoff_ns), *get = rv_format_duration(model->pinned_get_ns);
    if (model->pinned)
        g_string_append_printf(output->notes,
                               "    pin_memory (%s): the %s hand-off a batch runs on the training process's "
                               "pin_memory thread, and the training loop takes the pinned batch from its queue in %s\n",
                               model->pin_memory_said, handoff, get);
    else
        g_string_append_printf(output->notes,
                               "    %s hand-off a batch stays in the training loop (%s); first touch of "
                               "%.2f MiB of batches in shared memory\n",
                               handoff, model->pin_memory_said, bytes_touched / 1048576.0);
    g_free(handoff);
    g_free(get);
}

/* The host slowdown beside the workers, with what the recorded hosts'
 * spread would make of it.  loading_share: the fraction of the step that
 * workers are loading. */
static void append_interference(rv_plugin_output *output, double loading_share, const worker_model *model)
{
    double low = g_ascii_strtod(INTERFERENCE_LOW, NULL), high = g_ascii_strtod(INTERFERENCE_HIGH, NULL);
    g_string_append_printf(output->notes,
                           "    host work x%.3f beside the workers: they load %.0f%% of the step, and slow it by "
                           "interference %.3f meanwhile (the recorded hosts' quartiles, %s-%s, would give "
                           "x%.3f-x%.3f; each 0.1 more slows the training process's host work by %.1f%%)%s\n",
                           1.0 + model->interference * loading_share, 100.0 * loading_share, model->interference,
                           INTERFERENCE_LOW, INTERFERENCE_HIGH, 1.0 + low * loading_share, 1.0 + high * loading_share,
                           10.0 * loading_share,
                           model->workers > INTERFERENCE_WORKERS_MEASURED
                               ? "; the recordings behind the default had at most 8 workers" : "");
}

static gboolean apply_workers(rv_graph *graph, GArray *loadings, const worker_model *model, rv_plugin_output *output,
                              GError **error)
{
    int64_t recorded_loading_ns, rest_ns;
    split_recorded_steps(graph, loadings, &recorded_loading_ns, &rest_ns);
    int64_t worker_loading_ns = (int64_t)llround((double)recorded_loading_ns * model->worker_slowdown);
    double busy = busy_workers(worker_loading_ns, rest_ns, model->workers);
    double loading_share = MIN(1.0, busy);
    double factor = 1.0 + model->interference * loading_share;
    int64_t loading_ns = 0;
    for (guint i = 0; i < loadings->len; i++) loading_ns += g_array_index(loadings, step_loading, i).work_ns;
    if (!move_to_workers(graph, loadings, model, error)) return FALSE;
    int64_t bytes = add_page_faults(graph, model);
    slow_host_work(graph, factor);
    char *load = rv_format_duration(loading_ns / loadings->len);
    g_string_append_printf(output->notes,
                           "    %u %s: loading %s a batch moves to %" G_GINT64_FORMAT " workers%s (%.2f busy on "
                           "average)\n",
                           loadings->len, graph->ranks->len > 1 ? "batches (steps x ranks)" : "steps", load,
                           model->workers, graph->ranks->len > 1 ? " of its rank" : "", busy);
    append_handoff(output, bytes, model);
    append_interference(output, loading_share, model);
    append_pipeline_bound(output, loadings->len, recorded_loading_ns, rest_ns, factor, model);
    append_profiler_share(output, loadings, loading_ns, model);
    g_free(load);
    return TRUE;
}

/* pin_memory=auto|on|off: auto reads the recording's batch copies. */
static void decide_pinned(rv_graph *graph, const char *pin_memory, worker_model *model)
{
    if (strcmp(pin_memory, "auto") != 0) {
        model->pinned = strcmp(pin_memory, "on") == 0;
        model->pin_memory_said = model->pinned ? "pin_memory=on" : "pin_memory=off";
        return;
    }
    model->pinned = recorded_pinned(graph);
    model->pin_memory_said = model->pinned ? "the recording's batch copies read pinned memory"
                                           : "no pin_memory: the recording's batch copies do not read pinned memory";
}

static gboolean dataloader_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    double profiler_whole_cost = rv_params_number(params, "profiler_whole_cost");
    worker_model model = { rv_params_integer(params, "workers"), rv_params_integer(params, "prefetch"),
                           rv_params_duration_ns(params, "handoff"), rv_params_duration_ns(params, "page_fault"),
                           rv_params_number(params, "worker_slowdown"), rv_params_number(params, "worker_slowdown_high"),
                           MAX(0, rv_profiler_op_cost_ns(graph, profiler_whole_cost)),
                           rv_params_number(params, "interference"),
                           strcmp(rv_params_string(params, "start"), "steady") == 0, FALSE,
                           rv_params_duration_ns(params, "pinned_get"), NULL };
    decide_pinned(graph, rv_params_string(params, "pin_memory"), &model);
    if (model.workers < 0 || model.workers > 4096 || model.prefetch < 1 || model.prefetch > 1024 ||
        model.interference < 0 || model.interference > 100 || model.worker_slowdown < 0.1 ||
        model.worker_slowdown > 100 || model.worker_slowdown_high < 1 || model.worker_slowdown_high > 100 ||
        !(profiler_whole_cost >= 0 && profiler_whole_cost <= 1000)) {
        /* a value out of range is the user's (exit 1), not the plugin's */
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "workers must be 0 to 4096, prefetch 1 to 1024, worker_slowdown 0.1 to 100, worker_slowdown_high 1 to 100, "
                    "profiler_whole_cost 0 to 1000 and interference 0 to 100");
        return FALSE;
    }
    GArray *loadings = collect_loadings(graph);
    if (loadings->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no data-loading tasks (no dataload events or \"enumerate(DataLoader)\" annotations)");
        free_loadings(loadings);
        return FALSE;
    }
    gboolean ok = TRUE;
    if (model.workers == 0) apply_remaining(graph, loadings, rv_params_duration_ns(params, "remaining"), output);
    else ok = apply_workers(graph, loadings, &model, output, error);
    free_loadings(loadings);
    return ok;
}

/* The composition law (compose.h): data-loading calls moved to worker channels or shrunk; page faults on the
 * batch copies' calls; host work slowed. */
static const rv_plugin_effects dataloader_effects = {
    .reads = RV_ASPECT_HOST | RV_ASPECT_FORWARD,
    .reads_time = RV_ASPECT_HOST,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_HOST,
    .order = RV_ORDER(RV_STAGE_EXECUTION, 30),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "dataloader",
    "faster data loading: N worker processes (workers=N), or each step's loading shrunk to `remaining`",
    dataloader_params, dataloader_apply, &dataloader_effects,
};
