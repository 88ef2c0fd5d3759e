/*
 * gpus.c - the GPU catalogue (gpus.h): reading data/gpus.json, finding an
 * entry by the user's name or by a trace's deviceProperties name.
 *
 * The loader is strict, because a wrong figure silently changes every
 * prediction made with it: unknown keys, figures that are not finite
 * positive numbers, an entry without an id, a figure without its source,
 * and two entries answering to one name are each refused with one line
 * naming the file and the entry.
 */
#include "reverie/gpus.h"
#include "reverie/paths.h"
#include "reverie/error.h"
#include "reverie/output.h"
#include <jansson.h>
#include <math.h>
#include <string.h>

#ifndef REVERIE_DATA_DIR
#define REVERIE_DATA_DIR "/usr/local/share/reverie"
#endif

struct rv_gpu_catalogue {
    char *path;
    GPtrArray *gpus;  /* rv_gpu* */
};

static const char *const dtype_names[RV_DTYPE_COUNT] = { "unknown", "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8" };
static const int dtype_sizes[RV_DTYPE_COUNT] = { 0, 8, 4, 4, 2, 2, 1, 1 };

const char *rv_dtype_name(rv_dtype dtype)
{
    return dtype < RV_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

int rv_dtype_from_name(const char *name)
{
    static const struct { const char *name; rv_dtype dtype; } synonyms[] = {
        { "float16", RV_DTYPE_FP16 }, { "half", RV_DTYPE_FP16 }, { "bfloat16", RV_DTYPE_BF16 },
        { "float32", RV_DTYPE_FP32 }, { "float", RV_DTYPE_FP32 }, { "float64", RV_DTYPE_FP64 },
        { "double", RV_DTYPE_FP64 }, { "float8", RV_DTYPE_FP8 },
    };
    if (name == NULL) return -1;
    for (int d = 1; d < RV_DTYPE_COUNT; d++)
        if (g_ascii_strcasecmp(name, dtype_names[d]) == 0) return d;
    for (gsize i = 0; i < G_N_ELEMENTS(synonyms); i++)
        if (g_ascii_strcasecmp(name, synonyms[i].name) == 0) return synonyms[i].dtype;
    return -1;
}

int rv_dtype_bytes(rv_dtype dtype)
{
    return dtype < RV_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

static void gpu_free(gpointer data)
{
    rv_gpu *gpu = data;
    g_free(gpu->id);
    g_free(gpu->name);
    g_free(gpu->vendor);
    g_free(gpu->note);
    if (gpu->aliases) g_ptr_array_unref(gpu->aliases);
    if (gpu->match) g_ptr_array_unref(gpu->match);
    if (gpu->sources) g_hash_table_destroy(gpu->sources);
    g_free(gpu);
}

/* ---- reading one entry ---------------------------------------------- */

typedef struct {
    const char *path;
    const char *id;   /* the entry being read, for messages */
    GError **error;
} reading;

static gboolean refuse(reading *r, const char *format, ...) G_GNUC_PRINTF(2, 3);
static gboolean refuse(reading *r, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *what = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(r->error, RV_ERROR, RV_ERROR_INPUT, "%s: GPU catalogue entry %s: %s", r->path,
                r->id ? r->id : "(no id)", what);
    g_free(what);
    return FALSE;
}

static gboolean read_figure(reading *r, json_t *value, const char *key, double scale, double *out)
{
    if (!json_is_number(value) || !isfinite(json_number_value(value)) || json_number_value(value) <= 0)
        return refuse(r, "'%s' must be a positive number", key);
    *out = json_number_value(value) * scale;
    return TRUE;
}

/* {"fp16": 125, ...} in TFLOP/s into per-dtype FLOP/s. */
static gboolean read_per_dtype(reading *r, json_t *object, const char *key, double *out)
{
    if (!json_is_object(object)) return refuse(r, "'%s' must be an object of dtype: TFLOP/s", key);
    const char *name;
    json_t *value;
    json_object_foreach(object, name, value) {
        int dtype = rv_dtype_from_name(name);
        if (dtype <= 0) return refuse(r, "'%s' names an unknown dtype '%s' (fp64, fp32, tf32, fp16, bf16, fp8, int8)", key, name);
        if (!read_figure(r, value, key, 1e12, &out[dtype])) return FALSE;
    }
    return TRUE;
}

static gboolean read_strings(reading *r, json_t *array, const char *key, GPtrArray **out)
{
    *out = g_ptr_array_new_with_free_func(g_free);
    if (array == NULL) return TRUE;
    if (!json_is_array(array)) return refuse(r, "'%s' must be a list of names", key);
    size_t i;
    json_t *item;
    json_array_foreach(array, i, item) {
        if (!json_is_string(item) || json_string_length(item) == 0) return refuse(r, "'%s' must hold non-empty names", key);
        g_ptr_array_add(*out, g_strdup(json_string_value(item)));
    }
    return TRUE;
}

static gboolean read_sources(reading *r, json_t *object, rv_gpu *gpu)
{
    gpu->sources = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    if (!json_is_object(object)) return refuse(r, "'sources' must be an object naming the document of each figure");
    const char *key;
    json_t *value;
    json_object_foreach(object, key, value) {
        if (!json_is_string(value) || json_string_length(value) == 0) return refuse(r, "source of '%s' must be text", key);
        g_hash_table_insert(gpu->sources, g_strdup(key), g_strdup(json_string_value(value)));
    }
    return TRUE;
}

/* The keys an entry may have: figures (which need a source) and the rest. */
static const char *const figure_keys[] = {
    "matrix_tflops", "vector_tflops", "achievable_matrix_tflops", "matrix_any_shape", "memory_GBps", "memory_GB",
    "sm_count", "sm_limits", "cache_MB", "link_GBps", "pcie_GBps", NULL };
static const char *const other_keys[] = { "id", "name", "vendor", "aliases", "match", "note", "sources", NULL };

static gboolean is_one_of(const char *key, const char *const *keys)
{
    for (; *keys; keys++)
        if (strcmp(key, *keys) == 0) return TRUE;
    return FALSE;
}

static gboolean check_keys(reading *r, json_t *entry, const rv_gpu *gpu)
{
    const char *key;
    json_t *value;
    json_object_foreach(entry, key, value) {
        if (is_one_of(key, figure_keys)) {
            if (!g_hash_table_contains(gpu->sources, key)) return refuse(r, "'%s' has no source (add it to 'sources')", key);
        } else if (!is_one_of(key, other_keys)) {
            return refuse(r, "unknown key '%s'", key);
        }
    }
    return TRUE;
}

static gboolean read_whole(reading *r, json_t *object, const char *key, int *out)
{
    json_t *value = json_object_get(object, key);
    if (!json_is_integer(value) || json_integer_value(value) <= 0 || json_integer_value(value) > 100000000)
        return refuse(r, "'sm_limits' needs '%s' as a positive whole number", key);
    *out = (int)json_integer_value(value);
    return TRUE;
}

/* {"threads": 2048, "blocks": 32, "registers": 65536, "shared_memory_KiB": 228, "warp_size": 32} */
static gboolean read_sm_limits(reading *r, json_t *entry, rv_gpu *gpu)
{
    json_t *limits = json_object_get(entry, "sm_limits");
    if (limits == NULL) return TRUE;
    static const char *const keys[] = { "threads", "blocks", "registers", "shared_memory_KiB", "warp_size", NULL };
    if (!json_is_object(limits)) return refuse(r, "'sm_limits' must be an object");
    const char *key;
    json_t *value;
    json_object_foreach(limits, key, value)
        if (!is_one_of(key, keys)) return refuse(r, "'sm_limits' has an unknown key '%s'", key);
    int shared_kib = 0;
    if (!read_whole(r, limits, "threads", &gpu->sm_max_threads) || !read_whole(r, limits, "blocks", &gpu->sm_max_blocks) ||
        !read_whole(r, limits, "registers", &gpu->sm_registers) ||
        !read_whole(r, limits, "shared_memory_KiB", &shared_kib) || !read_whole(r, limits, "warp_size", &gpu->warp_size))
        return FALSE;
    gpu->sm_shared_bytes = shared_kib * 1024;
    return TRUE;
}

static gboolean read_scalars(reading *r, json_t *entry, rv_gpu *gpu)
{
    json_t *value;
    if ((value = json_object_get(entry, "memory_GBps")) == NULL) return refuse(r, "'memory_GBps' is required");
    if (!read_figure(r, value, "memory_GBps", 1e9, &gpu->memory_Bps)) return FALSE;
    if ((value = json_object_get(entry, "memory_GB")) && !read_figure(r, value, "memory_GB", 1e9, &gpu->memory_bytes))
        return FALSE;
    if ((value = json_object_get(entry, "link_GBps")) && !read_figure(r, value, "link_GBps", 1e9, &gpu->link_Bps))
        return FALSE;
    if ((value = json_object_get(entry, "pcie_GBps")) == NULL) return refuse(r, "'pcie_GBps' is required");
    if (!read_figure(r, value, "pcie_GBps", 1e9, &gpu->pcie_Bps)) return FALSE;
    if ((value = json_object_get(entry, "sm_count")) != NULL) {
        if (!json_is_integer(value) || json_integer_value(value) <= 0 || json_integer_value(value) > 1000000)
            return refuse(r, "'sm_count' must be a positive whole number");
        gpu->sm_count = (int)json_integer_value(value);
    }
    if ((value = json_object_get(entry, "cache_MB")) && !read_figure(r, value, "cache_MB", 1e6, &gpu->cache_bytes))
        return FALSE;
    if (!read_sm_limits(r, entry, gpu)) return FALSE;
    if ((value = json_object_get(entry, "matrix_any_shape")) != NULL) {
        if (!json_is_boolean(value)) return refuse(r, "'matrix_any_shape' must be true or false");
        gpu->matrix_any_shape = json_is_true(value);
    }
    return TRUE;
}

static gboolean read_text(reading *r, json_t *entry, const char *key, gboolean required, char **out)
{
    json_t *value = json_object_get(entry, key);
    if (value == NULL && !required) return TRUE;
    if (!json_is_string(value) || json_string_length(value) == 0) return refuse(r, "'%s' must be non-empty text", key);
    *out = g_strdup(json_string_value(value));
    return TRUE;
}

static rv_gpu *read_entry(reading *r, json_t *entry)
{
    rv_gpu *gpu = g_new0(rv_gpu, 1);
    json_t *vector;
    gboolean ok = json_is_object(entry) || refuse(r, "not an object");
    ok = ok && read_text(r, entry, "id", TRUE, &gpu->id);
    if (ok) r->id = gpu->id;
    ok = ok && read_text(r, entry, "name", TRUE, &gpu->name) && read_text(r, entry, "vendor", TRUE, &gpu->vendor) &&
         read_text(r, entry, "note", FALSE, &gpu->note) &&
         read_strings(r, json_object_get(entry, "aliases"), "aliases", &gpu->aliases) &&
         read_strings(r, json_object_get(entry, "match"), "match", &gpu->match) &&
         read_sources(r, json_object_get(entry, "sources"), gpu) && check_keys(r, entry, gpu);
    ok = ok && ((vector = json_object_get(entry, "vector_tflops")) != NULL || refuse(r, "'vector_tflops' is required"));
    ok = ok && read_per_dtype(r, vector, "vector_tflops", gpu->vector_flops);
    ok = ok && (gpu->vector_flops[RV_DTYPE_FP32] > 0 || refuse(r, "'vector_tflops' needs an fp32 figure"));
    if (ok && json_object_get(entry, "matrix_tflops"))
        ok = read_per_dtype(r, json_object_get(entry, "matrix_tflops"), "matrix_tflops", gpu->matrix_flops);
    if (ok && json_object_get(entry, "achievable_matrix_tflops"))
        ok = read_per_dtype(r, json_object_get(entry, "achievable_matrix_tflops"), "achievable_matrix_tflops",
                            gpu->achievable_matrix_flops);
    ok = ok && read_scalars(r, entry, gpu);
    if (ok) return gpu;
    gpu_free(gpu);
    return NULL;
}

/* ---- names ---------------------------------------------------------- */

/* Lower case without '-', '_' and spaces: "H100-SXM" == "h100 sxm" == "H100_SXM". */
static char *name_key(const char *name)
{
    GString *key = g_string_new(NULL);
    for (const char *c = name; *c; c++)
        if (*c != '-' && *c != '_' && *c != ' ') g_string_append_c(key, g_ascii_tolower(*c));
    return g_string_free(key, FALSE);
}

static gboolean answers_to(const rv_gpu *gpu, const char *key)
{
    char *id = name_key(gpu->id);
    gboolean yes = strcmp(id, key) == 0;
    g_free(id);
    for (guint a = 0; !yes && a < gpu->aliases->len; a++) {
        char *alias = name_key(g_ptr_array_index(gpu->aliases, a));
        yes = strcmp(alias, key) == 0;
        g_free(alias);
    }
    return yes;
}

/* Two entries answering to one name would make a lookup depend on file order. */
static gboolean check_unique_names(const rv_gpu_catalogue *catalogue, GError **error)
{
    for (guint i = 0; i < catalogue->gpus->len; i++) {
        const rv_gpu *gpu = g_ptr_array_index(catalogue->gpus, i);
        GPtrArray *names = g_ptr_array_new();
        g_ptr_array_add(names, gpu->id);
        for (guint a = 0; a < gpu->aliases->len; a++) g_ptr_array_add(names, g_ptr_array_index(gpu->aliases, a));
        for (guint n = 0; n < names->len; n++) {
            char *key = name_key(g_ptr_array_index(names, n));
            for (guint j = 0; j < catalogue->gpus->len; j++) {
                const rv_gpu *other = g_ptr_array_index(catalogue->gpus, j);
                if (j == i || !answers_to(other, key)) continue;
                g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: GPU catalogue entries %s and %s both answer to '%s'",
                            catalogue->path, gpu->id, other->id, (char *)g_ptr_array_index(names, n));
                g_free(key);
                g_ptr_array_unref(names);
                return FALSE;
            }
            g_free(key);
        }
        g_ptr_array_unref(names);
    }
    return TRUE;
}

/* ---- loading -------------------------------------------------------- */

static gboolean read_catalogue(rv_gpu_catalogue *catalogue, json_t *root, GError **error)
{
    json_t *gpus = json_is_object(root) ? json_object_get(root, "gpus") : NULL;
    json_t *format = json_is_object(root) ? json_object_get(root, "format") : NULL;
    if (!json_is_string(format) || strcmp(json_string_value(format), "reverie-gpu-catalogue") != 0 ||
        !json_is_array(gpus) || json_array_size(gpus) == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s: not a GPU catalogue (expected {\"format\": \"reverie-gpu-catalogue\", \"gpus\": [...]})",
                    catalogue->path);
        return FALSE;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(gpus, i, entry) {
        reading r = { catalogue->path, NULL, error };
        rv_gpu *gpu = read_entry(&r, entry);
        if (gpu == NULL) return FALSE;
        g_ptr_array_add(catalogue->gpus, gpu);
    }
    return check_unique_names(catalogue, error);
}

rv_gpu_catalogue *rv_gpu_catalogue_load(const char *path, GError **error)
{
    rv_output_note_input(path); /* no output of this run may replace it */
    json_error_t parse_error;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &parse_error);
    if (root == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: cannot read the GPU catalogue: %s (line %d)", path,
                    parse_error.text, parse_error.line);
        return NULL;
    }
    rv_gpu_catalogue *catalogue = g_new0(rv_gpu_catalogue, 1);
    catalogue->path = g_strdup(path);
    catalogue->gpus = g_ptr_array_new_with_free_func(gpu_free);
    gboolean ok = read_catalogue(catalogue, root, error);
    json_decref(root);
    if (ok) return catalogue;
    rv_gpu_catalogue_free(catalogue);
    return NULL;
}

char *rv_data_file_path(const char *env, const char *name)
{
    const char *given = env ? g_getenv(env) : NULL;
    if (given && *given) return g_strdup(given);
    char *relative = g_build_filename("data", name, NULL);
    char *path = rv_build_tree_path(relative);
    g_free(relative);
    if (path == NULL) path = rv_beside_library_path(name);  /* a wheel keeps its data there (paths.h) */
    return path ? path : g_build_filename(REVERIE_DATA_DIR, name, NULL);
}

rv_gpu_catalogue *rv_gpu_catalogue_load_default(GError **error)
{
    char *path = rv_data_file_path("REVERIE_GPU_CATALOGUE", "gpus.json");
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load(path, error);
    g_free(path);
    return catalogue;
}

void rv_gpu_catalogue_free(rv_gpu_catalogue *catalogue)
{
    if (catalogue == NULL) return;
    g_ptr_array_unref(catalogue->gpus);
    g_free(catalogue->path);
    g_free(catalogue);
}

const char *rv_gpu_catalogue_path(const rv_gpu_catalogue *catalogue) { return catalogue->path; }
guint rv_gpu_catalogue_count(const rv_gpu_catalogue *catalogue) { return catalogue->gpus->len; }

const rv_gpu *rv_gpu_catalogue_get(const rv_gpu_catalogue *catalogue, guint index)
{
    return index < catalogue->gpus->len ? g_ptr_array_index(catalogue->gpus, index) : NULL;
}

char *rv_gpu_catalogue_known(const rv_gpu_catalogue *catalogue)
{
    GString *known = g_string_new(NULL);
    for (guint i = 0; i < catalogue->gpus->len; i++)
        g_string_append_printf(known, "%s%s", i ? ", " : "", ((rv_gpu *)g_ptr_array_index(catalogue->gpus, i))->id);
    return g_string_free(known, FALSE);
}

const rv_gpu *rv_gpu_find(const rv_gpu_catalogue *catalogue, const char *name, GError **error)
{
    char *key = name_key(name ? name : "");
    const rv_gpu *found = NULL;
    for (guint i = 0; found == NULL && *key && i < catalogue->gpus->len; i++)
        if (answers_to(g_ptr_array_index(catalogue->gpus, i), key)) found = g_ptr_array_index(catalogue->gpus, i);
    g_free(key);
    if (found == NULL) {
        char *known = rv_gpu_catalogue_known(catalogue);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "unknown GPU '%s' (known: %s)", name ? name : "", known);
        g_free(known);
    }
    return found;
}

