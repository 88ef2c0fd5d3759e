/*
 * sweep.c - `reverie sweep`: many what-if variants of one graph in one
 * process, in parallel, as a table a script can read.
 *
 * Each input is loaded once and its baseline replayed once; then every
 * variant (sweep_plan.h says which) is applied to a copy of the graph and
 * replayed by -j workers: worker processes by default (isolate.h: a
 * plugin that crashes, hangs or exits costs its variant's row only), or
 * with --no-isolate a GThreadPool.  Each worker reuses one scratch graph
 * (rv_graph_assign), so a variant costs a copy of the arrays, the plugins
 * and a replay.  Rows come out in variant order however the workers
 * finish: a window of at most WINDOW_PER_JOB x jobs variants is in flight,
 * and the row for the next variant waits for its result.
 *
 * --shard K/N keeps the variants whose number is K-1 modulo N (numbers run
 * over all inputs), so N processes split a sweep evenly and their rows,
 * sorted by variant, are the whole sweep's.
 *
 * Output goes through a sweep_output (CSV or JSON Lines).  --plot keeps,
 * beside it, each row's predicted time of a one-axis sweep and draws the
 * curve when the sweep ends (plot.h).
 */
#include "cli.h"
#include "isolate.h"
#include "reverie/output.h"
#include "reverie/documents.h"
#include "reverie/sweep_plan.h"
#include "reverie/plot.h"
#include "reverie/report.h"
#include "reverie/validate.h"
#include "reverie/select.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW_PER_JOB 64

/* ---- one variant's outcome ------------------------------------------ */

typedef struct {
    int64_t predicted_ns;
    int64_t peak_bytes; /* the memory model's peak after the variant's plugins; -1: not estimated */
    GArray *steps;     /* int64 predicted ns per step (with --steps) */
    char *error;       /* NULL when it ran */
    int status;        /* its exit status when it failed */
} variant_result;

static void result_free(variant_result *result)
{
    if (result == NULL) return;
    if (result->steps) g_array_unref(result->steps);
    g_free(result->error);
    g_free(result);
}

static int64_t total_ns(const GArray *steps)
{
    int64_t total = 0;
    for (guint s = 0; s < steps->len; s++) total += g_array_index(steps, rv_step_time, s).simulated_ns;
    return total;
}

/* ---- output ----------------------------------------------------------- */

typedef struct {
    uint64_t variant;           /* over all inputs */
    uint64_t local;             /* within the plan */
    const char *source;
    const GArray *baseline;     /* rv_step_time; NULL if the input failed */
    int64_t baseline_peak;      /* bytes, -1: not estimated (no shapes) */
    const variant_result *result;
} sweep_row;

typedef struct sweep_output sweep_output;
struct sweep_output {
    void (*begin)(sweep_output *out, guint steps);
    void (*row)(sweep_output *out, const sweep_row *row);
    const rv_sweep_plan *plan;
    gboolean with_source;       /* several inputs */
    gboolean with_steps;
    FILE *file;                 /* standard output, or with --plot a buffer printed once the plot is safe */
};

/* A CSV field, quoted when it must be (RFC 4180). */
static void csv_field(FILE *f, const char *text, gboolean last)
{
    if (strpbrk(text, ",\"\n\r") == NULL) {
        fputs(text, f);
    } else {
        fputc('"', f);
        for (const char *c = text; *c; c++) {
            if (*c == '"') fputc('"', f);
            fputc(*c, f);
        }
        fputc('"', f);
    }
    fputc(last ? '\n' : ',', f);
}

static void csv_number(FILE *f, double value, const char *format)
{
    fprintf(f, format, value);
    fputc(',', f);
}

/* A peak in MiB, or an empty field where it is not estimated. */
static void csv_peak(FILE *f, int64_t bytes)
{
    if (bytes < 0) fputc(',', f);
    else csv_number(f, bytes / 1048576.0, "%.1f");
}

static void csv_begin(sweep_output *out, guint steps)
{
    FILE *f = out->file;
    csv_field(f, "variant", FALSE);
    if (out->with_source) csv_field(f, "source", FALSE);
    if (out->plan->line_texts->len > 1 || *(const char *)g_ptr_array_index(out->plan->line_texts, 0))
        csv_field(f, "opts", FALSE);
    for (guint a = 0; a < out->plan->axes->len; a++) {
        const rv_sweep_axis *axis = g_ptr_array_index(out->plan->axes, a);
        char *name = g_strdup_printf("%s.%s", axis->plugin, axis->param);
        csv_field(f, name, FALSE);
        g_free(name);
    }
    fputs("predicted_ms,baseline_ms,speedup,predicted_peak_mib,baseline_peak_mib,", f);
    for (guint s = 0; out->with_steps && s < steps; s++) fprintf(f, "step_%u_ms,", s + 1);
    csv_field(f, "error", TRUE);
}

