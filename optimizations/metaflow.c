/*
 * metaflow.c - layer substitutions (MetaFlow, Jia et al., MLSys 2019) as
 * Daydream models them (appendix A.7, Algorithm 9): a substitution policy,
 * given as a rule file, removes layers, scales their dimensions, fuses a
 * chain of layers into one or merges parallel layers into one wider layer;
 * the kernels of the new layers are costed by the kernel cost model
 * (costmodel.h) instead of being profiled.
 *
 *   reverie whatif resnet.json.gz --opt metaflow:rules=conv-bn-relu
 *   reverie whatif sam.json.gz --opt metaflow:rules=qkv
 *   reverie whatif trace.json.gz --opt metaflow:rules=./my-rules.json
 *
 * RULE FILE.  JSON: {"description": TEXT (optional), "rules": [RULE, ...]},
 * applied in order, each to the graph the previous ones left.  A RULE:
 *   "name"     optional; the notes and errors use it ("rule N" otherwise)
 *   "action"   "fuse" | "merge-parallel" | "remove" | "scale:FACTOR"
 *   "match"    selection text (select.h, the syntax of `reverie query`):
 *              fuse: a list of 2 to 8, the chain in forward order;
 *              the others: one
 *   "skip"     fuse and merge-parallel: a list of selections of operators
 *              that may sit between the matched ones and stay as they are
 *              (BatchNorm's integer counter increment, name~<long>)
 *   "count"    merge-parallel: how many parallel operators make one merge
 *              (2 to 64; absent: every run of 2 or more)
 *   "backward" fuse: "keep" (default) or "fuse" (below)
 * A bundled rule file is named without a path: rules=conv-bn-relu reads
 * metaflow/conv-bn-relu.json beside the GPU catalogue (gpus.h says where
 * that is: the source or build tree's data/, or the installed share/reverie).
 *
 * OPERATORS.  The unit of matching is an operator instance: consecutive
 * kernels on one GPU stream, in one step and phase, with the same layer tag
 * and operator (a cuDNN convolution launches several kernels), up to a
 * GEMM or convolution kernel name the instance holds already (the trace
 * does not say which call launched a kernel, so three linear calls in a
 * row are told apart by their GEMM kernel coming again).  It matches a selection when one of
 * its kernels does.  Its main kernel is its longest.  "Forward" includes
 * the phase "other" of an inference trace, which has no backward.
 *
 * ACTIONS.
 *   fuse: instances matching the chain, one after another on a stream (the
 *     skip instances allowed between), become one layer: the first one's
 *     main kernel takes the place of the new kernel (its launch, stream slot
 *     and dependencies), and the others' kernels are removed with their
 *     launch calls (the host time before each launch is kept: the Python of
 *     the network does not change).  The new kernel does the first
 *     operator's work plus the fused operators' FLOPs; its bytes are the
 *     first operator's, because the intermediate tensors never reach memory
 *     (the epilogue works on registers).  Without shapes the first kernel
 *     keeps its time: the fused work is taken as free, as in Daydream's
 *     Algorithm 5.  backward=fuse also fuses each fused chain's backward:
 *     in each stream's step the runs of backward kernels of the first
 *     operator's kind (convolution backward) are paired, in reverse order,
 *     with its forward operators (Daydream's layer mapping); the backward
 *     of a fused one absorbs the fused operators' backward kernels just
 *     before it (batch-norm backward, ReLU backward), which are removed.
 *     A step where the counts differ keeps its backward.  By default the
 *     backward pass is kept, because a training-time fusion still has to compute the
 *     batch-norm and ReLU gradients (MetaFlow's conv+BN fusion folds the
 *     statistics into the weights, which only inference allows).
 *   merge-parallel: runs of adjacent forward instances matching "match"
 *     whose main kernels are GEMMs or convolutions with the same input
 *     tensor shape (MetaFlow's "enlarge and merge": Q/K/V projections,
 *     Inception branches) become one kernel of the summed output width:
 *     FLOPs summed, bytes summed less the shared input read again by each;
 *     the first instance's main kernel takes that cost (cost model), the
 *     others' kernels go with their launches.  The trace records no tensor
 *     identities, so equal shapes side by side are taken as one input.
 *     Needs Input Dims (record_shapes=True).  The backward pass is kept.
 *   remove: every GPU kernel, copy or set matching "match" goes with its
 *     launch (Algorithm 9's Remove_layer).
 *   scale:F: their work (FLOPs and bytes) times F on the cost model, the
 *     fixed cost of a launch kept (Algorithm 9's Scale_layer, which scales
 *     the whole duration).  scale:1 changes nothing.
 * A rule that finds nothing to substitute is an error naming it; a file
 * that is not such a list is one line naming the file, the position or the
 * rule and what is wrong.  An empty list changes nothing (the baseline).
 */
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/select.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

static const rv_param_spec metaflow_params[] = {
    { "rules", RV_PARAM_STRING, NULL, NULL,
      "the substitution rule file (JSON), or a bundled one by name: conv-bn-relu, conv-bn-relu-train, conv-relu, qkv", NULL },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { NULL }
};

#define MAX_CHAIN 8
#define MAX_MERGE 64

typedef enum { ACTION_FUSE, ACTION_MERGE, ACTION_REMOVE, ACTION_SCALE } action_kind;
static const char *const action_names[] = { "fuse", "merge-parallel", "remove", "scale" };

