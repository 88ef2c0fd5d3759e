/*
 * plugin.c - loading optimization plugins (GModule), parsing their
 * parameters against the typed table each one declares, and applying them.
 *
 * A plugin is named or given as a file:
 *   - a name (letters, digits, '-' and '_') is looked up as NAME.so in the
 *     plugin folders, in order: each folder of REVERIE_PLUGIN_PATH, the
 *     optimizations/ folder of the build tree when the running library is
 *     in one, else reverie/ beside the library (an install or a wheel,
 *     paths.h), then the install folder;
 *   - anything with a '/' (./my.so, /opt/x/my.so) is that file, never a
 *     search: a bare "my.so" is refused rather than handed to dlopen(),
 *     which would look it up through LD_LIBRARY_PATH.
 * The build tree is found at run time from the library's own path (a
 * meson build folder holds meson-private/), never compiled in, so an
 * installed library does not search the folder it was built in.
 *
 * Loading a shared object runs its constructors.  Listing the folders
 * (rv_plugin_discover) reads each file's ELF symbol table first and loads
 * only files that define rv_plugin_descriptor.
 */
#include "reverie/plugin.h"
#include "reverie/checked.h"
#include "reverie/error.h"
#include "reverie/paths.h"
#include "reverie/suggest.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include "elf.h"
#include "../graph/cycles.h"
#include <gmodule.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

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

/* The user's folders: REVERIE_PLUGIN_PATH's. */
static GPtrArray *user_folders(void)
{
    GPtrArray *folders = g_ptr_array_new_with_free_func(g_free);
    const char *env = g_getenv("REVERIE_PLUGIN_PATH");
    if (env != NULL) {
        char **parts = g_strsplit(env, G_SEARCHPATH_SEPARATOR_S, -1);
        for (char **part = parts; *part; part++)
            if (**part) g_ptr_array_add(folders, g_strdup(*part));
        g_strfreev(parts);
    }
    return folders;
}

/* The built-in plugins' folders: the build tree, or an install's or a
 * wheel's folder, beside the library (paths.h), then the install folder. */
static GPtrArray *builtin_folders(void)
{
    GPtrArray *folders = g_ptr_array_new_with_free_func(g_free);
    char *beside = rv_build_tree_path("optimizations");
    if (beside == NULL) beside = rv_beside_library_path(NULL);
    if (beside != NULL) g_ptr_array_add(folders, beside);
    if (beside == NULL || strcmp(beside, REVERIE_PLUGIN_DIR) != 0) g_ptr_array_add(folders, g_strdup(REVERIE_PLUGIN_DIR));
    return folders;
}

GPtrArray *rv_plugin_search_path(void)
{
    GPtrArray *folders = user_folders(), *builtin = builtin_folders();
    for (guint i = 0; i < builtin->len; i++) g_ptr_array_add(folders, g_strdup(g_ptr_array_index(builtin, i)));
    g_ptr_array_unref(builtin);
    return folders;
}

/* NAME.so in the first of the folders that has one (g_free), or NULL. */
static char *find_in(const GPtrArray *folders, const char *name)
{
    for (guint i = 0; i < folders->len; i++) {
        char *file = g_strdup_printf("%s/%s.so", (char *)g_ptr_array_index(folders, i), name);
        if (g_file_test(file, G_FILE_TEST_IS_REGULAR)) return file;
        g_free(file);
    }
    return NULL;
}

static gboolean same_file(const char *a, const char *b)
{
    GStatBuf x, y;
    return g_stat(a, &x) == 0 && g_stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The built-in plugin that a user's plugin file would shadow (g_free), or
 * NULL: a file of REVERIE_PLUGIN_PATH named like a built-in one, which is
 * not that file. */
static char *shadowed_builtin(const char *user_file, const char *name)
{
    GPtrArray *builtin = builtin_folders();
    char *original = find_in(builtin, name);
    g_ptr_array_unref(builtin);
    if (original != NULL && same_file(original, user_file)) g_clear_pointer(&original, g_free);
    return original;
}

static gboolean is_plugin_name(const char *name)
{
    if (*name == '\0') return FALSE;
    for (const char *c = name; *c; c++)
        if (!g_ascii_isalnum(*c) && *c != '-' && *c != '_') return FALSE;
    return TRUE;
}

/* The NAMEs of the NAME.so files in the plugin folders (loading none). */
static GPtrArray *names_on_path(const GPtrArray *folders)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < folders->len; i++) {
        GDir *dir = g_dir_open(g_ptr_array_index(folders, i), 0, NULL);
        const char *entry;
        while (dir && (entry = g_dir_read_name(dir)) != NULL)
            if (g_str_has_suffix(entry, ".so")) g_ptr_array_add(names, g_strndup(entry, strlen(entry) - 3));
        if (dir) g_dir_close(dir);
    }
    return names;
}

