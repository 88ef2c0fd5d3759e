/*
 * efficiency.c - per-GPU efficiency tables (efficiency.h): measuring a
 * recording, the JSON file, the job signature, and the per-GPU views the
 * hardware projection reads.
 *
 * The loader is strict for the same reason as the GPU catalogue's: a wrong
 * figure silently moves every projection to that GPU.  Unknown keys, a
 * figure that is not a finite number in its range, a bucket of an unknown
 * class, unit or variant, and two recordings with one SHA-256 are each one
 * line naming the file and the recording.
 */
#include "reverie/efficiency.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/output.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

#define SIGNATURE_SIZE 64
#define FORMAT_NAME "reverie-efficiency"
#define FORMAT_VERSION 1
#define EFFICIENCY_MAX RV_EFFICIENCY_CACHE_MAX

typedef struct {
    rv_cost_bucket key;
    guint kernels;
    double roofline_ns, variable_ns;  /* summed over the bucket's kernels */
    double q25, q75;                  /* quartiles of the kernels' own efficiencies */
} bucket_entry;

typedef struct {
    char *gpu, *label, *sha256;
    guint32 job[SIGNATURE_SIZE];
    GArray *members;                     /* guint32, ascending: the job's distinct (operator, Input
                                            Dims), hashed; NULL in tables written before them */
    guint kernels, samples, rejected;    /* rejected: samples above the bound (their work overcounted) */
    double kernel_ns, fixed_ns, gap_ns;  /* gap_ns < 0: not measured */
    double shortest_ns;                  /* the 5th percentile of its kernels, not capped */
    guint gap_samples;
    GArray *buckets;                     /* bucket_entry */
} recording;

struct rv_efficiency_table {
    char *path;
    GPtrArray *recordings;  /* recording* */
};

typedef struct {
    guint64 kernels;  /* a bucket may hold 10^9 in each recording: a guint wrapped past 2^32 */
    double roofline_ns, variable_ns, low, high;
} bucket_total;

struct rv_gpu_efficiency {
    GPtrArray *recordings;  /* borrowed recording* */
    GHashTable *buckets;    /* packed rv_cost_bucket -> bucket_total */
    GHashTable *paired;     /* the same, over the recordings of jobs the other
                               side of a projection also recorded (NULL until
                               rv_efficiency_pair_views) */
};

static const char *const unit_names[] = { "vector", "matrix" };

static void recording_free(gpointer data)
{
    recording *r = data;
    g_free(r->gpu);
    g_free(r->label);
    g_free(r->sha256);
    if (r->buckets) g_array_unref(r->buckets);
    if (r->members) g_array_unref(r->members);
    g_free(r);
}

rv_efficiency_table *rv_efficiency_table_new(void)
{
    rv_efficiency_table *table = g_new0(rv_efficiency_table, 1);
    table->path = g_strdup("");
    table->recordings = g_ptr_array_new_with_free_func(recording_free);
    return table;
}

void rv_efficiency_table_free(rv_efficiency_table *table)
{
    if (table == NULL) return;
    g_ptr_array_unref(table->recordings);
    g_free(table->path);
    g_free(table);
}

const char *rv_efficiency_table_path(const rv_efficiency_table *table) { return table->path; }
guint rv_efficiency_table_count(const rv_efficiency_table *table) { return table->recordings->len; }

/* ---- the job signature -------------------------------------------------- */

static guint64 mix64(guint64 x)  /* splitmix64's finalizer */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static guint64 text_hash(const char *a, const char *b)  /* FNV-1a over a, a separator, b */
{
    guint64 h = 0xcbf29ce484222325ULL;
    for (const char *c = a; *c; c++) h = (h ^ (guchar)*c) * 0x100000001b3ULL;
    h = (h ^ 0x1f) * 0x100000001b3ULL;
    for (const char *c = b; *c; c++) h = (h ^ (guchar)*c) * 0x100000001b3ULL;
    return h;
}

static gint compare_hash(gconstpointer a, gconstpointer b)
{
    guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
    return x < y ? -1 : x > y;
}

/* The distinct (operator, Input Dims) string-id pairs of the GPU tasks:
 * a million tasks name a few hundred pairs, so the texts are hashed once
 * per pair rather than once per task (a hash set: sorting a million pairs
 * cost more than the rest of the signature). */
static GArray *distinct_op_dims(const rv_graph *graph)
{
    GArray *pairs = g_array_new(FALSE, FALSE, sizeof(gint64));
    GHashTable *seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    gint64 previous = -1; /* op ids are positive: never a pair */
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!(task->flags & RV_TASK_FLAG_GPU) || task->op <= 0) continue;
        gint64 pair = ((gint64)task->op << 32) | (guint32)task->input_dims;
        if (pair == previous) continue; /* runs of one operator's kernels */
        previous = pair;
        if (g_hash_table_contains(seen, &pair)) continue;
        g_hash_table_add(seen, g_memdup2(&pair, sizeof pair));
        g_array_append_val(pairs, pair);
    }
    g_hash_table_destroy(seen);
    return pairs;
}

/* MinHash of the set of (operator, Input Dims) of the graph's GPU tasks:
 * per slot k, the least of a k-seeded mix of each member's hash.  Members
 * are texts, not ids: two ids of one text (two tables) are one member. */
static gint compare_member(gconstpointer a, gconstpointer b)
{
    guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
    return x < y ? -1 : x > y;
}

/* ... and the members themselves (hashed to 32 bits, ascending, each once;
 * g_array_unref), which say how much of one job another holds. */
