/*
 * parallel_plan.c - the search over tensor x pipeline x data splits, ZeRO
 * stages, micro-batches and checkpointing (parallel_plan.h): each
 * configuration built from the shipped optimizations on a copy of the
 * graph, its memory estimated, and the ones that fit replayed on a pool
 * of worker threads.
 */
#include "reverie/parallel_plan.h"
#include "reverie/blocks.h"
#include "reverie/compose.h"
#include "reverie/error.h"
#include "reverie/memory.h"
#include "reverie/optimize.h"
#include "reverie/report.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <math.h>
#include <string.h>

#define MAX_MICROBATCHES 64
#define DEFAULT_BLOCKS 4   /* checkpoint segments where no block is found */

/* The plugins a plan is built from, and the parameters it sets itself. */
static const char *const plan_plugins[] = { "hardware", "checkpoint", "tp-allreduce", "pipeline", "ddp", "zero",
                                            "world-size", NULL };
static const char *const own_params[] = { "gpu", "segments", "degree", "stages", "microbatches", "schedule", "world",
                                          "stage", "parallelism", NULL };

gboolean rv_plan_check_gpus(int gpus, int gpus_per_node, GError **error)
{
    if (gpus_per_node < 1 || gpus_per_node > 65536) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "--gpus-per-node %d: give 1 to 65536", gpus_per_node);
        return FALSE;
    }
    if (gpus < 1 || gpus > 65536) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "--gpus %d: give 1 to 65536 GPUs", gpus);
        return FALSE;
    }
    if (gpus > gpus_per_node && gpus % gpus_per_node != 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "--gpus %d cannot be split: more than one node of %d GPUs but not whole nodes (give a multiple of %d, "
                    "or --gpus-per-node)", gpus, gpus_per_node, gpus_per_node);
        return FALSE;
    }
    return TRUE;
}

/* ---- what the graph says -------------------------------------------------------- */

/* Transformer blocks in the first step's forward (0: none). */
static guint blocks_per_step(const rv_graph *graph)
{
    GArray *kernels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int32_t step = -1;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind != RV_TASK_KERNEL || task->phase != RV_PHASE_FORWARD ||
            task->step < 0 || (step >= 0 && task->step != step))
            continue;
        step = task->step;
        g_array_append_val(kernels, id);
    }
    rv_block_finder *finder = rv_block_finder_new(graph);
    rv_blocks blocks;
    rv_blocks_find(finder, kernels, &blocks);
    guint count = rv_blocks_count(&blocks);
    rv_blocks_clear(&blocks);
    rv_block_finder_free(finder);
    g_array_unref(kernels);
    return count;
}

static gboolean data_parallel_recorded(const rv_graph *graph)
{
    for (guint c = 0; c < graph->collectives->len; c++) {
        const rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        if (info->parallelism == RV_PARALLEL_DATA && !info->inserted) return TRUE;
    }
    return FALSE;
}

/* The memory model where the trace has shapes; else the recorded step
 * with the highest peak: model states before it, activations above. */
static gboolean memory_basis(const rv_graph *graph, rv_plan *plan, GError **error)
{
    rv_memory_estimate estimate;
    GError *missing = NULL;
    plan->memory_from_shapes = rv_memory_estimate_graph(graph, &estimate, &missing);
    plan->optimizer_states = MAX(estimate.optimizer_factor, 0);
    if (plan->memory_from_shapes) return TRUE;
    int64_t best = -1;
    for (guint i = 0; i < graph->memory->len; i++) {
        const rv_memory_record *r = &g_array_index(graph->memory, rv_memory_record, i);
        if (r->peak_allocated <= best || r->allocated_before < 0) continue;
        best = r->peak_allocated;
        plan->recorded_states = r->allocated_before;
        plan->recorded_activations = r->peak_allocated - r->allocated_before;
    }
    if (best >= 0) {
        g_error_free(missing);
        return TRUE;
    }
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                "%s: cannot say what fits: the trace has no shapes (record_shapes=True) and no [memory] events with "
                "totals (profile_memory=True)", graph->source);
    g_error_free(missing);
    return FALSE;
}

