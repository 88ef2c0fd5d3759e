/*
 * pairs.c - the recorded pairs and the folders of ranks, run through the
 * command line exactly as a user runs them (`reverie validate ... --json`,
 * `reverie simulate FOLDER --json`), so the documented commands are the
 * measured ones.
 *
 * Each pair folder under traces/pairs/ holds a pair.json that says which
 * what-if predicts which recording and which figure is judged:
 *   { "knob": "...", "predictions": [ { "baseline": FILE, "variant": FILE,
 *     "opt": [SPEC...], "judge": "step" | "mean" | "gpu", "limit": 0.05,
 *     "known_miss": "why" (optional) } ] }
 * A known miss is a prediction further off than predicting no change whose
 * cause is stated: the table says so and the suite does not fail on that
 * alone; its limit still holds, as a bound on regressions.
 * "step" is the steady step (the median of the steps after the first);
 * "mean" the mean of the steps after the first (where steps stall in
 * turns, as an input pipeline's do when its workers fall behind);
 * "gpu" the GPU kernel time of those steps, for pairs whose step the GPU
 * does not decide (another host, another driver).
 */
#include "accuracy.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Run reverie with argv (NULL-terminated, without the program); its JSON
 * output, or NULL with *failure set. */
static json_t *run_json(const char *reverie, GPtrArray *args, char **failure)
{
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)reverie);
    for (guint i = 0; i < args->len; i++) g_ptr_array_add(argv, g_ptr_array_index(args, i));
    g_ptr_array_add(argv, "--json");
    g_ptr_array_add(argv, NULL);
    char *out = NULL, *err = NULL;
    int status = 0;
    GError *error = NULL;
    json_t *root = NULL;
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error)) {
        *failure = g_strdup(error->message);
        g_error_free(error);
    } else if (!g_spawn_check_wait_status(status, NULL)) {
        *failure = g_strdup_printf("reverie failed: %s", g_strstrip(err));
    } else if ((root = json_loads(out, 0, NULL)) == NULL) {
        *failure = g_strdup("reverie printed no JSON");
    }
    g_free(out);
    g_free(err);
    g_ptr_array_unref(argv);
    return root;
}

static double number_at(json_t *root, const char *object, const char *key)
{
    json_t *holder = object ? json_object_get(root, object) : root;
    return json_number_value(json_object_get(holder, key));
}

static void measure_prediction(accuracy_report *report, const char *dir, const char *pair, json_t *spec,
                               const char *reverie)
{
    pair_row row = { 0 };
    row.pair = g_strdup(pair);
    row.baseline = g_strdup(json_string_value(json_object_get(spec, "baseline")));
    row.variant = g_strdup(json_string_value(json_object_get(spec, "variant")));
    row.judge = g_strdup(json_string_value(json_object_get(spec, "judge")));
    row.limit = json_number_value(json_object_get(spec, "limit"));
    const char *known_miss = json_string_value(json_object_get(spec, "known_miss"));
    row.known_miss = known_miss ? g_strdup(known_miss) : NULL;
    GPtrArray *args = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(args, g_strdup("validate"));
    g_ptr_array_add(args, g_build_filename(dir, "pairs", pair, row.baseline ? row.baseline : "", NULL));
    g_ptr_array_add(args, g_build_filename(dir, "pairs", pair, row.variant ? row.variant : "", NULL));
    GString *opts = g_string_new(NULL);
    size_t i;
    json_t *opt;
    json_array_foreach(json_object_get(spec, "opt"), i, opt) {
        g_ptr_array_add(args, g_strdup("--opt"));
        g_ptr_array_add(args, g_strdup(json_string_value(opt)));
        g_string_append_printf(opts, "%s`--opt %s`", i ? " " : "", json_string_value(opt));
    }
    row.opt = g_string_free(opts, FALSE);
    if (row.baseline == NULL || row.variant == NULL || row.judge == NULL || row.limit <= 0) {
        row.failure = g_strdup_printf("pairs/%s/pair.json: a prediction lacks baseline, variant, judge or limit", pair);
    } else {
        json_t *root = run_json(reverie, args, &row.failure);
        gboolean gpu = strcmp(row.judge, "gpu") == 0, mean = strcmp(row.judge, "mean") == 0;
        if (root != NULL && mean) {
            row.recorded_us = number_at(root, "mean", "variant_us");
            row.predicted_us = number_at(root, "mean", "predicted_us");
            row.error = number_at(root, "mean", "error");
            row.no_change_error = number_at(root, "mean", "no_change_error");
            row.low_us = row.high_us = -1;
            json_decref(root);
        } else if (root != NULL) {
            row.recorded_us = gpu ? number_at(root, "gpu_kernel", "variant_us") : number_at(root, "variant", "recorded_steady_us");
            row.predicted_us = gpu ? number_at(root, "gpu_kernel", "predicted_us") : number_at(root, NULL, "predicted_steady_us");
            row.error = gpu ? number_at(root, "gpu_kernel", "error") : number_at(root, NULL, "error");
            row.no_change_error = gpu ? number_at(root, "gpu_kernel", "no_change_error") : number_at(root, NULL, "no_change_error");
            json_t *range = gpu ? json_object_get(root, "gpu_kernel") : root;
            const char *low_key = gpu ? "predicted_low_us" : "predicted_steady_low_us";
            const char *high_key = gpu ? "predicted_high_us" : "predicted_steady_high_us";
            row.high_us = json_is_number(json_object_get(range, high_key)) ? number_at(range, NULL, high_key) : -1;
            row.low_us = json_is_number(json_object_get(range, low_key)) ? number_at(range, NULL, low_key) : -1;
            json_decref(root);
        }
    }
    fprintf(stderr, "accuracy: pair %s %s -> %s %s%s%s\n", pair, row.baseline, row.variant, row.opt,
            row.failure ? ": " : "", row.failure ? row.failure : "");
    g_ptr_array_unref(args);
    g_array_append_val(report->pairs, row);
}

