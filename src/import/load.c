/*
 * load.c - a command's or a script's input, loaded (load.h): a trace or a
 * saved graph told apart by its first bytes, checked before it is handed
 * out; several, or a folder of them, as the ranks of one job.
 */
#include "reverie/load.h"
#include "reverie/checked.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/explain.h"
#include "reverie/input.h"
#include "reverie/job.h"
#include "reverie/store.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_load_options no_options = { { 0 }, NULL, NULL, NULL };

static uint64_t max_bytes(const rv_load_options *options)
{
    return options->import.max_bytes ? options->import.max_bytes : RV_IMPORT_DEFAULT_MAX_BYTES;
}

static rv_graph *load_trace(rv_input *input, const rv_load_options *options, GError **error)
{
    rv_trace *trace = rv_trace_load_input(input, NULL, &options->import, error);
    if (trace == NULL) return NULL;
    rv_graph *graph = rv_graph_build(trace, error);
    rv_trace_free(trace);
    return graph;
}

/* A saved graph is loaded whole: by path when it is a file, else read here. */
static rv_graph *load_saved_graph(rv_input *input, const char *path, const rv_load_options *options, GError **error)
{
    const char *name = rv_input_name(input);
    if (rv_input_is_regular(input) && strcmp(path, "-") != 0) {
        if ((uint64_t)rv_input_size(input) > max_bytes(options)) {
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %" G_GINT64_FORMAT " bytes, more than the limit of %"
                        G_GUINT64_FORMAT " (--max-bytes raises it)", name, rv_input_size(input), max_bytes(options));
            return NULL;
        }
        return rv_store_load(path, error);
    }
    GBytes *bytes = rv_input_read_all(input, max_bytes(options), error);
    if (bytes == NULL) return NULL;
    gsize length = 0;
    const guint8 *data = g_bytes_get_data(bytes, &length);
    rv_graph *graph = rv_store_load_buffer(data, length, name, error);
    g_bytes_unref(bytes);
    return graph;
}

/* A .rvg name promises a graph: say what the file is rather than fail as a bad trace. */
static void not_a_graph(rv_input *input, GError **error)
{
    const guint8 *head = NULL;
    gssize got = rv_input_peek(input, 512, &head, NULL);
    const char *what = got <= 0 ? "it is empty" : rv_describe_content(head, (gsize)got);
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: named .rvg but is not a reverie graph: %s",
                rv_input_name(input), what ? what : "it does not start with the graph magic number");
}

/* Told apart by content: the first 8 bytes of a saved graph are its magic. */
static rv_graph *load_input(rv_input *input, const char *path, const rv_load_options *options, GError **error)
{
    static const guint8 graph_magic[8] = { 'R', 'V', 'G', 'R', 'A', 'P', 'H', '\0' };
    const guint8 *head = NULL;
    gssize got = rv_input_peek(input, sizeof graph_magic, &head, error);
    if (got < 0) return NULL;
    if (got == (gssize)sizeof graph_magic && memcmp(head, graph_magic, sizeof graph_magic) == 0)
        return load_saved_graph(input, path, options, error);
    if (g_str_has_suffix(path, ".rvg")) {
        not_a_graph(input, error);
        return NULL;
    }
    return load_trace(input, options, error);
}

/* The simulator and the reports trust the graph; a trace of impossible
 * durations is refused here, as bad input.  (The store's loader validates
 * a saved graph in full, and the builder sorts a trace's graph for
 * cycles, so the sort is not repeated.) */
static gboolean check_loaded(rv_graph *graph, const char *name, GError **error)
{
    GError *invalid = NULL;
    if (!rv_graph_validate_except_cycles(graph, &invalid)) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: %s", name, invalid->message);
        g_error_free(invalid);
        return FALSE;
    }
    /* Reports print the source; a saved graph stores whatever path it was given. */
    if (rv_text_needs_escape(graph->source)) {
        char *escaped = rv_escape_text(graph->source);
        g_free(graph->source);
        graph->source = escaped;
    }
    return TRUE;
}

/* What the timing model assumed about the graph, as "SOURCE: note" lines. */
static void add_notes(const rv_graph *graph, GPtrArray *notes)
{
    if (notes == NULL) return;
    GPtrArray *found = rv_timing_notes(graph);
    for (guint i = 0; i < found->len; i++)
        g_ptr_array_add(notes, g_strdup_printf("%s: %s", graph->source, (const char *)g_ptr_array_index(found, i)));
    g_ptr_array_unref(found);
}

/* One input without its notes. */
static rv_graph *load_one(const char *path, const rv_load_options *options, GError **error)
{
    rv_input *input = rv_input_open(path, options->import.read_timeout_ms, error);
    if (input == NULL) return NULL;
    if (options->opened) options->opened(rv_input_name(input), options->opened_data);
    rv_graph *graph = load_input(input, path, options, error);
    if (graph != NULL && !check_loaded(graph, rv_input_name(input), error)) {
        rv_graph_free(graph);
        graph = NULL;
    }
    rv_input_close(input);
    return graph;
}

