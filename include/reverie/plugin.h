/*
 * plugin.h - the optimization plugin ABI.
 *
 * An optimization is a shared object that exports one symbol,
 * `rv_plugin_descriptor`, of type rv_plugin.  reverie loads it with GModule
 * by name from REVERIE_PLUGIN_PATH, the build tree (when the program runs
 * from one) and the install folder, or from a path given on the command
 * line (--opt ./my.so:k=v).  The descriptor carries a typed parameter
 * table; reverie parses the user's k=v text (with units) against it before
 * calling apply(), so a plugin never parses strings.  Values are bounded
 * (checked.h): integers within 2^53, durations within RV_MAX_DURATION_NS,
 * sizes within RV_MAX_BYTES, numbers finite; a parameter given twice is an
 * error.
 *
 * ABI rules: bump RV_PLUGIN_ABI_VERSION when rv_plugin, rv_param_spec,
 * rv_params or any graph struct changes layout.  A plugin built for another
 * version is refused with a message naming both versions.
 */
#ifndef REVERIE_PLUGIN_H
#define REVERIE_PLUGIN_H

#include <glib.h>
#include <gmodule.h>
#include <stdint.h>
#include "reverie/compose.h"
#include "reverie/graph.h"
#include "reverie/memory.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

#define RV_PLUGIN_ABI_VERSION 12u  /* 2: rv_priority_fn became a rank (sim.h);
                                     3: rules-only timing (host_overhead_ns, stream timing in rv_resource);
                                     4: several ranks in one graph (rv_resource.rank_index,
                                        rv_task.collective, graph->collectives and graph->ranks);
                                     5: rv_graph.contention (contention.h);
                                     6: graph->memory (recorded [memory] peaks, memory.h);
                                     7: graph->memory_effects (what plugins did to tensors, memory.h);
                                     8: timing estimates with their evidence (rv_estimate in rv_timing
                                        and rv_resource), graph->launches and graph->duration_ranges
                                        (costmodel.h, range.h), rv_plugin.effects and graph->applied
                                        (the composition law, compose.h);
                                     9: rv_graph.host_operators and rv_timing.profiler_op_cost (the
                                        profiler's own time, graph.h), rv_graph.sharing and
                                        rv_graph.kernel_demands (the sharing rule,
                                        contention.h), RV_MEM_EFFECT_OFFLOAD and
                                        rv_memory_estimate.offloaded_states, RV_MEM_EFFECT_RESIDENT and
                                        rv_memory_estimate.resident (memory.h);
                                     10: rv_plugin_output.last, .before, .before_memory and
                                        .after_replay (replays and memory estimates the host
                                        makes anyway, lent to the plugin);
                                     11: rv_sim_result.step_gpu_end_ns and .step_count (sim.h);
                                     12: rv_graph.op_args (a convolution's geometry, shapes.h) */
#define RV_PLUGIN_SYMBOL "rv_plugin_descriptor"

typedef enum {
    RV_PARAM_NUMBER,     /* a plain number: 1.5 */
    RV_PARAM_INTEGER,    /* a whole number: 8 */
    RV_PARAM_DURATION,   /* 5us, 2ms */
    RV_PARAM_BYTES,      /* 25MiB, 1GB */
    RV_PARAM_BANDWIDTH,  /* 25GB/s, 100Gbps */
    RV_PARAM_CHOICE,     /* one of spec->choices, "a|b|c" */
    RV_PARAM_STRING      /* free text: a selection, a file name */
} rv_param_type;

typedef struct {
    const char *name;
    rv_param_type type;
    const char *default_value;  /* text, parsed like user input; NULL = required */
    const char *unit;           /* shown in `reverie plugins`: "us", "bytes", "B/s", "x" */
    const char *help;
    const char *choices;        /* RV_PARAM_CHOICE only: "ring|tree|hierarchical" */
} rv_param_spec;

/* Parsed parameter values, looked up by name. */
typedef struct rv_params rv_params;

double rv_params_number(const rv_params *params, const char *name);
int64_t rv_params_integer(const rv_params *params, const char *name);
int64_t rv_params_duration_ns(const rv_params *params, const char *name);
int64_t rv_params_bytes(const rv_params *params, const char *name);
double rv_params_bandwidth(const rv_params *params, const char *name); /* bytes per second */
const char *rv_params_string(const rv_params *params, const char *name); /* also CHOICE */
/* TRUE if the user gave the parameter (rather than its default). */
gboolean rv_params_given(const rv_params *params, const char *name);

/* What the host hands to after_replay (rv_plugin_output.last): its replay
 * of the graph the plugin left, and its memory estimate of that graph. */
typedef struct {
    const rv_policy *policy;          /* the policy the replay used; NULL: none */
    const rv_sim_result *sim;         /* the replay's result */
    const rv_memory_estimate *memory; /* rv_memory_estimate_graph's, where the host made one; else NULL */
} rv_host_replay;

/* Called by the host after its replay; lines it appends to `notes` end the plugin's notes. */
typedef void (*rv_after_replay_fn)(const rv_graph *graph, const rv_host_replay *replay, GString *notes, void *data);

/*
 * What apply() may hand back besides a transformed graph.  The host sets
 * the two fields marked "in" before apply() (zero: it tells nothing) and a
 * plugin reads them to skip a replay of its own that the host runs anyway:
 *   last    no optimization follows this one, and the host replays the
 *           graph apply() leaves - with the last policy any optimization
 *           returned - and then calls after_replay, if apply() set it,
 *           with that replay.  A plugin that replays its own result for its
 *           notes can leave that to after_replay;
 *   before  the graph as apply() receives it, replayed without a policy
 *           (the host's baseline, for the first optimization), or NULL;
 *   before_memory  rv_memory_estimate_graph's estimate of that graph
 *           (memory.h) where the host made one, or NULL.
 * after_replay is only called where `last` was set; its data is freed
 * with free_after_replay_data either way.
 */
typedef struct {
    rv_policy policy;      /* a replacement scheduling priority, or {NULL} */
    GDestroyNotify free_policy_data;
    GString *notes;        /* free-form lines for the report ("4 buckets, 97.5 MiB") */
    /* Appended in ABI 10 (above). */
    gboolean last;                  /* in */
    const rv_sim_result *before;    /* in */
    const rv_memory_estimate *before_memory; /* in */
    rv_after_replay_fn after_replay;
    void *after_replay_data;
    GDestroyNotify free_after_replay_data;
} rv_plugin_output;

typedef struct {
    uint32_t abi_version;       /* RV_PLUGIN_ABI_VERSION */
    const char *name;
    const char *summary;
    const rv_param_spec *params; /* terminated by an entry with name == NULL */
    /* Transform the graph.  Returning FALSE with an RV_ERROR_PLUGIN error
     * aborts the what-if (exit 3); "found nothing to act on" is such an error.
     * A parameter out of range is RV_ERROR_USAGE (exit 1).  The host checks
     * the graph after apply() (validate.h) and blames the plugin if it is
     * broken. */
    gboolean (*apply)(rv_graph *graph, const rv_params *params, rv_plugin_output *output,
                      GError **error);
    /* Appended in ABI 8: what apply() reads and rewrites (compose.h), so
     * that reverie can refuse an order of two plugins that do not commute;
     * NULL: not declared (neither checked nor checked against). */
    const rv_plugin_effects *effects;
} rv_plugin;

/* ---- host side ------------------------------------------------------ */

typedef struct rv_loaded_plugin rv_loaded_plugin;

/* Load by name (letters, digits, '-', '_': searched in the plugin folders)
 * or by file path (anything with a '/', such as ./my.so).  A name found in
 * REVERIE_PLUGIN_PATH that is also a built-in plugin's is refused
 * (RV_ERROR_USAGE): a user's plugin replaces a built-in one only when
 * given by path. */
rv_loaded_plugin *rv_plugin_load(const char *name_or_path, GError **error);
void rv_plugin_unload(rv_loaded_plugin *plugin);
const rv_plugin *rv_plugin_descriptor_of(const rv_loaded_plugin *plugin);

/* The plugin's parameter called `name`, or NULL. */
const rv_param_spec *rv_plugin_param(const rv_plugin *plugin, const char *name);
/* Its parameter names, "world, bucket_cap, ..." ("none" if it has none), for messages (g_free). */
char *rv_plugin_param_names(const rv_plugin *plugin);
/* For a message about a parameter it does not have: "'wrold': did you mean
 * 'world'? (parameters: world, bucket_cap, ...)" (g_free). */
char *rv_plugin_unknown_param(const rv_plugin *plugin, const char *given);

/* Parse "k=v,k=v" against the plugin's table (defaults filled in). */
rv_params *rv_params_parse(const rv_plugin *plugin, const char *text, GError **error);
void rv_params_free(rv_params *params);
/* The effective values as text, in table order (for reports). */
GPtrArray *rv_params_describe(const rv_params *params);

/*
 * Run the plugin's apply() and check the graph it leaves (validate.h).
 * Before apply(), the composition law (compose.h) may refuse the plugin
 * after one applied earlier (RV_ERROR_PLUGIN, one line); after it, the
 * plugin joins graph->applied.
 * FALSE with the error prefixed by the plugin's name when apply() fails -
 * also when it fails without setting an error, or sets one and claims
 * success - and with RV_ERROR_PLUGIN when the graph is broken afterwards.
 * The graph given is taken as valid (loads and earlier applies leave it
 * so): the cycle check runs only when apply() changed the edges.
 */
gboolean rv_plugin_apply(const rv_loaded_plugin *plugin, rv_graph *graph, const rv_params *params,
                         rv_plugin_output *output, GError **error);

/* Call the after_replay that `output` holds (plugin.h's rv_plugin_output),
 * if any, as the host of a `last` plugin must after its replay, then free
 * its data; the apply watch below is told as for apply().  Nothing happens
 * when output holds none. */
void rv_plugin_after_replay(const rv_loaded_plugin *plugin, rv_plugin_output *output, const rv_graph *graph,
                            const rv_host_replay *replay);
/* Free what after_replay would have had (a host that will not replay). */
void rv_plugin_output_drop_after_replay(rv_plugin_output *output);

/* Told before and after every rv_plugin_apply and rv_plugin_after_replay
 * (entering TRUE, then FALSE), whoever calls it: the command line's isolated children (src/cli/isolate.c)
 * tell their parent which plugin a crash or a hang belongs to.  One watch
 * per process, set before any plugin runs (not thread-safe to change);
 * NULL: none. */
typedef void (*rv_plugin_apply_watch)(const char *plugin, gboolean entering);
void rv_plugin_watch_apply(rv_plugin_apply_watch watch);

/* Every plugin found on the search path, sorted by name (loaded).  A file
 * is loaded - which runs its code - only when its ELF symbol table defines
 * rv_plugin_descriptor.  A file of REVERIE_PLUGIN_PATH named like a
 * built-in plugin is left out (rv_plugin_load refuses it by name too).  If
 * skipped is not NULL, one line (char*) per .so file left out, saying why,
 * is added to it. */
GPtrArray *rv_plugin_discover(GPtrArray *skipped);
/* The folders searched, in order. */
GPtrArray *rv_plugin_search_path(void);

const char *rv_param_type_name(rv_param_type type);

G_END_DECLS

#endif