typedef struct {
    char *name;
    action_kind action;
    double factor;          /* scale */
    guint count;            /* merge-parallel: 0 = any run of 2 or more */
    gboolean backward;      /* fuse: the backward chain too */
    GPtrArray *match;       /* rv_selection*: the chain (fuse) or one */
    GPtrArray *skip;        /* rv_selection* */
} rule;

static void rule_free(gpointer data)
{
    rule *r = data;
    g_free(r->name);
    g_ptr_array_unref(r->match);
    g_ptr_array_unref(r->skip);
    g_free(r);
}

/* ---- the rule file ------------------------------------------------------ */

/* A usage error about a rule file, on one line whatever the file holds:
 * names, keys and jansson's excerpts are escaped (escape.h). */
#define set_file_error(error, ...) rv_set_escaped_error((error), RV_ERROR_USAGE, __VA_ARGS__)

/* "FILE: rule N ("name"): " for messages (g_free). */
static char *rule_where(const char *path, guint index, const rule *r)
{
    return r->name ? g_strdup_printf("%s: rule %u (\"%s\")", path, index + 1, r->name)
                   : g_strdup_printf("%s: rule %u", path, index + 1);
}

static gboolean fail_rule(const char *path, guint index, const rule *r, GError **error, const char *format, ...)
    G_GNUC_PRINTF(5, 6);
static gboolean fail_rule(const char *path, guint index, const rule *r, GError **error, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *what = g_strdup_vprintf(format, args);
    va_end(args);
    char *where = rule_where(path, index, r);
    set_file_error(error, "%s: %s", where, what);
    g_free(where);
    g_free(what);
    return FALSE;
}

/* One selection text into list; the selection's own message says what is wrong. */
static gboolean add_selection(GPtrArray *list, json_t *value, const char *key, const char *path, guint index, const rule *r,
                              GError **error)
{
    if (!json_is_string(value)) return fail_rule(path, index, r, error, "\"%s\" must hold selection strings", key);
    GError *bad = NULL;
    rv_selection *sel = rv_selection_parse(json_string_value(value), &bad);
    if (sel == NULL) {
        fail_rule(path, index, r, error, "\"%s\": %s", key, bad->message);
        g_error_free(bad);
        return FALSE;
    }
    g_ptr_array_add(list, sel);
    return TRUE;
}

static gboolean read_selections(GPtrArray *list, json_t *value, const char *key, guint least, guint most, const char *path,
                                guint index, const rule *r, GError **error)
{
    if (!json_is_array(value)) return add_selection(list, value, key, path, index, r, error);
    if (json_array_size(value) < least || json_array_size(value) > most)
        return fail_rule(path, index, r, error, "\"%s\" must list %u to %u selections, not %zu", key, least, most,
                         json_array_size(value));
    size_t i;
    json_t *item;
    json_array_foreach(value, i, item) if (!add_selection(list, item, key, path, index, r, error)) return FALSE;
    return TRUE;
}

static gboolean read_action(rule *r, json_t *value, const char *path, guint index, GError **error)
{
    const char *text = json_is_string(value) ? json_string_value(value) : NULL;
    if (text && strcmp(text, "fuse") == 0) r->action = ACTION_FUSE;
    else if (text && strcmp(text, "merge-parallel") == 0) r->action = ACTION_MERGE;
    else if (text && strcmp(text, "remove") == 0) r->action = ACTION_REMOVE;
    else if (text && g_str_has_prefix(text, "scale:")) {
        r->action = ACTION_SCALE;
        if (!rv_parse_number(text + 6, &r->factor, NULL) || !(r->factor > 0 && r->factor <= 1e4))
            return fail_rule(path, index, r, error, "\"%s\": the factor must be a number in (0, 10000]", text);
    } else {
        return fail_rule(path, index, r, error, "\"action\" must be \"fuse\", \"merge-parallel\", \"remove\" or \"scale:FACTOR\"%s%s",
                         text ? ", not " : "", text ? text : "");
    }
    return TRUE;
}

/* The keys a rule may have, and which action each belongs to. */
static gboolean check_keys(const rule *r, json_t *object, const char *path, guint index, GError **error)
{
    const char *key;
    json_t *value;
    json_object_foreach(object, key, value) {
        gboolean known = strcmp(key, "name") == 0 || strcmp(key, "action") == 0 || strcmp(key, "match") == 0 ||
                         strcmp(key, "skip") == 0 || strcmp(key, "count") == 0 || strcmp(key, "backward") == 0;
        if (!known)
            return fail_rule(path, index, r, error, "unknown key \"%s\" (a rule has name, action, match, skip, count, backward)",
                             key);
        if ((strcmp(key, "skip") == 0 && r->action != ACTION_FUSE && r->action != ACTION_MERGE) ||
            (strcmp(key, "count") == 0 && r->action != ACTION_MERGE) || (strcmp(key, "backward") == 0 && r->action != ACTION_FUSE))
            return fail_rule(path, index, r, error, "\"%s\" does not apply to action %s", key, action_names[r->action]);
    }
    return TRUE;
}

