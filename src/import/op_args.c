/*
 * op_args.c - the scalar arguments of an operator that its shapes need:
 * a convolution's geometry, a pool's window.
 *
 * Input Dims give a convolution's input and weight but not its stride,
 * padding or dilation, so a stride-2 convolution looks like a stride-1
 * one with four times the output.  Profilers of PyTorch 2.x with
 * record_shapes=True also write "Concrete Inputs", the values of the
 * scalar arguments as text, one per argument ('' for a tensor):
 *
 *   aten::conv2d  Concrete Inputs ['', '', '', '[2, 2]', '[1, 1]', '[1, 1]', '1']
 *
 * Which position holds which argument depends on the operator's schema
 * (native_functions.yaml), so it is read here, where the operator's name
 * is known, and kept as one compact object that names its fields:
 *
 *   {"stride":[2,2],"padding":[1,1],"dilation":[1,1],"groups":1,"transposed":false}
 *
 * (shapes.h's rv_conv_geometry_parse reads it back).  A pooling operator's
 * window is kept the same way, {"pool":"window","kernel":[3,3],"stride":..,
 * "padding":..,"dilation":..,"ceil_mode":false}, and an adaptive pool's
 * output, {"pool":"adaptive","output_size":[1,1]} (rv_pool_geometry_parse).  A record that does
 * not fit its schema (a list of the wrong length, a negative stride, a
 * padding string other than 'valid' or 'same') is left out, never an error:
 * like shapes, these are advisory.
 */
#include "import.h"
#include <stdlib.h>
#include <string.h>

#define MAX_SPATIAL 3

/* Positions of the arguments in the operator's schema; -1: not an argument
 * of it.  transposed_always: a conv_transpose*, transposed by name. */
typedef struct {
    const char *op;
    int stride, padding, dilation, transposed, output_padding, groups;
    gboolean transposed_always;
} conv_schema;

static const conv_schema conv_schemas[] = {
    /* (input, weight, bias, stride, padding, dilation, groups) */
    { "aten::conv1d", 3, 4, 5, -1, -1, 6, FALSE },
    { "aten::conv2d", 3, 4, 5, -1, -1, 6, FALSE },
    { "aten::conv3d", 3, 4, 5, -1, -1, 6, FALSE },
    /* (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...) */
    { "aten::convolution", 3, 4, 5, 6, 7, 8, FALSE },
    { "aten::_convolution", 3, 4, 5, 6, 7, 8, FALSE },
    /* (input, weight, bias, stride, padding, output_padding, groups, dilation) */
    { "aten::conv_transpose1d", 3, 4, 7, -1, 5, 6, TRUE },
    { "aten::conv_transpose2d", 3, 4, 7, -1, 5, 6, TRUE },
    { "aten::conv_transpose3d", 3, 4, 7, -1, 5, 6, TRUE },
    /* (self, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32) */
    { "aten::cudnn_convolution", 3, 2, 4, -1, -1, 5, FALSE },
    /* (self, weight, bias, padding, stride, dilation, groups, ...) */
    { "aten::miopen_convolution", 4, 3, 5, -1, -1, 6, FALSE },
    { "aten::mkldnn_convolution", 4, 3, 5, -1, -1, 6, FALSE },
};

/* A pooling window's positions; dilation -1 for avg_pool (always 1);
 * output_size >= 0 for an adaptive pool (the rest unused). */
typedef struct {
    const char *op;
    int kernel, stride, padding, dilation, ceil_mode, output_size;
} pool_schema;