/* ---- one configuration ---------------------------------------------------------------- */

typedef struct {
    const rv_graph *graph;
    const rv_plan_request *request;
    rv_plan *plan;
    GHashTable *plugins;
} search;

/* A generated spec with the user's extra parameters for that plugin. */
static char *spec_with(const search *s, const char *name, const char *params)
{
    GString *spec = g_string_new(name);
    if (params && *params) g_string_append_printf(spec, ":%s", params);
    const rv_loaded_plugin *loaded = g_hash_table_lookup(s->plugins, name);
    if (s->request->trace_gpu_assumed && loaded && rv_plugin_param(rv_plugin_descriptor_of(loaded), "source_gpu"))
        g_string_append_printf(spec, "%ssource_gpu=%s", params && *params ? "," : ":", s->request->trace_gpu->id);
    for (char **with = s->request->with; with && *with; with++) {
        const char *colon = strchr(*with, ':');
        if (colon == NULL || (gsize)(colon - *with) != strlen(name) || strncmp(*with, name, strlen(name)) != 0) continue;
        g_string_append(spec, strchr(spec->str, ':') ? "," : ":");
        g_string_append(spec, colon + 1);
    }
    return g_string_free(spec, FALSE);
}

static void add_spec(GPtrArray *specs, const search *s, const char *name, char *params)
{
    g_ptr_array_add(specs, spec_with(s, name, params));
    g_free(params);
}

/* The --opt lists of a configuration: what is applied first and, after a
 * rebase (compose.h), second.  In the canonical order, except that a
 * pipelined data-parallel job of a trace without data-parallel
 * collectives gets them from ddp first and is then pipelined as a
 * recording of that job would be: once the pipeline has moved the
 * backward's kernels to its stages, ddp finds none to attach to. */
static GPtrArray *config_specs(const search *s, const rv_plan_config *c, GPtrArray **second)
{
    GPtrArray *specs = g_ptr_array_new_with_free_func(g_free), *after = g_ptr_array_new_with_free_func(g_free);
    const rv_plan_request *r = s->request;
    gboolean ddp_first = !s->plan->data_recorded && c->pipeline > 1 && c->data > 1;
    if (strcmp(r->gpu->id, r->trace_gpu->id) != 0) add_spec(specs, s, "hardware", g_strdup_printf("gpu=%s", r->gpu->id));
    if (c->checkpoint)
        add_spec(specs, s, "checkpoint", g_strdup_printf("segments=%u", s->plan->blocks ? s->plan->blocks : DEFAULT_BLOCKS));
    if (c->tensor > 1) add_spec(specs, s, "tp-allreduce", g_strdup_printf("degree=%d", c->tensor));
    if (ddp_first) add_spec(specs, s, "ddp", g_strdup_printf("world=%d", c->data));
    GPtrArray *rest = ddp_first ? after : specs;
    if (c->pipeline > 1)
        add_spec(rest, s, "pipeline", g_strdup_printf("stages=%d,microbatches=%d,schedule=1f1b", c->pipeline,
                                                      c->microbatches));
    if (s->plan->data_recorded) {
        if (c->zero > 0) add_spec(rest, s, "zero", g_strdup_printf("stage=%d,world=%d", c->zero, c->data));
        add_spec(rest, s, "world-size", g_strdup_printf("world=%d,parallelism=data", r->gpus));
    } else {
        if (c->data > 1 && !ddp_first) add_spec(rest, s, "ddp", g_strdup_printf("world=%d", c->data));
        if (c->zero > 0) add_spec(rest, s, "zero", g_strdup_printf("stage=%d,world=%d", c->zero, c->data));
    }
    g_ptr_array_add(specs, NULL);
    g_ptr_array_add(after, NULL);
    *second = after;
    return specs;
}

/* "a b c", and " then, as the recording: d e" after a rebase. */
static char *specs_text(const GPtrArray *first, const GPtrArray *second)
{
    char *a = g_strjoinv(" ", (char **)first->pdata), *b = g_strjoinv(" ", (char **)second->pdata);
    char *text = second->len > 1 ? g_strdup_printf("%s, then as the recording: %s", a, b) : g_strdup(a);
    g_free(a);
    g_free(b);
    return text;
}

