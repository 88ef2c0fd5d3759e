/*
 * sweep_plan.c - the variants of a sweep: --vary axes (lists and ranges
 * with units), --variants files, and each variant's list of specs (see
 * sweep_plan.h for the rules).
 */
#include "reverie/sweep_plan.h"
#include "reverie/error.h"
#include "reverie/optimize.h"
#include "reverie/units.h"
#include <math.h>
#include <string.h>

#define MAX_POINTS 1000000

static void axis_free(gpointer data)
{
    rv_sweep_axis *axis = data;
    g_free(axis->text);
    g_free(axis->plugin);
    g_free(axis->param);
    g_ptr_array_unref(axis->values);
    g_free(axis);
}

void rv_sweep_plan_free(rv_sweep_plan *plan)
{
    if (plan == NULL) return;
    g_ptr_array_unref(plan->base);
    g_ptr_array_unref(plan->lines);
    g_ptr_array_unref(plan->line_texts);
    g_ptr_array_unref(plan->axes);
    g_free(plan);
}

static GPtrArray *strings_array(void)
{
    return g_ptr_array_new_with_free_func(g_free);
}

/* ---- values of one axis --------------------------------------------- */

/* A quantity in its canonical unit (ns, bytes, bytes/s, or the number). */
static gboolean canonical_value(rv_param_type type, const char *text, double *value, GError **error)
{
    int64_t integer = 0;
    gboolean ok;
    switch (type) {
    case RV_PARAM_DURATION: ok = rv_parse_duration_ns(text, &integer, error); *value = (double)integer; return ok;
    case RV_PARAM_BYTES: ok = rv_parse_bytes(text, &integer, error); *value = (double)integer; return ok;
    case RV_PARAM_BANDWIDTH: return rv_parse_bandwidth(text, value, error);
    default: return rv_parse_number(text, value, error);
    }
}

/* A range's end: its canonical value, and how it was written (the number
 * and the unit after it), so the points between read like the ends. */
typedef struct {
    double value;   /* canonical */
    double number;  /* as written */
    char *unit;     /* as written after the number, "" if none */
} range_end;

static gboolean parse_range_end(rv_param_type type, const char *text, range_end *end, GError **error)
{
    char *rest = NULL;
    GError *units = NULL;
    end->unit = NULL;
    if (!canonical_value(type, text, &end->value, &units)) { /* a bad value is bad usage: exit 1 */
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s", units->message);
        g_error_free(units);
        return FALSE;
    }
    end->number = g_ascii_strtod(text, &rest);
    end->unit = g_strstrip(g_strdup(rest ? rest : ""));
    return TRUE;
}

/* "lo..hi/N" or "lo..hi/N log" -> its parts; FALSE if it is not a range. */
static gboolean split_range(const char *text, char **lo, char **hi, int *points, gboolean *log_scale, GError **error)
{
    const char *dots = strstr(text, "..");
    if (dots == NULL) return FALSE;
    char *rest = g_strstrip(g_strdup(dots + 2));
    *log_scale = g_str_has_suffix(rest, " log") || g_str_has_suffix(rest, "\tlog");
    if (*log_scale) {
        rest[strlen(rest) - 3] = '\0';
        g_strstrip(rest);
    }
    const char *slash = strrchr(rest, '/'); /* the last: units such as GB/s have one too */
    char *count_end = NULL;
    gint64 count = slash ? g_ascii_strtoll(slash + 1, &count_end, 10) : 0;
    if (slash == NULL || count_end == slash + 1 || *count_end != '\0' || count < 2 || count > MAX_POINTS) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "a range is lo..hi/N with N from 2 to %d points, or lo..hi/N log", MAX_POINTS);
        g_free(rest);
        return TRUE;
    }
    *lo = g_strstrip(g_strndup(text, (gsize)(dots - text)));
    *hi = g_strstrip(g_strndup(rest, (gsize)(slash - rest)));
    *points = (int)count;
    g_free(rest);
    return TRUE;
}

