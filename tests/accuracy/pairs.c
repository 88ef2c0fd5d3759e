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
 * alone; its limit still holds, as a bound on regressions.  A
 * "memory_known_miss" states why the predicted peak's change misses the
 * recorded one (table.c): shown, not failed on, unless the prediction
 * moves the opposite way to the recording.
 * "step" is the steady step (the median of the steps after the first);
 * "mean" the mean of the steps after the first (where steps stall in
 * turns, as an input pipeline's do when its workers fall behind);
 * "gpu" the GPU kernel time of those steps, for pairs whose step the GPU
 * does not decide (another host, another driver).
 * "timed" judges a variant that is a timing, not a trace: "variant" is
 * FILE#JOB:VARIANT, a line of a traces/record.py manifest (record.py
 * --no-profile: the job timed without the profiler), whose mean step is
 * the recording; the prediction is `reverie whatif BASELINE --opt ...`'s
 * mean step after the first, and no change is the baseline's.
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

/* The mean of a manifest line's step_seconds_measured, in us, for
 * FILE#JOB:VARIANT under dir/pairs/pair; -1 with *failure set if none. */
static double timed_variant_us(const char *dir, const char *pair, const char *variant, char **failure)
{
    char **parts = g_strsplit(variant, "#", 2);
    char **names = parts[1] ? g_strsplit(parts[1], ":", 2) : NULL;
    char *path = g_build_filename(dir, "pairs", pair, parts[0], NULL);
    char *text = NULL;
    double mean_us = -1;
    if (names == NULL || names[1] == NULL) {
        *failure = g_strdup_printf("a timed variant is FILE#JOB:VARIANT, not '%s'", variant);
    } else if (!g_file_get_contents(path, &text, NULL, NULL)) {
        *failure = g_strdup_printf("%s: cannot be read", path);
    } else {
        char **lines = g_strsplit(text, "\n", -1);
        for (char **line = lines; *line && mean_us < 0; line++) {
            json_t *entry = json_loads(*line, 0, NULL);
            json_t *steps = json_object_get(entry, "step_seconds_measured");
            if (entry && g_strcmp0(json_string_value(json_object_get(entry, "job")), names[0]) == 0 &&
                g_strcmp0(json_string_value(json_object_get(entry, "variant")), names[1]) == 0 && json_array_size(steps)) {
                double sum = 0;
                size_t i;
                json_t *value;
                json_array_foreach(steps, i, value) sum += json_number_value(value);
                mean_us = 1e6 * sum / (double)json_array_size(steps);
            }
            json_decref(entry);
        }
        g_strfreev(lines);
        if (mean_us < 0) *failure = g_strdup_printf("%s: no timing of %s:%s", path, names[0], names[1]);
    }
    g_free(text);
    g_free(path);
    g_strfreev(names);
    g_strfreev(parts);
    return mean_us;
}

/* The mean, after the first, of a whatif's steps' key (predicted_us or
 * baseline_us). */
static double mean_after_first(json_t *root, const char *key)
{
    json_t *steps = json_object_get(root, "steps");
    size_t count = json_array_size(steps);
    double sum = 0;
    for (size_t i = count > 1 ? 1 : 0; i < count; i++) sum += number_at(json_array_get(steps, i), NULL, key);
    return count > 1 ? sum / (double)(count - 1) : sum;
}

/* The predicted range validate --json gives under holder's keys; -1 at
 * both ends without one. */
static void read_range(pair_row *row, json_t *holder, const char *low_key, const char *high_key)
{
    gboolean present = json_is_number(json_object_get(holder, high_key)) && json_is_number(json_object_get(holder, low_key));
    row->low_us = present ? number_at(holder, NULL, low_key) : -1;
    row->high_us = present ? number_at(holder, NULL, high_key) : -1;
}

static void measure_timed(pair_row *row, json_t *root, double recorded_us)
{
    row->recorded_us = recorded_us;
    row->predicted_us = mean_after_first(root, "predicted_us");
    row->error = row->predicted_us / recorded_us - 1;
    row->no_change_error = mean_after_first(root, "baseline_us") / recorded_us - 1;
    row->low_us = row->high_us = -1;
}

/* validate's "memory" figure at key, bytes; -1 where it is null. */
static int64_t bytes_at(json_t *root, const char *key)
{
    json_t *value = json_object_get(json_object_get(root, "memory"), key);
    return json_is_integer(value) ? (int64_t)json_integer_value(value) : -1;
}

static void read_memory(pair_row *row, json_t *root)
{
    row->memory_baseline_estimate = bytes_at(root, "baseline_estimate_bytes");
    row->memory_baseline_recorded = bytes_at(root, "baseline_recorded_bytes");
    row->memory_predicted = bytes_at(root, "predicted_bytes");
    row->memory_variant = bytes_at(root, "variant_recorded_bytes");
}

