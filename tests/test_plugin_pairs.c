/*
 * test_plugin_pairs.c - the composition law (plugin.h): every ordered pair
 * of optimizations on six traces (a CNN with shapes, a ROCm training
 * trace, a data-parallel Transformer rank, a generated DDP trace, a small
 * BERT's inference and the 8-rank DLRM job).  For each pair A, B either both orders predict the
 * same step total within 0.1%, or one order is refused in one line (and
 * the other is not); a plugin that refuses alone (nothing of its kind in
 * the trace) is refused in both orders.  Every composition that works
 * leaves a valid graph that replays.
 *
 * The plugins are every NAME.so in the build's optimizations folder, so
 * new ones join the test by being built; a plugin this file knows gets the
 * parameters below (some need a value: world-size's world, straggler's
 * rank), any other its defaults.  Each trace is loaded once and copied
 * into one reused graph per composition (rv_graph_assign).
 *
 * REVERIE_PAIRS_VERBOSE=1 prints every refusal in one order;
 * REVERIE_PAIRS_TABLE=1 prints the orders the law refuses as the Markdown
 * table of docs/optimizations.md; REVERIE_PAIRS_SLOW=1 names the pairs
 * that take over 0.1 s.
 */
#include "plugin_harness.h"
#include "reverie/job.h"
#include "reverie/validate.h"
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Two orders agree when their step totals differ by at most this much. */
#define AGREEMENT 0.001

typedef struct {
    const char *name;
    const char *params;
} known_plugin;

static const known_plugin known[] = {
    { "scale", "factor=0.5" },
    { "amp", "" },
    { "fused-adam", "" },
    { "dataloader", "" },
    { "network", "bandwidth_factor=0.5" },
    { "ddp", "world=16" },
    { "tp-allreduce", "degree=4,batch=8,seq=512,hidden=1024" },
    { "p3", "slice_size=4MB" },
    { "vdnn", "" },
    { "straggler", "rank=0,factor=2" },
    { "world-size", "world=16" },
    { "hardware", "gpu=H100" },
    { "precision", "dtype=bf16" },
    { "model-scale", "hidden=2" },
    { "contention", "" },
    { "fused-collective", "" },
    { "t3", "" },
    { "cuda-graphs", "static=assume" },
    { "batch-size", "factor=2" },
    { "grad-accumulation", "steps=2" },
    { "checkpoint", "segments=4" },
    { "metaflow", "rules=conv-bn-relu" },
    { "pipeline", "stages=2,microbatches=4" },
    { "zero", "stage=3" },
    { "blueconnect", "world=16" },
    { "dgc", "world=8" },
    { "gist", "" },
    { "batchnorm-restructure", "" },
    { "concurrent-kernels", "" },
    { "nmc-optimizer", "" },
    { "expert-parallel", "experts=8,gpus=8,batch=8,seq=512,hidden=1024" },
    { "decode", "tokens=64" },
};

typedef struct {
    char *name;
    rv_loaded_plugin *plugin;
    rv_params *params;
} loaded;

static GPtrArray *plugins;

static const char *params_for(const char *name)
{
    for (gsize i = 0; i < G_N_ELEMENTS(known); i++)
        if (strcmp(known[i].name, name) == 0) return known[i].params;
    return "";
}