static void csv_row(sweep_output *out, const sweep_row *row)
{
    FILE *f = out->file;
    fprintf(f, "%" G_GUINT64_FORMAT ",", row->variant);
    if (out->with_source) csv_field(f, row->source, FALSE);
    if (out->plan->line_texts->len > 1 || *(const char *)g_ptr_array_index(out->plan->line_texts, 0))
        csv_field(f, g_ptr_array_index(out->plan->line_texts, rv_sweep_plan_line(out->plan, row->local)), FALSE);
    for (guint a = 0; a < out->plan->axes->len; a++) csv_field(f, rv_sweep_plan_value(out->plan, row->local, a), FALSE);
    const variant_result *result = row->result;
    guint steps = row->baseline ? row->baseline->len : 0;
    if (result->error == NULL) {
        int64_t baseline = total_ns(row->baseline);
        csv_number(f, result->predicted_ns / 1e6, "%.6f");
        csv_number(f, baseline / 1e6, "%.6f");
        csv_number(f, result->predicted_ns ? (double)baseline / result->predicted_ns : 0.0, "%.6f");
        csv_peak(f, result->peak_bytes);
        csv_peak(f, row->baseline_peak);
        for (guint s = 0; out->with_steps && s < steps; s++)
            csv_number(f, g_array_index(result->steps, int64_t, s) / 1e6, "%.6f");
        csv_field(f, "", TRUE);
    } else {
        fputs(",,,,,", f);
        for (guint s = 0; out->with_steps && s < steps; s++) fputc(',', f);
        csv_field(f, rv_cli_bounded(result->error), TRUE);
    }
}

static void jsonl_begin(sweep_output *out, guint steps) { }

static json_t *jsonl_steps(const GArray *baseline, const variant_result *result)
{
    json_t *steps = json_array();
    for (guint s = 0; s < baseline->len; s++) {
        const rv_step_time *step = &g_array_index(baseline, rv_step_time, s);
        json_array_append_new(steps, json_pack("{s:s,s:f,s:f}", "name", step->name, "baseline_us", step->simulated_ns / 1e3,
                                               "predicted_us", g_array_index(result->steps, int64_t, s) / 1e3));
    }
    return steps;
}

static void jsonl_row(sweep_output *out, const sweep_row *row)
{
    json_t *params = json_object(), *opts = json_array();
    for (guint a = 0; a < out->plan->axes->len; a++) {
        const rv_sweep_axis *axis = g_ptr_array_index(out->plan->axes, a);
        char *name = g_strdup_printf("%s.%s", axis->plugin, axis->param);
        json_object_set_new(params, name, json_string(rv_sweep_plan_value(out->plan, row->local, a)));
        g_free(name);
    }
    GPtrArray *specs = rv_sweep_plan_specs(out->plan, row->local);
    for (guint i = 0; i < specs->len; i++) json_array_append_new(opts, json_string(g_ptr_array_index(specs, i)));
    g_ptr_array_unref(specs);
    json_t *line = json_pack("{s:I,s:o,s:o,s:o}", "variant", (json_int_t)row->variant, "source",
                             rv_json_text(row->source), "opts", opts, "params", params);
    const variant_result *result = row->result;
    if (result->error == NULL) {
        int64_t baseline = total_ns(row->baseline);
        json_object_set_new(line, "predicted_us", json_real(result->predicted_ns / 1e3));
        json_object_set_new(line, "baseline_us", json_real(baseline / 1e3));
        json_object_set_new(line, "speedup", json_real(result->predicted_ns ? (double)baseline / result->predicted_ns : 0.0));
        json_object_set_new(line, "predicted_peak_bytes", result->peak_bytes >= 0 ? json_integer(result->peak_bytes) : json_null());
        json_object_set_new(line, "baseline_peak_bytes", row->baseline_peak >= 0 ? json_integer(row->baseline_peak) : json_null());
        if (out->with_steps) json_object_set_new(line, "steps", jsonl_steps(row->baseline, result));
        json_object_set_new(line, "error", json_null());
    } else {
        json_object_set_new(line, "error", rv_json_text(result->error));
    }
    char *text = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(15));
    fputs(text, out->file);
    fputc('\n', out->file);
    free(text);
    json_decref(line);
}

/* ---- running the variants of one input ------------------------------- */

typedef struct {
    const rv_sweep_plan *plan;
    GHashTable *plugins;        /* every plugin of the plan, loaded: read-only here */
    const rv_graph *graph;      /* the input; only read */
    const rv_sim_structure *structure; /* its replay structure, for variants that keep it */
    rv_memory_peak peak;           /* the input's peak memory (estimated FALSE: none for any variant) */
    rv_memory_durations_only *durations_only; /* for variants that changed durations only; NULL: none skip the check */
    gboolean keep_steps;
    GAsyncQueue *scratch;       /* rv_graph*, one per worker */
    GArray *selected;           /* uint64: the plan's variants this shard runs */
    guint window;
    variant_result **slots;     /* selected[k]'s result in slots[k % window] */
    GMutex lock;
    GCond ready;
} sweep_run;

/* The memory model's peak of a variant's graph, -1 where not estimated
 * (the input has no shapes: no variant is estimated, at no cost). */
