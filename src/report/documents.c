/*
 * documents.c - the JSON documents of `--json` (documents.h), built from
 * the library's replays, what-ifs and runs for every front end.
 */
#include "reverie/documents.h"
#include "reverie/breakdown.h"
#include "reverie/critical_path.h"
#include "reverie/escape.h"
#include "reverie/job.h"
#include "reverie/optimize.h"
#include <stdlib.h>

json_t *rv_json_text(const char *text)
{
    /* Bounded (escape.h): valid UTF-8, which jansson needs (a forged saved
     * graph may hold other bytes), and no name copied per task can
     * multiply a document's size. */
    char *copy = NULL;
    json_t *value = json_string(rv_bounded_name(text, &copy));
    g_free(copy);
    return value;
}

char *rv_document_text(const json_t *document, int digits)
{
    return json_dumps(document, JSON_INDENT(2) | JSON_REAL_PRECISION(digits));
}

/* ---- labels ------------------------------------------------------------------ */

static gboolean is_job(const rv_graph *graph) { return rv_graph_rank_count(graph) > 1; }

static const char *text_of(const rv_graph *graph, int32_t id) { return rv_strings_get(graph->strings, id); }

static const char *task_name(const rv_graph *graph, int32_t task)
{
    return text_of(graph, g_array_index(graph->tasks, rv_task, task).name);
}

static const char *resource_label(const rv_graph *graph, int32_t resource)
{
    return text_of(graph, g_array_index(graph->resources, rv_resource, resource).name);
}

/* A task's step ("-": none), as simulate lists the unexplained tasks. */
static const char *task_step_label(const rv_graph *graph, int32_t step)
{
    return step >= 0 ? text_of(graph, g_array_index(graph->steps, rv_step, step).name) : "-";
}

/* A report's step, as breakdown and critical-path list them. */
static const char *step_label(const rv_graph *graph, guint step)
{
    return graph->steps->len ? text_of(graph, g_array_index(graph->steps, rv_step, step).name) : "(whole trace)";
}

static int64_t rank_number(const rv_graph *graph, guint rank_index)
{
    return g_array_index(graph->ranks, rv_rank, rank_index).rank;
}

/* ---- simulate and whatif ------------------------------------------------------ */

/* One rank's entry: its steps (baseline and predicted when a prediction
 * is given), its waits and whom for. */
static json_t *json_rank(const rv_graph *graph, guint r, const GArray *steps, const GArray *predicted,
                         const rv_rank_wait *wait)
{
    json_t *list = json_array(), *whom = json_array();
    for (guint s = 0; s < steps->len; s++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, s);
        json_t *item = json_pack("{s:o,s:f,s:f}", "name", rv_json_text(step->name), "recorded_us",
                                 step->recorded_ns / 1e3, "simulated_us", step->simulated_ns / 1e3);
        if (predicted && s < predicted->len) {
            const rv_step_time *after = &g_array_index(predicted, rv_step_time, s);
            json_object_set_new(item, "baseline_us", json_real(step->simulated_ns / 1e3));
            json_object_set_new(item, "predicted_us", json_real(after->simulated_ns / 1e3));
            json_object_set_new(item, "simulated_us", json_real(after->simulated_ns / 1e3));
        }
        json_array_append_new(list, item);
    }
    for (guint other = 0; other < rv_graph_rank_count(graph); other++)
        if (wait->waited_for_ns[other] > 0)
            json_array_append_new(whom, json_pack("{s:I,s:f}", "rank", (json_int_t)rank_number(graph, other), "us",
                                                  wait->waited_for_ns[other] / 1e3));
    const rv_rank *rank = &g_array_index(graph->ranks, rv_rank, r);
    return json_pack("{s:I,s:o,s:o,s:f,s:I,s:o,s:f,s:i}", "rank", (json_int_t)rank->rank, "source",
                     rv_json_text(rv_strings_get(graph->strings, rank->source)), "steps", list, "wait_us",
                     wait->wait_ns / 1e3, "collectives", (json_int_t)wait->collectives, "waited_for", whom,
                     "clock_offset_us", rank->clock_offset_ns / 1e3, "clock_offset_samples", rank->offset_samples);
}

