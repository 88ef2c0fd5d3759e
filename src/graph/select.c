/*
 * select.c - the selection language of select.h: parsing terms such as
 * `kind=kernel phase=backward layer~conv` and matching tasks against them.
 *
 * Parsing happens once, without a graph, so a plugin can validate its
 * selection parameter before it touches the graph.  Matching a whole graph
 * (rv_select) caches each term's verdict per interned string, per resource
 * and per step: a million tasks share a few thousand names, so each glob or
 * substring test runs once per distinct name rather than once per task.
 */
#include "reverie/select.h"
#include "reverie/error.h"
#include "index.h"
#include <string.h>

typedef enum { KEY_KIND, KEY_PHASE, KEY_LAYER, KEY_NAME, KEY_OP, KEY_RESOURCE, KEY_STEP, KEY_COUNT } select_key;

static const char *const key_names[KEY_COUNT] = { "kind", "phase", "layer", "name", "op", "resource", "step" };
#define KEY_LIST "kind, phase, layer, name, op, resource, step"
#define KIND_LIST "cpu, kernel, memcpy, memset, sync, comm, dataload, marker, gpu"
#define PHASE_LIST "forward, backward, optimizer, dataload, other"
#define STEP_FORMS "N, A..B, A.., ..B, none, or a step name such as ProfilerStep#12"

/* Longest operators first, so "!=" is not read as a key ending in "!". */
static const char *const operators[] = { "!=", "!~", "=", "~" };

typedef struct {
    int32_t first, last; /* inclusive step indices */
} step_range;

typedef struct {
    select_key key;
    gboolean negate;     /* != or !~: the term matches when the list does not */
    gboolean substring;  /* ~ or !~ rather than = or != */
    uint32_t mask;       /* kind and phase: bit per enum value */
    gboolean any_gpu;    /* kind=gpu */
    gboolean step_none;  /* step=none: tasks outside every step */
    GPtrArray *globs;    /* GPatternSpec*: = on names, and step names */
    GPtrArray *needles;  /* lower-case char*: ~ on names */
    GArray *ranges;      /* step_range */
    char *text;          /* the term as written, for rv_selection_text */
} select_term;

struct rv_selection {
    GArray *terms; /* select_term */
    char *text;
};

/* ---- tokenizing ------------------------------------------------------- */

/* Index of the quote closing the one at text[open], or -1.  A lone quote is
 * literal, so names like "Bob's kernel" need no escaping. */
static gssize closing_quote(const char *text, gsize open)
{
    const char *close = strchr(text + open + 1, text[open]);
    return close ? close - text : -1;
}

/* Split on whitespace outside quotes; quotes group words and are dropped. */
static GPtrArray *split_words(const char *text)
{
    GPtrArray *words = g_ptr_array_new_with_free_func(g_free);
    GString *word = NULL;
    for (gsize i = 0; text[i] != '\0'; i++) {
        char c = text[i];
        if (g_ascii_isspace(c)) {
            if (word) g_ptr_array_add(words, g_string_free(word, FALSE));
            word = NULL;
            continue;
        }
        if (word == NULL) word = g_string_new(NULL);
        gssize close = (c == '"' || c == '\'') ? closing_quote(text, i) : -1;
        if (close < 0) {
            g_string_append_c(word, c);
            continue;
        }
        g_string_append_len(word, text + i + 1, close - (gssize)i - 1);
        i = (gsize)close;
    }
    if (word) g_ptr_array_add(words, g_string_free(word, FALSE));
    return words;
}

/* If word starts with KEY OP, set *key_length and *op; else FALSE. */
static gboolean find_operator(const char *word, gsize *key_length, const char **op)
{
    gsize n = 0;
    while (g_ascii_isalpha(word[n]) || word[n] == '_') n++;
    if (n == 0) return FALSE;
    for (gsize i = 0; i < G_N_ELEMENTS(operators); i++) {
        if (g_str_has_prefix(word + n, operators[i])) {
            *key_length = n;
            *op = operators[i];
            return TRUE;
        }
    }
    return FALSE;
}

/* ---- compiling one term ----------------------------------------------- */

static void term_clear(select_term *term)
{
    if (term->globs) g_ptr_array_unref(term->globs);
    if (term->needles) g_ptr_array_unref(term->needles);
    if (term->ranges) g_array_unref(term->ranges);
    g_free(term->text);
}

static int key_from_name(const char *name)
{
    for (int k = 0; k < KEY_COUNT; k++)
        if (g_ascii_strcasecmp(key_names[k], name) == 0) return k;
    return -1;
}