static void loaded_free(gpointer data)
{
    loaded *entry = data;
    rv_params_free(entry->params);
    rv_plugin_unload(entry->plugin);
    g_free(entry->name);
    g_free(entry);
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

/* Plugins in the canonical order (compose.h), names within a place. */
static gint compare_order(gconstpointer a, gconstpointer b)
{
    const loaded *x = *(loaded *const *)a, *y = *(loaded *const *)b;
    const rv_plugin_effects *ex = rv_plugin_descriptor_of(x->plugin)->effects, *ey = rv_plugin_descriptor_of(y->plugin)->effects;
    int ox = ex ? ex->order : 10000, oy = ey ? ey->order : 10000;
    return ox != oy ? (ox < oy ? -1 : 1) : strcmp(x->name, y->name);
}

static G_GNUC_NORETURN void give_up(const char *what, const char *why)
{
    g_printerr("test_plugin_pairs: %s: %s\n", what, why);
    exit(EXIT_FAILURE);
}

/* Every plugin built, with its parameters parsed; one that needs a value
 * this file does not know is left out, with a note.  (Before the tests
 * run: no Check assertions here.) */
static GPtrArray *load_plugins(void)
{
    const char *dir_name = g_getenv("REVERIE_TEST_PLUGIN_DIR");
    if (dir_name == NULL) give_up("REVERIE_TEST_PLUGIN_DIR", "not set (run through meson test)");
    GDir *dir = g_dir_open(dir_name, 0, NULL);
    if (dir == NULL) give_up(dir_name, "cannot be read");
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *file;
    while ((file = g_dir_read_name(dir)) != NULL)
        if (g_str_has_suffix(file, ".so")) g_ptr_array_add(names, g_strndup(file, strlen(file) - 3));
    g_dir_close(dir);
    g_ptr_array_sort(names, compare_names);
    GPtrArray *list = g_ptr_array_new_with_free_func(loaded_free);
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        char *file_name = g_strconcat(name, ".so", NULL);
        char *path = g_build_filename(dir_name, file_name, NULL);
        g_free(file_name);
        GError *error = NULL;
        rv_loaded_plugin *plugin = rv_plugin_load(path, &error);
        if (plugin == NULL) give_up(path, error ? error->message : "does not load");
        rv_params *params = rv_params_parse(rv_plugin_descriptor_of(plugin), params_for(name), &error);
        g_free(path);
        if (params == NULL) {
            g_printerr("note: %s left out: %s\n", name, error->message);
            g_error_free(error);
            rv_plugin_unload(plugin);
            continue;
        }
        loaded *entry = g_new0(loaded, 1);
        entry->name = g_strdup(name);
        entry->plugin = plugin;
        entry->params = params;
        g_ptr_array_add(list, entry);
    }
    g_ptr_array_unref(names);
    if (list->len < G_N_ELEMENTS(known)) give_up(dir_name, "holds fewer plugins than this test knows");
    g_ptr_array_sort(list, compare_order);
    return list;
}

/* What one ordered pair gave. */
typedef struct {
    gboolean worked;
    int64_t total_ns;   /* the simulated step total, when it worked */
    int refused_by;     /* 0 or 1: which of the two refused, when it did not */
    char *why;          /* the refusal */
} outcome;

/* One plugin applied: TRUE, or FALSE with a one-line error of the kinds a
 * refusal may have (kept in *why); anything else fails the test. */
static gboolean apply_checked(rv_graph *graph, const loaded *entry, const char *pair, rv_plugin_output *policy,
                              char **why)
{
    rv_plugin_output output = { .notes = g_string_new(NULL) };
    GError *error = NULL;
    gboolean ok = rv_plugin_apply(entry->plugin, graph, entry->params, &output, &error);
    g_string_free(output.notes, TRUE);
    if (ok) {
        if (output.policy.priority) {
            if (policy->free_policy_data) policy->free_policy_data(policy->policy.user_data);
            *policy = output;
            policy->notes = NULL;
        }
        return TRUE;
    }
    if (output.free_policy_data) output.free_policy_data(output.policy.user_data);
    ck_assert_msg(error != NULL, "%s: failed without an error", pair);
    ck_assert_msg(error->domain == RV_ERROR && (error->code == RV_ERROR_USAGE || error->code == RV_ERROR_PLUGIN),
                  "%s: refused with an unexpected kind of error: %s", pair, error->message);
    ck_assert_msg(*error->message && strchr(error->message, '\n') == NULL, "%s: not one line: \"%s\"", pair,
                  error->message);
    *why = g_strdup(error->message);
    g_error_free(error);
    return FALSE;
}