const rv_gpu *rv_gpu_match_device(const rv_gpu_catalogue *catalogue, const char *device_name)
{
    if (device_name == NULL) return NULL;
    char *lower = g_ascii_strdown(device_name, -1);
    const rv_gpu *best = NULL;
    gsize best_length = 0;
    for (guint i = 0; i < catalogue->gpus->len; i++) {
        const rv_gpu *gpu = g_ptr_array_index(catalogue->gpus, i);
        for (guint m = 0; m < gpu->match->len; m++) {
            char *pattern = g_ascii_strdown(g_ptr_array_index(gpu->match, m), -1);
            gsize length = strlen(pattern);
            if (length > best_length && strstr(lower, pattern) != NULL) {
                best = gpu;
                best_length = length;
            }
            g_free(pattern);
        }
    }
    g_free(lower);
    return best;
}

const rv_gpu *rv_gpu_of_graph(const rv_gpu_catalogue *catalogue, const rv_graph *graph, const char *given,
                              const char *parameter, GError **error)
{
    if (given != NULL && *given != '\0') return rv_gpu_find(catalogue, given, error);
    const char *device = graph->device_names && graph->device_names->len > 0
                             ? g_ptr_array_index(graph->device_names, 0) : NULL;
    const rv_gpu *gpu = rv_gpu_match_device(catalogue, device);
    if (gpu != NULL) return gpu;
    char *known = rv_gpu_catalogue_known(catalogue);
    if (device == NULL)
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "the trace names no GPU (no deviceProperties): give %s=NAME (known: %s)", parameter, known);
    else
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "the trace's GPU \"%s\" is not in the catalogue: give %s=NAME (known: %s)", device, parameter, known);
    g_free(known);
    return NULL;
}

double rv_gpu_matrix_peak(const rv_gpu *gpu, rv_dtype dtype, gboolean achievable)
{
    if (dtype >= RV_DTYPE_COUNT) return 0;
    if (achievable && gpu->achievable_matrix_flops[dtype] > 0) return gpu->achievable_matrix_flops[dtype];
    /* MAMF tables measure bf16; fp16 runs on the same units at the same peak */
    if (achievable && dtype == RV_DTYPE_FP16 && gpu->achievable_matrix_flops[RV_DTYPE_BF16] > 0 &&
        gpu->matrix_flops[RV_DTYPE_FP16] == gpu->matrix_flops[RV_DTYPE_BF16])
        return gpu->achievable_matrix_flops[RV_DTYPE_BF16];
    return gpu->matrix_flops[dtype];
}

double rv_gpu_vector_peak(const rv_gpu *gpu, rv_dtype dtype)
{
    if (dtype < RV_DTYPE_COUNT && gpu->vector_flops[dtype] > 0) return gpu->vector_flops[dtype];
    return gpu->vector_flops[RV_DTYPE_FP32];
}
