/*
 * strings.c - the interned string table (see include/reverie/strings.h).
 *
 * Invariant: texts live in a GStringChunk and never move, so a pointer
 * returned by rv_strings_get stays valid for the table's lifetime.  The id
 * array is a plain C array grown under the mutex; readers may index it
 * without the lock only for ids they obtained earlier (the slot was written
 * before the id was handed out).  The array is never shrunk, but growth
 * reallocates it, so rv_strings_get reads through the lock-free snapshot
 * pointer that is swapped only after the new array is filled.
 */
#include "reverie/strings.h"
#include "reverie/escape.h"
#include <string.h>

struct rv_strings {
    GMutex lock;
    GStringChunk *chunk;
    GHashTable *ids;          /* const char* (in chunk) -> id + 1 */
    const char **texts;       /* id -> text */
    GPtrArray *retired_arrays;
    int32_t count;
    int32_t capacity;
    gint refcount;
};

rv_strings *rv_strings_new(void)
{
    rv_strings *strings = g_new0(rv_strings, 1);
    g_mutex_init(&strings->lock);
    strings->chunk = g_string_chunk_new(1 << 16);
    strings->ids = g_hash_table_new(g_str_hash, g_str_equal);
    strings->retired_arrays = g_ptr_array_new_with_free_func(g_free);
    strings->refcount = 1;
    strings->capacity = 1024;
    strings->texts = g_new0(const char *, strings->capacity);
    rv_strings_intern(strings, "");
    return strings;
}

rv_strings *rv_strings_ref(rv_strings *strings)
{
    g_atomic_int_inc(&strings->refcount);
    return strings;
}

void rv_strings_free(rv_strings *strings)
{
    if (strings == NULL || !g_atomic_int_dec_and_test(&strings->refcount))
        return;
    g_hash_table_destroy(strings->ids);
    g_string_chunk_free(strings->chunk);
    g_ptr_array_free(strings->retired_arrays, TRUE);
    g_free(strings->texts);
    g_mutex_clear(&strings->lock);
    g_free(strings);
}

static int32_t intern_locked(rv_strings *strings, const char *text)
{
    gpointer found = g_hash_table_lookup(strings->ids, text);
    if (found != NULL)
        return GPOINTER_TO_INT(found) - 1;
    if (strings->count == strings->capacity) {
        int32_t capacity = strings->capacity * 2;
        const char **texts = g_new0(const char *, capacity);
        memcpy(texts, strings->texts, sizeof *texts * (gsize)strings->count);
        g_ptr_array_add(strings->retired_arrays, (gpointer)strings->texts);
        g_atomic_pointer_set(&strings->texts, texts);
        strings->capacity = capacity;
    }
    const char *stored = g_string_chunk_insert(strings->chunk, text);
    int32_t id = strings->count;
    strings->texts[id] = stored;
    g_atomic_int_set(&strings->count, id + 1);
    g_hash_table_insert(strings->ids, (gpointer)stored, GINT_TO_POINTER(id + 1));
    return id;
}

int32_t rv_strings_intern(rv_strings *strings, const char *text)
{
    g_mutex_lock(&strings->lock);
    int32_t id = intern_locked(strings, text ? text : "");
    g_mutex_unlock(&strings->lock);
    return id;
}

int32_t rv_strings_intern_len(rv_strings *strings, const char *text, gsize length)
{
    char small[256];
    char *copy = length < sizeof small ? small : g_malloc(length + 1);
    memcpy(copy, text, length);
    copy[length] = '\0';
    int32_t id = rv_strings_intern(strings, copy);
    if (copy != small)
        g_free(copy);
    return id;
}

int32_t rv_strings_lookup(rv_strings *strings, const char *text)
{
    g_mutex_lock(&strings->lock);
    gpointer found = g_hash_table_lookup(strings->ids, text);
    g_mutex_unlock(&strings->lock);
    return found ? GPOINTER_TO_INT(found) - 1 : -1;
}

const char *rv_strings_get(const rv_strings *strings, int32_t id)
{
    rv_strings *mutable_strings = (rv_strings *)strings; /* atomics take non-const */
    const char **texts = g_atomic_pointer_get(&mutable_strings->texts);
    if (id <= 0 || id >= g_atomic_int_get(&mutable_strings->count))
        return "";
    return texts[id];
}

int32_t rv_strings_count(const rv_strings *strings)
{
    return g_atomic_int_get(&((rv_strings *)strings)->count);
}

/* ---- verdicts per string -------------------------------------------- */

void rv_string_memo_init(rv_string_memo *memo, const rv_strings *strings, rv_string_decide_fn decide)
{
    memo->strings = strings;
    memo->decide = decide;
    memo->verdicts = NULL;
    memo->count = 0;
}

int rv_string_memo_get(rv_string_memo *memo, int32_t id)
{
    if (id <= 0) return memo->decide("");
    if (id >= memo->count) {
        /* strings interned since (a plugin's own names) get room too */
        int32_t count = MAX(rv_strings_count(memo->strings), id + 1);
        memo->verdicts = g_renew(gint8, memo->verdicts, count);
        memset(memo->verdicts + memo->count, -1, (gsize)(count - memo->count));
        memo->count = count;
    }
    if (memo->verdicts[id] < 0) memo->verdicts[id] = (gint8)memo->decide(rv_strings_get(memo->strings, id));
    return memo->verdicts[id];
}

void rv_string_memo_clear(rv_string_memo *memo)
{
    g_free(memo->verdicts);
    memo->verdicts = NULL;
    memo->count = 0;
}

void rv_bounded_strings_init(rv_bounded_strings *bounded, const rv_strings *strings)
{
    bounded->count = rv_strings_count(strings);
    bounded->texts = g_new(const char *, bounded->count);
    bounded->copies = g_new0(char *, bounded->count);
    for (int32_t id = 0; id < bounded->count; id++)
        bounded->texts[id] = rv_bounded_name(rv_strings_get(strings, id), &bounded->copies[id]);
}

const char *rv_bounded_strings_get(const rv_bounded_strings *bounded, int32_t id)
{
    return id >= 0 && id < bounded->count ? bounded->texts[id] : "";
}

void rv_bounded_strings_clear(rv_bounded_strings *bounded)
{
    for (int32_t id = 0; id < bounded->count; id++) g_free(bounded->copies[id]);
    g_free(bounded->copies);
    g_free(bounded->texts);
    memset(bounded, 0, sizeof *bounded);
}