/* The "ranks" array: each rank's steps, with baseline_us and predicted_us
 * when a prediction is given, its waits (in the prediction, if any) and
 * clock offset. */
static json_t *ranks_document(const rv_graph *graph, const rv_replay *baseline, const rv_replay *predicted)
{
    const rv_replay *last = predicted ? predicted : baseline;
    json_t *ranks = json_array();
    for (guint r = 0; r < baseline->by_rank->len; r++)
        json_array_append_new(ranks, json_rank(graph, r, g_ptr_array_index(baseline->by_rank, r),
                                               predicted ? g_ptr_array_index(predicted->by_rank, r) : NULL,
                                               &g_array_index(last->waits, rv_rank_wait, r)));
    return ranks;
}

static json_t *json_explanation(const rv_graph *graph, const rv_explanation *x)
{
    json_t *resources = json_object(), *top = json_array();
    for (guint r = 0; r < graph->resources->len; r++)
        if (x->by_resource[r]) {
            char *copy = NULL;
            json_object_set_new(resources, rv_bounded_name(resource_label(graph, (int32_t)r), &copy),
                                json_real(x->by_resource[r] / 1e3));
            g_free(copy);
        }
    for (guint i = 0; i < x->top->len; i++) {
        const rv_unexplained_task *item = &g_array_index(x->top, rv_unexplained_task, i);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, item->task);
        /* A trace's timestamp (16 digits of microseconds) as an integer:
         * the document's 12 significant digits would round it to 10 ms. */
        json_t *entry = json_pack("{s:o,s:o,s:o,s:I,s:f}", "name", rv_json_text(task_name(graph, item->task)), "resource",
                                  rv_json_text(resource_label(graph, task->resource)), "step",
                                  rv_json_text(task_step_label(graph, task->step)),
                                  "recorded_start_us", (json_int_t)(task->recorded_start_ns / 1000), "unexplained_us",
                                  item->unexplained_ns / 1e3);
        if (item->binding >= 0) json_object_set_new(entry, "after", rv_json_text(task_name(graph, item->binding)));
        json_array_append_new(top, entry);
    }
    json_t *sites = json_array();
    for (guint i = 0; i < x->cpu_sites->len; i++) {
        const rv_unexplained_site *site = &g_array_index(x->cpu_sites, rv_unexplained_site, i);
        json_array_append_new(sites, json_pack("{s:o,s:o,s:I,s:f}", "call", rv_json_text(rv_strings_get(graph->strings, site->name)),
                                               "operator", rv_json_text(site->op > 0 ? rv_strings_get(graph->strings, site->op) : ""),
                                               "calls", (json_int_t)site->calls, "unexplained_us", site->total_ns / 1e3));
    }
    return json_pack("{s:f,s:I,s:o,s:f,s:I,s:I,s:I,s:f,s:I,s:f,s:f,s:o,s:o}", "cpu_total_us", x->cpu_total_ns / 1e3,
                     "cpu_calls", (json_int_t)x->cpu_calls, "cpu_sites", sites, "total_us", x->total_ns / 1e3, "late_tasks",
                     (json_int_t)x->late_tasks, "gpu_tasks", (json_int_t)x->gpu_tasks, "early_tasks",
                     (json_int_t)x->early_tasks, "early_us", x->early_ns / 1e3, "suspect_host_gaps",
                     (json_int_t)x->suspect_host_gaps, "suspect_host_us", x->suspect_host_ns / 1e3,
                     "suspect_by_chance", x->suspect_by_chance,
                     "by_resource_us", resources, "largest", top);
}

int64_t rv_peer_wait_total(const rv_graph *graph)
{
    GArray *waits = rv_peer_waits_by_step(graph);
    int64_t total = 0;
    for (guint s = 0; s < waits->len; s++) total += g_array_index(waits, int64_t, s);
    g_array_unref(waits);
    return total;
}