static GArray *job_signature(const rv_graph *graph, guint32 *signature)
{
    for (int i = 0; i < SIGNATURE_SIZE; i++) signature[i] = G_MAXUINT32;
    GArray *pairs = distinct_op_dims(graph);
    GArray *hashes = g_array_sized_new(FALSE, FALSE, sizeof(guint64), pairs->len);
    for (guint i = 0; i < pairs->len; i++) {
        gint64 pair = g_array_index(pairs, gint64, i);
        int32_t op = (int32_t)(pair >> 32), input_dims = (int32_t)(guint32)pair;
        const char *dims = input_dims >= 0 ? rv_strings_get(graph->strings, input_dims) : "";
        guint64 h = text_hash(rv_strings_get(graph->strings, op), dims);
        g_array_append_val(hashes, h);
    }
    g_array_unref(pairs);
    g_array_sort(hashes, compare_hash);
    GArray *members = g_array_sized_new(FALSE, FALSE, sizeof(guint32), hashes->len);
    for (guint i = 0; i < hashes->len; i++) {
        guint64 h = g_array_index(hashes, guint64, i);
        if (i > 0 && h == g_array_index(hashes, guint64, i - 1)) continue;  /* a set: each member once */
        guint32 member = (guint32)(h >> 32);
        g_array_append_val(members, member);
        for (int k = 0; k < SIGNATURE_SIZE; k++) {
            guint32 v = (guint32)(mix64(h ^ (0x9e3779b97f4a7c15ULL * (guint64)(k + 1))) >> 32);
            if (v < signature[k]) signature[k] = v;
        }
    }
    g_array_unref(hashes);
    g_array_sort(members, compare_member);
    return members;
}

static double signature_similarity(const guint32 *a, const guint32 *b)
{
    int same = 0;
    for (int k = 0; k < SIGNATURE_SIZE; k++) same += a[k] == b[k] && a[k] != G_MAXUINT32;
    return (double)same / SIGNATURE_SIZE;
}

/* How many of the smaller set's members the larger holds (both ascending). */
static double containment(const GArray *a, const GArray *b)
{
    guint i = 0, j = 0, shared = 0;
    while (i < a->len && j < b->len) {
        guint32 x = g_array_index(a, guint32, i), y = g_array_index(b, guint32, j);
        shared += x == y;
        i += x <= y;
        j += y <= x;
    }
    return (double)shared / MAX(1u, MIN(a->len, b->len));
}

/* Are two recordings one job?  Either their sets are alike (Jaccard), or
 * the smaller is mostly inside the larger: the same network with its
 * optimizer's per-parameter operators (Adam foreach=False adds hundreds of
 * shapes to a ResNet-50's: Jaccard 0.4 against the fused optimizer's run,
 * every operator of which it holds) or with autocast's casts.  The same
 * network at another batch or sequence length has other shapes: another
 * job (the shipped GPT-shaped decoder at batch 16 holds 0.62 of batch 8's).
 * Containment needs a set of some size: a trace of a handful of generic
 * operators lies inside many (two unrelated 9-member traces: 1.0). */
static gboolean same_job(const guint32 *a, const GArray *a_members, const guint32 *b, const GArray *b_members)
{
    if (signature_similarity(a, b) >= RV_EFFICIENCY_SAME_JOB) return TRUE;
    return a_members && b_members && MIN(a_members->len, b_members->len) >= RV_EFFICIENCY_CONTAINED_MIN_MEMBERS &&
           containment(a_members, b_members) >= RV_EFFICIENCY_SAME_JOB_CONTAINED;
}

double rv_efficiency_job_similarity(const rv_graph *a, const rv_graph *b)
{
    guint32 x[SIGNATURE_SIZE], y[SIGNATURE_SIZE];
    g_array_unref(job_signature(a, x));
    g_array_unref(job_signature(b, y));
    return signature_similarity(x, y);
}

/* ---- measuring a recording --------------------------------------------- */

static guint32 bucket_packed(rv_cost_bucket b)
{
    return (guint32)b.cls << 24 | (guint32)b.unit << 16 | (guint32)b.variant << 8 | (guint8)b.decade;
}