static const pool_schema pool_schemas[] = {
    /* (self, kernel_size, stride, padding, dilation, ceil_mode) */
    { "aten::max_pool1d", 1, 2, 3, 4, 5, -1 },
    { "aten::max_pool2d", 1, 2, 3, 4, 5, -1 },
    { "aten::max_pool3d", 1, 2, 3, 4, 5, -1 },
    { "aten::max_pool2d_with_indices", 1, 2, 3, 4, 5, -1 },
    { "aten::max_pool3d_with_indices", 1, 2, 3, 4, 5, -1 },
    /* (self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) */
    { "aten::avg_pool1d", 1, 2, 3, -1, 4, -1 },
    { "aten::avg_pool2d", 1, 2, 3, -1, 4, -1 },
    { "aten::avg_pool3d", 1, 2, 3, -1, 4, -1 },
    /* (self, output_size) */
    { "aten::adaptive_avg_pool1d", -1, -1, -1, -1, -1, 1 },
    { "aten::adaptive_avg_pool2d", -1, -1, -1, -1, -1, 1 },
    { "aten::adaptive_avg_pool3d", -1, -1, -1, -1, -1, 1 },
    { "aten::_adaptive_avg_pool2d", -1, -1, -1, -1, -1, 1 },
    { "aten::_adaptive_avg_pool3d", -1, -1, -1, -1, -1, 1 },
    { "aten::adaptive_max_pool1d", -1, -1, -1, -1, -1, 1 },
    { "aten::adaptive_max_pool2d", -1, -1, -1, -1, -1, 1 },
    { "aten::adaptive_max_pool3d", -1, -1, -1, -1, -1, 1 },
};

static const conv_schema *schema_of(const char *op)
{
    if (op == NULL || strstr(op, "conv") == NULL) return NULL;
    for (gsize i = 0; i < G_N_ELEMENTS(conv_schemas); i++)
        if (strcmp(conv_schemas[i].op, op) == 0) return &conv_schemas[i];
    return NULL;
}

static const pool_schema *pool_schema_of(const char *op)
{
    if (op == NULL || strstr(op, "pool") == NULL) return NULL;
    for (gsize i = 0; i < G_N_ELEMENTS(pool_schemas); i++)
        if (strcmp(pool_schemas[i].op, op) == 0) return &pool_schemas[i];
    return NULL;
}

/* The text of argument `position`, or NULL. */
static const char *argument(json_t *concrete, int position)
{
    if (position < 0 || (size_t)position >= json_array_size(concrete)) return NULL;
    json_t *value = json_array_get(concrete, (size_t)position);
    return json_is_string(value) ? json_string_value(value) : NULL;
}

/* "[2, 2]" (or "2": a bare scalar applies to every dimension) into at most
 * MAX_SPATIAL integers of at least `minimum`; the count, or 0 if it is not
 * such a list. */
static guint int_list(const char *text, int64_t minimum, int64_t values[MAX_SPATIAL])
{
    if (text == NULL) return 0;
    const char *at = text;
    while (*at == ' ') at++;
    gboolean bracketed = *at == '[';
    if (bracketed) at++;
    guint count = 0;
    for (;;) {
        while (*at == ' ') at++;
        if (bracketed && *at == ']' && count > 0) break;
        char *end;
        long long value = strtoll(at, &end, 10);
        if (end == at || value < minimum || value > G_MAXINT32 || count == MAX_SPATIAL) return 0;
        values[count++] = value;
        at = end;
        while (*at == ' ') at++;
        if (*at == ',' && bracketed) { at++; continue; }
        if (bracketed && *at == ']') break;
        if (!bracketed && *at == '\0') return count;
        return 0;
    }
    at++;
    while (*at == ' ') at++;
    return *at == '\0' ? count : 0;
}

static void add_list(json_t *object, const char *key, const int64_t *values, guint count)
{
    json_t *list = json_array();
    for (guint i = 0; i < count; i++) json_array_append_new(list, json_integer(values[i]));
    json_object_set_new(object, key, list);
}

/* A list argument into the object, widened to `spatial` dimensions where
 * it is one value; FALSE when the text is present but not such a list. */
static gboolean add_spatial(json_t *object, const char *key, const char *text, int64_t minimum, guint spatial)
{
    int64_t values[MAX_SPATIAL];
    guint count = int_list(text, minimum, values);
    if (count == 1)
        for (guint d = 1; d < spatial; d++) values[d] = values[0];
    else if (count != spatial) return FALSE;
    add_list(object, key, values, spatial);
    return TRUE;
}