int64_t rv_job_step_entering_together(const rv_graph *graph, const GArray *steps)
{
    if (!is_job(graph) || steps->len != 1) return -1;
    rv_graph *together = rv_graph_copy(graph);
    int64_t step = -1;
    rv_replay replay;
    if (rv_job_enter_together(together) > 0 && rv_replay_run(together, NULL, &replay, NULL))
        step = g_array_index(replay.steps, rv_step_time, 0).simulated_ns;
    rv_replay_clear(&replay);
    rv_graph_free(together);
    return step;
}

rv_job_figures rv_job_figures_of(const rv_graph *graph, const GArray *steps)
{
    rv_job_figures figures = { rv_graph_live_task_count(graph), graph->edges->len, rv_peer_wait_total(graph),
                               rv_job_step_entering_together(graph, steps) };
    return figures;
}

json_t *rv_simulate_document(const rv_graph *graph, const rv_replay *replay, const rv_explanation *x,
                             gboolean detail)
{
    rv_job_figures figures = rv_job_figures_of(graph, replay->steps);
    return rv_simulate_document_with(graph, replay, x, detail, &figures);
}

json_t *rv_simulate_document_with(const rv_graph *graph, const rv_replay *replay, const rv_explanation *x,
                                  gboolean detail, const rv_job_figures *figures)
{
    const GArray *steps = replay->steps;
    rv_steps_summary summary = rv_steps_summarize(steps);
    json_t *root = json_object(), *list = json_array();
    GArray *peer_waits = rv_peer_waits_by_step(graph);
    json_object_set_new(root, "source", rv_json_text(graph->source));
    for (guint i = 0; i < steps->len; i++) {
        const rv_step_time *step = &g_array_index(steps, rv_step_time, i);
        json_t *item = json_object();
        json_object_set_new(item, "name", rv_json_text(step->name));
        json_object_set_new(item, "recorded_us", json_real(step->recorded_ns / 1e3));
        json_object_set_new(item, "simulated_us", json_real(step->simulated_ns / 1e3));
        json_object_set_new(item, "error", json_real(rv_relative_error(step->recorded_ns, step->simulated_ns)));
        json_object_set_new(item, "unexplained_us", json_real(rv_step_unexplained(graph, x, i) / 1e3));
        if (!is_job(graph) && i < graph->steps->len) {
            json_object_set_new(item, "unexplained_cpu_us", json_real(x->cpu_by_step[i] / 1e3));
            json_object_set_new(item, "peer_wait_us", json_real(g_array_index(peer_waits, int64_t, i) / 1e3));
        }
        json_array_append_new(list, item);
    }
    g_array_unref(peer_waits);
    json_object_set_new(root, "steps", list);
    json_object_set_new(root, "recorded_us", json_real(summary.recorded_total_ns / 1e3));
    json_object_set_new(root, "simulated_us", json_real(summary.simulated_total_ns / 1e3));
    json_object_set_new(root, "mean_error", json_real(summary.mean_error));
    json_object_set_new(root, "max_error", json_real(summary.max_error));
    json_object_set_new(root, "unexplained_us", json_real(x->total_ns / 1e3));
    json_object_set_new(root, "unexplained_cpu_us", json_real(x->cpu_total_ns / 1e3));
    json_object_set_new(root, "peer_wait_us", json_real(figures->peer_wait_ns / 1e3));
    if (detail) json_object_set_new(root, "unexplained", json_explanation(graph, x));
    json_object_set_new(root, "whole_trace", json_boolean(graph->whole_trace_step));
    json_object_set_new(root, "tasks", json_integer(figures->live_tasks));
    json_object_set_new(root, "edges", json_integer(figures->edges));
    if (is_job(graph)) json_object_set_new(root, "ranks", ranks_document(graph, replay, NULL));
    if (figures->entering_together_ns >= 0)
        json_object_set_new(root, "step_entering_together_us", json_real(figures->entering_together_ns / 1e3));
    return root;
}

