/*
 * plugin.c - loading optimization plugins (GModule) and parsing their
 * parameters against the typed table each one declares.
 *
 * Search order for a plugin named NAME (file NAME.so): each folder of
 * REVERIE_PLUGIN_PATH, the build tree's optimizations/ folder, then the
 * install folder.  A name containing '/' or ending in ".so" is a path.
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/units.h"
#include <gmodule.h>
#include <string.h>

#ifndef REVERIE_BUILD_PLUGIN_DIR
#define REVERIE_BUILD_PLUGIN_DIR ""
#endif
#ifndef REVERIE_PLUGIN_DIR
#define REVERIE_PLUGIN_DIR "/usr/local/lib/reverie"
#endif

struct rv_loaded_plugin {
    GModule *module;
    const rv_plugin *descriptor;
    char *path;
};

typedef struct {
    const rv_param_spec *spec;
    double number;
    int64_t integer;
    char *text;
    gboolean given;
} param_value;

struct rv_params {
    GHashTable *values;      /* name -> param_value* */
    const rv_param_spec *table;
};

static const char *const type_names[] = {
    "number", "integer", "duration", "size", "bandwidth", "choice", "string",
};

const char *rv_param_type_name(rv_param_type type)
{
    return type <= RV_PARAM_STRING ? type_names[type] : "?";
}

GPtrArray *rv_plugin_search_path(void)
{
    GPtrArray *folders = g_ptr_array_new_with_free_func(g_free);
    const char *env = g_getenv("REVERIE_PLUGIN_PATH");
    if (env != NULL) {
        char **parts = g_strsplit(env, G_SEARCHPATH_SEPARATOR_S, -1);
        for (char **part = parts; *part; part++)
            if (**part) g_ptr_array_add(folders, g_strdup(*part));
        g_strfreev(parts);
    }
    if (REVERIE_BUILD_PLUGIN_DIR[0] && g_file_test(REVERIE_BUILD_PLUGIN_DIR, G_FILE_TEST_IS_DIR))
        g_ptr_array_add(folders, g_strdup(REVERIE_BUILD_PLUGIN_DIR));
    g_ptr_array_add(folders, g_strdup(REVERIE_PLUGIN_DIR));
    return folders;
}

static char *find_plugin_file(const char *name)
{
    if (strchr(name, '/') != NULL || g_str_has_suffix(name, ".so"))
        return g_strdup(name);
    GPtrArray *folders = rv_plugin_search_path();
    char *found = NULL;
    for (guint i = 0; i < folders->len && found == NULL; i++) {
        char *file = g_strdup_printf("%s/%s.so", (char *)g_ptr_array_index(folders, i), name);
        if (g_file_test(file, G_FILE_TEST_IS_REGULAR)) found = file;
        else g_free(file);
    }
    g_ptr_array_free(folders, TRUE);
    return found;
}

static gboolean check_descriptor(const rv_plugin *descriptor, const char *path, GError **error)
{
    if (descriptor->abi_version != RV_PLUGIN_ABI_VERSION) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "plugin %s: built for plugin ABI %u, this reverie has ABI %u; rebuild it",
                    path, descriptor->abi_version, RV_PLUGIN_ABI_VERSION);
        return FALSE;
    }
    if (descriptor->name == NULL || descriptor->apply == NULL || descriptor->params == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "plugin %s: descriptor is incomplete (needs name, params and apply)", path);
        return FALSE;
    }
    return TRUE;
}

rv_loaded_plugin *rv_plugin_load(const char *name_or_path, GError **error)
{
    char *path = find_plugin_file(name_or_path);
    if (path == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no optimization named '%s' (see 'reverie plugins'; or give a path to a .so)",
                    name_or_path);
        return NULL;
    }
    GModule *module = g_module_open(path, G_MODULE_BIND_LOCAL);
    if (module == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "plugin %s: cannot load: %s", path, g_module_error());
        g_free(path);
        return NULL;
    }
    gpointer symbol = NULL;
    if (!g_module_symbol(module, RV_PLUGIN_SYMBOL, &symbol) || symbol == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "plugin %s: no '%s' symbol - not a reverie plugin",
                    path, RV_PLUGIN_SYMBOL);
        g_module_close(module);
        g_free(path);
        return NULL;
    }
    if (!check_descriptor(symbol, path, error)) {
        g_module_close(module);
        g_free(path);
        return NULL;
    }
    rv_loaded_plugin *plugin = g_new0(rv_loaded_plugin, 1);
    plugin->module = module;
    plugin->descriptor = symbol;
    plugin->path = path;
    return plugin;
}

