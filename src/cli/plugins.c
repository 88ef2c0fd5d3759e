/*
 * plugins.c - `reverie plugins [NAME] [--json]`: the optimizations reverie
 * can find, with their parameters (name, type, default, unit, help).
 *
 * Listing loads plugins, which runs their code; the loader only loads .so
 * files whose symbol table defines rv_plugin_descriptor (plugin.c), and a
 * NAME loads that plugin alone.  Descriptor texts come from foreign code and
 * are escaped before they reach the terminal.
 */
#include "cli.h"
#include "reverie/escape.h"
#include "reverie/plugin.h"
#include <jansson.h>
#include <string.h>

static void print_text(const char *format_width, const char *text)
{
    char *shown = rv_escape_text(text);
    printf(format_width, shown);
    g_free(shown);
}

static void print_plugin(const rv_plugin *plugin, gboolean detailed)
{
    print_text("%-14s ", plugin->name);
    print_text("%s\n", plugin->summary ? plugin->summary : "");
    if (!detailed) return;
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++) {
        print_text("    %-16s ", spec->name);
        print_text("%-22s ", spec->type == RV_PARAM_CHOICE ? spec->choices : rv_param_type_name(spec->type));
        print_text("default %-10s ", spec->default_value ? spec->default_value : "(required)");
        print_text("%-6s ", spec->unit ? spec->unit : "");
        print_text("%s\n", spec->help ? spec->help : "");
    }
}

static json_t *plugin_json(const rv_plugin *plugin)
{
    json_t *params = json_array();
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++) {
        json_t *item = json_object();
        json_object_set_new(item, "name", rv_cli_json_text(spec->name));
        json_object_set_new(item, "type", json_string(rv_param_type_name(spec->type)));
        if (spec->default_value) json_object_set_new(item, "default", rv_cli_json_text(spec->default_value));
        if (spec->unit) json_object_set_new(item, "unit", rv_cli_json_text(spec->unit));
        if (spec->help) json_object_set_new(item, "help", rv_cli_json_text(spec->help));
        if (spec->choices) json_object_set_new(item, "choices", rv_cli_json_text(spec->choices));
        json_array_append_new(params, item);
    }
    json_t *object = json_object();
    json_object_set_new(object, "name", rv_cli_json_text(plugin->name));
    if (plugin->summary) json_object_set_new(object, "summary", rv_cli_json_text(plugin->summary));
    json_object_set_new(object, "params", params);
    return object;
}

/* One row per parameter (a plugin without parameters gets one row with an
 * empty parameter), so that a spreadsheet can filter by plugin. */
static void print_plugin_csv(const rv_plugin *plugin)
{
    const rv_param_spec *spec = plugin->params;
    do {
        const char *row[] = { rv_cli_shown(plugin->name), rv_cli_shown(plugin->summary),
                              spec->name ? rv_cli_shown(spec->name) : "",
                              spec->name ? rv_cli_shown(spec->type == RV_PARAM_CHOICE ? spec->choices
                                                                                     : rv_param_type_name(spec->type)) : "",
                              spec->name ? rv_cli_shown(spec->default_value) : "",
                              spec->name ? rv_cli_shown(spec->unit) : "", spec->name ? rv_cli_shown(spec->help) : "" };
        rv_cli_csv_row(row, G_N_ELEMENTS(row));
    } while (spec->name && (++spec)->name);
}

/* The plugins to show: the one named (loaded alone), or every one found. */
static GPtrArray *plugins_to_show(const char *only, int *status)
{
    if (only == NULL) {
        GPtrArray *skipped = g_ptr_array_new_with_free_func(g_free);
        GPtrArray *plugins = rv_plugin_discover(skipped);
        for (guint i = 0; i < skipped->len; i++) {
            char *line = rv_escape_text(g_ptr_array_index(skipped, i));
            fprintf(stderr, "reverie: skipped %s\n", line);
            g_free(line);
        }
        g_ptr_array_free(skipped, TRUE);
        return plugins;
    }
    GPtrArray *plugins = g_ptr_array_new_with_free_func((GDestroyNotify)rv_plugin_unload);
    GError *error = NULL;
    rv_loaded_plugin *plugin = rv_plugin_load(only, &error);
    if (plugin != NULL) g_ptr_array_add(plugins, plugin);
    else *status = rv_cli_fail(error);
    return plugins;
}

int rv_cmd_plugins(int argc, char **argv)
{
    gboolean as_json = FALSE, as_csv = FALSE;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON", NULL },
        { "csv", 0, 0, G_OPTION_ARG_NONE, &as_csv, "print one CSV row per parameter", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("[NAME] - list optimizations and their parameters");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "Plugins are found by name in REVERIE_PLUGIN_PATH, the build tree (when reverie\n"
        "runs from one) and the install folder. Listing them loads them, which runs their\n"
        "code: only .so files whose symbol table defines rv_plugin_descriptor are loaded,\n"
        "and the others are named on stderr as skipped. NAME loads that plugin alone.\n\n"
        "Examples:\n  reverie plugins\n  reverie plugins ddp --json\n  reverie plugins --csv > plugins.csv\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse_without_input(context, &argc, &argv, &status)) goto out;
    if (argc > 2) { status = rv_cli_usage("plugins", "give at most one NAME"); goto out; }
    if (as_json && as_csv) { status = rv_cli_usage("plugins", "give --json or --csv, not both"); goto out; }
    GPtrArray *plugins = plugins_to_show(argc > 1 ? argv[1] : NULL, &status);
    json_t *list = json_array();
    if (as_csv && plugins->len) {
        const char *header[] = { "plugin", "summary", "param", "type", "default", "unit", "help" };
        rv_cli_csv_row(header, G_N_ELEMENTS(header));
    }
    for (guint i = 0; i < plugins->len; i++) {
        const rv_plugin *plugin = rv_plugin_descriptor_of(g_ptr_array_index(plugins, i));
        if (as_json) json_array_append_new(list, plugin_json(plugin));
        else if (as_csv) print_plugin_csv(plugin);
        else print_plugin(plugin, TRUE);
    }
    if (as_json && status == RV_EXIT_OK) rv_cli_print_json(list);
    else json_decref(list);
    g_ptr_array_free(plugins, TRUE);
out:
    g_option_context_free(context);
    return status;
}