/* Apply a list of specs to the graph; the last policy is kept in *policy. */
static gboolean apply_specs(const search *s, rv_graph *graph, const GPtrArray *specs, rv_plugin_output *policy,
                            GError **error)
{
    if (specs->len <= 1) return TRUE;
    GPtrArray *opts = rv_opts_prepare(s->plugins, (char *const *)specs->pdata, error);
    gboolean ok = opts != NULL && rv_opts_apply(graph, opts, FALSE, policy, error);
    if (opts) g_ptr_array_unref(opts);
    return ok;
}

/* The recorded split scaled to a configuration (parallel_plan.h). */
static int64_t recorded_peak(const rv_plan *plan, const rv_plan_config *c)
{
    double split = 2.0 + plan->optimizer_states;
    double part = (double)plan->recorded_states / split / (c->tensor * c->pipeline);
    double weights = part, grads = part, state = part * plan->optimizer_states;
    if (c->zero >= 1) state /= c->data;
    if (c->zero >= 2) grads /= c->data;
    if (c->zero >= 3) weights /= c->data;
    double activations = (double)plan->recorded_activations * (10.0 + 24.0 / c->tensor) / 34.0 *
                         MIN(c->pipeline, c->microbatches) / ((double)c->pipeline * c->microbatches);
    if (c->checkpoint) activations *= 2.0 / 34.0 + 1.0 / (plan->blocks ? plan->blocks : DEFAULT_BLOCKS);
    return (int64_t)llround(weights + grads + state + activations);
}

static void too_big(rv_plan_config *c, const rv_plan_request *r)
{
    char *need = rv_format_bytes(c->peak_bytes), *limit = rv_format_bytes(r->memory_bytes);
    c->verdict = RV_PLAN_TOO_BIG;
    c->why = g_strdup_printf("needs %s a GPU, more than %s", need, limit);
    g_free(need);
    g_free(limit);
}

/* Build, estimate and (if it fits) replay one configuration. */
static void evaluate(const search *s, rv_plan_config *c)
{
    GPtrArray *second = NULL, *specs = config_specs(s, c, &second);
    c->specs = specs_text(specs, second);
    if (!s->plan->memory_from_shapes) {
        c->peak_bytes = recorded_peak(s->plan, c);
        if (c->peak_bytes > s->request->memory_bytes) {
            too_big(c, s->request);
            g_ptr_array_unref(specs);
            g_ptr_array_unref(second);
            return;
        }
    }
    GError *error = NULL;
    rv_graph *copy = rv_graph_copy(s->graph);
    rv_plugin_output policy = { 0 };
    gboolean ok = apply_specs(s, copy, specs, &policy, &error);
    if (ok && second->len > 1) {
        rv_compose_rebase(copy);
        ok = apply_specs(s, copy, second, &policy, &error);
    }
    if (ok && s->plan->memory_from_shapes) {
        rv_memory_estimate estimate;
        GError *missing = NULL;
        c->peak_bytes = rv_memory_estimate_graph(copy, &estimate, &missing) ? estimate.peak : -1;
        g_clear_error(&missing);
        if (c->peak_bytes > s->request->memory_bytes) too_big(c, s->request);
    }
    if (ok && c->verdict == RV_PLAN_FITS) {
        GArray *steps = rv_replay_steps(copy, NULL, policy.policy.priority ? &policy.policy : NULL, NULL, &error);
        ok = steps != NULL;
        int64_t total = 0;
        for (guint i = 0; ok && i < steps->len; i++) total += g_array_index(steps, rv_step_time, i).simulated_ns;
        if (ok) c->predicted_ns = steps->len ? total / (int64_t)steps->len : 0;
        if (steps) g_array_unref(steps);
    }
    if (!ok) {
        c->verdict = RV_PLAN_REFUSED;
        c->why = g_strdup(error ? error->message : "failed");
    }
    g_clear_error(&error);
    rv_opts_policy_clear(&policy);
    rv_graph_free(copy);
    g_ptr_array_unref(specs);
    g_ptr_array_unref(second);
}