static gint compare_double(gconstpointer a, gconstpointer b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(GArray *sorted, double q)
{
    return g_array_index(sorted, double, (guint)(q * (sorted->len - 1) + 0.5));
}

typedef struct {
    bucket_entry entry;
    GArray *efficiencies;  /* double: each kernel's own */
} bucket_builder;

static void bucket_builder_free(gpointer data)
{
    bucket_builder *b = data;
    g_array_unref(b->efficiencies);
    g_free(b);
}

static gint compare_buckets(gconstpointer a, gconstpointer b)
{
    guint32 x = bucket_packed(((const bucket_entry *)a)->key), y = bucket_packed(((const bucket_entry *)b)->key);
    return x < y ? -1 : x > y;
}

/* The most a sample may achieve: the roofline itself for a working set
 * that comes from memory, RV_EFFICIENCY_CACHE_MAX of it from the cache. */
static double efficiency_bound(rv_cost_bucket key)
{
    return key.variant == RV_BUCKET_IN_CACHE ? RV_EFFICIENCY_CACHE_MAX : RV_EFFICIENCY_PLAIN_MAX;
}

/* The samples of a cost model, bucket by bucket, in bucket order.  A kernel
 * faster than its bound did less work than its operator's shapes count (a
 * strided convolution counted at stride 1, one of an operator's several
 * kernels counted with all its bytes): its efficiency says nothing about
 * the GPU, and it is left out, counted in *rejected. */
static GArray *measure_buckets(const rv_cost_model *model, guint *kernels, guint *samples, guint *rejected,
                               double *kernel_ns)
{
    const rv_graph *graph = rv_cost_model_graph(model);
    GHashTable *by_key = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, bucket_builder_free);
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
        if (cost == NULL || cost->cls == RV_COST_COMM || cost->cls == RV_COST_HOST_COPY || cost->cls == RV_COST_UNKNOWN)
            continue;
        (*kernels)++;
        *kernel_ns += (double)g_array_index(graph->tasks, rv_task, t).duration_ns;
        rv_cost_bucket key;
        double roofline, variable;
        if (!rv_cost_model_sample(model, t, &key, &roofline, &variable)) continue;
        if (roofline / variable > efficiency_bound(key)) {
            (*rejected)++;
            continue;
        }
        (*samples)++;
        bucket_builder *b = g_hash_table_lookup(by_key, GUINT_TO_POINTER(bucket_packed(key)));
        if (b == NULL) {
            b = g_new0(bucket_builder, 1);
            b->entry.key = key;
            b->efficiencies = g_array_new(FALSE, FALSE, sizeof(double));
            g_hash_table_insert(by_key, GUINT_TO_POINTER(bucket_packed(key)), b);
        }
        b->entry.kernels++;
        b->entry.roofline_ns += roofline;
        b->entry.variable_ns += variable;
        double efficiency = roofline / variable;
        g_array_append_val(b->efficiencies, efficiency);
    }
    GArray *buckets = g_array_new(FALSE, FALSE, sizeof(bucket_entry));
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, by_key);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        bucket_builder *b = value;
        g_array_sort(b->efficiencies, compare_double);
        b->entry.q25 = MIN(quantile(b->efficiencies, 0.25), EFFICIENCY_MAX);
        b->entry.q75 = MIN(quantile(b->efficiencies, 0.75), EFFICIENCY_MAX);
        g_array_append_val(buckets, b->entry);
    }
    g_hash_table_destroy(by_key);
    g_array_sort(buckets, compare_buckets);
    return buckets;
}

/* The 5th percentile of the recording's kernel durations (kernels the
 * cost model re-costs, above zero), without the cost model's 3 us cap:
 * two recordings of one job compare the same kernels this way. */
static double shortest_kernels(const rv_cost_model *model)
{
    const rv_graph *graph = rv_cost_model_graph(model);
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(double));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (cost == NULL || task->kind != RV_TASK_KERNEL || task->duration_ns <= 0 || cost->cls == RV_COST_COMM ||
            cost->cls == RV_COST_UNKNOWN)
            continue;
        double ns = (double)task->duration_ns;
        g_array_append_val(durations, ns);
    }
    double shortest = 0;
    if (durations->len > 0) {
        g_array_sort(durations, compare_double);
        shortest = g_array_index(durations, double, (guint)(0.05 * (durations->len - 1)));
    }
    g_array_unref(durations);
    return shortest;
}

gboolean rv_efficiency_table_add(rv_efficiency_table *table, const rv_cost_model *model, const char *label,
                                 const char *sha256, gboolean *replaced, GError **error)
{
    const rv_graph *graph = rv_cost_model_graph(model);
    recording *r = g_new0(recording, 1);
    r->buckets = measure_buckets(model, &r->kernels, &r->samples, &r->rejected, &r->kernel_ns);
    if (r->kernels == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: no GPU kernel to calibrate on (the trace records none that "
                    "the cost model re-costs)", label);
        recording_free(r);
        return FALSE;
    }
    r->gpu = g_strdup(rv_cost_model_source(model)->id);
    r->label = g_strdup(label);
    r->sha256 = g_strdup(sha256);
    r->members = job_signature(graph, r->job);
    r->fixed_ns = (double)rv_cost_model_fixed_ns(model);
    r->shortest_ns = shortest_kernels(model);
    r->gap_samples = (guint)MIN(graph->timing.idle_gap.samples, G_MAXUINT);
    r->gap_ns = r->gap_samples >= RV_EFFICIENCY_MIN_GAPS && graph->timing.idle_gap.source == RV_SOURCE_MEASURED ? (double)graph->timing.idle_gap.value : -1;
    if (replaced) *replaced = FALSE;
    for (guint i = 0; i < table->recordings->len; i++) {
        recording *old = g_ptr_array_index(table->recordings, i);
        if (strcmp(old->sha256, sha256) != 0) continue;
        g_ptr_array_index(table->recordings, i) = r;
        recording_free(old);
        if (replaced) *replaced = TRUE;
        return TRUE;
    }
    g_ptr_array_add(table->recordings, r);
    return TRUE;
}

rv_efficiency_recording rv_efficiency_table_recording(const rv_efficiency_table *table, guint index)
{
    const recording *r = g_ptr_array_index(table->recordings, index);
    /* summed in 64 bits and shown at most as 2^32 - 1: buckets of 10^9 kernels each wrapped a guint */
    guint64 samples = 0;
    for (guint b = 0; b < r->buckets->len; b++) samples += g_array_index(r->buckets, bucket_entry, b).kernels;
    return (rv_efficiency_recording){ r->gpu, r->label, r->sha256, r->kernels, (guint)MIN(samples, G_MAXUINT),
                                      r->rejected, r->buckets->len,
                                      r->kernel_ns, r->fixed_ns, r->gap_ns };
}

/* ---- the file ----------------------------------------------------------- */

static json_t *bucket_json(const bucket_entry *b)
{
    json_t *object = json_pack("{s:s,s:s,s:i}", "class", rv_cost_class_name((rv_cost_class)b->key.cls), "unit",
                               unit_names[b->key.unit], "decade", (int)b->key.decade);
    if (b->key.variant != RV_BUCKET_PLAIN)
        json_object_set_new(object, "variant", json_string(rv_cost_bucket_variant_name(b->key.variant)));
    json_object_set_new(object, "kernels", json_integer(b->kernels));
    json_object_set_new(object, "roofline_us", json_real(b->roofline_ns / 1e3));
    json_object_set_new(object, "variable_us", json_real(b->variable_ns / 1e3));
    json_object_set_new(object, "q25", json_real(b->q25));
    json_object_set_new(object, "q75", json_real(b->q75));
    return object;
}