/* Point i of n between the ends, written in lo's unit (hi's if lo is 0). */
static char *range_point(const rv_param_spec *spec, const range_end *lo, const range_end *hi, int i, int n,
                         gboolean log_scale)
{
    double t = (double)i / (n - 1);
    double value = log_scale ? lo->value * pow(hi->value / lo->value, t) : lo->value + (hi->value - lo->value) * t;
    const range_end *like = lo->number != 0 ? lo : hi;
    double per_unit = like->number != 0 ? like->value / like->number : 1.0;
    double shown = value / per_unit;
    char number[G_ASCII_DTOSTR_BUF_SIZE];
    if (spec->type == RV_PARAM_INTEGER || (spec->type == RV_PARAM_BYTES && *like->unit == '\0'))
        g_snprintf(number, sizeof number, "%.0f", round(shown));
    else
        g_ascii_formatd(number, sizeof number, "%.6g", shown);
    return g_strconcat(number, like->unit, NULL);
}

static gboolean expand_range(const rv_param_spec *spec, const char *lo_text, const char *hi_text, int points,
                             gboolean log_scale, GPtrArray *values, GError **error)
{
    if (spec->type == RV_PARAM_CHOICE || spec->type == RV_PARAM_STRING) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s is a %s: give a list a,b,c, not a range", spec->name,
                    rv_param_type_name(spec->type));
        return FALSE;
    }
    range_end lo = { 0, 0, NULL }, hi = { 0, 0, NULL };
    gboolean ok = parse_range_end(spec->type, lo_text, &lo, error) && parse_range_end(spec->type, hi_text, &hi, error);
    if (ok && log_scale && !(lo.value > 0 && hi.value > 0)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "a log range needs both ends above zero");
        ok = FALSE;
    }
    for (int i = 0; ok && i < points; i++)
        g_ptr_array_add(values, i == 0 ? g_strdup(lo_text) : i == points - 1 ? g_strdup(hi_text)
                                                            : range_point(spec, &lo, &hi, i, points, log_scale));
    g_free(lo.unit);
    g_free(hi.unit);
    return ok;
}

static gboolean expand_list(const char *text, GPtrArray *values, GError **error)
{
    char **items = g_strsplit(text, ",", -1);
    gboolean ok = TRUE;
    for (char **item = items; *item && ok; item++) {
        char *value = g_strstrip(g_strdup(*item));
        if (*value == '\0') {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "an empty value in the list");
            ok = FALSE;
            g_free(value);
        } else {
            g_ptr_array_add(values, value);
        }
    }
    g_strfreev(items);
    return ok;
}

static gboolean expand_values(const rv_param_spec *spec, const char *list, GPtrArray *values, GError **error)
{
    char *lo = NULL, *hi = NULL;
    int points = 0;
    gboolean log_scale = FALSE;
    GError *syntax = NULL;
    if (!split_range(list, &lo, &hi, &points, &log_scale, &syntax)) return expand_list(list, values, error);
    if (syntax) {
        g_propagate_error(error, syntax);
        return FALSE;
    }
    gboolean ok = expand_range(spec, lo, hi, points, log_scale, values, error);
    g_free(lo);
    g_free(hi);
    return ok;
}

/* "NAME.PARAM=LIST" -> an axis whose plugin is loaded and whose values
 * each parse as PARAM.  The error says which --vary and why. */
static rv_sweep_axis *parse_axis(const char *text, GHashTable *plugins, GError **error)
{
    const char *equals = strchr(text, '=');
    char *key = equals ? g_strndup(text, (gsize)(equals - text)) : g_strdup(text);
    char *dot = strrchr(key, '.');
    if (equals == NULL || dot == NULL || dot == key || dot[1] == '\0') {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "--vary %s: expected NAME.PARAM=LIST (e.g. ddp.world=2,4,8)", text);
        g_free(key);
        return NULL;
    }
    rv_sweep_axis *axis = g_new0(rv_sweep_axis, 1);
    axis->text = g_strdup(text);
    axis->plugin = g_strndup(key, (gsize)(dot - key));
    axis->param = g_strdup(dot + 1);
    axis->values = strings_array();
    g_free(key);
    const rv_loaded_plugin *loaded = rv_plugin_table_get(plugins, axis->plugin, error);
    const rv_plugin *plugin = loaded ? rv_plugin_descriptor_of(loaded) : NULL;
    const rv_param_spec *spec = plugin ? rv_plugin_param(plugin, axis->param) : NULL;
    gboolean ok = spec != NULL;
    if (plugin != NULL && spec == NULL) {
        char *what = rv_plugin_unknown_param(plugin, axis->param);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "--vary %s: plugin %s has no parameter %s", text, axis->plugin,
                    what);
        g_free(what);
    }
    if (ok && !expand_values(spec, equals + 1, axis->values, error)) {
        g_prefix_error(error, "--vary %s: ", text);
        ok = FALSE;
    }
    if (!ok) {
        axis_free(axis);
        return NULL;
    }
    return axis;
}

