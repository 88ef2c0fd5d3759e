/*
 * fuzz_params.c - libFuzzer harness for the text users type on the command
 * line and names that come from traces: plugin parameters with units
 * (rv_params_parse, units.c) and the escaping of names (escape.c).
 *
 * The harness aborts on any sanitizer report and when a promise breaks:
 *   - an accepted parameter lies outside its documented bounds (integers
 *     below 2^53, durations and sizes within checked.h's limits, numbers
 *     finite, bandwidths finite and above zero);
 *   - a refused one fails with anything but RV_ERROR_USAGE;
 *   - escaped text is not UTF-8, or still holds a control character.
 * Build and run: tests/fuzz/run_all.sh.
 */
#include "reverie/checked.h"
#include "reverie/error.h"
#include "reverie/escape.h"
#include "reverie/plugin.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const rv_param_spec specs[] = {
    { "n", RV_PARAM_NUMBER, "1", NULL, NULL, NULL },
    { "i", RV_PARAM_INTEGER, "1", NULL, NULL, NULL },
    { "d", RV_PARAM_DURATION, "1us", NULL, NULL, NULL },
    { "b", RV_PARAM_BYTES, "1KB", NULL, NULL, NULL },
    { "w", RV_PARAM_BANDWIDTH, "1GB/s", NULL, NULL, NULL },
    { "c", RV_PARAM_CHOICE, "a", NULL, NULL, "a|bb|c c" },
    { "s", RV_PARAM_STRING, "", NULL, NULL, NULL },
    { NULL }
};

static gboolean apply_nothing(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    return TRUE;
}

static const rv_plugin descriptor = { RV_PLUGIN_ABI_VERSION, "fuzz", "", specs, apply_nothing, NULL };

static void fail(const char *what, const char *text)
{
    fprintf(stderr, "fuzz_params: %s: \"%s\"\n", what, text);
    abort();
}

static void check_values(const rv_params *params, const char *text)
{
    if (!isfinite(rv_params_number(params, "n"))) fail("a number that is not finite", text);
    if (fabs((double)rv_params_integer(params, "i")) >= RV_MAX_EXACT_INTEGER) fail("an integer beyond 2^53", text);
    int64_t d = rv_params_duration_ns(params, "d"), b = rv_params_bytes(params, "b");
    if (d < 0 || d > RV_MAX_DURATION_NS) fail("a duration out of bounds", text);
    if (b < 0 || b > RV_MAX_BYTES) fail("a size out of bounds", text);
    double w = rv_params_bandwidth(params, "w");
    if (!isfinite(w) || !(w > 0)) fail("a bandwidth out of bounds", text);
    GPtrArray *described = rv_params_describe(params);
    g_ptr_array_free(described, TRUE);
}

static void check_escape(const char *text)
{
    char *escaped = rv_escape_text(text);
    if (!g_utf8_validate(escaped, -1, NULL)) fail("escaped text is not UTF-8", text);
    for (const char *c = escaped; *c; c = g_utf8_next_char(c)) {
        gunichar u = g_utf8_get_char(c);
        if (u < 0x20 || u == 0x7f || (u >= 0x80 && u <= 0x9f)) fail("escaped text holds a control character", text);
    }
    if (rv_text_needs_escape(text) != (g_strcmp0(text, escaped) != 0)) fail("rv_text_needs_escape disagrees", text);
    g_free(escaped);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = g_strndup((const char *)data, size);
    GError *error = NULL;
    rv_params *params = rv_params_parse(&descriptor, text, &error);
    if (params != NULL) {
        check_values(params, text);
        rv_params_free(params);
    } else if (error == NULL || error->domain != RV_ERROR || error->code != RV_ERROR_USAGE) {
        fail("refused without an RV_ERROR_USAGE error", text);
    }
    g_clear_error(&error);
    check_escape(text);
    g_free(text);
    return 0;
}