static void json_peak(json_t *root, const rv_memory_peak *peak)
{
    json_object_set_new(root, "baseline_peak_bytes", peak->estimated ? json_integer(peak->baseline.peak) : json_null());
    json_object_set_new(root, "predicted_peak_bytes", peak->estimated ? json_integer(peak->predicted.peak) : json_null());
    json_object_set_new(root, "predicted_peak_phase",
                        peak->estimated ? json_string(rv_phase_name((rv_phase)peak->predicted.peak_phase)) : json_null());
    json_object_set_new(root, "recorded_peak_bytes", peak->recorded ? json_integer(peak->recorded_bytes) : json_null());
}

static int64_t steps_total(const GArray *steps)
{
    int64_t total = 0;
    for (guint s = 0; s < steps->len; s++) total += g_array_index(steps, rv_step_time, s).simulated_ns;
    return total;
}

/* The prediction's range (whatif.h): each step's ends and the totals; null
 * where the what-if gives none. */
static void json_range(json_t *root, json_t *steps, const rv_prediction_range *range)
{
    if (!range->present) {
        json_object_set_new(root, "predicted_low_us", json_null());
        json_object_set_new(root, "predicted_high_us", json_null());
        json_object_set_new(root, "predicted_gpu_low_us", json_null());
        json_object_set_new(root, "predicted_gpu_high_us", json_null());
        return;
    }
    for (guint s = 0; s < json_array_size(steps) && s < range->low.steps->len && s < range->high.steps->len; s++) {
        json_t *step = json_array_get(steps, s);
        json_object_set_new(step, "predicted_low_us",
                            json_real(g_array_index(range->low.steps, rv_step_time, s).simulated_ns / 1e3));
        json_object_set_new(step, "predicted_high_us",
                            json_real(g_array_index(range->high.steps, rv_step_time, s).simulated_ns / 1e3));
    }
    json_object_set_new(root, "predicted_low_us", json_real(steps_total(range->low.steps) / 1e3));
    json_object_set_new(root, "predicted_high_us", json_real(steps_total(range->high.steps) / 1e3));
    json_object_set_new(root, "predicted_gpu_low_us", json_real(range->gpu_ns[0] / 1e3));
    json_object_set_new(root, "predicted_gpu_high_us", json_real(range->gpu_ns[1] / 1e3));
}

json_t *rv_whatif_document(const rv_graph *graph, GPtrArray *opts, const rv_whatif *whatif)
{
    const GArray *baseline = whatif->baseline.steps, *predicted = whatif->predicted.steps;
    json_t *root = json_object(), *list = json_array(), *steps = json_array();
    json_object_set_new(root, "source", rv_json_text(graph->source));
    uint64_t changed = 0;
    for (guint i = 0; i < opts->len; i++) {
        const rv_opt *opt = g_ptr_array_index(opts, i);
        json_t *params = json_object();
        GPtrArray *described = rv_params_describe(opt->params);
        for (guint k = 0; k < described->len; k++) {
            char **pair = g_strsplit(g_ptr_array_index(described, k), "=", 2);
            json_object_set_new(params, pair[0], rv_json_text(pair[1] ? pair[1] : ""));
            g_strfreev(pair);
        }
        g_ptr_array_free(described, TRUE);
        json_array_append_new(list, json_pack("{s:o,s:o,s:o,s:I}", "name", rv_json_text(opt->plugin->name),
                                              "params", params, "notes", rv_json_text(opt->notes ? opt->notes->str : ""),
                                              "changed_tasks", (json_int_t)opt->changed_tasks));
        changed += opt->changed_tasks;
    }
    json_object_set_new(root, "optimizations", list);
    json_object_set_new(root, "changed_tasks", json_integer((json_int_t)changed));
    int64_t base_total = 0, pred_total = 0, rec_total = 0;
    for (guint s = 0; s < baseline->len; s++) {
        const rv_step_time *b = &g_array_index(baseline, rv_step_time, s);
        const rv_step_time *p = &g_array_index(predicted, rv_step_time, s);
        json_array_append_new(steps, json_pack("{s:o,s:f,s:f,s:f}", "name", rv_json_text(b->name), "recorded_us", b->recorded_ns / 1e3,
                                               "baseline_us", b->simulated_ns / 1e3, "predicted_us", p->simulated_ns / 1e3));
        base_total += b->simulated_ns; pred_total += p->simulated_ns; rec_total += b->recorded_ns;
    }
    json_object_set_new(root, "steps", steps);
    json_object_set_new(root, "recorded_us", json_real(rec_total / 1e3));
    json_object_set_new(root, "baseline_us", json_real(base_total / 1e3));
    json_object_set_new(root, "predicted_us", json_real(pred_total / 1e3));
    json_object_set_new(root, "speedup", json_real(pred_total ? (double)base_total / pred_total : 0.0));
    json_object_set_new(root, "baseline_gpu_us", json_real(whatif->baseline_gpu_ns / 1e3));
    json_object_set_new(root, "predicted_gpu_us", json_real(whatif->predicted_gpu_ns / 1e3));
    json_object_set_new(root, "predicted_critical_path_us", json_real(whatif->predicted.path_ns / 1e3));
    json_object_set_new(root, "predicted_host_path_us", json_real(whatif->predicted.host_path_ns / 1e3));
    json_object_set_new(root, "predicted_profiler_path_us", json_real(whatif->predicted.profiler_path_ns / 1e3));
    json_range(root, steps, &whatif->range);
    json_peak(root, &whatif->peak);
    if (is_job(graph)) json_object_set_new(root, "ranks", ranks_document(graph, &whatif->baseline, &whatif->predicted));
    return root;
}