static json_t *recording_json(const recording *r)
{
    json_t *job = json_array(), *buckets = json_array();
    for (int k = 0; k < SIGNATURE_SIZE; k++) json_array_append_new(job, json_integer(r->job[k]));
    for (guint b = 0; b < r->buckets->len; b++)
        json_array_append_new(buckets, bucket_json(&g_array_index(r->buckets, bucket_entry, b)));
    json_t *object = json_pack("{s:s,s:s,s:s,s:I,s:f,s:f,s:f}", "gpu", r->gpu, "recording", r->label, "sha256",
                               r->sha256, "kernels", (json_int_t)r->kernels, "kernel_time_us", r->kernel_ns / 1e3,
                               "fixed_us", r->fixed_ns / 1e3, "shortest_us", r->shortest_ns / 1e3);
    json_object_set_new(object, "rejected", json_integer(r->rejected));
    if (r->gap_ns >= 0) json_object_set_new(object, "gap_us", json_real(r->gap_ns / 1e3));
    json_object_set_new(object, "gap_samples", json_integer(r->gap_samples));
    json_object_set_new(object, "job", job);
    json_t *members = json_array();
    for (guint i = 0; r->members && i < r->members->len; i++)
        json_array_append_new(members, json_integer(g_array_index(r->members, guint32, i)));
    json_object_set_new(object, "job_members", members);
    json_object_set_new(object, "buckets", buckets);
    return object;
}

char *rv_efficiency_table_to_json(const rv_efficiency_table *table)
{
    json_t *recordings = json_array();
    for (guint i = 0; i < table->recordings->len; i++)
        json_array_append_new(recordings, recording_json(g_ptr_array_index(table->recordings, i)));
    json_t *root = json_pack(
        "{s:s,s:i,s:s,s:o}", "format", FORMAT_NAME, "version", FORMAT_VERSION, "about",
        "Per-GPU kernel efficiencies measured by `reverie calibrate` (include/reverie/efficiency.h): per recording, "
        "its GPU (a catalogue id), the fixed per-kernel cost (us), the idle gap between back-to-back kernels (us, "
        "where 20 gaps or more were seen), a MinHash signature of its job (operators and shapes), and per size "
        "bucket (class, unit, decade of FLOPs or bytes, in_cache or fused) the kernels' summed wave-aware roofline "
        "on datasheet peaks and summed time above the fixed cost (us), and the quartiles of their efficiencies.",
        "recordings", recordings);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(9));
    json_decref(root);
    char *out = g_strconcat(text, "\n", NULL);
    free(text);
    return out;
}

/* An RV_ERROR_INPUT about the file, on one line whatever the file holds:
 * keys, texts and jansson's excerpts of it may hold newlines or terminal
 * controls (JSON escapes, raw bytes), so the message is escaped (escape.h). */
#define set_input_error(error, ...) rv_set_escaped_error((error), RV_ERROR_INPUT, __VA_ARGS__)

typedef struct {
    const char *path;
    guint index;
    guint bucket;  /* the bucket being read, from 1; 0 outside the buckets */
    GError **error;
} reading;

static gboolean refuse(reading *r, const char *format, ...) G_GNUC_PRINTF(2, 3);
static gboolean refuse(reading *r, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *what = g_strdup_vprintf(format, args);
    va_end(args);
    char *bucket = r->bucket ? g_strdup_printf(", bucket %u", r->bucket) : g_strdup("");
    set_input_error(r->error, "%s: efficiency recording %u%s: %s", r->path, r->index + 1, bucket, what);
    g_free(bucket);
    g_free(what);
    return FALSE;
}

static gboolean keys_known(reading *r, json_t *object, const char *what, const char *const *keys)
{
    const char *key;
    json_t *value;
    json_object_foreach(object, key, value) {
        gboolean known = FALSE;
        for (const char *const *k = keys; *k && !known; k++) known = strcmp(*k, key) == 0;
        if (!known) return refuse(r, "%s has an unknown key '%s'", what, key);
    }
    return TRUE;
}

static gboolean number_in(reading *r, json_t *object, const char *key, double low, double high, gboolean required,
                          double *out)
{
    json_t *value = json_object_get(object, key);
    if (value == NULL && !required) return TRUE;
    if (!json_is_number(value) || !isfinite(json_number_value(value)) || json_number_value(value) < low ||
        json_number_value(value) > high)
        return refuse(r, "'%s' must be a number in [%g, %g]", key, low, high);
    *out = json_number_value(value);
    return TRUE;
}

/* A recording's count: a whole number from `low` up to G_MAXUINT, for the
 * guint it is kept in (casting a larger or fractional double to guint is
 * undefined behaviour, and a fraction of a kernel is no count). */
static gboolean count_in(reading *r, json_t *object, const char *key, double low, guint *out)
{
    double value = 0;
    if (!number_in(r, object, key, low, G_MAXUINT, TRUE, &value)) return FALSE;
    if (value != floor(value)) return refuse(r, "'%s' must be a whole number", key);
    *out = (guint)value;
    return TRUE;
}

static gboolean text_of(reading *r, json_t *object, const char *key, char **out)
{
    json_t *value = json_object_get(object, key);
    if (!json_is_string(value) || json_string_length(value) == 0) return refuse(r, "'%s' must be non-empty text", key);
    *out = g_strdup(json_string_value(value));
    return TRUE;
}