void rv_plugin_unload(rv_loaded_plugin *plugin)
{
    if (plugin == NULL) return;
    g_module_close(plugin->module);
    g_free(plugin->path);
    g_free(plugin);
}

const rv_plugin *rv_plugin_descriptor_of(const rv_loaded_plugin *plugin) { return plugin->descriptor; }

static gint compare_plugins(gconstpointer a, gconstpointer b)
{
    const rv_loaded_plugin *x = *(rv_loaded_plugin *const *)a, *y = *(rv_loaded_plugin *const *)b;
    return strcmp(x->descriptor->name, y->descriptor->name);
}

GPtrArray *rv_plugin_discover(GError **error)
{
    GPtrArray *plugins = g_ptr_array_new_with_free_func((GDestroyNotify)rv_plugin_unload);
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    GPtrArray *folders = rv_plugin_search_path();
    for (guint i = 0; i < folders->len; i++) {
        GDir *dir = g_dir_open(g_ptr_array_index(folders, i), 0, NULL);
        if (dir == NULL) continue;
        const char *entry;
        while ((entry = g_dir_read_name(dir)) != NULL) {
            if (!g_str_has_suffix(entry, ".so") || g_hash_table_contains(seen, entry)) continue;
            char *path = g_build_filename(g_ptr_array_index(folders, i), entry, NULL);
            rv_loaded_plugin *plugin = rv_plugin_load(path, NULL);
            g_free(path);
            if (plugin == NULL) continue;
            g_hash_table_add(seen, g_strdup(entry));
            g_ptr_array_add(plugins, plugin);
        }
        g_dir_close(dir);
    }
    g_ptr_array_free(folders, TRUE);
    g_hash_table_destroy(seen);
    g_ptr_array_sort(plugins, compare_plugins);
    (void)error;
    return plugins;
}

/* ---- parameters ----------------------------------------------------- */

static gboolean parse_choice(const rv_param_spec *spec, const char *text, GError **error)
{
    char **choices = g_strsplit(spec->choices ? spec->choices : "", "|", -1);
    gboolean ok = g_strv_contains((const char *const *)choices, text);
    g_strfreev(choices);
    if (!ok)
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s=%s: expected one of %s", spec->name, text,
                    spec->choices ? spec->choices : "(none)");
    return ok;
}

static gboolean parse_value(const rv_param_spec *spec, const char *text, param_value *value, GError **error)
{
    GError *inner = NULL;
    gboolean ok = TRUE;
    double number = 0;
    switch (spec->type) {
    case RV_PARAM_NUMBER: ok = rv_parse_number(text, &value->number, &inner); break;
    case RV_PARAM_INTEGER:
        ok = rv_parse_number(text, &number, &inner);
        if (ok && number != (double)(int64_t)number) {
            g_set_error(&inner, RV_ERROR, RV_ERROR_USAGE, "\"%s\" is not a whole number", text);
            ok = FALSE;
        }
        value->integer = (int64_t)number;
        value->number = number;
        break;
    case RV_PARAM_DURATION: ok = rv_parse_duration_ns(text, &value->integer, &inner); break;
    case RV_PARAM_BYTES: ok = rv_parse_bytes(text, &value->integer, &inner); break;
    case RV_PARAM_BANDWIDTH: ok = rv_parse_bandwidth(text, &value->number, &inner); break;
    case RV_PARAM_CHOICE: ok = parse_choice(spec, text, &inner); break;
    case RV_PARAM_STRING: break;
    }
    if (!ok) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "parameter %s: %s", spec->name, inner->message);
        g_error_free(inner);
        return FALSE;
    }
    g_free(value->text);
    value->text = g_strdup(text);
    return TRUE;
}

static void free_value(gpointer data)
{
    param_value *value = data;
    g_free(value->text);
    g_free(value);
}

static gboolean apply_defaults(rv_params *params, const rv_plugin *plugin, GError **error)
{
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++) {
        param_value *value = g_new0(param_value, 1);
        value->spec = spec;
        g_hash_table_insert(params->values, (gpointer)spec->name, value);
        if (spec->default_value && !parse_value(spec, spec->default_value, value, error)) {
            g_prefix_error(error, "plugin %s: bad default: ", plugin->name);
            return FALSE;
        }
    }
    return TRUE;
}

/* Split "a=1,b=x,y" on commas, but a piece without '=' continues the
 * previous value (so selections and lists can contain commas). */