/* ---- breakdown ------------------------------------------------------------------ */

static json_t *json_split(int64_t total, const int64_t *split, int64_t exposed)
{
    json_t *object = json_pack("{s:f}", "time_us", total / 1e3);
    for (int k = 0; k < RV_SPLIT_COUNT; k++) {
        char *key = g_strdup_printf("%s_us", rv_split_name(k));
        json_object_set_new(object, key, json_real(split[k] / 1e3));
        g_free(key);
    }
    json_object_set_new(object, "exposed_communication_us", json_real(exposed / 1e3));
    json_object_set_new(object, "exposed_communication_share", json_real(total > 0 ? (double)exposed / total : 0.0));
    return object;
}

static json_t *json_step(const rv_graph *graph, const rv_breakdown *breakdown, guint s)
{
    const rv_step_breakdown *step = &g_array_index(breakdown->steps, rv_step_breakdown, s);
    int64_t total = step->end_ns - step->begin_ns;
    json_t *item = json_split(total, step->split_ns, step->exposed_comm_ns);
    json_object_set_new(item, "name", rv_json_text(step_label(graph, s)));
    json_object_set_new(item, "communication_us", json_real(step->comm_ns / 1e3));
    json_t *phases = json_object(), *streams = json_array();
    for (int p = 0; p < RV_PHASE_COUNT; p++) {
        int64_t phase_total = 0;
        for (int k = 0; k < RV_SPLIT_COUNT; k++) phase_total += step->phase_split_ns[p][k];
        json_object_set_new(phases, rv_phase_name(p),
                            json_split(phase_total, step->phase_split_ns[p], step->phase_exposed_comm_ns[p]));
    }
    for (guint r = 0; r < breakdown->resource_count; r++) {
        if (!rv_breakdown_has_uses(graph, (int32_t)r)) continue;
        json_t *stream = json_pack("{s:o}", "resource", rv_json_text(resource_label(graph, r)));
        for (int u = 0; u < RV_USE_COUNT; u++) {
            char *key = g_strdup_printf("%s_us", rv_stream_use_name(u));
            json_object_set_new(stream, key, json_real(step->use_ns[r * RV_USE_COUNT + u] / 1e3));
            g_free(key);
        }
        json_array_append_new(streams, stream);
    }
    json_object_set_new(item, "phases", phases);
    json_object_set_new(item, "streams", streams);
    return item;
}