static gboolean read_bucket(reading *r, json_t *object, bucket_entry *b)
{
    static const char *const keys[] = { "class", "unit", "decade", "variant", "kernels", "roofline_us",
                                        "variable_us", "q25", "q75", NULL };
    if (!json_is_object(object)) return refuse(r, "a bucket is not an object");
    if (!keys_known(r, object, "a bucket", keys)) return FALSE;
    json_t *cls = json_object_get(object, "class"), *unit = json_object_get(object, "unit");
    int c = json_is_string(cls) ? rv_cost_class_from_name(json_string_value(cls)) : -1;
    if (c < 0 || c == RV_COST_COMM || c == RV_COST_HOST_COPY || c == RV_COST_UNKNOWN)
        return refuse(r, "a bucket's 'class' must be a re-costed kernel class (gemm, conv, attention, elementwise, "
                      "reduction, norm, copy, other)");
    int u = json_is_string(unit) ? (strcmp(json_string_value(unit), "matrix") == 0   ? RV_UNIT_MATRIX
                                    : strcmp(json_string_value(unit), "vector") == 0 ? RV_UNIT_VECTOR
                                                                                     : -1)
                                 : -1;
    if (u < 0) return refuse(r, "a bucket's 'unit' must be vector or matrix");
    json_t *variant = json_object_get(object, "variant");
    int v = variant == NULL ? RV_BUCKET_PLAIN
            : json_is_string(variant) ? rv_cost_bucket_variant_from_name(json_string_value(variant)) : -1;
    if (v < 0) return refuse(r, "a bucket's 'variant' must be in_cache or fused");
    double decade = 0, kernels = 0;
    if (!number_in(r, object, "decade", 0, 60, TRUE, &decade) || decade != floor(decade))
        return decade != floor(decade) ? refuse(r, "a bucket's 'decade' must be a whole number") : FALSE;
    if (!number_in(r, object, "kernels", 1, 1e9, TRUE, &kernels) || kernels != floor(kernels))
        return kernels != floor(kernels) ? refuse(r, "a bucket's 'kernels' must be a whole number") : FALSE;
    double roofline_us = 0, variable_us = 0;
    if (!number_in(r, object, "roofline_us", 1e-12, 1e15, TRUE, &roofline_us) ||
        !number_in(r, object, "variable_us", 1e-12, 1e15, TRUE, &variable_us) ||
        !number_in(r, object, "q25", 0, EFFICIENCY_MAX, TRUE, &b->q25) ||
        !number_in(r, object, "q75", 0, EFFICIENCY_MAX, TRUE, &b->q75))
        return FALSE;
    if (b->q25 > b->q75) return refuse(r, "a bucket's 'q25' is above its 'q75'");
    b->key = (rv_cost_bucket){ (uint8_t)c, (uint8_t)u, (uint8_t)v, (int8_t)decade };
    /* calibrate leaves out every sample above its bound, so no bucket it
     * writes passes it (a margin for the 9 digits the file keeps); one that
     * does would project the target's kernels to their fixed cost alone,
     * or the source's to 10^27 times their time */
    if (roofline_us / variable_us > efficiency_bound(b->key) * (1 + 1e-6))
        return refuse(r, "a bucket's efficiency ('roofline_us' / 'variable_us') is %g, above its bound of %g",
                      roofline_us / variable_us, efficiency_bound(b->key));
    b->kernels = (guint)kernels;
    b->roofline_ns = roofline_us * 1e3;
    b->variable_ns = variable_us * 1e3;
    return TRUE;
}

static gboolean read_signature(reading *r, json_t *array, guint32 *job)
{
    if (!json_is_array(array) || json_array_size(array) != SIGNATURE_SIZE)
        return refuse(r, "'job' must be a list of %d signature values", SIGNATURE_SIZE);
    size_t k;
    json_t *value;
    json_array_foreach(array, k, value) {
        if (!json_is_integer(value) || json_integer_value(value) < 0 || json_integer_value(value) > G_MAXUINT32)
            return refuse(r, "'job' holds a value that is not a 32-bit whole number");
        job[k] = (guint32)json_integer_value(value);
    }
    return TRUE;
}

/* The job's members: absent in older tables (NULL), else ascending 32-bit values. */
static gboolean read_members(reading *r, json_t *array, GArray **members)
{
    if (array == NULL) return TRUE;
    if (!json_is_array(array)) return refuse(r, "'job_members' must be a list");
    *members = g_array_sized_new(FALSE, FALSE, sizeof(guint32), (guint)json_array_size(array));
    size_t i;
    json_t *item;
    json_array_foreach(array, i, item) {
        json_int_t v = json_is_integer(item) ? json_integer_value(item) : -1;
        if (v < 0 || v > G_MAXUINT32 ||
            (i > 0 && (guint32)v <= g_array_index(*members, guint32, i - 1)))
            return refuse(r, "'job_members' must be ascending integers from 0 to %u", G_MAXUINT32);
        guint32 member = (guint32)v;
        g_array_append_val(*members, member);
    }
    return TRUE;
}