static gboolean read_options(rule *r, json_t *object, const char *path, guint index, GError **error)
{
    json_t *count = json_object_get(object, "count"), *backward = json_object_get(object, "backward");
    if (count) {
        json_int_t n = json_is_integer(count) ? json_integer_value(count) : 0;
        if (n < 2 || n > MAX_MERGE) return fail_rule(path, index, r, error, "\"count\" must be an integer from 2 to %d", MAX_MERGE);
        r->count = (guint)n;
    }
    if (backward) {
        const char *text = json_is_string(backward) ? json_string_value(backward) : "";
        if (strcmp(text, "fuse") != 0 && strcmp(text, "keep") != 0)
            return fail_rule(path, index, r, error, "\"backward\" must be \"keep\" or \"fuse\"");
        r->backward = strcmp(text, "fuse") == 0;
    }
    json_t *skip = json_object_get(object, "skip");
    return skip == NULL || read_selections(r->skip, skip, "skip", 1, MAX_CHAIN, path, index, r, error);
}

static rule *read_rule(json_t *object, const char *path, guint index, GError **error)
{
    rule *r = g_new0(rule, 1);
    r->match = g_ptr_array_new_with_free_func((GDestroyNotify)rv_selection_free);
    r->skip = g_ptr_array_new_with_free_func((GDestroyNotify)rv_selection_free);
    gboolean ok = json_is_object(object) || fail_rule(path, index, r, error, "not an object");
    json_t *name = ok ? json_object_get(object, "name") : NULL;
    if (ok && name) {
        ok = json_is_string(name) || fail_rule(path, index, r, error, "\"name\" must be a string");
        if (ok) r->name = g_strdup(json_string_value(name));
    }
    json_t *action = ok ? json_object_get(object, "action") : NULL, *match = ok ? json_object_get(object, "match") : NULL;
    ok = ok && (action != NULL || fail_rule(path, index, r, error, "no \"action\""));
    ok = ok && (match != NULL || fail_rule(path, index, r, error, "no \"match\""));
    ok = ok && read_action(r, action, path, index, error) && check_keys(r, object, path, index, error);
    if (ok && r->action == ACTION_FUSE && !json_is_array(match))
        ok = fail_rule(path, index, r, error, "fuse needs \"match\" to list the chain of 2 to %d operators", MAX_CHAIN);
    if (ok && r->action != ACTION_FUSE && json_is_array(match))
        ok = fail_rule(path, index, r, error, "%s needs \"match\" to be one selection", action_names[r->action]);
    ok = ok && read_selections(r->match, match, "match", 2, MAX_CHAIN, path, index, r, error) &&
         read_options(r, object, path, index, error);
    if (ok) return r;
    rule_free(r);
    return NULL;
}

/* rules=NAME (no '/' and no .json): the bundled file beside the catalogue. */
static char *rules_path(const char *given, const rv_gpu_catalogue *catalogue)
{
    if (strchr(given, '/') || g_str_has_suffix(given, ".json")) return g_strdup(given);
    char *folder = g_path_get_dirname(rv_gpu_catalogue_path(catalogue));
    char *file = g_strconcat(given, ".json", NULL);
    char *path = g_build_filename(folder, "metaflow", file, NULL);
    g_free(folder);
    g_free(file);
    return path;
}

static gint by_name(gconstpointer a, gconstpointer b) { return g_strcmp0(*(char *const *)a, *(char *const *)b); }

/* "conv-bn-relu, qkv": the bundled rule names in path's folder (g_free). */
static char *bundled_names(const char *path)
{
    char *folder = g_path_get_dirname(path);
    GDir *dir = g_dir_open(folder, 0, NULL);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *file;
    while (dir && (file = g_dir_read_name(dir)) != NULL)
        if (g_str_has_suffix(file, ".json")) g_ptr_array_add(names, g_strndup(file, strlen(file) - 5));
    if (dir) g_dir_close(dir);
    g_free(folder);
    g_ptr_array_sort(names, by_name);
    g_ptr_array_add(names, NULL);
    char *list = names->len > 1 ? g_strjoinv(", ", (char **)names->pdata) : g_strdup("none found");
    g_ptr_array_unref(names);
    return list;
}

static json_t *load_rules_json(const char *given, const char *path, GError **error)
{
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        gboolean bundled = strcmp(given, path) != 0;
        char *known = bundled ? bundled_names(path) : NULL;
        set_file_error(error, "rules=%s: %s%s%s", given,
                    bundled ? "no bundled rule file of that name (bundled: " : "no such file", known ? known : "",
                    bundled ? ")" : "");
        g_free(known);
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        set_file_error(error, "%s: line %d, column %d: %s", path, jerr.line, jerr.column, jerr.text);
    return root;
}

static gboolean top_keys_known(json_t *root, const char *path, GError **error)
{
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (strcmp(key, "rules") == 0 || strcmp(key, "description") == 0) continue;
        set_file_error(error, "%s: unknown top-level key \"%s\" (a rule file has rules, description)", path, key);
        return FALSE;
    }
    return TRUE;
}

/* The rules of a file (rule*), or NULL with one line saying what is wrong. */
static GPtrArray *read_rules(const char *given, const char *path, GError **error)
{
    json_t *root = load_rules_json(given, path, error);
    if (root == NULL) return NULL;
    json_t *list = json_is_object(root) ? json_object_get(root, "rules") : NULL;
    gboolean ok = json_is_array(list) && top_keys_known(root, path, error);
    if (!json_is_array(list))
        set_file_error(error, "%s: not a rule file: the top level must be an object with a \"rules\" list", path);
    GPtrArray *rules = g_ptr_array_new_with_free_func(rule_free);
    for (size_t i = 0; ok && i < json_array_size(list); i++) {
        rule *r = read_rule(json_array_get(list, i), path, (guint)i, error);
        ok = r != NULL;
        if (ok) g_ptr_array_add(rules, r);
    }
    json_decref(root);
    if (ok) return rules;
    g_ptr_array_unref(rules);
    return NULL;
}