/* ---- --variants files ------------------------------------------------ */

/* One line: shell words, each a spec ("--opt" words are allowed and skipped,
 * so a line can be copied from a whatif command). */
static GPtrArray *parse_line(const char *line, GError **error)
{
    int argc = 0;
    char **argv = NULL;
    GError *shell = NULL;
    if (!g_shell_parse_argv(line, &argc, &argv, &shell)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s", shell->message);
        g_error_free(shell);
        return NULL;
    }
    GPtrArray *specs = strings_array();
    for (int i = 0; i < argc; i++) {
        const char *word = argv[i];
        if (strcmp(word, "--opt") == 0 || strcmp(word, "-o") == 0) continue;
        if (g_str_has_prefix(word, "--opt=")) word += 6;
        g_ptr_array_add(specs, g_strdup(word));
    }
    g_strfreev(argv);
    return specs;
}

/* Each spec parses against its plugin (which is loaded). */
static gboolean check_specs(GPtrArray *specs, GHashTable *plugins, GError **error)
{
    for (guint i = 0; i < specs->len; i++) {
        rv_opt *opt = rv_opt_parse(plugins, g_ptr_array_index(specs, i), error);
        if (opt == NULL) return FALSE;
        rv_opt_free(opt);
    }
    return TRUE;
}

/* A --variants file is text: a NUL byte would silently end a line early
 * (C strings), and specs are UTF-8 like every option value. */
static gboolean check_text(const char *path, const char *text, gsize length, GError **error)
{
    const char *nul = memchr(text, '\0', length), *bad = NULL;
    if (nul == NULL && g_utf8_validate(text, (gssize)length, &bad)) return TRUE;
    const char *at = nul ? nul : bad;
    guint line = 1;
    for (const char *c = text; c < at; c++) line += *c == '\n';
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s:%u: %s at byte %" G_GSIZE_FORMAT " - give a text file of --opt specs, "
                "one variant per line", path, line, nul ? "a NUL byte" : "text that is not UTF-8",
                (gsize)(at - text));
    return FALSE;
}

static gboolean read_variants(rv_sweep_plan *plan, const char *path, GHashTable *plugins, GError **error)
{
    char *text = NULL;
    gsize length = 0;
    GError *io = NULL;
    if (!g_file_get_contents(path, &text, &length, &io)) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "--variants: %s", io->message);
        g_error_free(io);
        return FALSE;
    }
    if (!check_text(path, text, length, error)) {
        g_free(text);
        return FALSE;
    }
    char **lines = g_strsplit(text, "\n", -1);
    gboolean ok = TRUE;
    for (guint n = 0; lines[n] && ok; n++) {
        char *line = g_strstrip(lines[n]);
        if (*line == '\0' || *line == '#') continue;
        GPtrArray *specs = parse_line(line, error);
        if (specs != NULL && specs->len == 0)
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "no --opt spec on the line");
        ok = specs != NULL && specs->len > 0 && check_specs(specs, plugins, error);
        if (!ok) {
            g_prefix_error(error, "%s:%u: ", path, n + 1);
        } else {
            g_ptr_array_add(plan->lines, g_ptr_array_ref(specs));
            g_ptr_array_add(plan->line_texts, g_strdup(line));
        }
        if (specs) g_ptr_array_unref(specs);
    }
    if (ok && plan->lines->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "--variants %s: no variant in the file (one line of --opt specs each)",
                    path);
        ok = FALSE;
    }
    g_strfreev(lines);
    g_free(text);
    return ok;
}