static gboolean compile_kind(select_term *term, const char *item, GError **error)
{
    char *lower = g_ascii_strdown(item, -1);
    int kind = rv_task_kind_from_name(lower);
    if (strcmp(lower, "gpu") == 0) term->any_gpu = TRUE;
    else if (kind >= 0) term->mask |= 1u << kind;
    g_free(lower);
    if (kind >= 0 || term->any_gpu) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: unknown kind \"%s\" (" KIND_LIST ")", term->text, item);
    return FALSE;
}

static gboolean compile_phase(select_term *term, const char *item, GError **error)
{
    char *lower = g_ascii_strdown(item, -1);
    int phase = rv_phase_from_name(lower);
    g_free(lower);
    if (phase >= 0) {
        term->mask |= 1u << phase;
        return TRUE;
    }
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: unknown phase \"%s\" (" PHASE_LIST ")", term->text, item);
    return FALSE;
}

static gboolean compile_name(select_term *term, const char *item)
{
    if (term->substring) g_ptr_array_add(term->needles, g_ascii_strdown(item, -1));
    else g_ptr_array_add(term->globs, g_pattern_spec_new(item));
    return TRUE;
}

/* A step index: decimal digits only, within int32. */
static gboolean parse_step_index(const char *text, int32_t *index)
{
    guint64 value = 0;
    if (*text == '\0' || !g_ascii_string_to_unsigned(text, 10, 0, G_MAXINT32, &value, NULL)) return FALSE;
    *index = (int32_t)value;
    return TRUE;
}

/* "A..B", "A.." or "..B". */
static gboolean parse_step_range(const char *item, step_range *range)
{
    const char *dots = strstr(item, "..");
    char *first = g_strndup(item, dots - item);
    const char *last = dots + 2;
    range->first = 0;
    range->last = G_MAXINT32;
    gboolean ok = (*first != '\0' || *last != '\0') &&
                  (*first == '\0' || parse_step_index(first, &range->first)) &&
                  (*last == '\0' || parse_step_index(last, &range->last));
    g_free(first);
    return ok;
}

/* Text made only of digits, dots and signs was meant as an index, not a name. */
static gboolean looks_numeric(const char *item)
{
    return item[strspn(item, "0123456789.-+")] == '\0';
}

static gboolean compile_step(select_term *term, const char *item, GError **error)
{
    step_range range;
    if (g_ascii_strcasecmp(item, "none") == 0) {
        term->step_none = TRUE;
        return TRUE;
    }
    gboolean is_range = strstr(item, "..") != NULL;
    if (!is_range && !looks_numeric(item)) {
        g_ptr_array_add(term->globs, g_pattern_spec_new(item));
        return TRUE;
    }
    gboolean ok = is_range ? parse_step_range(item, &range) : parse_step_index(item, &range.first);
    if (!is_range) range.last = range.first;
    if (!ok) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: malformed step \"%s\" (" STEP_FORMS ")", term->text, item);
        return FALSE;
    }
    if (range.first > range.last) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: empty step range \"%s\" (first > last)", term->text, item);
        return FALSE;
    }
    g_array_append_val(term->ranges, range);
    return TRUE;
}

static gboolean compile_item(select_term *term, const char *item, GError **error)
{
    switch (term->key) {
    case KEY_KIND: return compile_kind(term, item, error);
    case KEY_PHASE: return compile_phase(term, item, error);
    case KEY_STEP: return compile_step(term, item, error);
    default: return compile_name(term, item);
    }
}

/* kind, phase and step are closed sets or numbers: a substring makes no sense. */
static gboolean check_operator(const select_term *term, GError **error)
{
    if (!term->substring || term->key == KEY_LAYER || term->key == KEY_NAME || term->key == KEY_OP ||
        term->key == KEY_RESOURCE)
        return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: %s takes = or !=, not ~", term->text, key_names[term->key]);
    return FALSE;
}

static gboolean compile_values(select_term *term, const char *value, GError **error)
{
    char **items = g_strsplit(value, ",", -1);
    gboolean ok = TRUE;
    if (items[0] == NULL) { /* g_strsplit gives no items at all for "" */
        g_strfreev(items);
        items = g_new0(char *, 2);
        items[0] = g_strdup("");
    }
    for (char **item = items; ok && *item; item++) {
        g_strstrip(*item);
        if (**item == '\0') {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s: empty value (write %s=VALUE[,VALUE...])", term->text,
                        key_names[term->key]);
            ok = FALSE;
        } else {
            ok = compile_item(term, *item, error);
        }
    }
    g_strfreev(items);
    return ok;
}