json_t *rv_breakdown_document(const rv_runs *runs)
{
    rv_run list[3];
    guint count = rv_runs_list(runs, TRUE, list);
    json_t *array = json_array();
    for (guint i = 0; i < count; i++) {
        rv_breakdown *breakdown = rv_run_breakdown(&list[i]);
        json_t *steps = json_array();
        for (guint s = 0; s < breakdown->steps->len; s++) json_array_append_new(steps, json_step(list[i].graph, breakdown, s));
        json_array_append_new(array, json_pack("{s:s,s:o}", "run", list[i].label, "steps", steps));
        rv_breakdown_free(breakdown);
    }
    return json_pack("{s:o,s:o}", "source", rv_json_text(runs->baseline->source), "runs", array);
}

/* ---- critical path -------------------------------------------------------------- */

/* The path lists a name per link: each one bounded once per run (strings.h). */
static const char *path_text(const rv_bounded_strings *names, int32_t id) { return rv_bounded_strings_get(names, id); }

static const char *path_step(const rv_graph *graph, const rv_bounded_strings *names, guint step)
{
    return graph->steps->len ? path_text(names, g_array_index(graph->steps, rv_step, step).name) : "(whole trace)";
}

static json_t *json_link(const rv_graph *graph, const rv_bounded_strings *names, const rv_sim_result *sim,
                         const rv_path_link *link, guint step)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, link->task);
    const rv_resource *resource = &g_array_index(graph->resources, rv_resource, task->resource);
    json_t *item = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:s,s:s}", "name",
                             path_text(names, task->name), "kind", rv_task_kind_name(task->kind), "resource",
                             path_text(names, resource->name), "layer", path_text(names, task->layer), "phase",
                             rv_phase_name(task->phase), "step", path_step(graph, names, step), "start_us",
                             sim->start_ns[link->task] / 1e3, "duration_us",
                             (sim->end_ns[link->task] - sim->start_ns[link->task]) / 1e3, "on_path_us",
                             link->run_ns / 1e3, "host_overhead_us", link->host_overhead_ns / 1e3, "wait_us",
                             link->wait_ns / 1e3, "recorded_duration_us", task->duration_ns / 1e3, "wait_kind",
                             link->wait_ns ? rv_wait_kind_name(link->wait_kind) : "", "via", rv_via_name(link->via));
    json_object_set_new(item, "recorded_start_us", (task->flags & RV_TASK_FLAG_INSERTED)
                                                       ? json_null() : json_real(task->recorded_start_ns / 1e3));
    if (link->via == RV_VIA_EDGE) json_object_set_new(item, "edge", json_string(rv_edge_kind_name(link->edge_kind)));
    if (link->predecessor >= 0)
        json_object_set_new(item, "after", json_string(path_text(names, g_array_index(graph->tasks, rv_task,
                                                                                       link->predecessor).name)));
    return item;
}

static json_t *json_named(const char *(*name_of)(int), const int64_t *values, int count)
{
    json_t *object = json_object();
    for (int i = 0; i < count; i++)
        if (values[i]) json_object_set_new(object, name_of(i), json_real(values[i] / 1e3));
    return object;
}

static const char *kind_name(int k) { return rv_task_kind_name(k); }
static const char *wait_name(int w) { return rv_wait_kind_name(w); }
static const char *phase_name(int p) { return rv_phase_name(p); }

static json_t *json_totals(const rv_bounded_strings *names, const rv_path_totals *totals)
{
    json_t *layers = json_array();
    GArray *order = rv_path_totals_layers(totals);
    for (guint i = 0; i < order->len; i++) {
        int32_t layer = g_array_index(order, int32_t, i);
        json_array_append_new(layers, json_pack("{s:s,s:f}", "layer", path_text(names, layer), "us",
                                                rv_path_totals_layer_ns(totals, layer) / 1e3));
    }
    g_array_unref(order);
    return json_pack("{s:f,s:o,s:o,s:o,s:o}", "total_us", totals->total_ns / 1e3, "by_kind_us",
                     json_named(kind_name, totals->by_kind_ns, RV_TASK_KIND_COUNT), "by_wait_us",
                     json_named(wait_name, totals->by_wait_ns, RV_WAIT_KIND_COUNT), "by_phase_us",
                     json_named(phase_name, totals->by_phase_ns, RV_PHASE_COUNT), "by_layer_us", layers);
}