/* ---- operator instances ------------------------------------------------- */

typedef struct {
    guint first, count;   /* positions in the stream-ordered kernel list */
    int32_t main;         /* the longest kernel */
    int32_t resource, step;
    uint8_t phase;
} instance;

typedef struct {
    rv_graph *graph;
    GArray *kernels;      /* int32 task ids, by stream then recorded order */
    GArray *instances;    /* instance */
} operators;

static gboolean is_live_kernel(const rv_task *task)
{
    return !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) && (task->flags & RV_TASK_FLAG_GPU) &&
           task->kind == RV_TASK_KERNEL && task->collective == 0;
}

/* The live kernels, by stream then recorded order: gathered per stream,
 * each stream's list put in recorded order (rv_tasks_sort_recorded: one
 * pass where, as usual, ids already follow it), then the streams in
 * resource order.  The order is total, so this is the one a single sort
 * by (stream, recorded order) would give, without its n log n compares. */
static void kernels_by_stream(GArray *kernels, const rv_graph *graph)
{
    GPtrArray *streams = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (!is_live_kernel(task)) continue;
        while (streams->len <= (guint)task->resource) g_ptr_array_add(streams, g_array_new(FALSE, FALSE, sizeof(int32_t)));
        g_array_append_val(g_ptr_array_index(streams, task->resource), id);
    }
    for (guint r = 0; r < streams->len; r++) {
        GArray *stream = g_ptr_array_index(streams, r);
        rv_tasks_sort_recorded(graph, stream);
        g_array_append_vals(kernels, stream->data, stream->len);
    }
    g_ptr_array_unref(streams);
}


static gboolean same_operator(const rv_task *a, const rv_task *b)
{
    return a->resource == b->resource && a->step == b->step && a->phase == b->phase && a->layer == b->layer && a->op == b->op;
}

/* Does the instance hold a GEMM or convolution kernel of this name?  Then
 * the task starts the next call of the same operator (Q, K and V
 * projections side by side); an operator launches its math kernel once,
 * while layout transforms may come twice (cuDNN's nchwToNhwc). */
static gboolean launched_already(const operators *ops, const instance *in, const rv_task *task)
{
    gboolean repeated = FALSE;
    for (guint k = 0; k < in->count && !repeated; k++)
        repeated = rv_graph_task(ops->graph, g_array_index(ops->kernels, int32_t, in->first + k))->name == task->name;
    const rv_strings *strings = ops->graph->strings;
    return repeated && rv_cost_class_is_matmul(rv_cost_classify_name(rv_strings_get(strings, task->name),
                                                                     task->op > 0 ? rv_strings_get(strings, task->op) : NULL,
                                                                     (rv_task_kind)task->kind));
}

static void operators_init(operators *ops, rv_graph *graph)
{
    ops->graph = graph;
    ops->kernels = g_array_new(FALSE, FALSE, sizeof(int32_t));
    ops->instances = g_array_new(FALSE, FALSE, sizeof(instance));
    kernels_by_stream(ops->kernels, graph);
    for (guint i = 0; i < ops->kernels->len; i++) {
        const rv_task *task = rv_graph_task(graph, g_array_index(ops->kernels, int32_t, i));
        instance *last = ops->instances->len ? &g_array_index(ops->instances, instance, ops->instances->len - 1) : NULL;
        if (last && same_operator(rv_graph_task(graph, last->main), task) && !launched_already(ops, last, task)) {
            last->count++;
            if (task->duration_ns > rv_graph_task(graph, last->main)->duration_ns) last->main = g_array_index(ops->kernels, int32_t, i);
            continue;
        }
        instance next = { i, 1, g_array_index(ops->kernels, int32_t, i), task->resource, task->step, task->phase };
        g_array_append_val(ops->instances, next);
    }
}

static void operators_clear(operators *ops)
{
    g_array_unref(ops->kernels);
    g_array_unref(ops->instances);
}

static const instance *instance_at(const operators *ops, guint i) { return &g_array_index(ops->instances, instance, i); }

/* Which tasks a selection picks, as a byte per task. */
static guint8 *selection_mask(const rv_graph *graph, const rv_selection *sel)
{
    guint8 *mask = g_new0(guint8, rv_graph_task_count(graph) + 1);
    GArray *picked = rv_select(graph, sel);
    for (guint i = 0; i < picked->len; i++) mask[g_array_index(picked, int32_t, i)] = 1;
    g_array_unref(picked);
    return mask;
}

static gboolean instance_matches(const operators *ops, const instance *in, const guint8 *mask)
{
    for (guint k = 0; k < in->count; k++)
        if (mask[g_array_index(ops->kernels, int32_t, in->first + k)]) return TRUE;
    return FALSE;
}

/* ---- what a rule found -------------------------------------------------- */

/* One rule's matches: the kernels to re-cost with their new work, and those to remove. */
typedef struct {
    GHashTable *recost;   /* task + 1 -> work_change* */
    GArray *removed;      /* int32 kernel ids */
    guint forward, backward, unshaped_runs;
    guint unpaired;       /* fuse backward: stream-steps whose backward runs did not pair with the forward operators */
    int64_t before_ns;    /* recorded time of the kernels replaced (re-costed and removed) */
} findings;

