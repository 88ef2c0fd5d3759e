/*
 * grad_accumulation.c - gradient accumulation: K micro-batches of forward
 * and backward per optimizer step, the effective batch K times larger at
 * the same memory.
 *
 *   reverie whatif trace.json.gz --opt grad-accumulation:steps=4
 *
 * Every task of the forward and backward phases - CPU calls with their
 * host overheads, GPU tasks - lasts K times as long: each stands for its K
 * repetitions, run back to back (the same kernels, the same launches, K
 * times).  Data loading (one micro-batch each) lasts K times too.  The
 * optimizer runs once, and the gradient collectives run once (DDP's
 * no_sync() skips them in the first K-1 micro-batches), so they keep their
 * time.  The notes replay the graph before and after (no policy, before
 * any later --opt) and give samples per second for an effective batch of K
 * micro-batches (batch=, else from the shapes, batch.h).  A what-if
 * replays those graphs anyway when grad-accumulation comes first (the
 * baseline: plugin.h's `before`) or last (the prediction, when no policy
 * is in force: after_replay); those replays are used rather than run twice.
 * Weak: stretching a task stands for K copies of it; the overlap between
 * micro-batches (the next forward's launches while the last backward runs)
 * is modelled only within one stretched pass, and the all-reduces of a
 * DDP step that overlap the last backward overlap a K times longer one.
 */
#include "reverie/batch.h"
#include "reverie/error.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/validate.h"

static const rv_param_spec grad_accumulation_params[] = {
    { "steps", RV_PARAM_INTEGER, "1", "micro-batches", "forward and backward passes per optimizer step", NULL },
    { "batch", RV_PARAM_INTEGER, "0", "samples", "the recorded (micro-)batch size (0: from the shapes) for samples/s", NULL },
    { NULL }
};

static gboolean repeated(const rv_task *task)
{
    if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind == RV_TASK_MARKER) return FALSE;
    if (task->kind == RV_TASK_DATALOAD) return TRUE;
    if (task->kind == RV_TASK_COMM || task->collective > 0 || (task->flags & RV_TASK_FLAG_RENDEZVOUS)) return FALSE;
    return task->phase == RV_PHASE_FORWARD || task->phase == RV_PHASE_BACKWARD;
}

/* The line "step A -> B; samples" for K micro-batches a step (batch.h). */
static gboolean describe_throughput(rv_graph *graph, const rv_params *params, int64_t k, int64_t before,
                                    rv_plugin_output *output, GError **error)
{
    int64_t batch = rv_params_integer(params, "batch");
    if (batch == 0) batch = rv_graph_batch_size(graph);
    return rv_throughput_note(graph, output, before, (double)batch, (double)batch * (double)k, error);
}

static gboolean grad_accumulation_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t k = rv_params_integer(params, "steps");
    if (k < 1 || k > 10000 || rv_params_integer(params, "batch") < 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 1 <= steps <= 10000 and batch >= 0");
        return FALSE;
    }
    GArray *tasks = g_array_new(FALSE, FALSE, sizeof(int32_t));
    gboolean optimizer = FALSE;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (repeated(task)) g_array_append_val(tasks, id);
        optimizer |= !(task->flags & RV_TASK_FLAG_REMOVED) && task->phase == RV_PHASE_OPTIMIZER;
    }
    gboolean ok = tasks->len > 0 && optimizer;
    if (!ok)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the trace has no %s, so there is no %s to accumulate over",
                    tasks->len == 0 ? "forward or backward work" : "optimizer phase (\"Optimizer.step\" annotation)",
                    tasks->len == 0 ? "micro-batch" : "optimizer step");
    if (ok && k > 1) {
        char *cause = g_strdup_printf("steps=%" G_GINT64_FORMAT, k);
        int64_t before = rv_mean_step_before(graph, output, error);
        ok = before >= 0 && rv_tasks_check_scale(graph, tasks, (double)k, cause, error);
        if (ok) {
            rv_transform_scale(graph, tasks, (double)k);
            rv_transform_scale_host_overhead(graph, tasks, (double)k);
            g_string_append_printf(output->notes,
                                   "    %" G_GINT64_FORMAT " micro-batches per optimizer step: %u forward, backward and "
                                   "data-loading tasks (and host overheads) x%" G_GINT64_FORMAT
                                   "; optimizer and collectives once\n", k, tasks->len, k);
            ok = describe_throughput(graph, params, k, before, output, error);
        }
        g_free(cause);
    } else if (ok) {
        g_string_append(output->notes, "    steps=1: one micro-batch per optimizer step, nothing changes\n");
    }
    g_array_unref(tasks);
    return ok;
}

/* The composition law (compose.h): every forward and backward task (host time included) K times as long: a plain
 * factor. */
static const rv_plugin_effects grad_accumulation_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_HOST,
    .reads_time = 0,
    .scales = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_HOST,
    .reprices = 0,
    .rewrites = 0,
    .order = RV_ORDER(RV_STAGE_MODEL, 70),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "grad-accumulation",
    "gradient accumulation: forward and backward (and data loading) K times per optimizer step, optimizer and "
    "collectives once; step time and samples/s",
    grad_accumulation_params, grad_accumulation_apply, &grad_accumulation_effects,
};