/* ---- composing variants ---------------------------------------------- */

guint rv_sweep_plan_line(const rv_sweep_plan *plan, uint64_t v)
{
    return (guint)(v / (plan->count / plan->lines->len));
}

guint rv_sweep_plan_value_index(const rv_sweep_plan *plan, uint64_t v, guint axis)
{
    uint64_t rest = v % (plan->count / plan->lines->len);
    for (guint a = plan->axes->len; a-- > axis + 1;) rest /= ((rv_sweep_axis *)g_ptr_array_index(plan->axes, a))->values->len;
    return (guint)(rest % ((rv_sweep_axis *)g_ptr_array_index(plan->axes, axis))->values->len);
}

const char *rv_sweep_plan_value(const rv_sweep_plan *plan, uint64_t v, guint axis)
{
    const rv_sweep_axis *a = g_ptr_array_index(plan->axes, axis);
    return g_ptr_array_index(a->values, rv_sweep_plan_value_index(plan, v, axis));
}

/* The specs (base, then line) naming plugin `name`: their count, and the last. */
static guint specs_naming(GPtrArray *specs, const char *name, guint *found)
{
    guint count = 0;
    for (guint i = 0; i < specs->len; i++) {
        char *spec_name = rv_opt_spec_name(g_ptr_array_index(specs, i));
        if (strcmp(spec_name, name) == 0) { count++; *found = i; }
        g_free(spec_name);
    }
    return count;
}

/* Set PARAM=value on spec i (a later assignment wins in rv_params_parse). */
static void set_on_spec(GPtrArray *specs, guint i, const char *param, const char *value)
{
    char *spec = g_ptr_array_index(specs, i);
    specs->pdata[i] = g_strdup_printf("%s%s%s=%s", spec, strchr(spec, ':') ? "," : ":", param, value);
    g_free(spec);
}

GPtrArray *rv_sweep_plan_specs(const rv_sweep_plan *plan, uint64_t v)
{
    GPtrArray *specs = strings_array();
    GPtrArray *line = g_ptr_array_index(plan->lines, rv_sweep_plan_line(plan, v));
    for (guint i = 0; i < plan->base->len; i++) g_ptr_array_add(specs, g_strdup(g_ptr_array_index(plan->base, i)));
    for (guint i = 0; i < line->len; i++) g_ptr_array_add(specs, g_strdup(g_ptr_array_index(line, i)));
    for (guint a = 0; a < plan->axes->len; a++) {
        const rv_sweep_axis *axis = g_ptr_array_index(plan->axes, a);
        guint at = 0;
        if (specs_naming(specs, axis->plugin, &at) == 0) {
            g_ptr_array_add(specs, g_strdup(axis->plugin));
            at = specs->len - 1;
        }
        set_on_spec(specs, at, axis->param, rv_sweep_plan_value(plan, v, a));
    }
    return specs;
}

/* ---- checks ----------------------------------------------------------- */

/* An axis must name at most one spec of each line's list, or which one it
 * sets would be a guess. */
static gboolean check_axis_targets(const rv_sweep_plan *plan, GError **error)
{
    for (guint l = 0; l < plan->lines->len; l++) {
        GPtrArray *specs = g_ptr_array_new();
        g_ptr_array_extend(specs, plan->base, NULL, NULL);
        g_ptr_array_extend(specs, g_ptr_array_index(plan->lines, l), NULL, NULL);
        for (guint a = 0; a < plan->axes->len; a++) {
            const rv_sweep_axis *axis = g_ptr_array_index(plan->axes, a);
            guint at = 0, count = specs_naming(specs, axis->plugin, &at);
            if (count > 1) {
                g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                            "--vary %s.%s: %s is applied %u times in a variant; vary one of them by listing "
                            "the variants with --variants", axis->plugin, axis->param, axis->plugin, count);
                g_ptr_array_unref(specs);
                return FALSE;
            }
        }
        g_ptr_array_unref(specs);
    }
    return TRUE;
}