typedef struct {
    double flops, bytes;  /* factors on the cost model */
} work_change;

static void findings_init(findings *f)
{
    memset(f, 0, sizeof *f);
    f->recost = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    f->removed = g_array_new(FALSE, FALSE, sizeof(int32_t));
}

static void findings_clear(findings *f)
{
    g_hash_table_destroy(f->recost);
    g_array_unref(f->removed);
}

static void recost(findings *f, const rv_graph *graph, int32_t task, double flops, double bytes)
{
    work_change *change = g_new(work_change, 1);
    *change = (work_change){ flops, bytes };
    g_hash_table_replace(f->recost, GINT_TO_POINTER(task + 1), change);
    f->before_ns += g_array_index(graph->tasks, rv_task, task).duration_ns;
}

static void remove_instance(findings *f, const operators *ops, const instance *in)
{
    for (guint k = 0; k < in->count; k++) {
        int32_t id = g_array_index(ops->kernels, int32_t, in->first + k);
        g_array_append_val(f->removed, id);
        f->before_ns += rv_graph_task(ops->graph, id)->duration_ns;
    }
}

/* ---- fuse --------------------------------------------------------------- */

typedef struct {
    const operators *ops;
    guint8 *chain[MAX_CHAIN];
    guint length;
    GPtrArray *skips;     /* guint8* masks */
    const rv_cost_model *model;
} matcher;

static gboolean same_stream_and_step(const instance *a, const instance *b)
{
    return a->resource == b->resource && a->step == b->step;
}

static gboolean skippable(const matcher *m, const instance *in)
{
    for (guint s = 0; s < m->skips->len; s++)
        if (instance_matches(m->ops, in, g_ptr_array_index(m->skips, s))) return TRUE;
    return FALSE;
}

/* The nearest instance from `from` in direction dir (+1: later, -1:
 * earlier) on its stream in its step and phase matching `mask`, with only
 * instances the skip list passes over between; -1 if there is none. */
static gint64 nearest_match(const matcher *m, guint from, int dir, const guint8 *mask)
{
    const instance *start = instance_at(m->ops, from);
    for (gint64 j = (gint64)from + dir; j >= 0 && j < (gint64)m->ops->instances->len; j += dir) {
        const instance *in = instance_at(m->ops, (guint)j);
        if (!same_stream_and_step(in, start)) return -1;
        if (in->phase == start->phase && instance_matches(m->ops, in, mask)) return j;
        if (!skippable(m, in)) return -1; /* of any phase: legacy traces tag AccumulateGrad forward */
    }
    return -1;
}

/* The chain from instance i: forward, each operator after the previous one
 * (dir +1); or backward from the first operator's backward, each fused
 * operator's backward before the previous one (dir -1). */
static gboolean chain_at(const matcher *m, guint i, int dir, guint *members)
{
    members[0] = i;
    for (guint k = 1; k < m->length; k++) {
        gint64 j = nearest_match(m, members[k - 1], dir, m->chain[k]);
        if (j < 0) return FALSE;
        members[k] = (guint)j;
    }
    return TRUE;
}

/* The fused kernel: the first operator's work plus the others' FLOPs. */
static void fuse_members(findings *f, const matcher *m, const guint *members)
{
    const instance *anchor = instance_at(m->ops, members[0]);
    const rv_kernel_cost *cost = rv_cost_model_kernel(m->model, anchor->main);
    double added = 0;
    for (guint k = 1; k < m->length; k++) {
        const instance *in = instance_at(m->ops, members[k]);
        const rv_kernel_cost *fused = rv_cost_model_kernel(m->model, in->main);
        if (fused && fused->shaped) added += fused->flops;
        remove_instance(f, m->ops, in);
    }
    gboolean shaped = cost && cost->shaped && cost->flops > 0;
    recost(f, m->ops->graph, anchor->main, shaped ? 1 + added / cost->flops : 1, 1);
}

/* The forward pass, or a trace of inference (no backward: phase "other"). */
static gboolean in_forward(const instance *in) { return in->phase == RV_PHASE_FORWARD || in->phase == RV_PHASE_OTHER; }

/* Forward chains; anchored[i] marks the instances that became fused kernels. */
static void find_forward_chains(findings *f, const matcher *m, guint8 *anchored)
{
    guint members[MAX_CHAIN];
    for (guint i = 0; i < m->ops->instances->len; i++) {
        const instance *in = instance_at(m->ops, i);
        if (!in_forward(in) || !instance_matches(m->ops, in, m->chain[0]) || !chain_at(m, i, +1, members)) continue;
        fuse_members(f, m, members);
        anchored[i] = 1;
        f->forward++;
        i = members[m->length - 1];
    }
}

/* In one stream's step (instances begin..end): the forward operators of the
 * chain's first kind, and the runs of their backward kernels, which come in
 * reverse order (Daydream's layer mapping).  Where they pair one to one,
 * each fused forward operator's backward fuses with the fused operators'
 * backward kernels before it; elsewhere the backward pass is kept. */