static int64_t variant_peak(const sweep_run *run, const rv_graph *graph)
{
    if (!run->peak.estimated) return -1;
    if (run->durations_only && rv_memory_durations_only_unchanged(run->durations_only, run->graph, graph))
        return run->peak.baseline.peak;
    if (rv_memory_estimate_unchanged(run->graph, graph, run->peak.baseline.element_bytes)) return run->peak.baseline.peak;
    rv_memory_peak peak = run->peak;
    peak.missing = NULL;
    rv_memory_peak_after(&peak, graph);
    int64_t bytes = peak.estimated ? peak.predicted.peak : -1;
    rv_memory_peak_clear(&peak);
    return bytes;
}

/* Variant v applied to `graph` (a copy of the input, or in an isolated
 * child the input itself, copy-on-write) and replayed. */
static variant_result *evaluate_on(sweep_run *run, uint64_t v, rv_graph *graph)
{
    variant_result *result = g_new0(variant_result, 1);
    GError *error = NULL;
    GPtrArray *specs = rv_sweep_plan_specs(run->plan, v);
    GPtrArray *opts = g_ptr_array_new_with_free_func(rv_opt_free);
    for (guint i = 0; i < specs->len && error == NULL; i++) {
        rv_opt *opt = rv_opt_parse(run->plugins, g_ptr_array_index(specs, i), &error);
        if (opt) g_ptr_array_add(opts, opt);
    }
    rv_plugin_output policy = { 0 };
    GArray *steps = NULL;
    if (error == NULL && rv_cli_apply_opts(graph, opts, FALSE, &policy, &error))
        steps = rv_cli_replay_steps(graph, run->structure, policy.policy.priority ? &policy.policy : NULL, &error);
    rv_opts_policy_clear(&policy);
    result->peak_bytes = steps != NULL ? variant_peak(run, graph) : -1;
    if (steps != NULL) {
        result->predicted_ns = total_ns(steps);
        if (run->keep_steps) {
            result->steps = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), steps->len);
            for (guint s = 0; s < steps->len; s++)
                g_array_append_val(result->steps, g_array_index(steps, rv_step_time, s).simulated_ns);
        }
        g_array_unref(steps);
    } else {
        result->error = g_strdup(error->message);
        result->status = rv_error_exit_status(error);
        g_error_free(error);
    }
    g_ptr_array_unref(opts);
    g_ptr_array_unref(specs);
    return result;
}

/* In a thread: on a scratch graph of its own, the input's arrays copied in. */
static variant_result *evaluate(sweep_run *run, uint64_t v)
{
    rv_graph *graph = g_async_queue_pop(run->scratch);
    rv_graph_assign(graph, run->graph);
    variant_result *result = evaluate_on(run, v, graph);
    g_async_queue_push(run->scratch, graph);
    return result;
}

static void run_variant(gpointer item, gpointer data)
{
    sweep_run *run = data;
    guint k = GPOINTER_TO_UINT(item) - 1;
    variant_result *result = evaluate(run, g_array_index(run->selected, uint64_t, k));
    g_mutex_lock(&run->lock);
    run->slots[k % run->window] = result;
    g_cond_broadcast(&run->ready);
    g_mutex_unlock(&run->lock);
}

/* ---- one child process per variant (isolate.h) ------------------------ */

/* A result crosses the pipe as: predicted_ns, peak_bytes (int64), status
 * (int32), the step count and each step's ns, the error's length and
 * bytes (0: none).  Both ends are this program: native byte order. */
static GBytes *encode_result(const variant_result *result)
{
    GByteArray *bytes = g_byte_array_new();
    int32_t status = result->status;
    guint32 steps = result->steps ? result->steps->len : 0, length = result->error ? (guint32)strlen(result->error) : 0;
    g_byte_array_append(bytes, (const guint8 *)&result->predicted_ns, 8);
    g_byte_array_append(bytes, (const guint8 *)&result->peak_bytes, 8);
    g_byte_array_append(bytes, (const guint8 *)&status, 4);
    g_byte_array_append(bytes, (const guint8 *)&steps, 4);
    if (steps) g_byte_array_append(bytes, (const guint8 *)result->steps->data, steps * 8);
    g_byte_array_append(bytes, (const guint8 *)&length, 4);
    if (length) g_byte_array_append(bytes, (const guint8 *)result->error, length);
    return g_byte_array_free_to_bytes(bytes);
}

static variant_result *decode_result(GBytes *bytes)
{
    gsize size = 0;
    const guint8 *data = g_bytes_get_data(bytes, &size);
    variant_result *result = g_new0(variant_result, 1);
    guint32 steps = 0, length = 0;
    int32_t status = 0;
    if (size < 24) goto broken;
    memcpy(&result->predicted_ns, data, 8);
    memcpy(&result->peak_bytes, data + 8, 8);
    memcpy(&status, data + 16, 4);
    memcpy(&steps, data + 20, 4);
    if ((size - 24) / 8 < steps || size - 24 - (gsize)steps * 8 < 4) goto broken;
    if (steps) {
        result->steps = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), steps);
        g_array_append_vals(result->steps, data + 24, steps);
    }
    memcpy(&length, data + 24 + (gsize)steps * 8, 4);
    if (size - 28 - (gsize)steps * 8 != length) goto broken;
    if (length) result->error = g_strndup((const char *)data + 28 + (gsize)steps * 8, length);
    result->status = status;
    return result;
