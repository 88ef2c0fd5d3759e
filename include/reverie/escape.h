/*
 * escape.h - text from a trace or a saved graph, made safe to print.
 *
 * Kernel, operator, step and thread names come from files that other people
 * made.  Printed raw, a name holding ESC or BEL can move the terminal's
 * cursor, change its title or clear the screen, and a newline or a
 * carriage return can add a fake line to a report.  Every place that prints
 * such text to a terminal or a text report passes it through here first.
 *
 * What is escaped, and how (everything else is copied unchanged):
 *   \n \r \t                 as those two-character escapes;
 *   other C0 controls, DEL   as \xNN;
 *   bytes that are not UTF-8 as \xNN, one per byte;
 *   C1 controls (U+0080..U+009F), the line and paragraph separators
 *   (U+2028, U+2029), the bidirectional controls (U+200E, U+200F,
 *   U+202A..U+202E, U+2066..U+2069) and U+FEFF, which reorder or hide
 *   text without being seen, as \uNNNN.
 * The result is valid UTF-8 with no control character, so it is also safe
 * for jansson (which rejects invalid UTF-8) and for XML 1.0 (which forbids
 * most C0 controls even as character references).  A backslash is copied
 * as it is: escaping is for safety, not for reversing.
 */
#ifndef REVERIE_ESCAPE_H
#define REVERIE_ESCAPE_H

#include <glib.h>

G_BEGIN_DECLS

/* A new string (g_free): text escaped as above; NULL gives "". */
char *rv_escape_text(const char *text);
/* The same, appended to a GString. */
void rv_escape_append(GString *out, const char *text);
/* Set *error (RV_ERROR, code) to the formatted message escaped: one line
 * whatever the file it quotes holds (keys, names, jansson's excerpts). */
void rv_set_escaped_error(GError **error, int code, const char *format, ...) G_GNUC_PRINTF(3, 4);
/* TRUE when rv_escape_text would change text (NULL: FALSE). */
gboolean rv_text_needs_escape(const char *text);

/* text if it needs no escaping, else an escaped copy kept in *scratch
 * (g_free it when done; it is set to NULL when nothing was copied).
 * For printing loops that should not allocate for every clean name. */
const char *rv_escape_if_needed(const char *text, char **scratch);

/*
 * Names copied into every event of an output (a timeline, a critical-path
 * listing, a query, an exported graph) are bounded, so that one long name
 * cannot multiply an output's size by its number of events (a 50 MB step
 * name in each of a timeline's events).  RV_NAME_BOUND is about three
 * times the longest real name in the traces we have: a 5,123-byte PyTorch
 * kernel name (distribution_elementwise_grid_stride_kernel<...>, HTA's
 * AlexNet trace on an A100).
 */
#define RV_NAME_BOUND 16384

/* text when it is valid UTF-8 of at most RV_NAME_BOUND bytes; else a copy
 * in *scratch (g_free it; NULL when nothing was copied): bytes that are not
 * UTF-8 escaped as \xNN, and a longer text cut at a character boundary
 * with " [... N bytes in all]" after it, so the full length is said. */
const char *rv_bounded_name(const char *text, char **scratch);

G_END_DECLS

#endif