static gboolean compile_term(select_term *term, const char *key, const char *op, const char *value, GError **error)
{
    int k = key_from_name(key);
    if (k < 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "unknown selection key \"%s\" (keys: " KEY_LIST ")", key);
        return FALSE;
    }
    term->key = (select_key)k;
    term->negate = op[0] == '!';
    term->substring = strchr(op, '~') != NULL;
    term->text = g_strconcat(key_names[k], op, value, NULL);
    term->globs = g_ptr_array_new_with_free_func((GDestroyNotify)g_pattern_spec_free);
    term->needles = g_ptr_array_new_with_free_func(g_free);
    term->ranges = g_array_new(FALSE, FALSE, sizeof(step_range));
    return check_operator(term, error) && compile_values(term, value, error);
}

/* ---- parsing a whole selection ------------------------------------------ */

typedef struct {
    char *key;
    const char *op;
    GString *value;
} raw_term;

static void raw_term_clear(gpointer data)
{
    raw_term *raw = data;
    g_free(raw->key);
    g_string_free(raw->value, TRUE);
}

/* Group words into terms: a word without KEY OP continues the previous value. */
static GArray *group_words(const GPtrArray *words, GError **error)
{
    GArray *raws = g_array_new(FALSE, TRUE, sizeof(raw_term));
    g_array_set_clear_func(raws, raw_term_clear);
    for (guint i = 0; i < words->len; i++) {
        const char *word = g_ptr_array_index(words, i);
        gsize key_length;
        const char *op;
        if (find_operator(word, &key_length, &op)) {
            raw_term raw = { g_strndup(word, key_length), op, g_string_new(word + key_length + strlen(op)) };
            g_array_append_val(raws, raw);
        } else if (raws->len > 0) {
            GString *value = g_array_index(raws, raw_term, raws->len - 1).value;
            if (value->len) g_string_append_c(value, ' ');
            g_string_append(value, word);
        } else {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                        "selection term \"%s\" has no operator (write KEY=VALUE, KEY~VALUE, KEY!=VALUE or "
                        "KEY!~VALUE; keys: " KEY_LIST ")", word);
            g_array_unref(raws);
            return NULL;
        }
    }
    return raws;
}

static rv_selection *selection_new(void)
{
    rv_selection *sel = g_new0(rv_selection, 1);
    sel->terms = g_array_new(FALSE, TRUE, sizeof(select_term));
    g_array_set_clear_func(sel->terms, (GDestroyNotify)term_clear);
    return sel;
}

static void set_canonical_text(rv_selection *sel)
{
    GString *text = g_string_new(NULL);
    for (guint i = 0; i < sel->terms->len; i++) {
        if (i) g_string_append_c(text, ' ');
        g_string_append(text, g_array_index(sel->terms, select_term, i).text);
    }
    sel->text = g_string_free(text, FALSE);
}

rv_selection *rv_selection_parse(const char *text, GError **error)
{
    GPtrArray *words = split_words(text ? text : "");
    GArray *raws = group_words(words, error);
    g_ptr_array_unref(words);
    if (raws == NULL) return NULL;
    rv_selection *sel = selection_new();
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < raws->len; i++) {
        const raw_term *raw = &g_array_index(raws, raw_term, i);
        select_term term = { 0 };
        ok = compile_term(&term, raw->key, raw->op, raw->value->str, error);
        g_array_append_val(sel->terms, term); /* appended even on failure, so it is freed */
    }
    g_array_unref(raws);
    if (!ok) {
        rv_selection_free(sel);
        return NULL;
    }
    set_canonical_text(sel);
    return sel;
}

rv_selection *rv_selection_parse_argv(char **pieces, int count, GError **error)
{
    GString *text = g_string_new(NULL);
    for (int i = 0; i < count; i++) {
        if (i) g_string_append_c(text, ' ');
        g_string_append(text, pieces[i]);
    }
    rv_selection *sel = rv_selection_parse(text->str, error);
    g_string_free(text, TRUE);
    return sel;
}

void rv_selection_free(rv_selection *sel)
{
    if (sel == NULL) return;
    g_array_unref(sel->terms);
    g_free(sel->text);
    g_free(sel);
}

const char *rv_selection_text(const rv_selection *sel) { return sel->text; }
gboolean rv_selection_is_empty(const rv_selection *sel) { return sel->terms->len == 0; }

/* ---- matching ----------------------------------------------------------- */