broken:
    result_free(result);
    result = g_new0(variant_result, 1);
    result->error = g_strdup("the isolated variant sent back a damaged result");
    result->status = RV_EXIT_INPUT;
    return result;
}

/* A worker process: variants (their numbers in the plan) come on
 * `requests`; each is applied to the worker's scratch graph, a copy of the
 * input (which the worker shares with the parent copy-on-write), and its
 * row's numbers go back to the parent. */
static void serve_variants(gpointer data, int requests)
{
    sweep_run *run = data;
    stdout = stderr; /* a plugin's printf must not land among the rows */
    rv_graph *scratch = rv_graph_new(NULL, "");
    uint64_t v;
    while (rv_cli_read_request(requests, &v, sizeof v)) {
        rv_graph_assign(scratch, run->graph);
        variant_result *result = evaluate_on(run, v, scratch);
        GBytes *bytes = encode_result(result);
        gsize size = 0;
        const void *raw = g_bytes_get_data(bytes, &size);
        rv_cli_isolation_result(raw, size);
        g_bytes_unref(bytes);
        result_free(result);
    }
}

/* A worker's death as its variant's row: why, naming the plugin (exit 3). */
static variant_result *failed_variant(const rv_cli_child *worker)
{
    variant_result *result = g_new0(variant_result, 1);
    result->error = rv_cli_child_failure(worker, rv_cli_time_limit_s());
    result->status = RV_EXIT_PLUGIN;
    return result;
}

static variant_result *error_variant(const GError *error)
{
    variant_result *result = g_new0(variant_result, 1);
    result->error = g_strdup(error->message);
    result->status = rv_error_exit_status(error);
    return result;
}

/* -j workers, each on at most one variant; a worker that died is
 * replaced before it gets another. */
typedef struct {
    sweep_run *run;
    GPtrArray *workers;       /* rv_cli_child* */
    gint64 *running;          /* per worker: the selected index it runs, or -1 */
    variant_result **ready;   /* selected[k]'s row in ready[k % window] */
    guint next;               /* the next selected index to hand out */
} worker_pool;

/* Collect answers and deaths; give idle workers the next variants that fit
 * in the window (those before `until`). */
static void tend_workers(worker_pool *pool, guint until)
{
    sweep_run *run = pool->run;
    for (guint j = 0; j < pool->workers->len; j++) {
        rv_cli_child *worker = g_ptr_array_index(pool->workers, j);
        GBytes *answer = worker ? rv_cli_child_take_result(worker) : NULL;
        if (answer != NULL) {
            pool->ready[pool->running[j] % run->window] = decode_result(answer);
            g_bytes_unref(answer);
            pool->running[j] = -1;
        }
        if (worker != NULL && rv_cli_child_finished(worker)) {
            if (pool->running[j] >= 0) pool->ready[pool->running[j] % run->window] = failed_variant(worker);
            pool->running[j] = -1;
            rv_cli_child_free(worker);
            g_ptr_array_index(pool->workers, j) = worker = NULL;
        }
        if (pool->running[j] >= 0 || pool->next >= run->selected->len || pool->next >= until) continue;
        GError *error = NULL;
        if (worker == NULL)
            g_ptr_array_index(pool->workers, j) = worker = rv_cli_worker_start(serve_variants, run, &error);
        uint64_t v = g_array_index(run->selected, uint64_t, pool->next);
        if (worker == NULL) {
            pool->ready[pool->next % run->window] = error_variant(error);
            g_error_free(error);
        } else {
            rv_cli_child_request(worker, &v, sizeof v); /* a failure shows as its death */
            pool->running[j] = pool->next;
        }
        pool->next++;
    }
}

/* ---- the sweep -------------------------------------------------------- */

typedef struct {
    char **inputs;
    int input_count;
    int jobs;
    guint shard, shards;        /* this is shard `shard` (1-based) of `shards` */
    sweep_output *out;
    gboolean begun;
    GHashTable *plugins;
    const rv_sweep_plan *plan;
    GAsyncQueue *scratch;
    /* progress and outcome */
    gboolean progress;
    uint64_t total, printed, failed;
    gint64 started_us, shown_us;
    int status;                 /* of the first failed variant */
    char *first_failure;
    /* --plot: one rv_plot_point per row, and the baseline's time */
    const char *plot;
    GArray *points;
    int64_t baseline_ns;
    gboolean no_peak;           /* --no-peak */
    gboolean isolate;           /* one child process per variant (isolate.h) */
    gboolean stopped;           /* the rows could not be written: nothing more to compute */
    gboolean plot_failed;       /* --plot could not be written: the rows are not printed */
} sweep;

static void show_progress(sweep *s, gboolean force)
{
    gint64 now = g_get_monotonic_time();
    if (!s->progress || (!force && now - s->shown_us < 200000)) return;
    s->shown_us = now;
    double seconds = (now - s->started_us) / 1e6, rate = seconds > 0 ? s->printed / seconds : 0;
    fprintf(stderr, "\r\033[Ksweep: %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT " variants, %.0f per minute, %"
            G_GUINT64_FORMAT " failed, %.0f s left", s->printed, s->total, rate * 60, s->failed,
            rate > 0 ? (s->total - s->printed) / rate : 0.0);
    fflush(stderr);
}