/* A name that names nothing is the user's typo (exit 1), not a plugin that
 * failed (exit 3): say so, with the nearest name there is. */
static void no_such_plugin(const char *name, const GPtrArray *folders, GError **error)
{
    GPtrArray *names = names_on_path(folders);
    const char *near = rv_suggest(name, (const char *const *)names->pdata, names->len);
    if (near)
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "no optimization named '%s': did you mean '%s'? (see 'reverie "
                    "plugins'; or give a path to a .so, such as ./%s.so)", name, near, name);
    else
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "no optimization named '%s' (see 'reverie plugins'; or give a path to a .so, such as ./%s.so)",
                    name, name);
    g_ptr_array_unref(names);
}

/*
 * A name is looked up in the user's folders, then the built-in ones.  A
 * user's plugin named like a built-in one is refused rather than silently
 * used instead of it: the user asks for it by giving its path.
 */
static char *search_folders(const char *name, GError **error)
{
    GPtrArray *users = user_folders();
    char *found = find_in(users, name);
    g_ptr_array_unref(users);
    char *original = found ? shadowed_builtin(found, name) : NULL;
    if (original != NULL) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s (from REVERIE_PLUGIN_PATH) has the name of the built-in "
                    "optimization %s (%s): rename it, or give its path (--opt %s) to use it instead",
                    found, name, original, found);
        g_free(original);
        g_free(found);
        return NULL;
    }
    if (found != NULL) return found;
    GPtrArray *folders = rv_plugin_search_path();
    found = find_in(folders, name);
    if (found == NULL) no_such_plugin(name, folders, error);
    g_ptr_array_free(folders, TRUE);
    return found;
}
/* The file to load: a path as given (made absolute, so that dlopen takes
 * it as that file), or a name found in the plugin folders. */
static char *find_plugin_file(const char *name, GError **error)
{
    if (strchr(name, '/') != NULL) {
        if (!g_file_test(name, G_FILE_TEST_IS_REGULAR)) {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "plugin %s: %s", name,
                        g_file_test(name, G_FILE_TEST_EXISTS) ? "not a regular file" : "no such file");
            return NULL;
        }
        return g_canonicalize_filename(name, NULL);
    }
    if (is_plugin_name(name)) return search_folders(name, error);
    if (g_str_has_suffix(name, ".so"))
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "'%s' is a file name: to load that file give its path "
                    "(./%s); a bare name is looked up in the plugin folders", name, name);
    else
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "'%s' is not an optimization name (letters, digits, '-', '_') "
                    "nor a path (with a '/')", name);
    return NULL;
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

