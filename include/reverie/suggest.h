/*
 * suggest.h - "did you mean": the known name closest to a mistyped one
 * (a command, an optimization, a parameter).
 *
 * Names are compared without case and with '_' and '-' alike (fused_adam
 * is fused-adam); the closest by edit distance (a swap of two neighbours
 * counts one) wins if it is within a third of the name's length (at least
 * one edit), else a name the given text is the start of, if only one is.
 */
#ifndef REVERIE_SUGGEST_H
#define REVERIE_SUGGEST_H

#include <glib.h>

G_BEGIN_DECLS

/* The candidate to suggest for `given` (one of candidates, not a copy), or
 * NULL when none is close; never `given` itself. */
const char *rv_suggest(const char *given, const char *const *candidates, gsize count);

/* " (did you mean 'NAME'?)" for a message, or "" when there is nothing to
 * suggest (g_free). */
char *rv_suggest_text(const char *given, const char *const *candidates, gsize count);

G_END_DECLS

#endif