rv_graph *rv_load(const char *path, const rv_load_options *options, GError **error)
{
    if (options == NULL) options = &no_options;
    rv_graph *graph = load_one(path, options, error);
    if (graph) add_notes(graph, options->notes);
    return graph;
}

/* ---- several ranks of one job ---------------------------------------------- */

static gboolean is_rank_file(const char *name)
{
    return g_str_has_suffix(name, ".json") || g_str_has_suffix(name, ".json.gz") || g_str_has_suffix(name, ".rvg");
}

static gint by_file_name(gconstpointer left, gconstpointer right)
{
    char *a = g_utf8_collate_key_for_filename(*(char *const *)left, -1);
    char *b = g_utf8_collate_key_for_filename(*(char *const *)right, -1);
    gint order = strcmp(a, b);
    g_free(a);
    g_free(b);
    return order;
}

/* The traces and graphs in a folder, in natural order (rank2 before rank10). */
static GPtrArray *folder_inputs(const char *folder, GError **error)
{
    GDir *dir = g_dir_open(folder, 0, error);
    if (dir == NULL) return NULL;
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) {
        char *path = g_build_filename(folder, name, NULL);
        if (is_rank_file(name) && g_file_test(path, G_FILE_TEST_IS_REGULAR)) g_ptr_array_add(paths, path);
        else g_free(path);
    }
    g_dir_close(dir);
    g_ptr_array_sort(paths, by_file_name);
    if (paths->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: a folder with no .json, .json.gz or .rvg file in it", folder);
        g_ptr_array_unref(paths);
        return NULL;
    }
    return paths;
}

/* ---- ranks loaded side by side ---------------------------------------------- */

/*
 * Each rank is a file of its own, and one rank's JSON is often smaller than
 * one parse batch of the importer, so importing ranks one after another
 * leaves cores idle.  A thread pool loads up to one rank per processor at a
 * time.  Invariant: nothing is shared between two rank loads but the
 * caller's callbacks, which `lock` serializes (the caller wrote them for
 * one thread); the outcome (which rank's error is reported, the order of
 * the ranks) is the sequential one.
 */
typedef struct {
    const rv_load_options *caller;
    rv_load_options options;  /* the caller's, with the callbacks below */
    GMutex lock;
} rank_loads;

typedef struct {
    const char *path;
    rv_graph *graph;
    GError *error;
} rank_load;

static void opened_locked(const char *name, void *data)
{
    rank_loads *loads = data;
    g_mutex_lock(&loads->lock);
    loads->caller->opened(name, loads->caller->opened_data);
    g_mutex_unlock(&loads->lock);
}

static void progress_locked(uint64_t bytes, uint64_t events, void *data)
{
    rank_loads *loads = data;
    g_mutex_lock(&loads->lock);
    loads->caller->import.progress(bytes, events, loads->caller->import.progress_data);
    g_mutex_unlock(&loads->lock);
}

static void load_rank(gpointer data, gpointer user_data)
{
    rank_load *rank = data;
    rank->graph = load_one(rank->path, &((rank_loads *)user_data)->options, &rank->error);
}

/* Every path loaded, into ranks[i]; at most one load per processor at a time. */
static void load_side_by_side(GPtrArray *paths, const rv_load_options *options, rank_load *ranks)
{
    rank_loads loads = { options, *options, { 0 } };
    g_mutex_init(&loads.lock);
    if (options->opened) { loads.options.opened = opened_locked; loads.options.opened_data = &loads; }
    if (options->import.progress) { loads.options.import.progress = progress_locked; loads.options.import.progress_data = &loads; }
    guint threads = MIN(paths->len, MAX(g_get_num_processors(), 1));
    GThreadPool *pool = threads > 1 ? g_thread_pool_new(load_rank, &loads, (gint)threads, TRUE, NULL) : NULL;
    for (guint i = 0; i < paths->len; i++) {
        ranks[i] = (rank_load){ g_ptr_array_index(paths, i), NULL, NULL };
        if (pool == NULL || !g_thread_pool_push(pool, &ranks[i], NULL)) load_rank(&ranks[i], &loads);
    }
    if (pool) g_thread_pool_free(pool, FALSE, TRUE); /* waits for every load */
    g_mutex_clear(&loads.lock);
}

/* Each path loaded as one rank; a saved graph that holds a job already
 * cannot be a rank of another.  The first rank in order that fails is the
 * error. */
