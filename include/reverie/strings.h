/*
 * strings.h - an interned string table.
 *
 * Traces repeat the same few thousand names (kernels, operators, threads)
 * hundreds of thousands of times.  Every stage refers to a name by a dense
 * integer id into one table, so tasks stay small and the saved-graph format
 * can write the table once.  Id 0 is always the empty string.
 *
 * The table is safe to intern into from several threads (the importer parses
 * in parallel); lookups of an id are lock-free because strings never move
 * (GStringChunk) and the id array only grows under the lock.
 */
#ifndef REVERIE_STRINGS_H
#define REVERIE_STRINGS_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct rv_strings rv_strings;

/* Tables are reference-counted: a trace and the graphs built from it share one. */
rv_strings *rv_strings_new(void);
rv_strings *rv_strings_ref(rv_strings *strings);
/* Drop a reference; the table is freed with the last one. */
void rv_strings_free(rv_strings *strings);

/* The id of text, adding it if new.  Thread-safe. */
int32_t rv_strings_intern(rv_strings *strings, const char *text);
/* Like rv_strings_intern for a text of known length (need not be NUL-terminated). */
int32_t rv_strings_intern_len(rv_strings *strings, const char *text, gsize length);
/* The id of text, or -1 if it was never interned. */
int32_t rv_strings_lookup(rv_strings *strings, const char *text);
/* The text of an id; "" for id 0 or an id out of range. */
const char *rv_strings_get(const rv_strings *strings, int32_t id);
/* How many ids exist (ids are 0 .. count-1). */
int32_t rv_strings_count(const rv_strings *strings);

/*
 * A small verdict (0 to 127) about each string, worked out once per id:
 * plugins classify millions of tasks by a few hundred distinct names, and
 * lower-casing and searching a 200-character kernel name per task made
 * them slower than the replay.  One memo per plugin call (not thread-safe).
 */
typedef int (*rv_string_decide_fn)(const char *text);
typedef struct {
    const rv_strings *strings;
    rv_string_decide_fn decide;
    gint8 *verdicts;  /* per id; -1 until decided */
    int32_t count;
} rv_string_memo;

void rv_string_memo_init(rv_string_memo *memo, const rv_strings *strings, rv_string_decide_fn decide);
/* decide(text of id), from the memo after the first time (id <= 0: ""). */
int rv_string_memo_get(rv_string_memo *memo, int32_t id);
void rv_string_memo_clear(rv_string_memo *memo);

/*
 * Every string of a table bounded for an output that copies names per task
 * or event (escape.h's rv_bounded_name: valid UTF-8, a long one cut with
 * its length said), each worked out once: a 50 MB name costs its length
 * once per output, not once per task that carries it.
 */
typedef struct {
    const char **texts;  /* per id: the text to write */
    char **copies;       /* per id: the cut or escaped copy texts[id] points to, or NULL */
    int32_t count;
} rv_bounded_strings;

void rv_bounded_strings_init(rv_bounded_strings *bounded, const rv_strings *strings);
/* The bounded text of id; "" for an id out of range. */
const char *rv_bounded_strings_get(const rv_bounded_strings *bounded, int32_t id);
void rv_bounded_strings_clear(rv_bounded_strings *bounded);

G_END_DECLS

#endif