static void emit(sweep *s, uint64_t variant, uint64_t local, const char *source, const GArray *baseline,
                 int64_t baseline_peak, const variant_result *result)
{
    if (!s->begun) {
        s->out->begin(s->out, baseline ? baseline->len : 0);
        s->begun = TRUE;
    }
    sweep_row row = { variant, local, source, baseline, baseline_peak, result };
    s->out->row(s->out, &row);
    if (s->points) {
        rv_plot_point point = { rv_sweep_plan_value(s->plan, local, 0), result->predicted_ns / 1e6, result->error == NULL };
        g_array_append_val(s->points, point);
        if (baseline) s->baseline_ns = total_ns(baseline);
    }
    /* A row that cannot be written (a full disk) ends the sweep: every
     * variant after it would be computed for nothing. */
    if (s->out->file == stdout && (fflush(stdout) != 0 || ferror(stdout))) s->stopped = TRUE;
    s->printed++;
    if (result->error) {
        if (s->failed++ == 0) {
            s->status = result->status;
            s->first_failure = g_strdup_printf("variant %" G_GUINT64_FORMAT ": %s", variant, result->error);
        }
    }
    show_progress(s, FALSE);
}

/* Does this shard run variant v of input `input`?  Variants are numbered
 * over all inputs, and shard K keeps the numbers equal to K-1 modulo N. */
static gboolean in_shard(const sweep *s, int input, uint64_t v)
{
    return ((uint64_t)input * s->plan->count + v) % s->shards == s->shard - 1;
}

/* The plan's variants of input `input` that this shard runs. */
static GArray *select_variants(const sweep *s, int input)
{
    GArray *selected = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    for (uint64_t v = 0; v < s->plan->count; v++)
        if (in_shard(s, input, v)) g_array_append_val(selected, v);
    return selected;
}

/* Every selected variant of an input that could not be loaded or replayed
 * is a row with that error: the other inputs and shards go on. */
static void emit_failed_input(sweep *s, int input, GArray *selected, const GError *error)
{
    variant_result result = { 0, -1, NULL, error->message, rv_error_exit_status(error) };
    for (guint k = 0; k < selected->len; k++) {
        uint64_t v = g_array_index(selected, uint64_t, k);
        emit(s, (uint64_t)input * s->plan->count + v, v, s->inputs[input], NULL, -1, &result);
    }
}

/* The variants on a pool of -j threads, each on a scratch graph. */
static void run_in_threads(sweep *s, sweep_run *run, int input, const GArray *baseline, int64_t baseline_peak)
{
    const GArray *selected = run->selected;
    run->slots = g_new0(variant_result *, run->window);
    g_mutex_init(&run->lock);
    g_cond_init(&run->ready);
    GThreadPool *pool = g_thread_pool_new(run_variant, run, s->jobs, FALSE, NULL);
    guint pushed = 0;
    for (guint k = 0; k < selected->len && !s->stopped; k++) {
        for (; pushed < selected->len && pushed < k + run->window; pushed++)
            g_thread_pool_push(pool, GUINT_TO_POINTER(pushed + 1), NULL);
        g_mutex_lock(&run->lock);
        while (run->slots[k % run->window] == NULL)
            if (!g_cond_wait_until(&run->ready, &run->lock, g_get_monotonic_time() + 200000)) {
                g_mutex_unlock(&run->lock);
                show_progress(s, FALSE);
                g_mutex_lock(&run->lock);
            }
        variant_result *result = run->slots[k % run->window];
        run->slots[k % run->window] = NULL;
        g_mutex_unlock(&run->lock);
        uint64_t v = g_array_index(selected, uint64_t, k);
        emit(s, (uint64_t)input * s->plan->count + v, v, s->inputs[input], baseline, baseline_peak, result);
        result_free(result);
    }
    g_thread_pool_free(pool, TRUE, TRUE); /* stopped: the queued variants are dropped */
    for (guint k = 0; k < run->window; k++) result_free(run->slots[k]);
    g_free(run->slots);
    g_mutex_clear(&run->lock);
    g_cond_clear(&run->ready);
}

/* The variants in -j worker processes: a plugin that crashes, hangs or
 * exits costs its own row (exit 3), never the others. */
