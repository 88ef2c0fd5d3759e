/*
 * shapes.c - parse the profiler's Input Dims text, and a convolution's
 * geometry and a pool's window from its operator arguments (see shapes.h).
 *
 * Extents that are not non-negative integers, and products that would
 * overflow int64, make the input count as 0 elements: a forged or odd
 * record must never turn into a huge message size.
 */
#include "reverie/shapes.h"
#include <jansson.h>
#include <string.h>

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

/* ---- a convolution's geometry -------------------------------------------- */

/* A list of `count` integers of at least `minimum` into values. */
static gboolean read_list(json_t *list, guint count, int64_t minimum, int64_t *values)
{
    if (!json_is_array(list) || json_array_size(list) != count) return FALSE;
    for (guint d = 0; d < count; d++) {
        json_t *value = json_array_get(list, d);
        if (!json_is_integer(value) || json_integer_value(value) < minimum || json_integer_value(value) > G_MAXINT32)
            return FALSE;
        values[d] = json_integer_value(value);
    }
    return TRUE;
}

static gboolean read_geometry(json_t *root, rv_conv_geometry *g)
{
    json_t *stride = json_object_get(root, "stride"), *padding = json_object_get(root, "padding");
    json_t *groups = json_object_get(root, "groups");
    if (!json_is_array(stride) || json_array_size(stride) < 1 || json_array_size(stride) > RV_CONV_MAX_SPATIAL)
        return FALSE;
    g->spatial = (guint)json_array_size(stride);
    if (!read_list(stride, g->spatial, 1, g->stride) || !read_list(json_object_get(root, "dilation"), g->spatial, 1, g->dilation))
        return FALSE;
    g->same_padding = json_is_string(padding) && strcmp(json_string_value(padding), "same") == 0;
    if (!g->same_padding && !read_list(padding, g->spatial, 0, g->padding)) return FALSE;
    g->transposed = json_is_true(json_object_get(root, "transposed"));
    if (g->transposed && !read_list(json_object_get(root, "output_padding"), g->spatial, 0, g->output_padding))
        return FALSE;
    if (!json_is_integer(groups) || json_integer_value(groups) < 1 || json_integer_value(groups) > G_MAXINT32) return FALSE;
    g->groups = json_integer_value(groups);
    return TRUE;
}

/* An operator's arguments (rv_event.op_args' JSON object) read into `out`
 * (`size` bytes) by `read`; all zero when absent or not what `read` takes. */
static gboolean parse_op_args(const char *op_args_json, gboolean (*read)(json_t *root, void *out), void *out,
                              gsize size)
{
    memset(out, 0, size);
    if (op_args_json == NULL) return FALSE;
    json_t *root = json_loads(op_args_json, 0, NULL);
    gboolean ok = json_is_object(root) && read(root, out);
    json_decref(root);
    if (!ok) memset(out, 0, size);
    return ok;
}

static gboolean read_geometry_into(json_t *root, void *out) { return read_geometry(root, out); }

gboolean rv_conv_geometry_parse(const char *op_args_json, rv_conv_geometry *geometry)
{
    return parse_op_args(op_args_json, read_geometry_into, geometry, sizeof *geometry);
}

gboolean rv_conv_geometry_of_task(const rv_graph *graph, int32_t task, rv_conv_geometry *geometry)
{
    int32_t op_args = rv_task_op_args(graph, task);
    return rv_conv_geometry_parse(op_args > 0 ? rv_strings_get(graph->strings, op_args) : NULL, geometry);
}

int64_t rv_conv_output_extent(const rv_conv_geometry *g, guint d, int64_t in, int64_t kernel)
{
    if (d >= g->spatial || in <= 0 || kernel <= 0) return 0;
    /* the extents came from a trace: keep every product inside int64 */
    if (in > G_MAXINT32 || kernel > G_MAXINT32) return 0;
    int64_t reach = g->dilation[d] * (kernel - 1); /* the kernel's span less one */
    int64_t out;
    if (g->transposed)
        out = (in - 1) * g->stride[d] - 2 * g->padding[d] + reach + g->output_padding[d] + 1;
    else if (g->same_padding)
        out = in;
    else {
        int64_t span = in + 2 * g->padding[d] - reach - 1;
        out = span < 0 ? 0 : span / g->stride[d] + 1;
    }
    return out > 0 ? out : 0;
}

/* ---- a pool's window -------------------------------------------------------- */

static gboolean read_window(json_t *root, rv_pool_geometry *g)
{
    json_t *kernel = json_object_get(root, "kernel");
    if (!json_is_array(kernel) || json_array_size(kernel) < 1 || json_array_size(kernel) > RV_CONV_MAX_SPATIAL)
        return FALSE;
    g->spatial = (guint)json_array_size(kernel);
    g->ceil_mode = json_is_true(json_object_get(root, "ceil_mode"));
    return read_list(kernel, g->spatial, 1, g->kernel) && read_list(json_object_get(root, "stride"), g->spatial, 1, g->stride) &&
           read_list(json_object_get(root, "padding"), g->spatial, 0, g->padding) &&
           read_list(json_object_get(root, "dilation"), g->spatial, 1, g->dilation);
}

static gboolean read_pool(json_t *root, rv_pool_geometry *g)
{
    json_t *pool = json_object_get(root, "pool");
    if (!json_is_string(pool)) return FALSE;
    if (strcmp(json_string_value(pool), "window") == 0) return read_window(root, g);
    if (strcmp(json_string_value(pool), "adaptive") != 0) return FALSE;
    json_t *size = json_object_get(root, "output_size");
    if (!json_is_array(size) || json_array_size(size) < 1 || json_array_size(size) > RV_CONV_MAX_SPATIAL) return FALSE;
    g->spatial = (guint)json_array_size(size);
    g->adaptive = TRUE;
    return read_list(size, g->spatial, 1, g->output_size);
}

static gboolean read_pool_into(json_t *root, void *out) { return read_pool(root, out); }

gboolean rv_pool_geometry_parse(const char *op_args_json, rv_pool_geometry *geometry)
{
    return parse_op_args(op_args_json, read_pool_into, geometry, sizeof *geometry);
}

int64_t rv_pool_output_extent(const rv_pool_geometry *g, guint d, int64_t in)
{
    if (d >= g->spatial || in <= 0 || in > G_MAXINT32) return 0;
    if (g->adaptive) return g->output_size[d];
    int64_t span = in + 2 * g->padding[d] - g->dilation[d] * (g->kernel[d] - 1) - 1;
    if (span < 0) return 0;
    int64_t out = (g->ceil_mode ? (span + g->stride[d] - 1) / g->stride[d] : span / g->stride[d]) + 1;
    /* ceil mode: the last window must start inside the input or its left padding */
    if (g->ceil_mode && (out - 1) * g->stride[d] >= in + g->padding[d]) out--;
    return out > 0 ? out : 0;
}

int64_t rv_pool_output_elements(const rv_shapes *shapes, const rv_pool_geometry *g)
{
    guint rank = rv_shapes_rank(shapes, 0);
    if (rank != g->spatial + 1 && rank != g->spatial + 2) return 0;
    guint first = rank - g->spatial;
    double elements = 1;
    for (guint d = 0; d < rank; d++) {
        int64_t in = rv_shapes_extent(shapes, 0, d);
        elements *= (double)(d < first ? in : rv_pool_output_extent(g, d - first, in));
    }
    return elements > 0 && elements < (double)G_MAXINT64 / 16 ? (int64_t)elements : 0;
}