static recording *read_recording(reading *r, json_t *object)
{
    static const char *const keys[] = { "gpu", "recording", "sha256", "kernels", "kernel_time_us", "fixed_us",
                                        "shortest_us", "rejected", "gap_us", "gap_samples", "job", "job_members", "buckets",
                                        NULL };
    if (!json_is_object(object)) {
        refuse(r, "not an object");
        return NULL;
    }
    recording *rec = g_new0(recording, 1);
    rec->buckets = g_array_new(FALSE, FALSE, sizeof(bucket_entry));
    double kernel_us = 0, fixed_us = 0, shortest_us = 0, gap_us = -1;
    json_t *buckets = json_object_get(object, "buckets");
    gboolean ok = keys_known(r, object, "the recording", keys) && text_of(r, object, "gpu", &rec->gpu) &&
                  text_of(r, object, "recording", &rec->label) && text_of(r, object, "sha256", &rec->sha256) &&
                  count_in(r, object, "kernels", 1, &rec->kernels) &&
                  number_in(r, object, "kernel_time_us", 0, 1e15, TRUE, &kernel_us) &&
                  number_in(r, object, "fixed_us", 0, 1e6, TRUE, &fixed_us) &&
                  number_in(r, object, "shortest_us", 0, 1e6, TRUE, &shortest_us) &&
                  /* a kernel lasts whole nanoseconds: a pair's ratio of two
                   * of these then stays within 10^9 either way (a denormal
                   * made it infinite) */
                  (shortest_us == 0 || shortest_us >= 1e-3 ||
                   refuse(r, "'shortest_us' must be 0 (no kernel measured) or at least 0.001 (1 ns)")) &&
                  count_in(r, object, "rejected", 0, &rec->rejected) &&
                  number_in(r, object, "gap_us", 0, 1e6, FALSE, &gap_us) &&
                  count_in(r, object, "gap_samples", 0, &rec->gap_samples) &&
                  read_signature(r, json_object_get(object, "job"), rec->job) &&
                  read_members(r, json_object_get(object, "job_members"), &rec->members);
    ok = ok && (json_is_array(buckets) || refuse(r, "'buckets' must be a list"));
    size_t i;
    json_t *item;
    if (ok) json_array_foreach(buckets, i, item) {
            bucket_entry b = { { 0, 0, 0, 0 }, 0, 0, 0, 0, 0 };
            r->bucket = (guint)i + 1;
            if (!(ok = read_bucket(r, item, &b))) break;
            g_array_append_val(rec->buckets, b);
        }
    r->bucket = 0;
    if (!ok) {
        recording_free(rec);
        return NULL;
    }
    rec->kernel_ns = kernel_us * 1e3;
    rec->fixed_ns = fixed_us * 1e3;
    rec->shortest_ns = shortest_us * 1e3;
    rec->gap_ns = gap_us >= 0 ? gap_us * 1e3 : -1;
    return rec;
}

static gboolean read_table(rv_efficiency_table *table, json_t *root, GError **error)
{
    json_t *format = json_is_object(root) ? json_object_get(root, "format") : NULL;
    json_t *version = json_is_object(root) ? json_object_get(root, "version") : NULL;
    json_t *recordings = json_is_object(root) ? json_object_get(root, "recordings") : NULL;
    if (!json_is_string(format) || strcmp(json_string_value(format), FORMAT_NAME) != 0 || !json_is_array(recordings)) {
        set_input_error(error, "%s: not an efficiency table (expected {\"format\": \"" FORMAT_NAME "\", \"recordings\": "
                        "[...]})", table->path);
        return FALSE;
    }
    if (!json_is_integer(version) || json_integer_value(version) != FORMAT_VERSION) {
        set_input_error(error, "%s: efficiency table version %s (this reverie reads version %d)", table->path,
                        json_is_integer(version) ? "other than 1" : "missing", FORMAT_VERSION);
        return FALSE;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(recordings, i, entry) {
        reading r = { table->path, (guint)i, 0, error };
        recording *rec = read_recording(&r, entry);
        if (rec == NULL) return FALSE;
        for (guint j = 0; j < table->recordings->len; j++)
            if (strcmp(((recording *)g_ptr_array_index(table->recordings, j))->sha256, rec->sha256) == 0) {
                refuse(&r, "the same file (sha256 %s) as recording %u", rec->sha256, j + 1);
                recording_free(rec);
                return FALSE;
            }
        g_ptr_array_add(table->recordings, rec);
    }
    return TRUE;
}

rv_efficiency_table *rv_efficiency_table_load(const char *path, GError **error)
{
    rv_output_note_input(path); /* no output of this run may replace it (calibrate --from) */
    json_error_t parse_error;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &parse_error);
    if (root == NULL) {
        /* the column too (as metaflow's rule files say it): a table written
         * without indentation is one line */
        set_input_error(error, "%s: line %d, column %d: %s", path, parse_error.line, parse_error.column,
                        parse_error.text);
        return NULL;
    }
    rv_efficiency_table *table = rv_efficiency_table_new();
    g_free(table->path);
    table->path = g_strdup(path);
    gboolean ok = read_table(table, root, error);
    json_decref(root);
    if (ok) return table;
    rv_efficiency_table_free(table);
    return NULL;
}

rv_efficiency_table *rv_efficiency_table_load_default(GError **error)
{
    char *path = rv_data_file_path("REVERIE_EFFICIENCY", "efficiency.json");
    rv_efficiency_table *table = rv_efficiency_table_load(path, error);
    g_free(path);
    return table;
}

/* ---- views -------------------------------------------------------------- */

static GHashTable *bucket_totals_new(void)
{
    return g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
}

static void add_entry(GHashTable *buckets, guint32 key, const bucket_entry *entry)
{
    bucket_total *total = g_hash_table_lookup(buckets, GUINT_TO_POINTER(key));
    double own = entry->roofline_ns / entry->variable_ns;
    if (total == NULL) {
        total = g_new0(bucket_total, 1);
        total->low = G_MAXDOUBLE;
        g_hash_table_insert(buckets, GUINT_TO_POINTER(key), total);
    }
    total->kernels += entry->kernels;
    total->roofline_ns += entry->roofline_ns;
    total->variable_ns += entry->variable_ns;
    total->low = MIN(total->low, MIN(own, entry->q25));
    total->high = MAX(total->high, MAX(own, entry->q75));
}