static void run_in_children(sweep *s, sweep_run *run, int input, const GArray *baseline, int64_t baseline_peak)
{
    worker_pool pool = { run, g_ptr_array_new(), g_new(gint64, s->jobs), g_new0(variant_result *, run->window), 0 };
    g_ptr_array_set_size(pool.workers, s->jobs);
    for (int j = 0; j < s->jobs; j++) pool.running[j] = -1;
    double limit = rv_cli_time_limit_s();
    GPtrArray *live = g_ptr_array_new();
    for (guint k = 0; k < run->selected->len && !s->stopped; k++) {
        for (;;) {
            tend_workers(&pool, k + run->window);
            if (pool.ready[k % run->window] != NULL) break;
            g_ptr_array_set_size(live, 0);
            for (guint j = 0; j < pool.workers->len; j++)
                if (g_ptr_array_index(pool.workers, j)) g_ptr_array_add(live, g_ptr_array_index(pool.workers, j));
            rv_cli_children_wait(live, 200, limit);
            show_progress(s, FALSE);
        }
        variant_result *result = pool.ready[k % run->window];
        pool.ready[k % run->window] = NULL;
        uint64_t v = g_array_index(run->selected, uint64_t, k);
        emit(s, (uint64_t)input * s->plan->count + v, v, s->inputs[input], baseline, baseline_peak, result);
        result_free(result);
    }
    /* the workers end here (a stopped sweep's are killed mid-variant) */
    for (guint j = 0; j < pool.workers->len; j++) rv_cli_child_free(g_ptr_array_index(pool.workers, j));
    for (guint k = 0; k < run->window; k++) result_free(pool.ready[k]);
    g_ptr_array_unref(live);
    g_ptr_array_unref(pool.workers);
    g_free(pool.running);
    g_free(pool.ready);
}

static void run_input(sweep *s, int input, const rv_graph *graph, const GArray *baseline, GArray *selected)
{
    sweep_run run = { .plan = s->plan, .plugins = s->plugins, .graph = graph, .keep_steps = s->out->with_steps,
                      .scratch = s->scratch, .selected = selected, .structure = rv_sim_structure_new(graph) };
    if (!s->no_peak) rv_memory_peak_before(&run.peak, graph);
    /* REVERIE_SWEEP_FULL_CHECKS set: every variant pays the full checks,
     * to show that the shortcuts change no row */
    gboolean shortcuts = g_getenv("REVERIE_SWEEP_FULL_CHECKS") == NULL;
    if (run.peak.estimated && shortcuts)
        run.durations_only = rv_memory_durations_only_new(graph, run.peak.baseline.element_bytes);
    int64_t baseline_peak = run.peak.estimated ? run.peak.baseline.peak : -1;
    run.window = (guint)MIN((uint64_t)s->jobs * WINDOW_PER_JOB, MAX(selected->len, 1));
    if (s->isolate) run_in_children(s, &run, input, baseline, baseline_peak);
    else run_in_threads(s, &run, input, baseline, baseline_peak);
    rv_sim_structure_free((rv_sim_structure *)run.structure);
    rv_memory_peak_clear(&run.peak);
    rv_memory_durations_only_free(run.durations_only);
}

/* Load and replay one input; NULL with error set when it cannot be. */
static rv_graph *load_input(const char *path, GArray **baseline, GError **error)
{
    rv_graph *graph = rv_cli_load(path, error);
    if (graph == NULL) return NULL;
    *baseline = rv_cli_replay_steps(graph, NULL, NULL, error);
    if (*baseline == NULL) {
        rv_graph_free(graph);
        return NULL;
    }
    return graph;
}

/* One input: loaded only if this shard runs some of its variants. */
static void sweep_input(sweep *s, int input, rv_graph *graph, GArray *baseline)
{
    GArray *selected = select_variants(s, input);
    GError *error = NULL;
    if (selected->len > 0 && graph == NULL) graph = load_input(s->inputs[input], &baseline, &error);
    if (error) emit_failed_input(s, input, selected, error);
    else if (selected->len > 0) {
        /* every variant is a copy of this graph: the check after each
         * plugin then looks only around the edges it changed (validate.h) */
        rv_graph_remember_order(graph);
        /* and a selection that every variant makes first (scale's) is
         * matched once, not per variant (select.h) */
        if (g_getenv("REVERIE_SWEEP_FULL_CHECKS") == NULL) rv_graph_remember_selections(graph);
        run_input(s, input, graph, baseline, selected);
    }
    g_clear_error(&error);
    if (baseline) g_array_unref(baseline);
    rv_graph_free(graph);
    g_array_unref(selected);
}

static void finish(sweep *s)
{
    if (!s->begun) s->out->begin(s->out, 0);
    if (s->progress) {
        show_progress(s, TRUE);
        double seconds = (g_get_monotonic_time() - s->started_us) / 1e6;
        fprintf(stderr, "\r\033[Ksweep: %" G_GUINT64_FORMAT " variants in %.1f s\n", s->printed, seconds);
    }
    if (s->failed)
        fprintf(stderr, "reverie sweep: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " variants failed; first: %s\n",
                s->failed, s->printed, s->first_failure);
}

/* The curve of a one-axis sweep of one input (check_options saw to that). */
static gboolean draw_plot(const sweep *s)
{
    const rv_sweep_axis *axis = g_ptr_array_index(s->plan->axes, 0);
    char *x_label = g_strdup_printf("%s.%s", axis->plugin, axis->param);
    char *title = g_strdup_printf("sweep of %s: %s", x_label, rv_cli_shown(s->inputs[0]));
    GError *error = NULL;
    gboolean ok = rv_plot_curve_svg(s->plot, title, x_label, (const rv_plot_point *)s->points->data, s->points->len,
                                    s->baseline_ns / 1e6, &error);
    if (!ok) rv_cli_fail(error);
    g_free(title);
    g_free(x_label);
    return ok;
}