static GPtrArray *load_ranks(GPtrArray *paths, const rv_load_options *options, GError **error)
{
    rank_load *ranks = g_new0(rank_load, MAX(paths->len, 1));
    load_side_by_side(paths, options, ranks);
    GPtrArray *graphs = g_ptr_array_new_with_free_func((GDestroyNotify)rv_graph_free);
    for (guint i = 0; i < paths->len; i++) {
        rank_load *rank = &ranks[i];
        if (rank->graph != NULL && rank->graph->ranks->len > 1 && graphs != NULL) {
            g_set_error(&rank->error, RV_ERROR, RV_ERROR_INPUT, "%s holds a job of %u ranks already: give it alone",
                        rank->graph->source, rank->graph->ranks->len);
        }
        if (rank->graph == NULL && rank->error == NULL) /* never expected: a load that fails says why */
            g_set_error(&rank->error, RV_ERROR, RV_ERROR_INPUT, "%s: could not be loaded", rank->path);
        if (rank->error != NULL && graphs != NULL) {
            g_propagate_error(error, rank->error);
            rank->error = NULL;
            g_ptr_array_unref(graphs);
            graphs = NULL;
        }
        if (graphs != NULL) g_ptr_array_add(graphs, rank->graph);
        else if (rank->graph != NULL) rv_graph_free(rank->graph);
        g_clear_error(&rank->error);
    }
    g_free(ranks);
    return graphs;
}

/* What tells one recording from another: two ranks' traces never agree
 * to the nanosecond on all of these, and a trace and the graph imported
 * from it always do. */
typedef struct {
    int64_t tasks, edges, first_start_ns, duration_sum_ns;
} recording_key;

static recording_key key_of(const rv_graph *graph)
{
    recording_key key = { rv_graph_task_count(graph), graph->edges->len, 0, 0 };
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (t == 0) key.first_start_ns = task->recorded_start_ns;
        key.duration_sum_ns = rv_saturating_add(key.duration_sum_ns, task->duration_ns);
    }
    return key;
}

static guint key_hash(gconstpointer key)
{
    const recording_key *k = key;
    return g_int64_hash(&k->first_start_ns) ^ g_int64_hash(&k->duration_sum_ns) ^ (guint)k->tasks;
}

static gboolean key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(recording_key)) == 0;
}

/* A folder that holds a trace and the .rvg imported from it (import's
 * default output lands beside the trace) would otherwise become two ranks
 * of one recording, or "rank N is given twice" naming the same file. */
static gboolean check_distinct_recordings(GPtrArray *graphs, GPtrArray *paths, GError **error)
{
    recording_key *keys = g_new(recording_key, MAX(graphs->len, 1));
    GHashTable *seen = g_hash_table_new(key_hash, key_equal);
    gboolean ok = TRUE;
    for (guint i = 0; i < graphs->len && ok; i++) {
        const rv_graph *graph = g_ptr_array_index(graphs, i);
        keys[i] = key_of(graph);
        gpointer earlier = NULL;
        if (!g_hash_table_lookup_extended(seen, &keys[i], NULL, &earlier)) {
            g_hash_table_insert(seen, &keys[i], GUINT_TO_POINTER(i));
            continue;
        }
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                    "%s and %s hold one recording (the same tasks at the same times; a trace and the graph "
                    "imported from it?): give each rank once", (const char *)g_ptr_array_index(paths, GPOINTER_TO_UINT(earlier)),
                    (const char *)g_ptr_array_index(paths, i));
        ok = FALSE;
    }
    g_hash_table_destroy(seen);
    g_free(keys);
    return ok;
}

/* How reports name the job: the folder, or the first file and how many more. */
static char *job_name(char *const *paths, int count, gboolean folder)
{
    if (folder) return g_strdup(paths[0]);
    return g_strdup_printf("%s and %d more", paths[0], count - 1);
}

rv_graph *rv_load_job(char *const *paths, int count, const rv_load_options *options, GError **error)
{
    if (options == NULL) options = &no_options;
    gboolean folder = count == 1 && g_file_test(paths[0], G_FILE_TEST_IS_DIR);
    if (count == 1 && !folder) return rv_load(paths[0], options, error);
    GPtrArray *list = folder ? folder_inputs(paths[0], error) : g_ptr_array_new_with_free_func(g_free);
    if (list == NULL) return NULL;
    for (int i = 0; !folder && i < count; i++) g_ptr_array_add(list, g_strdup(paths[i]));
    GPtrArray *graphs = load_ranks(list, options, error);
    if (graphs != NULL && !check_distinct_recordings(graphs, list, error)) g_clear_pointer(&graphs, g_ptr_array_unref);
    g_ptr_array_unref(list);
    if (graphs == NULL) return NULL;
    char *name = job_name(paths, count, folder);
    /* The ranks' notes are taken before the join frees them, and given only
     * once the ranks are known to be one job: bad input gets its one line
     * and nothing else. */
    GPtrArray *rank_notes = options->notes ? g_ptr_array_new_with_free_func(g_free) : NULL;
    for (guint i = 0; i < graphs->len; i++) add_notes(g_ptr_array_index(graphs, i), rank_notes);
    rv_graph *joint = rv_job_join_freeing(graphs, name, error);
    if (joint != NULL && rank_notes != NULL) g_ptr_array_extend_and_steal(options->notes, g_steal_pointer(&rank_notes));
    if (rank_notes) g_ptr_array_unref(rank_notes);
    g_free(name);
    g_ptr_array_unref(graphs);
    return joint;
}