static void fuse_backward_of_step(findings *f, const matcher *m, const guint8 *anchored, guint begin, guint end)
{
    GArray *forward = g_array_new(FALSE, FALSE, sizeof(guint8)), *runs = g_array_new(FALSE, FALSE, sizeof(guint));
    gboolean in_run = FALSE, any = FALSE;
    for (guint i = begin; i < end; i++) {
        const instance *in = instance_at(m->ops, i);
        gboolean head = instance_matches(m->ops, in, m->chain[0]);
        if (head && in_forward(in)) g_array_append_val(forward, anchored[i]);
        any = any || anchored[i];
        if (in->phase != RV_PHASE_BACKWARD) continue;
        if (head && !in_run) g_array_append_val(runs, i);
        if (head) in_run = TRUE;
        for (guint k = 1; k < m->length && !head; k++) in_run = in_run && !instance_matches(m->ops, in, m->chain[k]);
    }
    guint members[MAX_CHAIN];
    if (any && forward->len != runs->len) f->unpaired++;
    for (guint k = 0; any && forward->len == runs->len && k < forward->len; k++) {
        if (!g_array_index(forward, guint8, k)) continue;
        if (!chain_at(m, g_array_index(runs, guint, runs->len - 1 - k), -1, members)) continue;
        fuse_members(f, m, members);
        f->backward++;
    }
    g_array_unref(forward);
    g_array_unref(runs);
}

static void find_chains(findings *f, const matcher *m, gboolean backward)
{
    guint count = m->ops->instances->len;
    guint8 *anchored = g_new0(guint8, count + 1);
    find_forward_chains(f, m, anchored);
    for (guint begin = 0, end; backward && begin < count; begin = end) {
        for (end = begin + 1; end < count && same_stream_and_step(instance_at(m->ops, end), instance_at(m->ops, begin)); end++) {}
        fuse_backward_of_step(f, m, anchored, begin, end);
    }
    g_free(anchored);
}

/* ---- merge-parallel ----------------------------------------------------- */

/* The input every parallel operator reads: X of addmm(bias, X, W), else the first. */
static guint activation_input(const rv_shapes *s)
{
    gboolean addmm = rv_shapes_count(s) >= 3 && rv_shapes_rank(s, 1) == 2 && rv_shapes_rank(s, 2) == 2 &&
                     rv_shapes_extent(s, 1, 1) == rv_shapes_extent(s, 2, 0);
    return addmm ? 1 : 0;
}

static gboolean same_tensor(const rv_shapes *a, guint i, const rv_shapes *b, guint j)
{
    if (rv_shapes_rank(a, i) != rv_shapes_rank(b, j) || rv_shapes_rank(a, i) == 0) return FALSE;
    for (guint d = 0; d < rv_shapes_rank(a, i); d++)
        if (rv_shapes_extent(a, i, d) != rv_shapes_extent(b, j, d)) return FALSE;
    return TRUE;
}

/* Can b's main kernel merge with a's: the same class of shaped GEMM or conv, the same input? */
static gboolean mergeable(const matcher *m, const instance *a, const instance *b)
{
    const rv_kernel_cost *x = rv_cost_model_kernel(m->model, a->main), *y = rv_cost_model_kernel(m->model, b->main);
    if (!x || !y || x->cls != y->cls || (x->cls != RV_COST_GEMM && x->cls != RV_COST_CONV) || !x->shaped || !y->shaped) return FALSE;
    rv_shapes sa, sb;
    gboolean same = rv_shapes_of_task(m->ops->graph, a->main, &sa) && rv_shapes_of_task(m->ops->graph, b->main, &sb) &&
                    same_tensor(&sa, activation_input(&sa), &sb, activation_input(&sb));
    rv_shapes_clear(&sa);
    rv_shapes_clear(&sb);
    return same;
}

/* Bytes of the shared input of an instance's main kernel. */
static double input_bytes(const matcher *m, const instance *in)
{
    const rv_kernel_cost *cost = rv_cost_model_kernel(m->model, in->main);
    rv_shapes s;
    double elements = rv_shapes_of_task(m->ops->graph, in->main, &s) ? (double)rv_shapes_elements(&s, activation_input(&s)) : 0;
    rv_shapes_clear(&s);
    int element = rv_dtype_bytes((rv_dtype)cost->dtype);
    return elements * (element > 0 ? element : 4);
}

static void merge_members(findings *f, const matcher *m, const guint *members, guint n)
{
    const instance *anchor = instance_at(m->ops, members[0]);
    const rv_kernel_cost *cost = rv_cost_model_kernel(m->model, anchor->main);
    double flops = 0, bytes = 0;
    for (guint k = 0; k < n; k++) {
        const rv_kernel_cost *part = rv_cost_model_kernel(m->model, instance_at(m->ops, members[k])->main);
        flops += part->flops;
        bytes += part->bytes;
        if (k > 0) remove_instance(f, m->ops, instance_at(m->ops, members[k]));
    }
    bytes -= (n - 1) * input_bytes(m, anchor);
    recost(f, m->ops->graph, anchor->main, flops / cost->flops, bytes / cost->bytes);
    f->forward++;
}

/* A run of parallel operators from i: as long as allowed, at least 2. */
static guint parallel_run(const matcher *m, guint i, guint count, guint *members, gboolean *unshaped)
{
    guint n = 1, most = count ? count : MAX_MERGE;
    members[0] = i;
    while (n < most) {
        gint64 j = nearest_match(m, members[n - 1], +1, m->chain[0]);
        if (j < 0) break;
        if (!mergeable(m, instance_at(m->ops, i), instance_at(m->ops, (guint)j))) {
            const rv_kernel_cost *cost = rv_cost_model_kernel(m->model, instance_at(m->ops, (guint)j)->main);
            *unshaped = *unshaped || (cost && !cost->shaped);
            break;
        }
        members[n++] = (guint)j;
    }
    return n >= (count ? count : 2) ? n : 0;
}