static int run_sweep(sweep *s)
{
    s->total = 0;
    for (int i = 0; i < s->input_count; i++)
        for (uint64_t v = 0; v < s->plan->count; v++)
            s->total += in_shard(s, i, v);
    s->scratch = g_async_queue_new_full((GDestroyNotify)rv_graph_free);
    for (int j = 0; j < s->jobs; j++) g_async_queue_push(s->scratch, rv_graph_new(NULL, ""));
    s->started_us = g_get_monotonic_time();
    /* One input: a bad file is one error line and exit 2, as in whatif; the
     * CSV header needs its step count, so it is loaded even for an empty shard. */
    if (s->input_count == 1) {
        GError *error = NULL;
        GArray *baseline = NULL;
        rv_graph *graph = load_input(s->inputs[0], &baseline, &error);
        if (graph == NULL) {
            g_async_queue_unref(s->scratch);
            return rv_cli_fail(error);
        }
        s->out->begin(s->out, baseline->len);
        s->begun = TRUE;
        sweep_input(s, 0, graph, baseline);
    } else {
        for (int i = 0; i < s->input_count; i++) sweep_input(s, i, NULL, NULL);
    }
    finish(s);
    g_async_queue_unref(s->scratch);
    /* rows that could not be written: rv_cli_finish says why (exit 2) */
    if (s->stopped) return RV_EXIT_OK;
    int status = s->failed ? s->status : RV_EXIT_OK;
    if (s->plot && !draw_plot(s)) {
        s->plot_failed = TRUE;
        status = RV_EXIT_INPUT;
    }
    return status;
}

/* ---- options ---------------------------------------------------------- */

/* "K/N" with 1 <= K <= N. */
static gboolean parse_shard(const char *text, guint *shard, guint *shards)
{
    char *end = NULL;
    if (text == NULL) { *shard = *shards = 1; return TRUE; }
    guint64 k = g_ascii_strtoull(text, &end, 10);
    if (end == text || *end != '/') return FALSE;
    const char *rest = end + 1;
    guint64 n = g_ascii_strtoull(rest, &end, 10);
    if (end == rest || *end != '\0' || n < 1 || n > 1000000 || k < 1 || k > n) return FALSE;
    *shard = (guint)k;
    *shards = (guint)n;
    return TRUE;
}

static const char sweep_help[] =
    "Each --vary adds an axis; the variants are all their combinations (the first --vary\n"
    "outermost).  A LIST is a,b,c; lo..hi/N for N evenly spaced points, lo and hi included;\n"
    "or lo..hi/N log for log spacing.  Values take units as in --opt (10Gbps, 5us, 25MiB).\n"
    "--variants FILE lists one variant per line as --opt specs (shell quoting; # comments).\n"
    "The fixed --opt specs apply first; an axis sets its parameter on the --opt of its plugin,\n"
    "or adds that plugin.  Variants are numbered from 0 over all inputs.\n"
    "\n"
    "Output: one row per variant in variant order: the varied values, the predicted and\n"
    "baseline time of all steps (ms; us in JSON), their ratio (speedup), the peak memory\n"
    "before and after (MiB; bytes in JSON; empty without shapes, or with --no-peak), per-step\n"
    "times with --steps, and the error of a variant that failed (the sweep goes on; the exit status is\n"
    "that of the first failure: 1 a value out of range, 3 plugin, 2 input).\n"
    "Each variant runs in a child process of its own (--isolate, the default): a plugin that\n"
    "crashes, hangs past --time-limit or calls exit() costs its own row (an error, exit 3),\n"
    "never the others.  --no-isolate runs the variants in threads instead, for plugins you trust.\n"
    "--plot FILE.svg draws a one-axis sweep as a curve: its values evenly spaced in the\n"
    "order given (so lo..hi/N is linear and lo..hi/N log is log-scaled), the baseline dashed;\n"
    "the rows are printed once the picture is written.\n"
    "\n"
    "Examples:\n"
    "  reverie sweep g.rvg --vary scale.factor=0.5..1/11\n"
    "  reverie sweep g.rvg --vary 'network.bandwidth_factor=0.1..10/21 log' --plot network.svg\n"
    "  reverie sweep g.rvg --opt amp --vary 'ddp.bandwidth=10Gbps..400Gbps/20 log' --vary ddp.world=8,16\n"
    "  reverie sweep g.rvg --variants variants.txt --json -o rows.jsonl\n"
    "  reverie sweep g.rvg --vary ddp.world=2..64/32 --shard 3/4 > part-3.csv   (see docs/sweeps.md)\n";

typedef struct {
    char **opts, **varies;
    char *variants, *shard, *plot;
    int jobs;
    gboolean jsonl, json, csv, steps, no_peak;
} sweep_options;

