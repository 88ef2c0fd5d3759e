/*
 * opts.c - optimizations as the commands take them (--opt NAME[:k=v,...]):
 * a plugin loaded once by name, a spec parsed against its parameter table,
 * a list applied in order, and a replay into step times.  whatif applies
 * one list; sweep applies thousands of lists from several threads, which
 * is why loading (once, up front) and parsing (per list) are apart.
 */
#include "cli.h"
#include "reverie/report.h"
#include <string.h>

GHashTable *rv_cli_plugins_new(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)rv_plugin_unload);
}

const rv_plugin *rv_cli_plugin(GHashTable *plugins, const char *name, GError **error)
{
    rv_loaded_plugin *plugin = g_hash_table_lookup(plugins, name);
    if (plugin == NULL) {
        plugin = rv_plugin_load(name, error);
        if (plugin == NULL) return NULL;
        g_hash_table_insert(plugins, g_strdup(name), plugin);
    }
    return rv_plugin_descriptor_of(plugin);
}

char *rv_cli_spec_name(const char *spec)
{
    const char *colon = strchr(spec, ':');
    return colon ? g_strndup(spec, (gsize)(colon - spec)) : g_strdup(spec);
}

rv_cli_opt *rv_cli_opt_parse(GHashTable *plugins, const char *spec, GError **error)
{
    char *name = rv_cli_spec_name(spec);
    const rv_plugin *plugin = rv_cli_plugin(plugins, name, error);
    g_free(name);
    if (plugin == NULL) return NULL;
    const char *colon = strchr(spec, ':');
    rv_params *params = rv_params_parse(plugin, colon ? colon + 1 : "", error);
    if (params == NULL) return NULL;
    rv_cli_opt *opt = g_new0(rv_cli_opt, 1);
    opt->plugin = plugin;
    opt->params = params;
    opt->spec = g_strdup(spec);
    return opt;
}

void rv_cli_opt_free(gpointer data)
{
    rv_cli_opt *opt = data;
    rv_params_free(opt->params);
    g_free(opt->spec);
    if (opt->notes) g_string_free(opt->notes, TRUE);
    g_free(opt);
}

void rv_cli_policy_clear(rv_plugin_output *policy)
{
    if (policy->free_policy_data) policy->free_policy_data(policy->policy.user_data);
    memset(policy, 0, sizeof *policy);
}

gboolean rv_cli_apply_opts(rv_graph *graph, GPtrArray *opts, rv_plugin_output *last_policy, GError **error)
{
    for (guint i = 0; i < opts->len; i++) {
        rv_cli_opt *opt = g_ptr_array_index(opts, i);
        rv_plugin_output output = { { NULL, NULL }, NULL, g_string_new(NULL) };
        if (!opt->plugin->apply(graph, opt->params, &output, error)) {
            g_prefix_error(error, "%s: ", opt->plugin->name);
            g_string_free(output.notes, TRUE);
            return FALSE;
        }
        opt->notes = output.notes;
        if (output.policy.priority != NULL) {
            rv_cli_policy_clear(last_policy);
            *last_policy = output;
            last_policy->notes = NULL;
        }
    }
    return TRUE;
}

GArray *rv_cli_replay_steps(const rv_graph *graph, const rv_sim_structure *structure, const rv_policy *policy,
                            GError **error)
{
    rv_sim_result sim = { 0 };
    if (!rv_simulate_reusing(graph, structure, policy, &sim, error)) return NULL;
    GArray *steps = rv_step_times(graph, &sim);
    rv_sim_result_clear(&sim);
    return steps;
}
