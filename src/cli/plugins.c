/*
 * plugins.c - `reverie plugins [NAME] [--json]`: the optimizations reverie
 * can find, with their parameters (name, type, default, unit, help).
 */
#include "cli.h"
#include "reverie/plugin.h"
#include <jansson.h>
#include <string.h>

static void print_plugin(const rv_plugin *plugin, gboolean detailed)
{
    printf("%-14s %s\n", plugin->name, plugin->summary ? plugin->summary : "");
    if (!detailed) return;
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++) {
        char *type = spec->type == RV_PARAM_CHOICE ? g_strdup(spec->choices) : g_strdup(rv_param_type_name(spec->type));
        printf("    %-16s %-22s default %-10s %-6s %s\n", spec->name, type,
               spec->default_value ? spec->default_value : "(required)", spec->unit ? spec->unit : "",
               spec->help ? spec->help : "");
        g_free(type);
    }
}

static json_t *plugin_json(const rv_plugin *plugin)
{
    json_t *params = json_array();
    for (const rv_param_spec *spec = plugin->params; spec->name; spec++)
        json_array_append_new(params, json_pack("{s:s,s:s,s:s?,s:s?,s:s?,s:s?}", "name", spec->name,
                                                "type", rv_param_type_name(spec->type), "default", spec->default_value,
                                                "unit", spec->unit, "help", spec->help, "choices", spec->choices));
    return json_pack("{s:s,s:s?,s:o}", "name", plugin->name, "summary", plugin->summary, "params", params);
}

int rv_cmd_plugins(int argc, char **argv)
{
    gboolean as_json = FALSE;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("[NAME] - list optimizations and their parameters");
    g_option_context_set_description(context,
        "Examples:\n  reverie plugins\n  reverie plugins ddp --json\n");
    g_option_context_add_main_entries(context, entries, NULL);
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    GPtrArray *plugins = rv_plugin_discover(NULL);
    const char *only = argc > 1 ? argv[1] : NULL;
    json_t *list = json_array();
    guint shown = 0;
    for (guint i = 0; i < plugins->len; i++) {
        const rv_plugin *plugin = rv_plugin_descriptor_of(g_ptr_array_index(plugins, i));
        if (only && strcmp(only, plugin->name) != 0) continue;
        shown++;
        if (as_json) json_array_append_new(list, plugin_json(plugin));
        else print_plugin(plugin, TRUE);
    }
    if (as_json) {
        char *text = json_dumps(list, JSON_INDENT(2));
        printf("%s\n", text);
        free(text);
    }
    json_decref(list);
    if (only && shown == 0) {
        fprintf(stderr, "reverie: no optimization named '%s' (see reverie plugins)\n", only);
        status = RV_EXIT_PLUGIN;
    }
    g_ptr_array_free(plugins, TRUE);
out:
    g_option_context_free(context);
    return status;
}