void accuracy_measure_pairs(accuracy_report *report, const char *dir, const char *reverie)
{
    char *pairs_dir = g_build_filename(dir, "pairs", NULL);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    GDir *handle = g_dir_open(pairs_dir, 0, NULL);
    const char *entry;
    while (handle && (entry = g_dir_read_name(handle)) != NULL) g_ptr_array_add(names, g_strdup(entry));
    if (handle) g_dir_close(handle);
    g_ptr_array_sort(names, accuracy_compare_names);
    for (guint n = 0; n < names->len; n++) {
        const char *pair = g_ptr_array_index(names, n);
        char *manifest = g_build_filename(pairs_dir, pair, "pair.json", NULL);
        json_error_t error;
        json_t *root = json_load_file(manifest, 0, &error);
        if (root == NULL) {
            pair_row row = { 0 };
            row.pair = g_strdup(pair);
            row.failure = g_strdup_printf("%s: %s", manifest, error.text);
            g_array_append_val(report->pairs, row);
        }
        size_t i;
        json_t *spec;
        json_array_foreach(json_object_get(root, "predictions"), i, spec)
            measure_prediction(report, dir, pair, spec, reverie);
        json_decref(root);
        g_free(manifest);
    }
    g_ptr_array_unref(names);
    g_free(pairs_dir);
}

static void measure_job(accuracy_report *report, const char *dir, const char *name, const char *reverie)
{
    job_row row = { 0 };
    row.name = g_strdup(name);
    GPtrArray *args = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(args, g_strdup("simulate"));
    g_ptr_array_add(args, g_build_filename(dir, name, NULL));
    json_t *root = run_json(reverie, args, &row.failure);
    size_t r, s;
    json_t *rank, *step;
    guint counted = 0;
    json_array_foreach(json_object_get(root, "ranks"), r, rank) {
        row.ranks++;
        json_array_foreach(json_object_get(rank, "steps"), s, step) {
            double recorded = number_at(step, NULL, "recorded_us"), simulated = number_at(step, NULL, "simulated_us");
            double error = recorded > 0 ? (simulated > recorded ? simulated - recorded : recorded - simulated) / recorded : 0;
            row.mean_error += error;
            row.worst_error = MAX(row.worst_error, error);
            counted++;
        }
    }
    if (counted) row.mean_error /= counted;
    json_decref(root);
    g_ptr_array_unref(args);
    g_array_append_val(report->jobs, row);
}

void accuracy_measure_jobs(accuracy_report *report, const char *dir, const char *reverie)
{
    GDir *handle = g_dir_open(dir, 0, NULL);
    const char *entry;
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    while (handle && (entry = g_dir_read_name(handle)) != NULL) {
        char *first = g_build_filename(dir, entry, "rank0.json.gz", NULL);
        if (g_file_test(first, G_FILE_TEST_EXISTS)) g_ptr_array_add(names, g_strdup(entry));
        g_free(first);
    }
    if (handle) g_dir_close(handle);
    g_ptr_array_sort(names, accuracy_compare_names);
    for (guint n = 0; n < names->len; n++) measure_job(report, dir, g_ptr_array_index(names, n), reverie);
    g_ptr_array_unref(names);
}