static void find_parallel(findings *f, const matcher *m, guint count)
{
    guint members[MAX_MERGE];
    for (guint i = 0; i < m->ops->instances->len; i++) {
        const instance *in = instance_at(m->ops, i);
        if (!in_forward(in) || !instance_matches(m->ops, in, m->chain[0])) continue;
        gboolean unshaped = FALSE;
        guint n = parallel_run(m, i, count, members, &unshaped);
        if (unshaped) f->unshaped_runs++;
        if (n == 0) continue;
        merge_members(f, m, members, n);
        i = members[n - 1];
    }
}

/* ---- remove and scale --------------------------------------------------- */

static gboolean is_layer_task(const rv_task *task)
{
    return !(task->flags & (RV_TASK_FLAG_REMOVED | RV_TASK_FLAG_RENDEZVOUS)) && (task->flags & RV_TASK_FLAG_GPU) &&
           task->collective == 0 && (task->kind == RV_TASK_KERNEL || task->kind == RV_TASK_MEMCPY || task->kind == RV_TASK_MEMSET);
}

static void find_layer_tasks(findings *f, rv_graph *graph, const rule *r)
{
    GArray *picked = rv_select(graph, g_ptr_array_index(r->match, 0));
    for (guint i = 0; i < picked->len; i++) {
        int32_t id = g_array_index(picked, int32_t, i);
        const rv_task *task = rv_graph_task(graph, id);
        if (!is_layer_task(task)) continue;
        if (task->phase == RV_PHASE_BACKWARD) f->backward++;
        else f->forward++;
        if (r->action == ACTION_SCALE) {
            if (r->factor != 1) recost(f, graph, id, r->factor, r->factor);
        } else {
            g_array_append_val(f->removed, id);
            f->before_ns += task->duration_ns;
        }
    }
    g_array_unref(picked);
}

/* ---- applying a rule ---------------------------------------------------- */

static gboolean planned_change(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                               gpointer data)
{
    (void)graph;
    (void)cost;
    const work_change *work = g_hash_table_lookup(data, GINT_TO_POINTER(task + 1));
    if (work == NULL) return FALSE;
    if (work->flops == 1 && work->bytes == 1) return FALSE; /* unshaped fused anchors keep their time */
    change->flops_factor = work->flops;
    change->bytes_factor = work->bytes;
    return TRUE;
}

static void matcher_init(matcher *m, const operators *ops, const rule *r, const rv_cost_model *model)
{
    memset(m, 0, sizeof *m);
    m->ops = ops;
    m->model = model;
    m->length = r->match->len;
    for (guint k = 0; k < m->length; k++) m->chain[k] = selection_mask(ops->graph, g_ptr_array_index(r->match, k));
    m->skips = g_ptr_array_new_with_free_func(g_free);
    for (guint s = 0; s < r->skip->len; s++) g_ptr_array_add(m->skips, selection_mask(ops->graph, g_ptr_array_index(r->skip, s)));
}

static void matcher_clear(matcher *m)
{
    for (guint k = 0; k < m->length; k++) g_free(m->chain[k]);
    g_ptr_array_unref(m->skips);
}

static void find(findings *f, rv_graph *graph, const rule *r, const rv_cost_model *model)
{
    if (r->action == ACTION_REMOVE || r->action == ACTION_SCALE) {
        find_layer_tasks(f, graph, r);
        return;
    }
    operators ops;
    operators_init(&ops, graph);
    matcher m;
    matcher_init(&m, &ops, r, model);
    if (r->action == ACTION_MERGE) {
        find_parallel(f, &m, r->count);
    } else {
        find_chains(f, &m, r->backward);
    }
    matcher_clear(&m);
    operators_clear(&ops);
}

static int64_t recosted_ns(const rv_graph *graph, const findings *f)
{
    int64_t total = 0;
    GHashTableIter iter;
    gpointer key;
    g_hash_table_iter_init(&iter, f->recost);
    while (g_hash_table_iter_next(&iter, &key, NULL)) total += g_array_index(graph->tasks, rv_task, GPOINTER_TO_INT(key) - 1).duration_ns;
    return total;
}

static void describe(GString *notes, const rule *r, guint index, const findings *f, int removed_tasks, guint recosted,
                     int64_t after_ns)
{
    g_string_append_printf(notes, "    rule %u%s%s (%s", index + 1, r->name ? " " : "", r->name ? r->name : "",
                           action_names[r->action]);
    if (r->action == ACTION_SCALE) g_string_append_printf(notes, " x%g", r->factor);
    for (guint k = 0; k < r->match->len; k++)
        g_string_append_printf(notes, "%s%s", k ? ", " : " ", rv_selection_text(g_ptr_array_index(r->match, k)));
    gboolean layers = r->action == ACTION_REMOVE || r->action == ACTION_SCALE;
    if (layers) g_string_append_printf(notes, "): %u GPU tasks (%u of them backward)", f->forward + f->backward, f->backward);
    else g_string_append_printf(notes, "): %u substitutions (%u forward, %u backward)", f->forward + f->backward, f->forward, f->backward);
    if (f->removed->len)
        g_string_append_printf(notes, ", %u kernels removed (%d tasks with their launches)", f->removed->len, removed_tasks);
    guint kept = g_hash_table_size(f->recost) - recosted;
    if (!layers)
        g_string_append_printf(notes, ", %u new kernels in the place of the first ones", g_hash_table_size(f->recost));
    if (r->action != ACTION_REMOVE) g_string_append_printf(notes, " (%u re-costed, %u unshaped keep their time)", recosted, kept);
    char *before = rv_format_duration(f->before_ns), *after = rv_format_duration(after_ns);
    g_string_append_printf(notes, "; %s -> %s\n", before, after);
    g_free(before);
    g_free(after);
}