static void add_to_buckets(GHashTable *buckets, const recording *r)
{
    for (guint b = 0; b < r->buckets->len; b++) {
        const bucket_entry *entry = &g_array_index(r->buckets, bucket_entry, b);
        add_entry(buckets, bucket_packed(entry->key), entry);
    }
}

/* One GPU's view, without the recordings of the job whose signature and
 * members are given (signature NULL: keep all). */
static rv_gpu_efficiency *view_without(const rv_efficiency_table *table, const char *gpu_id, const guint32 *signature,
                                       const GArray *members, GPtrArray *excluded)
{
    rv_gpu_efficiency *view = g_new0(rv_gpu_efficiency, 1);
    view->recordings = g_ptr_array_new();
    view->buckets = bucket_totals_new();
    for (guint i = 0; table && i < table->recordings->len; i++) {
        const recording *r = g_ptr_array_index(table->recordings, i);
        if (strcmp(r->gpu, gpu_id) != 0) continue;
        if (signature && same_job(signature, members, r->job, r->members)) {
            if (excluded) g_ptr_array_add(excluded, g_strdup(r->label));
            continue;
        }
        g_ptr_array_add(view->recordings, (gpointer)r);
        add_to_buckets(view->buckets, r);
    }
    return view;
}

rv_gpu_efficiency *rv_efficiency_for_gpu(const rv_efficiency_table *table, const char *gpu_id, const rv_graph *job,
                                         GPtrArray *excluded)
{
    guint32 signature[SIGNATURE_SIZE];
    GArray *members = job ? job_signature(job, signature) : NULL;
    rv_gpu_efficiency *view = view_without(table, gpu_id, job ? signature : NULL, members, excluded);
    if (members) g_array_unref(members);
    return view;
}

void rv_gpu_efficiency_free(rv_gpu_efficiency *view)
{
    if (view == NULL) return;
    g_ptr_array_unref(view->recordings);
    g_hash_table_destroy(view->buckets);
    if (view->paired) g_hash_table_destroy(view->paired);
    g_free(view);
}

guint rv_gpu_efficiency_recordings(const rv_gpu_efficiency *view) { return view ? view->recordings->len : 0; }

char *rv_gpu_efficiency_labels(const rv_gpu_efficiency *view)
{
    GString *labels = g_string_new(NULL);
    for (guint i = 0; view && i < view->recordings->len; i++)
        g_string_append_printf(labels, "%s%s", i ? ", " : "", ((const recording *)g_ptr_array_index(view->recordings, i))->label);
    return g_string_free(labels, FALSE);
}

/* The median of values (the mean of the middle two for an even count). */
static double median(GArray *values)
{
    g_array_sort(values, compare_double);
    guint n = values->len;
    return n % 2 ? g_array_index(values, double, n / 2)
                 : (g_array_index(values, double, n / 2 - 1) + g_array_index(values, double, n / 2)) / 2;
}

gboolean rv_gpu_efficiency_fixed(const rv_gpu_efficiency *view, double *fixed_ns, double *low_ns, double *high_ns)
{
    if (rv_gpu_efficiency_recordings(view) == 0) return FALSE;
    GArray *values = g_array_new(FALSE, FALSE, sizeof(double));
    for (guint i = 0; i < view->recordings->len; i++)
        g_array_append_val(values, ((const recording *)g_ptr_array_index(view->recordings, i))->fixed_ns);
    *fixed_ns = median(values);
    /* sorted by median() */
    *low_ns = values->len > 1 ? g_array_index(values, double, 0) : *fixed_ns / 2;
    *high_ns = values->len > 1 ? g_array_index(values, double, values->len - 1) : *fixed_ns * 2;
    g_array_unref(values);
    return TRUE;
}

gboolean rv_efficiency_fixed_ratio(const rv_gpu_efficiency *source, const rv_gpu_efficiency *target, double *ratio,
                                   double *low, double *high, guint *pairs)
{
    GArray *ratios = g_array_new(FALSE, FALSE, sizeof(double));
    for (guint i = 0; source && target && i < target->recordings->len; i++) {
        const recording *b = g_ptr_array_index(target->recordings, i);
        for (guint j = 0; j < source->recordings->len; j++) {
            const recording *a = g_ptr_array_index(source->recordings, j);
            if (a->shortest_ns <= 0 || b->shortest_ns <= 0 || !same_job(a->job, a->members, b->job, b->members))
                continue;
            double r = b->shortest_ns / a->shortest_ns;
            g_array_append_val(ratios, r);
        }
    }
    gboolean found = ratios->len > 0;
    if (found) {
        *pairs = ratios->len;
        *ratio = median(ratios);  /* sorts */
        *low = ratios->len > 1 ? g_array_index(ratios, double, 0) : *ratio / 2;
        *high = ratios->len > 1 ? g_array_index(ratios, double, ratios->len - 1) : *ratio * 2;
    }
    g_array_unref(ratios);
    return found;
}

gboolean rv_gpu_efficiency_gap(const rv_gpu_efficiency *view, double *gap_ns)
{
    GArray *values = g_array_new(FALSE, FALSE, sizeof(double));
    for (guint i = 0; view && i < view->recordings->len; i++) {
        const recording *r = g_ptr_array_index(view->recordings, i);
        if (r->gap_ns >= 0) g_array_append_val(values, r->gap_ns);
    }
    gboolean found = values->len > 0;
    if (found) *gap_ns = median(values);
    g_array_unref(values);
    return found;
}

/* The bucket's total, if it has enough kernels to be used. */
static const bucket_total *usable_key(GHashTable *buckets, guint32 key)
{
    const bucket_total *total = g_hash_table_lookup(buckets, GUINT_TO_POINTER(key));
    return total && total->kernels >= RV_EFFICIENCY_MIN_KERNELS && total->variable_ns > 0 ? total : NULL;
}