static json_t *json_run(const rv_run *run, const rv_critical_path *path)
{
    rv_bounded_strings names;
    rv_bounded_strings_init(&names, run->graph->strings);
    json_t *steps = json_array(), *tasks = json_array();
    rv_path_totals all;
    rv_path_totals_init(&all);
    for (guint s = 0; s < path->steps->len; s++) {
        const rv_step_path *step = &g_array_index(path->steps, rv_step_path, s);
        rv_path_totals_add(&all, run->graph, step);
        json_array_append_new(steps, json_pack("{s:s,s:f,s:f,s:f,s:I}", "name", path_step(run->graph, &names, s), "begin_us",
                                               step->begin_ns / 1e3, "end_us", step->end_ns / 1e3, "before_chain_us",
                                               step->before_chain_ns / 1e3, "links", (json_int_t)step->links->len));
        for (guint i = 0; i < step->links->len; i++)
            json_array_append_new(tasks, json_link(run->graph, &names, run->sim, &g_array_index(step->links, rv_path_link, i),
                                                   s));
    }
    json_t *root = json_pack("{s:s,s:o,s:o,s:o}", "run", run->label, "steps", steps, "totals",
                             json_totals(&names, &all), "tasks", tasks);
    rv_path_totals_clear(&all);
    rv_bounded_strings_clear(&names);
    return root;
}

json_t *rv_critical_path_document(const rv_runs *runs)
{
    rv_run list[3];
    guint count = rv_runs_list(runs, FALSE, list);
    json_t *root = NULL;
    for (guint i = 0; i < count; i++) {
        rv_critical_path *path = rv_critical_path_find(list[i].graph, list[i].sim);
        json_t *run = json_run(&list[i], path);
        rv_critical_path_free(path);
        if (root) json_object_set_new(run, "baseline", root);
        root = run;
    }
    json_object_set_new(root, "source", rv_json_text(runs->baseline->source));
    return root;
}

/* ---- plugins ---------------------------------------------------------------------- */

/* What a plugin declares for the composition law (compose.h): its place in
 * the order and the aspects it touches, per way. */
static json_t *effects_document(const rv_plugin_effects *effects)
{
    static const char *const ways[] = { "reads", "reads_time", "scales", "reprices", "rewrites" };
    if (effects == NULL) return json_null();
    const uint32_t masks[] = { effects->reads, effects->reads_time, effects->scales, effects->reprices, effects->rewrites };
    json_t *object = json_object();
    json_object_set_new(object, "order", json_integer(effects->order));
    json_object_set_new(object, "stage", json_string(rv_stage_name(effects->order / 100)));
    for (gsize way = 0; way < G_N_ELEMENTS(ways); way++) {
        json_t *aspects = json_array();
        for (int bit = 0; bit < RV_ASPECT_COUNT; bit++)
            if (masks[way] & (1u << bit)) json_array_append_new(aspects, json_string(rv_aspect_name(1u << bit)));
        json_object_set_new(object, ways[way], aspects);
    }
    return object;
}

json_t *rv_plugin_document(const rv_plugin *plugin)
{
    json_t *params = json_array();
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++) {
        json_t *item = json_object();
        json_object_set_new(item, "name", rv_json_text(spec->name));
        json_object_set_new(item, "type", json_string(rv_param_type_name(spec->type)));
        if (spec->default_value) json_object_set_new(item, "default", rv_json_text(spec->default_value));
        if (spec->unit) json_object_set_new(item, "unit", rv_json_text(spec->unit));
        if (spec->help) json_object_set_new(item, "help", rv_json_text(spec->help));
        if (spec->choices) json_object_set_new(item, "choices", rv_json_text(spec->choices));
        json_array_append_new(params, item);
    }
    json_t *object = json_object();
    json_object_set_new(object, "name", rv_json_text(plugin->name));
    if (plugin->summary) json_object_set_new(object, "summary", rv_json_text(plugin->summary));
    json_object_set_new(object, "params", params);
    json_object_set_new(object, "effects", effects_document(plugin->effects));
    return object;
}