static rv_loaded_plugin *load_file(char *path, GError **error)
{
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

rv_loaded_plugin *rv_plugin_load(const char *name_or_path, GError **error)
{
    char *path = find_plugin_file(name_or_path, error);
    return path ? load_file(path, error) : NULL;
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

/* Load path if its symbol table says it is a plugin; otherwise say why not. */
static rv_loaded_plugin *load_if_plugin(const char *path, GPtrArray *skipped)
{
    GError *error = NULL;
    const char *why = NULL;
    GMappedFile *file = g_mapped_file_new(path, FALSE, &error);
    gboolean plugin_file = file != NULL &&
        rv_elf_defines_symbol((const guint8 *)g_mapped_file_get_contents(file), g_mapped_file_get_length(file),
                              RV_PLUGIN_SYMBOL, &why);
    if (file != NULL) g_mapped_file_unref(file);
    rv_loaded_plugin *plugin = plugin_file ? load_file(g_strdup(path), &error) : NULL;
    if (plugin == NULL && skipped != NULL)
        g_ptr_array_add(skipped, error ? g_strdup(error->message) : g_strdup_printf("%s: not loaded: %s", path, why));
    g_clear_error(&error);
    return plugin;
}

/* The plugins in one folder, unless a file of that name was seen already
 * (seen: file name -> path): the same file is listed once, and a user's
 * file named like a built-in one is left out, with a line saying so. */
static void discover_in(const char *folder, GHashTable *seen, GPtrArray *plugins, GPtrArray *skipped)
{
    GDir *dir = g_dir_open(folder, 0, NULL);
    if (dir == NULL) return;
    const char *entry;
    while ((entry = g_dir_read_name(dir)) != NULL) {
        if (!g_str_has_suffix(entry, ".so")) continue;
        char *path = g_build_filename(folder, entry, NULL);
        const char *before = g_hash_table_lookup(seen, entry);
        if (before != NULL && !same_file(before, path) && skipped != NULL)
            g_ptr_array_add(skipped, g_strdup_printf("%s: not listed: it has the name of the built-in optimization "
                                                     "%s (give its path to --opt to use it instead)", path, before));
        rv_loaded_plugin *plugin = before == NULL && g_file_test(path, G_FILE_TEST_IS_REGULAR)
                                       ? load_if_plugin(path, skipped) : NULL;
        if (plugin != NULL) {
            g_hash_table_insert(seen, g_strdup(entry), path);
            g_ptr_array_add(plugins, plugin);
        } else {
            g_free(path);
        }
    }
    g_dir_close(dir);
}

GPtrArray *rv_plugin_discover(GPtrArray *skipped)
{
    GPtrArray *plugins = g_ptr_array_new_with_free_func((GDestroyNotify)rv_plugin_unload);
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    /* built-in first, so that a user's plugin never hides one */
    GPtrArray *builtin = builtin_folders(), *users = user_folders();
    for (guint i = 0; i < builtin->len; i++) discover_in(g_ptr_array_index(builtin, i), seen, plugins, skipped);
    for (guint i = 0; i < users->len; i++) discover_in(g_ptr_array_index(users, i), seen, plugins, skipped);
    g_ptr_array_unref(builtin);
    g_ptr_array_unref(users);
    g_hash_table_destroy(seen);
    g_ptr_array_sort(plugins, compare_plugins);
    return plugins;
}

/* ---- applying ------------------------------------------------------- */

/* Set once, before any plugin runs (plugin.h): read without a lock. */
static rv_plugin_apply_watch apply_watch;

void rv_plugin_watch_apply(rv_plugin_apply_watch watch)
{
    apply_watch = watch;
}

static gboolean apply_and_check(const rv_loaded_plugin *plugin, rv_graph *graph, const rv_params *params,
                                rv_plugin_output *output, GError **error)
{
    const rv_plugin *descriptor = plugin->descriptor;
    GError *failure = NULL;
    if (!rv_compose_check(graph, descriptor->name, descriptor->effects, &failure)) {
        g_prefix_error(&failure, "%s: ", descriptor->name);
        g_propagate_error(error, failure);
        return FALSE;
    }
    /* Kept to tell whether apply() touched the edges: only then can it
     * have closed a cycle in the graph it was given (taken as valid), and
     * only through an edge it changed (cycles.h). */
    rv_edges_before *edges_before = rv_edges_before_take(graph);
    gboolean ok = descriptor->apply(graph, params, output, &failure);
    if (ok && failure != NULL) {
        g_prefix_error(&failure, "reported success but set an error: ");
        ok = FALSE;
    }
    if (!ok && failure == NULL)
        g_set_error(&failure, RV_ERROR, RV_ERROR_PLUGIN, "failed without saying why (apply() returned FALSE "
                    "and set no error) - %s", plugin->path);
    if (!ok) {
        /* Whatever domain the plugin used (a GLib file error, its own), its
         * failure is a plugin error: exit status 3, as documented. */
        if (failure->domain != RV_ERROR) {
            failure->domain = RV_ERROR;
            failure->code = RV_ERROR_PLUGIN;
        }
        rv_edges_before_free(edges_before);
        g_prefix_error(&failure, "%s: ", descriptor->name);
        g_propagate_error(error, failure);
        return FALSE;
    }
    /* The plugin is foreign code with write access to the graph: check
     * what the simulator will trust, and blame the plugin, not the trace. */
    gboolean valid = rv_graph_validate_except_edges(graph, &failure);
    if (valid) valid = rv_edges_check_after_plugin(graph, edges_before, &failure);
    else rv_edges_before_free(edges_before);
    if (!valid) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "%s: the plugin left the graph broken (%s): %s",
                    descriptor->name, plugin->path, failure->message);
        g_error_free(failure);
        return FALSE;
    }
    rv_compose_record(graph, descriptor->name, descriptor->effects);
    return TRUE;
}

gboolean rv_plugin_apply(const rv_loaded_plugin *plugin, rv_graph *graph, const rv_params *params,
                         rv_plugin_output *output, GError **error)
{
    if (apply_watch) apply_watch(plugin->descriptor->name, TRUE);
    gboolean ok = apply_and_check(plugin, graph, params, output, error);
    if (apply_watch) apply_watch(plugin->descriptor->name, FALSE);
    return ok;
}

void rv_plugin_output_drop_after_replay(rv_plugin_output *output)
{
    if (output->free_after_replay_data) output->free_after_replay_data(output->after_replay_data);
    output->after_replay = NULL;
    output->after_replay_data = NULL;
    output->free_after_replay_data = NULL;
}