static gboolean check_variant(const rv_sweep_plan *plan, uint64_t v, GHashTable *plugins, GError **error)
{
    GPtrArray *specs = rv_sweep_plan_specs(plan, v);
    gboolean ok = check_specs(specs, plugins, error);
    g_ptr_array_unref(specs);
    return ok;
}

/* Every value of every axis, and every line, once in a whole variant: a
 * bad value or a required parameter missing shows here, naming the --vary
 * or the line, not in the middle of the sweep. */
static gboolean check_variants(const rv_sweep_plan *plan, GHashTable *plugins, GError **error)
{
    uint64_t per_line = plan->count / plan->lines->len, stride = 1;
    for (guint a = plan->axes->len; a-- > 0;) {
        const rv_sweep_axis *axis = g_ptr_array_index(plan->axes, a);
        for (guint i = 0; i < axis->values->len; i++)
            if (!check_variant(plan, i * stride, plugins, error)) {
                g_prefix_error(error, "--vary %s: ", axis->text);
                return FALSE;
            }
        stride *= axis->values->len;
    }
    for (guint l = 0; l < plan->lines->len; l++)
        if (!check_variant(plan, l * per_line, plugins, error)) {
            if (plan->lines->len > 1 || *(const char *)g_ptr_array_index(plan->line_texts, l))
                g_prefix_error(error, "--variants line '%s': ", (const char *)g_ptr_array_index(plan->line_texts, l));
            return FALSE;
        }
    return TRUE;
}

/* The axis just added must not vary a parameter an earlier one varies. */
static gboolean check_new_axis(const rv_sweep_plan *plan, GError **error)
{
    const rv_sweep_axis *added = g_ptr_array_index(plan->axes, plan->axes->len - 1);
    for (guint a = 0; a + 1 < plan->axes->len; a++) {
        const rv_sweep_axis *axis = g_ptr_array_index(plan->axes, a);
        if (strcmp(axis->plugin, added->plugin) == 0 && strcmp(axis->param, added->param) == 0) {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "--vary %s.%s is given twice; give its values in one list",
                        added->plugin, added->param);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean count_variants(rv_sweep_plan *plan, GError **error)
{
    plan->count = plan->lines->len;
    for (guint a = 0; a < plan->axes->len; a++) {
        plan->count *= ((rv_sweep_axis *)g_ptr_array_index(plan->axes, a))->values->len;
        if (plan->count > RV_SWEEP_MAX_VARIANTS) {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "more than %" G_GUINT64_FORMAT " variants; split the sweep",
                        RV_SWEEP_MAX_VARIANTS);
            return FALSE;
        }
    }
    return TRUE;
}

rv_sweep_plan *rv_sweep_plan_new(char **opts, char **varies, const char *variants_file, GHashTable *plugins,
                           GError **error)
{
    rv_sweep_plan *plan = g_new0(rv_sweep_plan, 1);
    plan->base = strings_array();
    plan->lines = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    plan->line_texts = strings_array();
    plan->axes = g_ptr_array_new_with_free_func(axis_free);
    for (char **spec = opts; spec && *spec; spec++) g_ptr_array_add(plan->base, g_strdup(*spec));
    gboolean ok = check_specs(plan->base, plugins, error);
    if (ok && variants_file) ok = read_variants(plan, variants_file, plugins, error);
    if (ok && !variants_file) {
        g_ptr_array_add(plan->lines, strings_array());
        g_ptr_array_add(plan->line_texts, g_strdup(""));
    }
    for (char **vary = varies; ok && vary && *vary; vary++) {
        rv_sweep_axis *axis = parse_axis(*vary, plugins, error);
        if (axis) g_ptr_array_add(plan->axes, axis);
        ok = axis != NULL && check_new_axis(plan, error);
    }
    ok = ok && count_variants(plan, error) && check_axis_targets(plan, error) && check_variants(plan, plugins, error);
    if (!ok) {
        rv_sweep_plan_free(plan);
        return NULL;
    }
    return plan;
}