/* ---- the search ---------------------------------------------------------------------- */

static void add_config(GArray *configs, int t, int p, int d, int z, int m, gboolean checkpoint)
{
    rv_plan_config c = { t, p, d, z, m, checkpoint, RV_PLAN_FITS, -1, -1, NULL, NULL };
    g_array_append_val(configs, c);
}

/* Every split without checkpointing (parallel_plan.h's SEARCH). */
static GArray *enumerate(const rv_plan_request *r, const rv_plan *plan)
{
    GArray *configs = g_array_new(FALSE, TRUE, sizeof(rv_plan_config));
    for (int t = 1; t <= MIN(plan->max_tensor, r->gpus); t *= 2) {
        if (r->gpus % t != 0) continue;
        for (int p = 1; p <= MIN(plan->max_pipeline, r->gpus / t); p++) {
            if ((r->gpus / t) % p != 0) continue;
            int d = r->gpus / t / p;
            for (int m = p; m <= (p == 1 ? 1 : MIN(4 * p, MAX_MICROBATCHES)); m *= 2)
                for (int z = 0; z <= (d > 1 ? 3 : 0); z++) add_config(configs, t, p, d, z, m, FALSE);
        }
    }
    return configs;
}

typedef struct {
    const search *s;
    GArray *configs;
    GMutex lock;
    GCond changed;
    guint done;
} pool_run;

static void run_one(gpointer item, gpointer data)
{
    pool_run *run = data;
    evaluate(run->s, &g_array_index(run->configs, rv_plan_config, GPOINTER_TO_UINT(item) - 1));
    g_mutex_lock(&run->lock);
    run->done++;
    g_cond_signal(&run->changed);
    g_mutex_unlock(&run->lock);
}

/* Evaluate configs[from..] on the pool; progress from this thread. */
static void evaluate_all(const search *s, GArray *configs, guint from, guint *done_before, guint total)
{
    pool_run run = { s, configs, { 0 }, { 0 }, 0 };
    g_mutex_init(&run.lock);
    g_cond_init(&run.changed);
    GThreadPool *pool = g_thread_pool_new(run_one, &run, (gint)MAX(s->request->jobs, 1), FALSE, NULL);
    for (guint i = from; i < configs->len; i++) g_thread_pool_push(pool, GUINT_TO_POINTER(i + 1), NULL);
    guint count = configs->len - from;
    g_mutex_lock(&run.lock);
    while (run.done < count) {
        g_cond_wait_until(&run.changed, &run.lock, g_get_monotonic_time() + 200000);
        if (s->request->progress) s->request->progress(*done_before + run.done, total, s->request->progress_data);
    }
    g_mutex_unlock(&run.lock);
    g_thread_pool_free(pool, FALSE, TRUE);
    g_mutex_clear(&run.lock);
    g_cond_clear(&run.changed);
    *done_before += count;
}

static gint compare_configs(gconstpointer a, gconstpointer b)
{
    const rv_plan_config *x = a, *y = b;
    if (x->verdict != y->verdict) return x->verdict < y->verdict ? -1 : 1;
    if (x->verdict == RV_PLAN_FITS && x->predicted_ns != y->predicted_ns) return x->predicted_ns < y->predicted_ns ? -1 : 1;
    if (x->verdict == RV_PLAN_TOO_BIG && x->peak_bytes != y->peak_bytes) return x->peak_bytes < y->peak_bytes ? -1 : 1;
    int mx = x->tensor * x->pipeline, my = y->tensor * y->pipeline;  /* then fewer model-parallel GPUs */
    if (mx != my) return mx < my ? -1 : 1;
    if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
    if (x->zero != y->zero) return x->zero < y->zero ? -1 : 1;
    if (x->microbatches != y->microbatches) return x->microbatches < y->microbatches ? -1 : 1;
    return x->checkpoint - y->checkpoint;
}

