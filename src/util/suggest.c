/*
 * suggest.c - the known name closest to a mistyped one (suggest.h).
 */
#include "reverie/suggest.h"
#include <string.h>

/* Lower case, '_' as '-'. */
static char *normalized(const char *name)
{
    char *copy = g_ascii_strdown(name, -1);
    for (char *c = copy; *c; c++)
        if (*c == '_') *c = '-';
    return copy;
}

/* Edit distance with swaps of neighbours (optimal string alignment). */
static gsize distance(const char *a, const char *b)
{
    gsize n = strlen(a), m = strlen(b);
    gsize *rows = g_new(gsize, 3 * (m + 1));
    gsize *before = rows, *previous = rows + (m + 1), *current = rows + 2 * (m + 1);
    for (gsize j = 0; j <= m; j++) previous[j] = j;
    for (gsize i = 1; i <= n; i++) {
        current[0] = i;
        for (gsize j = 1; j <= m; j++) {
            gsize cost = a[i - 1] != b[j - 1];
            gsize best = MIN(MIN(previous[j] + 1, current[j - 1] + 1), previous[j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) best = MIN(best, before[j - 2] + 1);
            current[j] = best;
        }
        gsize *spare = before;
        before = previous;
        previous = current;
        current = spare;
    }
    gsize result = previous[m];
    g_free(rows);
    return result;
}

const char *rv_suggest(const char *given, const char *const *candidates, gsize count)
{
    if (given == NULL || *given == '\0') return NULL;
    char *want = normalized(given);
    gsize limit = MAX(1, strlen(want) / 3), best_distance = G_MAXSIZE, starts = 0;
    const char *best = NULL, *started = NULL;
    for (gsize i = 0; i < count; i++) {
        if (candidates[i] == NULL || strcmp(candidates[i], given) == 0) continue;
        char *name = normalized(candidates[i]);
        gsize d = distance(want, name);
        if (d < best_distance) {
            best_distance = d;
            best = candidates[i];
        }
        if (strlen(want) >= 2 && g_str_has_prefix(name, want)) {
            starts++;
            started = candidates[i];
        }
        g_free(name);
    }
    g_free(want);
    if (best != NULL && best_distance <= limit) return best;
    return starts == 1 ? started : NULL;
}

char *rv_suggest_text(const char *given, const char *const *candidates, gsize count)
{
    const char *found = rv_suggest(given, candidates, count);
    return found ? g_strdup_printf(" (did you mean '%s'?)", found) : g_strdup("");
}