/* Replay a composed graph with the last priority a plugin set: its step total. */
static int64_t replayed_total(const rv_graph *graph, const rv_plugin_output *policy, const char *pair)
{
    GError *error = NULL;
    ck_assert_msg(rv_graph_validate(graph, &error), "%s: invalid graph: %s", pair, error ? error->message : "");
    rv_sim_result sim = { 0 };
    ck_assert_msg(rv_simulate(graph, policy->policy.priority ? &policy->policy : NULL, &sim, &error),
                  "%s: the replay failed: %s", pair, error ? error->message : "");
    GArray *steps = rv_step_times(graph, &sim);
    int64_t total = 0;
    for (guint s = 0; s < steps->len; s++) total += g_array_index(steps, rv_step_time, s).simulated_ns;
    g_array_unref(steps);
    rv_sim_result_clear(&sim);
    return total;
}

/* Every pair that starts with `first`: first applied once, to a copy of
 * base, then each second plugin to a copy of that (into `work`). */
static void run_pairs_from(rv_graph *work, const rv_graph *base, guint a, const char *trace, outcome *row)
{
    const loaded *first = g_ptr_array_index(plugins, a);
    char *alone = g_strdup_printf("%s: %s", trace, first->name);
    rv_graph *after_first = rv_graph_copy(base);
    rv_plugin_output first_policy = { 0 };
    char *why = NULL;
    gboolean first_worked = apply_checked(after_first, first, alone, &first_policy, &why);
    for (guint b = 0; b < plugins->len; b++) {
        const loaded *second = g_ptr_array_index(plugins, b);
        outcome *out = &row[b];
        memset(out, 0, sizeof *out);
        if (!first_worked) {
            out->why = g_strdup(why);
            continue;
        }
        char *pair = g_strdup_printf("%s: %s then %s", trace, first->name, second->name);
        int64_t began = g_get_monotonic_time();
        rv_graph_assign(work, after_first);
        rv_plugin_output policy = { 0 };
        out->refused_by = 1;
        out->worked = apply_checked(work, second, pair, &policy, &out->why);
        if (out->worked) out->total_ns = replayed_total(work, policy.policy.priority ? &policy : &first_policy, pair);
        if (policy.free_policy_data) policy.free_policy_data(policy.policy.user_data);
        if (g_getenv("REVERIE_PAIRS_SLOW") && g_get_monotonic_time() - began > 100000)
            g_printerr("SLOW %s: %.2f s\n", pair, (double)(g_get_monotonic_time() - began) / 1e6);
        g_free(pair);
    }
    if (first_policy.free_policy_data) first_policy.free_policy_data(first_policy.policy.user_data);
    rv_graph_free(after_first);
    g_free(why);
    g_free(alone);
}

typedef struct {
    guint agreed, one_refused, both_refused, disagreed;
} tally;

/* Check the two orders of one pair against the law; counts in *count. */
static void judge(const char *trace, const loaded *a, const loaded *b, const outcome *ab, const outcome *ba,
                  tally *count)
{
    gboolean verbose = g_getenv("REVERIE_PAIRS_VERBOSE") != NULL;
    if (ab->worked && ba->worked) {
        double diff = fabs((double)ab->total_ns - (double)ba->total_ns) / (double)MAX(MAX(ab->total_ns, ba->total_ns), 1);
        if (diff <= AGREEMENT) { count->agreed++; return; }
        count->disagreed++;
        g_printerr("DISAGREE %s: %s then %s %.3f ms, %s then %s %.3f ms (%.2f%%)\n", trace, a->name, b->name,
                   ab->total_ns / 1e6, b->name, a->name, ba->total_ns / 1e6, 100 * diff);
        return;
    }
    if (!ab->worked && !ba->worked) {
        count->both_refused++;
        return;
    }
    const outcome *refused = ab->worked ? ba : ab;
    const loaded *first = ab->worked ? b : a, *then = ab->worked ? a : b;
    count->one_refused++;
    if (verbose)
        g_printerr("REFUSED %s: %s then %s: %s\n", trace, first->name, then->name, refused->why);
}