/* Why a rule found nothing, for the error line (g_free). */
static char *nothing_found(const rule *r, guint index, const findings *f)
{
    char *where = r->name ? g_strdup_printf("rule %u (\"%s\", %s)", index + 1, r->name, action_names[r->action])
                          : g_strdup_printf("rule %u (%s)", index + 1, action_names[r->action]);
    const char *why = r->action == ACTION_FUSE    ? "no chain of those operators on one stream"
                      : r->action == ACTION_MERGE ? (f->unshaped_runs ? "its parallel operators have no Input Dims (record with "
                                                                        "record_shapes=True), so their merged width is unknown"
                                                                      : "no run of adjacent forward GEMMs or convolutions with "
                                                                        "the same input shape")
                                                  : "no GPU kernel matches";
    char *text = g_strdup_printf("%s found nothing: %s", where, why);
    g_free(where);
    return text;
}

static gboolean apply_findings(rv_graph *graph, const rv_cost_model *model, const rule *r, guint index, findings *f, GString *notes,
                               GError **error)
{
    rv_cost_plan *plan = model ? rv_cost_model_plan(model, planned_change, f->recost) : NULL;
    char *cause = g_strdup_printf("metaflow rule %u", index + 1);
    gboolean ok = plan == NULL || rv_cost_plan_apply(graph, plan, cause, error);
    g_free(cause);
    if (ok) {
        int64_t after = recosted_ns(graph, f);
        /* fused or merged work still makes its tensors; removed layers do not */
        if (r->action == ACTION_FUSE || r->action == ACTION_MERGE)
            rv_memory_effect_add_for_tasks(graph, f->removed, RV_MEM_EFFECT_MOVED, 1.0, 0);
        int removed = f->removed->len ? rv_transform_remove_many(graph, f->removed, RV_REMOVE_KEEP_OVERHEAD) : 0;
        describe(notes, r, index, f, removed, plan ? rv_cost_plan_changed(plan) : 0, after);
        if (plan) rv_cost_plan_describe(plan, "      ", notes);
    }
    rv_cost_plan_free(plan);
    return ok;
}

static gboolean apply_rules(rv_graph *graph, const GPtrArray *rules, const rv_gpu *gpu, GString *notes, GError **error)
{
    GString *missing = g_string_new(NULL);
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < rules->len; i++) {
        const rule *r = g_ptr_array_index(rules, i);
        rv_cost_model *model = r->action == ACTION_REMOVE ? NULL : rv_cost_model_new(graph, gpu, TRUE);
        findings f;
        findings_init(&f);
        find(&f, graph, r, model);
        if (f.forward + f.backward == 0) {
            char *why = nothing_found(r, i, &f);
            g_string_append_printf(missing, "%s%s", missing->len ? "; " : "", why);
            g_free(why);
        } else {
            ok = apply_findings(graph, model, r, i, &f, notes, error);
        }
        findings_clear(&f);
        if (model) rv_cost_model_free(model);
    }
    if (ok && missing->len) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "%s", missing->str);
        ok = FALSE;
    }
    g_string_free(missing, TRUE);
    return ok;
}

/* Does any rule cost new kernels (everything but remove)?  Then the trace's GPU must be known. */
static gboolean needs_costing(const GPtrArray *rules)
{
    for (guint i = 0; i < rules->len; i++)
        if (((const rule *)g_ptr_array_index(rules, i))->action != ACTION_REMOVE) return TRUE;
    return FALSE;
}

static gboolean metaflow_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const char *given = rv_params_string(params, "rules");
    char *path = rules_path(given, catalogue);
    GPtrArray *rules = read_rules(given, path, error);
    gboolean costed = rules && needs_costing(rules);
    const rv_gpu *gpu = costed ? rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", error) : NULL;
    gboolean ok = rules && (!costed || gpu);
    if (ok) {
        g_string_append_printf(output->notes, "    rules=%s: %u rule%s, %s%s\n", given, rules->len, rules->len == 1 ? "" : "s",
                               gpu ? "new kernels costed on " : "nothing to cost", gpu ? gpu->id : "");
        ok = apply_rules(graph, rules, gpu, output->notes, error);
    }
    if (rules) g_ptr_array_unref(rules);
    g_free(path);
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

/* The composition law (compose.h): operators its rules match fused, merged or removed with their launches, and
 * re-priced on the cost model. */
static const rv_plugin_effects metaflow_effects = {
    .reads = RV_ASPECT_GPU_WORK | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_GPU_WORK,
    .scales = RV_ASPECT_MEMORY,
    .reprices = 0,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_HOST,
    .order = RV_ORDER(RV_STAGE_MODEL, 30),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "metaflow",
    "MetaFlow layer substitutions (Daydream Algorithm 9) from a rule file: fuse chains (conv+bn+relu), merge parallel "
    "GEMMs/convs (Q/K/V), remove or scale layers; new kernels costed on the cost model",
    metaflow_params, metaflow_apply, &metaflow_effects,
};