void rv_plugin_after_replay(const rv_loaded_plugin *plugin, rv_plugin_output *output, const rv_graph *graph,
                            const rv_host_replay *replay)
{
    if (output->after_replay == NULL) return;
    if (apply_watch) apply_watch(plugin->descriptor->name, TRUE);
    output->after_replay(graph, replay, output->notes, output->after_replay_data);
    if (apply_watch) apply_watch(plugin->descriptor->name, FALSE);
    rv_plugin_output_drop_after_replay(output);
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

/* A whole number that a double holds exactly: below 2^53 in size, since
 * the text "2^53 + 1" already reads as 2^53.  Anything larger could be
 * silently rounded, and past 2^63 the cast to int64 is undefined. */
static gboolean parse_integer(const char *text, param_value *value, GError **error)
{
    double number = 0;
    if (!rv_parse_number(text, &number, error)) return FALSE;
    if (fabs(number) >= RV_MAX_EXACT_INTEGER) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "\"%s\" is out of range (less than 2^53 in size)", text);
        return FALSE;
    }
    if (number != floor(number)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "\"%s\" is not a whole number", text);
        return FALSE;
    }
    value->integer = (int64_t)number;
    value->number = number;
    return TRUE;
}

/* A parsed amount above the limit of its kind (checked.h): plugins add and
 * multiply these, so they must stay far inside int64. */
static gboolean check_amount(const char *text, int64_t amount, int64_t limit, const char *what, GError **error)
{
    if (amount <= limit) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "\"%s\" is out of range (a %s of at most %" G_GINT64_FORMAT ")",
                text, what, limit);
    return FALSE;
}

static gboolean parse_value(const rv_param_spec *spec, const char *text, param_value *value, GError **error)
{
    GError *inner = NULL;
    gboolean ok = TRUE;
    switch (spec->type) {
    case RV_PARAM_NUMBER: ok = rv_parse_number(text, &value->number, &inner); break;
    case RV_PARAM_INTEGER: ok = parse_integer(text, value, &inner); break;
    case RV_PARAM_DURATION:
        ok = rv_parse_duration_ns(text, &value->integer, &inner) &&
             check_amount(text, value->integer, RV_MAX_DURATION_NS, "duration in ns", &inner);
        break;
    case RV_PARAM_BYTES:
        ok = rv_parse_bytes(text, &value->integer, &inner) &&
             check_amount(text, value->integer, RV_MAX_BYTES, "size in bytes", &inner);
        break;
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
/* "key = value" -> "key=value"; a piece without '=' is kept as it is. */
static char *tidy_assignment(const char *piece)
{
    const char *equals = strchr(piece, '=');
    if (equals == NULL) return g_strdup(piece);
    char *key = g_strstrip(g_strndup(piece, (gsize)(equals - piece)));
    char *value = g_strstrip(g_strdup(equals + 1));
    char *tidy = g_strconcat(key, "=", value, NULL);
    g_free(key);
    g_free(value);
    return tidy;
}

static GPtrArray *split_assignments(const char *text)
{
    GPtrArray *pieces = g_ptr_array_new_with_free_func(g_free);
    char **parts = g_strsplit(text, ",", -1);
    for (char **part = parts; *part; part++) {
        /* "factor=0.5, select=..." as people type it: spaces around a
         * piece are not part of a name or a value */
        g_strstrip(*part);
        if (**part == '\0') continue;
        if (strchr(*part, '=') == NULL && pieces->len > 0) {
            char *joined = g_strdup_printf("%s,%s", (char *)g_ptr_array_index(pieces, pieces->len - 1), *part);
            g_free(pieces->pdata[pieces->len - 1]);
            pieces->pdata[pieces->len - 1] = joined;
        } else {
            g_ptr_array_add(pieces, tidy_assignment(*part));
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

char *rv_plugin_unknown_param(const rv_plugin *plugin, const char *given)
{
    GPtrArray *names = g_ptr_array_new();
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++) g_ptr_array_add(names, (gpointer)spec->name);
    const char *near = rv_suggest(given, (const char *const *)names->pdata, names->len);
    char *list = rv_plugin_param_names(plugin);
    char *text = near ? g_strdup_printf("'%s': did you mean '%s'? (parameters: %s)", given, near, list)
                      : g_strdup_printf("'%s' (parameters: %s)", given, list);
    g_free(list);
    g_ptr_array_unref(names);
    return text;
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
        char *what = rv_plugin_unknown_param(plugin, key);
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "plugin %s: unknown parameter %s", plugin->name, what);
        g_free(what);
    } else if (value->given) {
        /* Which one would win is a guess; a sweep script's typo should not be. */
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "plugin %s: parameter '%s' is given twice", plugin->name, key);
        ok = FALSE;
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