/* Case-insensitive (ASCII) substring test; needle is already lower-case. */
static gboolean contains_ignore_case(const char *haystack, const char *needle)
{
    gsize n = strlen(needle);
    for (const char *start = haystack; *start; start++) {
        gsize i = 0;
        while (i < n && g_ascii_tolower(start[i]) == needle[i]) i++;
        if (i == n) return TRUE;
    }
    return n == 0;
}

static gboolean text_hits(const select_term *term, const char *text)
{
    for (guint i = 0; i < term->globs->len; i++)
        if (g_pattern_spec_match_string(g_ptr_array_index(term->globs, i), text)) return TRUE;
    for (guint i = 0; i < term->needles->len; i++)
        if (contains_ignore_case(text, g_ptr_array_index(term->needles, i))) return TRUE;
    return FALSE;
}

static gboolean resource_hits(const select_term *term, const rv_graph *graph, int32_t id)
{
    if (id < 0 || (guint)id >= graph->resources->len) return FALSE;
    const rv_resource *resource = &g_array_index(graph->resources, rv_resource, id);
    return text_hits(term, rv_strings_get(graph->strings, resource->name)) ||
           text_hits(term, rv_resource_kind_name(resource->kind));
}

static gboolean step_hits(const select_term *term, const rv_graph *graph, int32_t step)
{
    if (step < 0 || (guint)step >= graph->steps->len) return term->step_none;
    for (guint i = 0; i < term->ranges->len; i++) {
        const step_range *range = &g_array_index(term->ranges, step_range, i);
        if (step >= range->first && step <= range->last) return TRUE;
    }
    return text_hits(term, rv_strings_get(graph->strings, g_array_index(graph->steps, rv_step, step).name));
}

static gboolean is_gpu_task(const rv_graph *graph, const rv_task *task)
{
    if (task->flags & RV_TASK_FLAG_GPU) return TRUE;
    if (task->resource < 0 || (guint)task->resource >= graph->resources->len) return FALSE;
    return g_array_index(graph->resources, rv_resource, task->resource).kind == RV_RES_GPU_STREAM;
}

static int32_t task_string(const select_term *term, const rv_task *task)
{
    return term->key == KEY_LAYER ? task->layer : term->key == KEY_NAME ? task->name : task->op;
}

/* Whether the term's value list matches, before negation. */
static gboolean term_hits(const select_term *term, const rv_graph *graph, const rv_task *task)
{
    switch (term->key) {
    case KEY_KIND: return (term->mask >> task->kind & 1u) || (term->any_gpu && is_gpu_task(graph, task));
    case KEY_PHASE: return term->mask >> task->phase & 1u;
    case KEY_RESOURCE: return resource_hits(term, graph, task->resource);
    case KEY_STEP: return step_hits(term, graph, task->step);
    default: return text_hits(term, rv_strings_get(graph->strings, task_string(term, task)));
    }
}

gboolean rv_selection_matches(const rv_selection *sel, const rv_graph *graph, int32_t id)
{
    const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
    for (guint i = 0; i < sel->terms->len; i++) {
        const select_term *term = &g_array_index(sel->terms, select_term, i);
        if (term_hits(term, graph, task) == term->negate) return FALSE;
    }
    return TRUE;
}

/* ---- matching a whole graph with cached verdicts ----------------------- */

enum { VERDICT_UNKNOWN = 0, VERDICT_NO = 1, VERDICT_YES = 2 };

/* One term bound to one graph: verdicts per string id, resource or step. */
typedef struct {
    const select_term *term;
    uint8_t *verdicts;
    int32_t count;
} bound_term;

static void bind_term(bound_term *bound, const select_term *term, const rv_graph *graph)
{
    bound->term = term;
    bound->count = 0;
    bound->verdicts = NULL;
    if (term->key == KEY_RESOURCE) {
        bound->count = (int32_t)graph->resources->len;
        bound->verdicts = g_new0(uint8_t, bound->count);
        for (int32_t r = 0; r < bound->count; r++)
            bound->verdicts[r] = resource_hits(term, graph, r) ? VERDICT_YES : VERDICT_NO;
    } else if (term->key == KEY_STEP) {
        bound->count = (int32_t)graph->steps->len + 1; /* slot 0: outside every step */
        bound->verdicts = g_new0(uint8_t, bound->count);
        for (int32_t s = -1; s + 1 < bound->count; s++)
            bound->verdicts[s + 1] = step_hits(term, graph, s) ? VERDICT_YES : VERDICT_NO;
    } else if (term->key != KEY_KIND && term->key != KEY_PHASE) {
        bound->count = rv_strings_count(graph->strings);
        bound->verdicts = g_new0(uint8_t, bound->count); /* filled lazily: most names never occur */
    }
}