/* The user's extra specs: plugins the plan uses, parameters it does not set. */
static gboolean check_with(const search *s, GError **error)
{
    for (char **with = s->request->with; with && *with; with++) {
        char *name = rv_opt_spec_name(*with);
        gboolean used = g_strv_contains(plan_plugins, name);
        if (!used) {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "--with %s: the plan is built from %s; '%s' is not one of them",
                        *with, "hardware, checkpoint, tp-allreduce, pipeline, ddp, zero and world-size", name);
            g_free(name);
            return FALSE;
        }
        g_free(name);
        rv_opt *opt = rv_opt_parse(s->plugins, *with, error);
        if (opt == NULL) return FALSE;
        for (const char *const *own = own_params; *own; own++)
            if (rv_plugin_param(opt->plugin, *own) != NULL && rv_params_given(opt->params, *own)) {
                g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "--with %s: the plan sets %s itself", *with, *own);
                rv_opt_free(opt);
                return FALSE;
            }
        rv_opt_free(opt);
    }
    return TRUE;
}

static gboolean prepare(const rv_graph *graph, const rv_plan_request *r, search *s, GError **error)
{
    rv_plan *plan = s->plan;
    if (!rv_plan_check_gpus(r->gpus, r->gpus_per_node, error)) return FALSE;
    if (r->gpu == NULL || r->trace_gpu == NULL || r->memory_bytes <= 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "plan: a GPU, the trace's GPU and a memory limit above 0 are needed");
        return FALSE;
    }
    for (const char *const *name = plan_plugins; *name; name++)
        if (rv_plugin_table_get(s->plugins, *name, error) == NULL) return FALSE;
    if (!check_with(s, error) || !memory_basis(graph, plan, error)) return FALSE;
    plan->blocks = blocks_per_step(graph);
    plan->data_recorded = data_parallel_recorded(graph);
    plan->max_tensor = r->max_tensor > 0 ? r->max_tensor : r->gpus_per_node;
    plan->max_pipeline = r->max_pipeline > 0 ? r->max_pipeline : (int)MAX(plan->blocks, 1);
    GArray *steps = rv_replay_steps(graph, NULL, NULL, NULL, error);
    if (steps == NULL) return FALSE;
    int64_t total = 0;
    for (guint i = 0; i < steps->len; i++) total += g_array_index(steps, rv_step_time, i).simulated_ns;
    plan->baseline_ns = steps->len ? total / (int64_t)steps->len : 0;
    g_array_unref(steps);
    return TRUE;
}

gboolean rv_plan_search(const rv_graph *graph, const rv_plan_request *request, rv_plan *out, GError **error)
{
    memset(out, 0, sizeof *out);
    search s = { graph, request, out, rv_plugin_table_new() };
    gboolean ok = prepare(graph, request, &s, error);
    if (ok) {
        out->configs = enumerate(request, out);
        guint first = out->configs->len, done = 0;
        evaluate_all(&s, out->configs, 0, &done, first);
        /* checkpointing only where a split does not fit without it */
        for (guint i = 0; i < first; i++) {
            const rv_plan_config c = g_array_index(out->configs, rv_plan_config, i);
            if (c.verdict == RV_PLAN_TOO_BIG) add_config(out->configs, c.tensor, c.pipeline, c.data, c.zero, c.microbatches, TRUE);
        }
        evaluate_all(&s, out->configs, first, &done, out->configs->len);
        g_array_sort(out->configs, compare_configs);
        for (guint i = 0; i < out->configs->len; i++)
            out->fitting += g_array_index(out->configs, rv_plan_config, i).verdict == RV_PLAN_FITS;
    }
    g_hash_table_destroy(s.plugins);
    return ok;
}

void rv_plan_clear(rv_plan *plan)
{
    for (guint i = 0; plan->configs && i < plan->configs->len; i++) {
        rv_plan_config *c = &g_array_index(plan->configs, rv_plan_config, i);
        g_free(c->why);
        g_free(c->specs);
    }
    if (plan->configs) g_array_unref(plan->configs);
    plan->configs = NULL;
}