static GPtrArray *split_assignments(const char *text)
{
    GPtrArray *pieces = g_ptr_array_new_with_free_func(g_free);
    char **parts = g_strsplit(text, ",", -1);
    for (char **part = parts; *part; part++) {
        if (**part == '\0') continue;
        if (strchr(*part, '=') == NULL && pieces->len > 0) {
            char *joined = g_strdup_printf("%s,%s", (char *)g_ptr_array_index(pieces, pieces->len - 1), *part);
            g_free(pieces->pdata[pieces->len - 1]);
            pieces->pdata[pieces->len - 1] = joined;
        } else {
            g_ptr_array_add(pieces, g_strdup(*part));
        }
    }
    g_strfreev(parts);
    return pieces;
}

const rv_param_spec *rv_plugin_param(const rv_plugin *plugin, const char *name)
{
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++)
        if (strcmp(spec->name, name) == 0) return spec;
    return NULL;
}

char *rv_plugin_param_names(const rv_plugin *plugin)
{
    GString *names = g_string_new(NULL);
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++)
        g_string_append_printf(names, "%s%s", names->len ? ", " : "", spec->name);
    if (names->len == 0) g_string_assign(names, "none");
    return g_string_free(names, FALSE);
}

static gboolean assign(rv_params *params, const rv_plugin *plugin, const char *piece, GError **error)
{
    const char *equals = strchr(piece, '=');
    if (equals == NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "plugin %s: '%s' is not key=value", plugin->name, piece);
        return FALSE;
    }
    char *key = g_strndup(piece, (gsize)(equals - piece));
    param_value *value = g_hash_table_lookup(params->values, key);
    gboolean ok = value != NULL;
    if (!ok) {
        char *names = rv_plugin_param_names(plugin);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "plugin %s: unknown parameter '%s' (parameters: %s)",
                    plugin->name, key, names);
        g_free(names);
    } else if ((ok = parse_value(value->spec, equals + 1, value, error))) {
        value->given = TRUE;
    } else {
        g_prefix_error(error, "plugin %s: ", plugin->name);
    }
    g_free(key);
    return ok;
}

static gboolean check_required(const rv_params *params, const rv_plugin *plugin, GError **error)
{
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++) {
        const param_value *value = g_hash_table_lookup(params->values, spec->name);
        if (value->text == NULL) {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "plugin %s: parameter '%s' is required (%s)",
                        plugin->name, spec->name, spec->help ? spec->help : "");
            return FALSE;
        }
    }
    return TRUE;
}

rv_params *rv_params_parse(const rv_plugin *plugin, const char *text, GError **error)
{
    rv_params *params = g_new0(rv_params, 1);
    params->values = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, free_value);
    params->table = plugin->params;
    gboolean ok = apply_defaults(params, plugin, error);
    GPtrArray *pieces = split_assignments(text ? text : "");
    for (guint i = 0; ok && i < pieces->len; i++) ok = assign(params, plugin, g_ptr_array_index(pieces, i), error);
    g_ptr_array_free(pieces, TRUE);
    if (ok) ok = check_required(params, plugin, error);
    if (!ok) { rv_params_free(params); return NULL; }
    return params;
}

void rv_params_free(rv_params *params)
{
    if (params == NULL) return;
    g_hash_table_destroy(params->values);
    g_free(params);
}

static const param_value *lookup(const rv_params *params, const char *name)
{
    const param_value *value = g_hash_table_lookup(params->values, name);
    g_return_val_if_fail(value != NULL, NULL); /* a plugin asked for a name it did not declare */
    return value;
}

double rv_params_number(const rv_params *p, const char *n) { const param_value *v = lookup(p, n); return v ? v->number : 0; }
int64_t rv_params_integer(const rv_params *p, const char *n) { const param_value *v = lookup(p, n); return v ? v->integer : 0; }
int64_t rv_params_duration_ns(const rv_params *p, const char *n) { const param_value *v = lookup(p, n); return v ? v->integer : 0; }
int64_t rv_params_bytes(const rv_params *p, const char *n) { const param_value *v = lookup(p, n); return v ? v->integer : 0; }
double rv_params_bandwidth(const rv_params *p, const char *n) { const param_value *v = lookup(p, n); return v ? v->number : 0; }
const char *rv_params_string(const rv_params *p, const char *n) { const param_value *v = lookup(p, n); return v ? v->text : NULL; }
gboolean rv_params_given(const rv_params *p, const char *n) { const param_value *v = lookup(p, n); return v && v->given; }

GPtrArray *rv_params_describe(const rv_params *params)
{
    GPtrArray *lines = g_ptr_array_new_with_free_func(g_free);
    for (const rv_param_spec *spec = params->table; spec->name; spec++) {
        const param_value *value = g_hash_table_lookup(params->values, spec->name);
        g_ptr_array_add(lines, g_strdup_printf("%s=%s", spec->name, value && value->text ? value->text : ""));
    }
    return lines;
}
