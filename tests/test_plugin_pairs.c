/*
 * test_plugin_pairs.c - every pair of optimizations, in both orders (and
 * each twice), on the project's traces and on the 8-rank DLRM job: each
 * composition either works (the graph it leaves is valid and replays) or
 * is refused with one clear line (an RV_ERROR of usage or plugin kind),
 * never an abort.  Issue 11 found `--opt fused-adam --opt ddp` failing
 * where the reverse order worked.
 *
 * The plugins are every NAME.so in the build's optimizations folder, so
 * new ones join the test by being built; a plugin this file knows gets the
 * parameters below (some need a value: world-size's world, straggler's
 * rank), any other its defaults.
 */
#include "plugin_harness.h"
#include "reverie/job.h"
#include "reverie/validate.h"
#include <check.h>
#include <stdlib.h>
#include <string.h>

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
    g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
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
    return list;
}

/* One plugin applied: TRUE, or FALSE with a one-line error of the kinds a
 * refusal may have; anything else fails the test. */
static gboolean apply_checked(rv_graph *graph, const loaded *entry, const char *pair, rv_plugin_output *policy)
{
    rv_plugin_output output = { { NULL, NULL }, NULL, g_string_new(NULL) };
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
    if (g_getenv("REVERIE_PAIRS_VERBOSE")) g_printerr("refused: %s: %s\n", pair, error->message);
    g_error_free(error);
    return FALSE;
}

typedef struct {
    guint worked, refused;
} tally;

static void run_pair(const rv_graph *base, const loaded *first, const loaded *second, const char *trace, tally *count)
{
    char *pair = g_strdup_printf("%s: %s then %s", trace, first->name, second->name);
    rv_graph *graph = rv_graph_copy(base);
    rv_plugin_output policy = { { NULL, NULL }, NULL, NULL };
    gboolean ok = apply_checked(graph, first, pair, &policy) && apply_checked(graph, second, pair, &policy);
    if (ok) {
        GError *error = NULL;
        ck_assert_msg(rv_graph_validate(graph, &error), "%s: invalid graph: %s", pair, error ? error->message : "");
        rv_sim_result sim = { 0 };
        ck_assert_msg(rv_simulate(graph, policy.policy.priority ? &policy.policy : NULL, &sim, &error),
                      "%s: the replay failed: %s", pair, error ? error->message : "");
        rv_sim_result_clear(&sim);
        count->worked++;
    } else {
        count->refused++;
    }
    if (policy.free_policy_data) policy.free_policy_data(policy.policy.user_data);
    rv_graph_free(graph);
    g_free(pair);
}

static void every_pair(const rv_graph *graph, const char *trace)
{
    tally count = { 0, 0 };
    for (guint a = 0; a < plugins->len; a++)
        for (guint b = 0; b < plugins->len; b++)
            run_pair(graph, g_ptr_array_index(plugins, a), g_ptr_array_index(plugins, b), trace, &count);
    g_printerr("%-48s %3u pairs worked, %3u refused with one line\n", trace, count.worked, count.refused);
    ck_assert_msg(count.worked > 0, "%s: no pair worked", trace);
}

static const char *const single_traces[] = {
    "kineto_legacy_resnet50_v100.2steps.json.gz",
    "hta_transformer_ddp_v100_rank1.2steps.json.gz",
    "small_ddp.json.gz",
    "hta_simple_add_a100.json.gz",
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

/* The order that used to fail works now, and so does the other. */
START_TEST(fused_adam_and_ddp_in_either_order)
{
    const loaded *fused = NULL, *ddp = NULL;
    for (guint i = 0; i < plugins->len; i++) {
        const loaded *entry = g_ptr_array_index(plugins, i);
        if (strcmp(entry->name, "fused-adam") == 0) fused = entry;
        if (strcmp(entry->name, "ddp") == 0) ddp = entry;
    }
    ck_assert(fused && ddp);
    rv_graph *graph = load_trace("kineto_legacy_resnet50_v100.2steps.json.gz");
    for (int order = 0; order < 2; order++) {
        tally count = { 0, 0 };
        run_pair(graph, order ? ddp : fused, order ? fused : ddp, "kineto_legacy", &count);
        ck_assert_uint_eq(count.worked, 1);
    }
    rv_graph_free(graph);
}
END_TEST

int main(void)
{
    static const char *const traces[] = {
        "kineto_legacy_resnet50_v100.2steps.json.gz", "hta_transformer_ddp_v100_rank1.2steps.json.gz",
        "small_ddp.json.gz", "hta_simple_add_a100.json.gz",
        "param_dlrm_v100_8ranks/rank0.json.gz", "param_dlrm_v100_8ranks/rank1.json.gz",
        "param_dlrm_v100_8ranks/rank2.json.gz", "param_dlrm_v100_8ranks/rank3.json.gz",
        "param_dlrm_v100_8ranks/rank4.json.gz", "param_dlrm_v100_8ranks/rank5.json.gz",
        "param_dlrm_v100_8ranks/rank6.json.gz", "param_dlrm_v100_8ranks/rank7.json.gz", NULL,
    };
    require_project_traces(traces);
    plugins = load_plugins();
    Suite *suite = suite_create("plugin pairs");
    TCase *tcase = tcase_create("pairs");
    tcase_set_timeout(tcase, 600);
    tcase_add_loop_test(tcase, pairs_on_a_trace, 0, (int)G_N_ELEMENTS(single_traces));
    tcase_add_test(tcase, pairs_on_the_dlrm_job);
    tcase_add_test(tcase, fused_adam_and_ddp_in_either_order);
    suite_add_tcase(suite, tcase);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    g_ptr_array_unref(plugins);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