static const bucket_total *usable(GHashTable *buckets, rv_cost_bucket bucket)
{
    return usable_key(buckets, bucket_packed(bucket));
}

/* The bucket `step` decades from `bucket`'s, if it has enough kernels. */
static const bucket_total *usable_at(GHashTable *buckets, rv_cost_bucket bucket, int step)
{
    bucket.decade = (int8_t)(bucket.decade + step);
    return buckets != NULL && bucket.decade >= 0 ? usable(buckets, bucket) : NULL;
}

static void efficiency_of(const bucket_total *total, double *efficiency, double *low, double *high)
{
    *efficiency = total->roofline_ns / total->variable_ns;
    *low = MIN(total->low, *efficiency);
    *high = MAX(total->high, *efficiency);
}

/* Both sides at the same size: the kernel's own decade on each, else the
 * same step down or up on both (the one with the more kernels on the
 * scarcer side), since efficiency moves smoothly with size.  Each side
 * stepping on its own compared kernels of different sizes: an MI300X
 * ResNet's batch norms of 1-10 MB were read against the MI300X's 10-100 MB
 * layer norms (0.25 of the bandwidth) and the H100's 0.1-1 MB ones
 * (0.06), latency-bound, and projected 4.2x slower on the H100 for that
 * alone. */
static gboolean bucket_pair_in(GHashTable *from, GHashTable *to, rv_cost_bucket on_source, rv_cost_bucket on_target,
                               rv_efficiency_pair *pair)
{
    const bucket_total *source = usable_at(from, on_source, 0), *target = usable_at(to, on_target, 0);
    if (source == NULL || target == NULL) {
        guint64 best = 0;
        source = target = NULL;
        for (int step = -1; step <= 1; step += 2) {
            const bucket_total *a = usable_at(from, on_source, step), *b = usable_at(to, on_target, step);
            if (a == NULL || b == NULL || MIN(a->kernels, b->kernels) <= best) continue;
            best = MIN(a->kernels, b->kernels);
            source = a;
            target = b;
        }
    }
    if (source == NULL) return FALSE;
    efficiency_of(source, &pair->source, &pair->source_low, &pair->source_high);
    efficiency_of(target, &pair->target, &pair->target_low, &pair->target_high);
    return TRUE;
}

/* Does `r` have a recording of its job among `others`? */
static gboolean has_partner(const recording *r, const GPtrArray *others)
{
    for (guint j = 0; j < others->len; j++) {
        const recording *other = g_ptr_array_index(others, j);
        if (same_job(r->job, r->members, other->job, other->members)) return TRUE;
    }
    return FALSE;
}

static GHashTable *paired_buckets(const rv_gpu_efficiency *view, const rv_gpu_efficiency *other)
{
    GHashTable *buckets = bucket_totals_new();
    for (guint i = 0; i < view->recordings->len; i++) {
        const recording *r = g_ptr_array_index(view->recordings, i);
        if (has_partner(r, other->recordings)) add_to_buckets(buckets, r);
    }
    return buckets;
}

void rv_efficiency_pair_views(rv_gpu_efficiency *source, rv_gpu_efficiency *target)
{
    if (source == NULL || target == NULL) return;
    if (source->paired) g_hash_table_destroy(source->paired);
    if (target->paired) g_hash_table_destroy(target->paired);
    source->paired = paired_buckets(source, target);
    target->paired = paired_buckets(target, source);
}

gboolean rv_efficiency_bucket_ratio(const rv_gpu_efficiency *source, const rv_gpu_efficiency *target,
                                    rv_cost_bucket on_source, rv_cost_bucket on_target, rv_efficiency_pair *pair)
{
    if (source == NULL || target == NULL) return FALSE;
    gboolean pairs = source->paired && g_hash_table_size(source->paired) > 0;
    GHashTable *from = pairs ? source->paired : source->buckets, *to = pairs ? target->paired : target->buckets;
    return bucket_pair_in(from, to, on_source, on_target, pair);
}

/* ---- what a projection reads --------------------------------------------- */

gboolean rv_efficiency_views_open(rv_efficiency_views *views, const char *given, const rv_graph *graph,
                                  const rv_gpu *source, const rv_gpu *target, GError **error)
{
    memset(views, 0, sizeof *views);
    views->excluded = g_ptr_array_new_with_free_func(g_free);
    if (source == target || g_ascii_strcasecmp(given ? given : "", "none") == 0) return TRUE;
    GError *failed = NULL;
    views->table = given && *given ? rv_efficiency_table_load(given, &failed) : rv_efficiency_table_load_default(&failed);
    if (views->table == NULL) {
        g_set_error(error, RV_ERROR, failed->code, "%s (efficiency=FILE names another table; efficiency=none "
                    "projects without one)", failed->message);
        g_error_free(failed);
        return FALSE;
    }
    /* the job's signature once, for both GPUs' views */
    guint32 signature[SIGNATURE_SIZE];
    GArray *members = graph ? job_signature(graph, signature) : NULL;
    views->source = view_without(views->table, source->id, graph ? signature : NULL, members, views->excluded);
    views->target = view_without(views->table, target->id, graph ? signature : NULL, members, views->excluded);
    if (members) g_array_unref(members);
    rv_efficiency_pair_views(views->source, views->target);
    return TRUE;
}

void rv_efficiency_views_clear(rv_efficiency_views *views)
{
    rv_gpu_efficiency_free(views->source);
    rv_gpu_efficiency_free(views->target);
    rv_efficiency_table_free(views->table);
    if (views->excluded) g_ptr_array_unref(views->excluded);
    memset(views, 0, sizeof *views);
}