static gboolean bound_hits(bound_term *bound, const rv_graph *graph, const rv_task *task)
{
    const select_term *term = bound->term;
    int32_t slot;
    switch (term->key) {
    case KEY_KIND:
    case KEY_PHASE: return term_hits(term, graph, task);
    case KEY_RESOURCE: slot = task->resource; break;
    case KEY_STEP: slot = task->step < 0 ? 0 : task->step + 1; break;
    default: slot = task_string(term, task); break;
    }
    if (slot < 0 || slot >= bound->count) return term_hits(term, graph, task);
    if (bound->verdicts[slot] == VERDICT_UNKNOWN)
        bound->verdicts[slot] = term_hits(term, graph, task) ? VERDICT_YES : VERDICT_NO;
    return bound->verdicts[slot] == VERDICT_YES;
}

GArray *rv_select(const rv_graph *graph, const rv_selection *sel)
{
    guint n_terms = sel->terms->len;
    bound_term *bound = g_new0(bound_term, n_terms ? n_terms : 1);
    for (guint i = 0; i < n_terms; i++) bind_term(&bound[i], &g_array_index(sel->terms, select_term, i), graph);
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, id);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        guint i = 0;
        while (i < n_terms && bound_hits(&bound[i], graph, task) != bound[i].term->negate) i++;
        if (i == n_terms) g_array_append_val(ids, id);
    }
    for (guint i = 0; i < n_terms; i++) g_free(bound[i].verdicts);
    g_free(bound);
    return ids;
}

/* ---- selections remembered for a sweep's copies -------------------- */

#define MEMO_MOST 64 /* selections remembered; more are matched every time */

struct rv_selection_memo {
    gint refs;
    guint tasks, edges, applied; /* the remembering graph's counts */
    GMutex lock;
    GHashTable *matched;         /* selection text -> GArray of int32 ids (never changed once in) */
};

struct rv_selection_memo *rv_selection_memo_ref(struct rv_selection_memo *memo)
{
    if (memo) g_atomic_int_inc(&memo->refs);
    return memo;
}

void rv_selection_memo_unref(struct rv_selection_memo *memo)
{
    if (memo == NULL || !g_atomic_int_dec_and_test(&memo->refs)) return;
    g_hash_table_destroy(memo->matched);
    g_mutex_clear(&memo->lock);
    g_free(memo);
}

void rv_graph_remember_selections(rv_graph *graph)
{
    rv_graph_index *index = rv_graph_index_get(graph);
    struct rv_selection_memo *memo = g_new0(struct rv_selection_memo, 1);
    memo->refs = 1;
    memo->tasks = graph->tasks->len;
    memo->edges = graph->edges->len;
    memo->applied = graph->applied->len;
    g_mutex_init(&memo->lock);
    memo->matched = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    rv_selection_memo_unref(index->selections);
    index->selections = memo;
}

/* The memo, if the graph is the one that remembered or a copy of it that
 * no plugin has changed: a plugin changes a graph only inside
 * rv_plugin_apply, which adds to graph->applied when it succeeds, and the
 * caller of rv_select_text has not changed it yet (select.h). */
static struct rv_selection_memo *memo_for(const rv_graph *graph)
{
    struct rv_selection_memo *memo = graph->index ? graph->index->selections : NULL;
    if (memo == NULL || graph->applied->len != memo->applied || graph->tasks->len != memo->tasks ||
        graph->edges->len != memo->edges)
        return NULL;
    return memo;
}

GArray *rv_select_text(const rv_graph *graph, const char *text, GError **error)
{
    struct rv_selection_memo *memo = memo_for(graph);
    if (memo) {
        g_mutex_lock(&memo->lock);
        const GArray *known = g_hash_table_lookup(memo->matched, text);
        GArray *ids = known ? g_array_copy((GArray *)known) : NULL;
        g_mutex_unlock(&memo->lock);
        if (ids) return ids;
    }
    rv_selection *selection = rv_selection_parse(text, error);
    if (selection == NULL) return NULL;
    GArray *ids = rv_select(graph, selection);
    rv_selection_free(selection);
    if (memo) {
        g_mutex_lock(&memo->lock);
        if (g_hash_table_size(memo->matched) < MEMO_MOST && !g_hash_table_contains(memo->matched, text))
            g_hash_table_insert(memo->matched, g_strdup(text), g_array_copy(ids));
        g_mutex_unlock(&memo->lock);
    }
    return ids;
}
