/*
 * escape.c - make names from traces safe to print (see
 * include/reverie/escape.h for what is escaped and why).
 */
#include "reverie/escape.h"
#include "reverie/error.h"
#include <string.h>

/* Printable code points that still change how text is shown. */
static gboolean is_invisible_control(gunichar c)
{
    return (c >= 0x80 && c <= 0x9f) || c == 0x200e || c == 0x200f || c == 0x2028 || c == 0x2029 ||
           (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c == 0xfeff;
}

/* How many bytes at text (which has `left` bytes) form one character that
 * is copied unchanged, or 0 if the next byte or character must be escaped. */
static gsize clean_length(const char *text, gsize left)
{
    unsigned char byte = (unsigned char)text[0];
    if (byte < 0x80) return byte >= 0x20 && byte != 0x7f ? 1 : 0;
    gunichar c = g_utf8_get_char_validated(text, (gssize)left);
    if (c == (gunichar)-1 || c == (gunichar)-2 || is_invisible_control(c)) return 0;
    return (gsize)(g_utf8_next_char(text) - text);
}

/* Append the escape for the character or byte at text; return its length. */
static gsize append_escape(GString *out, const char *text, gsize left)
{
    unsigned char byte = (unsigned char)text[0];
    switch (byte) {
    case '\n': g_string_append(out, "\\n"); return 1;
    case '\r': g_string_append(out, "\\r"); return 1;
    case '\t': g_string_append(out, "\\t"); return 1;
    default: break;
    }
    if (byte >= 0x80) {
        gunichar c = g_utf8_get_char_validated(text, (gssize)left);
        if (c != (gunichar)-1 && c != (gunichar)-2) {
            g_string_append_printf(out, "\\u%04x", (unsigned)c);
            return (gsize)(g_utf8_next_char(text) - text);
        }
    }
    g_string_append_printf(out, "\\x%02x", byte);
    return 1;
}

void rv_escape_append(GString *out, const char *text)
{
    if (text == NULL) return;
    gsize length = strlen(text), at = 0;
    while (at < length) {
        gsize clean = clean_length(text + at, length - at);
        if (clean > 0) {
            g_string_append_len(out, text + at, (gssize)clean);
            at += clean;
        } else {
            at += append_escape(out, text + at, length - at);
        }
    }
}

gboolean rv_text_needs_escape(const char *text)
{
    if (text == NULL) return FALSE;
    gsize length = strlen(text), at = 0;
    while (at < length) {
        gsize clean = clean_length(text + at, length - at);
        if (clean == 0) return TRUE;
        at += clean;
    }
    return FALSE;
}

char *rv_escape_text(const char *text)
{
    GString *out = g_string_sized_new(text ? strlen(text) + 8 : 1);
    rv_escape_append(out, text);
    return g_string_free(out, FALSE);
}

const char *rv_escape_if_needed(const char *text, char **scratch)
{
    g_free(*scratch);
    *scratch = NULL;
    if (!rv_text_needs_escape(text)) return text ? text : "";
    *scratch = rv_escape_text(text);
    return *scratch;
}

/* Append text with bytes that are not UTF-8 as \xNN, stopping before the
 * character that would take it past `limit` bytes; returns how much of
 * text was consumed. */
static gsize append_valid(GString *out, const char *text, gsize length, gsize limit)
{
    gsize at = 0;
    while (at < length) {
        gunichar c = g_utf8_get_char_validated(text + at, (gssize)(length - at));
        gboolean valid = c != (gunichar)-1 && c != (gunichar)-2;
        gsize step = valid ? (gsize)(g_utf8_next_char(text + at) - (text + at)) : 1;
        gsize grows = valid ? step : 4;
        if (out->len + grows > limit) break;
        if (valid) g_string_append_len(out, text + at, (gssize)step);
        else g_string_append_printf(out, "\\x%02x", (unsigned char)text[at]);
        at += step;
    }
    return at;
}

const char *rv_bounded_name(const char *text, char **scratch)
{
    *scratch = NULL;
    if (text == NULL) return "";
    gsize length = strlen(text);
    if (length <= RV_NAME_BOUND && g_utf8_validate(text, (gssize)length, NULL)) return text;
    GString *out = g_string_sized_new(MIN(length, RV_NAME_BOUND) + 48);
    gsize consumed = append_valid(out, text, length, RV_NAME_BOUND);
    if (consumed < length) g_string_append_printf(out, " [... %" G_GSIZE_FORMAT " bytes in all]", length);
    *scratch = g_string_free(out, FALSE);
    return *scratch;
}

void rv_set_escaped_error(GError **error, int code, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = g_strdup_vprintf(format, args);
    va_end(args);
    char *shown = rv_escape_text(text);
    g_set_error_literal(error, RV_ERROR, code, shown);
    g_free(shown);
    g_free(text);
}
