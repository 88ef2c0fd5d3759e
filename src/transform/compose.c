/*
 * compose.c - the composition law (compose.h): which of two plugins'
 * effects conflict, and the check rv_plugin_apply() makes before a plugin
 * runs on a graph that earlier plugins changed.
 */
#include "reverie/compose.h"
#include "reverie/error.h"
#include <string.h>

static const char *const aspect_names[RV_ASPECT_COUNT] = {
    "CPU calls and host time",
    "forward GPU work",
    "backward GPU work",
    "optimizer GPU work",
    "data-parallel collectives",
    "tensor-parallel collectives",
    "pipeline transfers",
    "expert and other collectives",
    "the step structure",
    "the device and dtype kernels are priced for",
    "the memory model's tensors",
    "the scheduling priority",
    "the contention rule",
    "the world size and groups",
    "the model's parameters",
};

static const char *const stage_names[] = {
    "?", "the model", "the precision", "how the work is issued", "the device", "the parallel split", "the cluster",
    "a last adjustment",
};

const char *rv_aspect_name(uint32_t aspect_bit)
{
    for (int i = 0; i < RV_ASPECT_COUNT; i++)
        if (aspect_bit == 1u << i) return aspect_names[i];
    return "?";
}

const char *rv_stage_name(int stage)
{
    return stage >= RV_STAGE_MODEL && stage <= RV_STAGE_ADJUST ? stage_names[stage] : stage_names[0];
}

char *rv_aspects_describe(uint32_t mask)
{
    GString *text = g_string_new(NULL);
    for (int i = 0; i < RV_ASPECT_COUNT; i++)
        if (mask & (1u << i)) g_string_append_printf(text, "%s%s", text->len ? ", " : "", aspect_names[i]);
    if (text->len == 0) g_string_append(text, "nothing");
    return g_string_free(text, FALSE);
}

static uint32_t touched(const rv_plugin_effects *e)
{
    return e->reads | e->reads_time | e->scales | e->reprices | e->rewrites;
}

/* Where `a` changes what `b` sees: its rewrites anything b touches, its
 * prices any duration b reads or changes, its factors any duration b reads
 * (factors commute with factors: multiplication does). */
static uint32_t changes_for(const rv_plugin_effects *a, const rv_plugin_effects *b)
{
    return (a->rewrites & touched(b)) | (a->reprices & (b->reads_time | b->scales | b->reprices)) |
           (a->scales & b->reads_time);
}

uint32_t rv_effects_conflict(const rv_plugin_effects *a, const rv_plugin_effects *b)
{
    return changes_for(a, b) | changes_for(b, a);
}

/* The strongest thing a plugin does to one aspect, as a verb phrase. */
static const char *role(const rv_plugin_effects *e, uint32_t bit)
{
    if (e->rewrites & bit) return "rewrites";
    if (e->reprices & bit) return "re-prices";
    if (e->scales & bit) return "scales the durations of";
    if (e->reads_time & bit) return "reads the durations of";
    return "reads";
}

/* Which of the conflicting aspects to name: the first one the earlier
 * plugin rewrites or scales (what it changed), else the first. */
static uint32_t telling_aspect(const rv_plugin_effects *earlier, uint32_t conflict)
{
    uint32_t changed = conflict & (earlier->rewrites | earlier->reprices | earlier->scales);
    uint32_t pick = changed ? changed : conflict;
    return pick & (~pick + 1u); /* lowest set bit */
}

static gboolean goes_before(const char *a, uint16_t a_order, const char *b, uint16_t b_order)
{
    return a_order != b_order ? a_order < b_order : strcmp(a, b) < 0;
}

gboolean rv_compose_check(const rv_graph *graph, const char *name, const rv_plugin_effects *effects, GError **error)
{
    if (effects == NULL || graph->applied == NULL) return TRUE;
    for (guint i = 0; i < graph->applied->len; i++) {
        const rv_applied_plugin *done = &g_array_index(graph->applied, rv_applied_plugin, i);
        const char *earlier = rv_strings_get(graph->strings, done->name);
        if (!done->declared || strcmp(earlier, name) == 0) continue;
        uint32_t conflict = rv_effects_conflict(&done->effects, effects);
        if (conflict == 0 || !goes_before(name, effects->order, earlier, done->effects.order)) continue;
        uint32_t bit = telling_aspect(&done->effects, conflict);
        int stage = effects->order / 100, earlier_stage = done->effects.order / 100;
        char *because = stage == earlier_stage
                            ? g_strdup_printf("both change %s; %s goes first", rv_stage_name(stage), name)
                            : g_strdup_printf("%s goes before %s", rv_stage_name(stage), rv_stage_name(earlier_stage));
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "refused after %s: %s %s %s, which %s %s%s, so the two orders give different graphs; give "
                    "--opt %s before --opt %s (%s)",
                    earlier, earlier, role(&done->effects, bit), rv_aspect_name(bit), name, role(effects, bit),
                    strcmp(role(&done->effects, bit), role(effects, bit)) == 0 ? " too" : "", name, earlier, because);
        g_free(because);
        return FALSE;
    }
    return TRUE;
}

void rv_compose_record(rv_graph *graph, const char *name, const rv_plugin_effects *effects)
{
    rv_applied_plugin done = { rv_strings_intern(graph->strings, name), effects != NULL, { 0, 0, 0, 0, 0, 0 } };
    if (effects) done.effects = *effects;
    g_array_append_val(graph->applied, done);
}

void rv_compose_rebase(rv_graph *graph)
{
    g_array_set_size(graph->applied, 0);
}