static int check_options(const sweep_options *o, int argc, guint *shard, guint *shards)
{
    if (argc < 2) return rv_cli_usage("sweep", "give at least one trace or graph");
    if ((o->varies == NULL || !*o->varies) && o->variants == NULL)
        return rv_cli_usage("sweep", "nothing to sweep: give --vary NAME.PARAM=LIST or --variants FILE");
    if ((o->jsonl || o->json) && o->csv) return rv_cli_usage("sweep", "give --csv or --json, not both");
    if (o->jobs < 0 || o->jobs > 1024) return rv_cli_usage("sweep", "--jobs takes 1 to 1024 (0: one per core)");
    if (!parse_shard(o->shard, shard, shards))
        return rv_cli_usage("sweep", "--shard takes K/N with 1 <= K <= N (e.g. 1/4 ... 4/4)");
    if (o->steps && !o->jsonl && !o->json && argc > 2)
        return rv_cli_usage("sweep", "--steps with several inputs needs --json (CSV columns need one step count)");
    if (o->plot && (argc > 2 || o->variants || o->varies == NULL || g_strv_length(o->varies) != 1))
        return rv_cli_usage("sweep", "--plot draws the curve of one --vary over one input (no --variants)");
    return RV_EXIT_OK;
}

static int sweep_with(const sweep_options *o, char **inputs, int input_count, guint shard, guint shards)
{
    GError *error = NULL;
    GHashTable *plugins = rv_plugin_table_new();
    rv_sweep_plan *plan = rv_sweep_plan_new(o->opts, o->varies, o->variants, plugins, &error);
    int status;
    if (plan == NULL) {
        status = rv_cli_fail(error);
    } else {
        gboolean json = o->jsonl || o->json;
        sweep_output out = { json ? jsonl_begin : csv_begin, json ? jsonl_row : csv_row, plan, input_count > 1,
                             o->steps, stdout };
        sweep s = { .inputs = inputs, .input_count = input_count, .jobs = o->jobs ? o->jobs : (int)g_get_num_processors(),
                    .shard = shard, .shards = shards, .out = &out, .plugins = plugins, .plan = plan,
                    .progress = isatty(STDERR_FILENO), .plot = o->plot, .no_peak = o->no_peak,
                    .isolate = rv_cli_isolate_variants() };
        /* with --plot the rows wait in memory until the picture is safe */
        char *rows = NULL;
        size_t rows_length = 0;
        if (o->plot) {
            s.points = g_array_new(FALSE, FALSE, sizeof(rv_plot_point));
            out.file = open_memstream(&rows, &rows_length);
        }
        status = run_sweep(&s);
        if (o->plot) {
            fclose(out.file);
            if (!s.plot_failed) fwrite(rows, 1, rows_length, stdout);
            free(rows);
        }
        g_free(s.first_failure);
        if (s.points) g_array_unref(s.points);
    }
    rv_sweep_plan_free(plan);
    g_hash_table_destroy(plugins);
    return status;
}

/* --variants is an input of the run: remembered while the options are
 * parsed, before -o is checked, so that no output can replace it. */
static char *variants_file;

static gboolean take_variants(const char *option, const char *value, gpointer data, GError **error)
{
    g_free(variants_file);
    variants_file = g_strdup(value);
    rv_output_note_input(value);
    return TRUE;
}

int rv_cmd_sweep(int argc, char **argv)
{
    sweep_options o = { 0 };
    GOptionEntry entries[] = {
        { "opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.opts, "an optimization every variant applies first", "NAME[:k=v,...]" },
        { "vary", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.varies, "an axis: a parameter and its values", "NAME.PARAM=LIST" },
        { "variants", 0, 0, G_OPTION_ARG_CALLBACK, (gpointer)take_variants, "one variant per line: its --opt specs", "FILE" },
        { "jobs", 'j', 0, G_OPTION_ARG_INT, &o.jobs, "variants run in parallel (default: one per core)", "N" },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &o.csv, "print CSV with a header line (the default)", NULL },
        { "json", 0, 0, G_OPTION_ARG_NONE, &o.json, "print JSON Lines: one JSON object per variant, per line", NULL },
        { "jsonl", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &o.jsonl, "the same as --json", NULL },
        { "steps", 0, 0, G_OPTION_ARG_NONE, &o.steps, "add each step's predicted time", NULL },
        { "no-peak", 0, 0, G_OPTION_ARG_NONE, &o.no_peak,
          "leave the peak memory columns empty and skip the memory model (faster on graphs with shapes)", NULL },
        { "shard", 0, 0, G_OPTION_ARG_STRING, &o.shard, "run only the K-th of N equal parts", "K/N" },
        { "plot", 0, 0, G_OPTION_ARG_FILENAME, &o.plot,
          "draw a one-axis sweep's predicted times as a curve against the baseline, to SVG", "FILE.svg" },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("GRAPH|TRACE... --vary NAME.PARAM=LIST... - many what-ifs in one run");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context, sweep_help);
    int status = RV_EXIT_OK;
    guint shard = 1, shards = 1;
    GError *error = NULL;
    gboolean parsed = rv_cli_parse(context, &argc, &argv, &status);
    o.variants = variants_file;
    if (parsed && (status = check_options(&o, argc, &shard, &shards)) == RV_EXIT_OK)
        status = rv_cli_check_output(o.plot, &error) ? sweep_with(&o, argv + 1, argc - 1, shard, shards) : rv_cli_fail(error);
    g_strfreev(o.opts);
    g_strfreev(o.varies);
    g_free(o.variants);
    variants_file = NULL;
    g_free(o.shard);
    g_free(o.plot);
    g_option_context_free(context);
    return status;
}
