/*
 * shapes.c - parse the profiler's Input Dims text (see shapes.h).
 *
 * Extents that are not non-negative integers, and products that would
 * overflow int64, make the input count as 0 elements: a forged or odd
 * record must never turn into a huge message size.
 */
#include "reverie/shapes.h"
#include <jansson.h>

static GArray *parse_input(json_t *value)
{
    GArray *extents = g_array_new(FALSE, FALSE, sizeof(int64_t));
    if (!json_is_array(value)) return extents;
    size_t i;
    json_t *extent;
    json_array_foreach(value, i, extent) {
        if (!json_is_integer(extent) || json_integer_value(extent) < 0) {
            g_array_set_size(extents, 0);
            break;
        }
        int64_t v = json_integer_value(extent);
        g_array_append_val(extents, v);
    }
    return extents;
}

gboolean rv_shapes_parse(const char *input_dims_json, rv_shapes *shapes)
{
    shapes->inputs = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    if (input_dims_json == NULL) return FALSE;
    json_t *root = json_loads(input_dims_json, JSON_DECODE_ANY, NULL);
    if (!json_is_array(root)) {
        json_decref(root);
        return FALSE;
    }
    size_t i;
    json_t *input;
    json_array_foreach(root, i, input) g_ptr_array_add(shapes->inputs, parse_input(input));
    json_decref(root);
    return TRUE;
}

gboolean rv_shapes_of_task(const rv_graph *graph, int32_t task, rv_shapes *shapes)
{
    int32_t dims = g_array_index(graph->tasks, rv_task, task).input_dims;
    return rv_shapes_parse(dims >= 0 ? rv_strings_get(graph->strings, dims) : NULL, shapes);
}

void rv_shapes_clear(rv_shapes *shapes)
{
    if (shapes->inputs) g_ptr_array_unref(shapes->inputs);
    shapes->inputs = NULL;
}

guint rv_shapes_count(const rv_shapes *shapes) { return shapes->inputs ? shapes->inputs->len : 0; }

guint rv_shapes_rank(const rv_shapes *shapes, guint input)
{
    if (input >= rv_shapes_count(shapes)) return 0;
    return ((GArray *)g_ptr_array_index(shapes->inputs, input))->len;
}

int64_t rv_shapes_extent(const rv_shapes *shapes, guint input, guint dim)
{
    if (dim >= rv_shapes_rank(shapes, input)) return 0;
    return g_array_index((GArray *)g_ptr_array_index(shapes->inputs, input), int64_t, dim);
}

int64_t rv_shapes_elements(const rv_shapes *shapes, guint input)
{
    guint rank = rv_shapes_rank(shapes, input);
    if (rank == 0) return 0;
    int64_t product = 1;
    for (guint d = 0; d < rank; d++) {
        int64_t extent = rv_shapes_extent(shapes, input, d);
        if (extent != 0 && product > G_MAXINT64 / extent) return 0;
        product *= extent;
    }
    return product;
}