/* The stride's length is the number of spatial dimensions. */
static gboolean read_conv(const conv_schema *schema, json_t *concrete, json_t *object)
{
    int64_t stride[MAX_SPATIAL];
    guint spatial = int_list(argument(concrete, schema->stride), 1, stride);
    if (spatial == 0) return FALSE;
    add_list(object, "stride", stride, spatial);
    const char *padding = argument(concrete, schema->padding);
    if (padding != NULL && strstr(padding, "same") != NULL) json_object_set_new(object, "padding", json_string("same"));
    else if (padding != NULL && strstr(padding, "valid") != NULL) add_spatial(object, "padding", "0", 0, spatial);
    else if (!add_spatial(object, "padding", padding, 0, spatial)) return FALSE;
    if (!add_spatial(object, "dilation", argument(concrete, schema->dilation), 1, spatial)) return FALSE;
    const char *transposed = argument(concrete, schema->transposed);
    gboolean is_transposed = schema->transposed_always || (transposed != NULL && strcmp(transposed, "True") == 0);
    json_object_set_new(object, "transposed", json_boolean(is_transposed));
    if (is_transposed &&
        !add_spatial(object, "output_padding", argument(concrete, schema->output_padding), 0, spatial))
        return FALSE;
    int64_t groups[MAX_SPATIAL];
    if (int_list(argument(concrete, schema->groups), 1, groups) != 1) return FALSE;
    json_object_set_new(object, "groups", json_integer(groups[0]));
    return TRUE;
}

/* A pool's window: the kernel's length is the number of spatial
 * dimensions; an empty stride ([], None) is the kernel's. */
static gboolean read_pool(const pool_schema *schema, json_t *concrete, json_t *object)
{
    if (schema->output_size >= 0) {
        int64_t size[MAX_SPATIAL];
        guint spatial = int_list(argument(concrete, schema->output_size), 1, size);
        if (spatial == 0) return FALSE;
        json_object_set_new(object, "pool", json_string("adaptive"));
        add_list(object, "output_size", size, spatial);
        return TRUE;
    }
    int64_t kernel[MAX_SPATIAL];
    guint spatial = int_list(argument(concrete, schema->kernel), 1, kernel);
    if (spatial == 0) return FALSE;
    json_object_set_new(object, "pool", json_string("window"));
    add_list(object, "kernel", kernel, spatial);
    const char *stride = argument(concrete, schema->stride);
    if (stride != NULL && strcmp(stride, "[]") == 0) add_list(object, "stride", kernel, spatial);
    else if (!add_spatial(object, "stride", stride, 1, spatial)) return FALSE;
    if (!add_spatial(object, "padding", argument(concrete, schema->padding), 0, spatial)) return FALSE;
    if (schema->dilation < 0) add_spatial(object, "dilation", "1", 1, spatial);
    else if (!add_spatial(object, "dilation", argument(concrete, schema->dilation), 1, spatial)) return FALSE;
    const char *ceil_mode = argument(concrete, schema->ceil_mode);
    json_object_set_new(object, "ceil_mode", json_boolean(ceil_mode != NULL && strcmp(ceil_mode, "True") == 0));
    return TRUE;
}

int32_t rv_import_op_args(event_context *ctx, const char *op, json_t *args)
{
    const conv_schema *conv = schema_of(op);
    const pool_schema *pool = conv == NULL ? pool_schema_of(op) : NULL;
    if (conv == NULL && pool == NULL) return -1;
    json_t *concrete = json_object_get(args, "Concrete Inputs");
    if (!json_is_array(concrete)) return -1;
    json_t *object = json_object();
    int32_t id = -1;
    if (conv != NULL ? read_conv(conv, concrete, object) : read_pool(pool, concrete, object))
        id = rv_import_intern_json(ctx, object, JSON_PRESERVE_ORDER);
    json_decref(object);
    return id;
}