static pair_row measure_prediction(const char *dir, const char *pair, json_t *spec, const char *reverie)
{
    pair_row row = { 0 };
    row.memory_baseline_estimate = row.memory_baseline_recorded = row.memory_predicted = row.memory_variant = -1;
    row.pair = g_strdup(pair);
    row.baseline = g_strdup(json_string_value(json_object_get(spec, "baseline")));
    row.variant = g_strdup(json_string_value(json_object_get(spec, "variant")));
    row.judge = g_strdup(json_string_value(json_object_get(spec, "judge")));
    row.limit = json_number_value(json_object_get(spec, "limit"));
    const char *known_miss = json_string_value(json_object_get(spec, "known_miss"));
    row.known_miss = known_miss ? g_strdup(known_miss) : NULL;
    const char *memory_known_miss = json_string_value(json_object_get(spec, "memory_known_miss"));
    row.memory_known_miss = memory_known_miss ? g_strdup(memory_known_miss) : NULL;
    gboolean timed = g_strcmp0(row.judge, "timed") == 0;
    GPtrArray *args = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(args, g_strdup(timed ? "whatif" : "validate"));
    g_ptr_array_add(args, g_build_filename(dir, "pairs", pair, row.baseline ? row.baseline : "", NULL));
    if (!timed) g_ptr_array_add(args, g_build_filename(dir, "pairs", pair, row.variant ? row.variant : "", NULL));
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
    } else if (timed) {
        double recorded_us = timed_variant_us(dir, pair, row.variant, &row.failure);
        json_t *root = recorded_us > 0 ? run_json(reverie, args, &row.failure) : NULL;
        if (root != NULL) measure_timed(&row, root, recorded_us);
        json_decref(root);
    } else {
        json_t *root = run_json(reverie, args, &row.failure);
        gboolean gpu = strcmp(row.judge, "gpu") == 0, mean = strcmp(row.judge, "mean") == 0;
        if (root != NULL) read_memory(&row, root);
        if (root != NULL && mean) {
            row.recorded_us = number_at(root, "mean", "variant_us");
            row.predicted_us = number_at(root, "mean", "predicted_us");
            row.error = number_at(root, "mean", "error");
            row.no_change_error = number_at(root, "mean", "no_change_error");
            read_range(&row, json_object_get(root, "mean"), "predicted_low_us", "predicted_high_us");
            json_decref(root);
        } else if (root != NULL) {
            row.recorded_us = gpu ? number_at(root, "gpu_kernel", "variant_us") : number_at(root, "variant", "recorded_steady_us");
            row.predicted_us = gpu ? number_at(root, "gpu_kernel", "predicted_us") : number_at(root, NULL, "predicted_steady_us");
            row.error = gpu ? number_at(root, "gpu_kernel", "error") : number_at(root, NULL, "error");
            row.no_change_error = gpu ? number_at(root, "gpu_kernel", "no_change_error") : number_at(root, NULL, "no_change_error");
            read_range(&row, gpu ? json_object_get(root, "gpu_kernel") : root,
                       gpu ? "predicted_low_us" : "predicted_steady_low_us",
                       gpu ? "predicted_high_us" : "predicted_steady_high_us");
            json_decref(root);
        }
    }
    fprintf(stderr, "accuracy: pair %s %s -> %s %s%s%s\n", pair, row.baseline, row.variant, row.opt,
            row.failure ? ": " : "", row.failure ? row.failure : "");
    g_ptr_array_unref(args);
    return row;
}

/* One row of the pairs' table: a prediction to run, or a manifest that
 * could not be read (its row made already). */
typedef struct {
    const char *pair;
    json_t *spec;       /* NULL: row holds the manifest's failure */
    pair_row row;
} pair_item;

typedef struct {
    const char *dir, *reverie;
    GArray *items;      /* pair_item */
} pair_work;

static void measure_item_at(guint index, gpointer data)
{
    pair_work *work = data;
    pair_item *item = &g_array_index(work->items, pair_item, index);
    if (item->spec != NULL) item->row = measure_prediction(work->dir, item->pair, item->spec, work->reverie);
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
    pair_work work = { dir, reverie, g_array_new(FALSE, TRUE, sizeof(pair_item)) };
    GPtrArray *manifests = g_ptr_array_new_with_free_func((GDestroyNotify)json_decref);
    for (guint n = 0; n < names->len; n++) {
        const char *pair = g_ptr_array_index(names, n);
        char *manifest = g_build_filename(pairs_dir, pair, "pair.json", NULL);
        json_error_t error;
        json_t *root = json_load_file(manifest, 0, &error);
        if (root == NULL) {
            pair_item item = { pair, NULL, { 0 } };
            item.row.pair = g_strdup(pair);
            item.row.failure = g_strdup_printf("%s: %s", manifest, error.text);
            g_array_append_val(work.items, item);
        } else {
            g_ptr_array_add(manifests, root);
        }
        size_t i;
        json_t *spec;
        json_array_foreach(json_object_get(root, "predictions"), i, spec) {
            pair_item item = { pair, spec, { 0 } };
            g_array_append_val(work.items, item);
        }
        g_free(manifest);
    }
    accuracy_run_parallel(work.items->len, measure_item_at, &work);
    for (guint i = 0; i < work.items->len; i++) g_array_append_val(report->pairs, g_array_index(work.items, pair_item, i).row);
    g_array_unref(work.items);
    g_ptr_array_unref(manifests);
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
