/*
 * sweep_plan.h - which what-if variants a sweep runs (`reverie sweep` and
 * the Python package's Graph.sweep run them).
 *
 * A variant is a list of --opt specs applied in order.  Every variant
 * starts with the fixed --opt specs, then one line of a --variants file
 * (if given), and then sets one value on each --vary axis:
 *
 *   --vary NAME.PARAM=a,b,c              a list (values with units as in --opt)
 *   --vary NAME.PARAM=lo..hi/N           N points evenly spaced, lo and hi included
 *   --vary NAME.PARAM=lo..hi/N log       N points evenly spaced in log scale
 *
 * An axis sets PARAM on the one spec of plugin NAME in the variant's list,
 * or, if the list has none, on a spec appended for NAME (axes of the same
 * new NAME share it).  Variants are numbered 0.. as nested loops: lines
 * outermost, then the axes in the order given, the last fastest.
 *
 * Everything is checked when the plan is made, before any graph is
 * loaded: plugins exist, parameters exist, every value parses with its
 * unit, lists and ranges are well formed.  Errors are one line (GError,
 * RV_ERROR_USAGE for bad usage, RV_ERROR_PLUGIN when a plugin cannot be
 * loaded, RV_ERROR_INPUT when the --variants file cannot be read).
 */
#ifndef REVERIE_SWEEP_PLAN_H
#define REVERIE_SWEEP_PLAN_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
    char *text;         /* the --vary as given */
    char *plugin;       /* NAME as given to --vary */
    char *param;
    GPtrArray *values;  /* char*: each value's text, with its unit */
} rv_sweep_axis;

typedef struct {
    GPtrArray *base;       /* char*: the --opt specs */
    GPtrArray *lines;      /* GPtrArray of char* specs, one per --variants line; one empty line without a file */
    GPtrArray *line_texts; /* char*: each line as written ("" without a file) */
    GPtrArray *axes;       /* rv_sweep_axis* */
    uint64_t count;        /* variants: lines x the product of the axis sizes */
} rv_sweep_plan;

/* Most variants one sweep may name (per input). */
#define RV_SWEEP_MAX_VARIANTS ((uint64_t)100000000)

/* `plugins` is rv_plugin_table_new()'s table: every plugin the plan names is
 * loaded into it, so variants can be parsed from several threads later. */
rv_sweep_plan *rv_sweep_plan_new(char **opts, char **varies, const char *variants_file, GHashTable *plugins,
                           GError **error);
void rv_sweep_plan_free(rv_sweep_plan *plan);

/* Variant v's line (an index into lines) and value index on each axis. */
guint rv_sweep_plan_line(const rv_sweep_plan *plan, uint64_t v);
guint rv_sweep_plan_value_index(const rv_sweep_plan *plan, uint64_t v, guint axis);
const char *rv_sweep_plan_value(const rv_sweep_plan *plan, uint64_t v, guint axis);

/* Variant v's --opt specs in the order they apply (g_ptr_array_unref). */
GPtrArray *rv_sweep_plan_specs(const rv_sweep_plan *plan, uint64_t v);

G_END_DECLS

#endif