static void every_pair(const rv_graph *base, const char *trace)
{
    guint n = plugins->len;
    int64_t began = g_get_monotonic_time();
    outcome *results = g_new0(outcome, (gsize)n * n);
    rv_graph *work = rv_graph_copy(base);
    for (guint a = 0; a < n; a++) run_pairs_from(work, base, a, trace, &results[a * n]);
    rv_graph_free(work);
    tally count = { 0, 0, 0, 0 };
    for (guint a = 0; a < n; a++)
        for (guint b = a + 1; b < n; b++)
            judge(trace, g_ptr_array_index(plugins, a), g_ptr_array_index(plugins, b), &results[a * n + b],
                  &results[b * n + a], &count);
    g_printerr("%-48s %3u pairs agree, %3u refused in one order, %3u in both, %3u disagree (%.1f s)\n", trace,
               count.agreed, count.one_refused, count.both_refused, count.disagreed,
               (double)(g_get_monotonic_time() - began) / 1e6);
    for (guint i = 0; i < n * n; i++) g_free(results[i].why);
    g_free(results);
    ck_assert_msg(count.agreed > 0, "%s: no pair worked", trace);
    ck_assert_msg(count.disagreed == 0, "%s: %u pairs give different answers in the two orders", trace, count.disagreed);
}

/* REVERIE_PAIRS_TABLE: the orders the law refuses, one Markdown row per
 * plugin (docs/optimizations.md holds this table). */
static void print_law_table(void)
{
    g_print("| plugin | refused after (give it before these) |\n|---|---|\n");
    for (guint n = 0; n < plugins->len; n++) {
        const loaded *next = g_ptr_array_index(plugins, n);
        const rv_plugin_effects *mine = rv_plugin_descriptor_of(next->plugin)->effects;
        GString *after = g_string_new(NULL);
        for (guint p = 0; p < plugins->len && mine; p++) {
            const loaded *earlier = g_ptr_array_index(plugins, p);
            const rv_plugin_effects *theirs = rv_plugin_descriptor_of(earlier->plugin)->effects;
            if (p == n || theirs == NULL || rv_effects_conflict(theirs, mine) == 0) continue;
            if (mine->order < theirs->order || (mine->order == theirs->order && strcmp(next->name, earlier->name) < 0))
                g_string_append_printf(after, "%s`%s`", after->len ? ", " : "", earlier->name);
        }
        g_print("| `%s` | %s |\n", next->name, after->len ? after->str : "none");
        g_string_free(after, TRUE);
    }
}

static const char *const single_traces[] = {
    "kineto_legacy_resnet50_v100.2steps.json.gz",
    "tracelens_mi300x_resnet_act_checkpoint.json.gz",
    "hta_transformer_ddp_v100_rank1.2steps.json.gz",
    "small_ddp.json.gz",
    /* inference with shapes and FlashAttention blocks: where decode and expert-parallel act */
    "pairs/gpu_h100_vs_mi300x_bert_small/h100.json.gz",
};

START_TEST(pairs_on_a_trace)
{
    rv_graph *graph = load_trace(single_traces[_i]);
    every_pair(graph, single_traces[_i]);
    rv_graph_free(graph);
}
END_TEST

START_TEST(pairs_on_the_dlrm_job)
{
    rv_graph *joint = load_dlrm_job();
    every_pair(joint, "param_dlrm_v100_8ranks (8 ranks)");
    rv_graph_free(joint);
}
END_TEST

int main(void)
{
    static const char *const traces[] = {
        "kineto_legacy_resnet50_v100.2steps.json.gz", "tracelens_mi300x_resnet_act_checkpoint.json.gz",
        "hta_transformer_ddp_v100_rank1.2steps.json.gz", "small_ddp.json.gz",
        "pairs/gpu_h100_vs_mi300x_bert_small/h100.json.gz", DLRM_RANK_TRACES, NULL,
    };
    require_project_traces(traces);
    plugins = load_plugins();
    if (g_getenv("REVERIE_PAIRS_TABLE")) print_law_table();
    Suite *suite = suite_create("plugin pairs");
    TCase *tcase = tcase_create("pairs");
    tcase_set_timeout(tcase, 600);
    tcase_add_loop_test(tcase, pairs_on_a_trace, 0, (int)G_N_ELEMENTS(single_traces));
    tcase_add_test(tcase, pairs_on_the_dlrm_job);
    suite_add_tcase(suite, tcase);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    g_ptr_array_unref(plugins);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
