/*
 * import.h - internals shared by the importer's files (not public).
 */
#ifndef REVERIE_IMPORT_INTERNAL_H
#define REVERIE_IMPORT_INTERNAL_H

#include <jansson.h>
#include "reverie/error.h"
#include "reverie/trace.h"

typedef enum {
    EVENT_KEPT,
    EVENT_NO_PHASE,
    EVENT_NO_DURATION,
    EVENT_IGNORED_CATEGORY,
    EVENT_UNMODELLED_BACKEND,   /* also counted as an ignored category */
    EVENT_IGNORED_PHASE,
    EVENT_GPU_ANNOTATION
} event_outcome;

/* Where an event came from, for error messages. */
typedef struct {
    const char *path;
    rv_strings *strings;
    uint32_t file_index;
    guint64 byte_offset;
    GError **error;
    const char *text;      /* the event's JSON text, for fields copied verbatim */
    gsize text_length;
} event_context;

/* Intern a JSON value's compact text (json_dump flags added to
 * JSON_COMPACT); -1 if it cannot be written. */
int32_t rv_import_intern_json(event_context *ctx, json_t *value, size_t flags);

/* A convolution's stride, padding, dilation, groups and transposition, or
 * a pool's window or output size, from its "Concrete Inputs" (op_args.c),
 * as the compact JSON object that rv_conv_geometry_parse or
 * rv_pool_geometry_parse reads, interned; -1 for any other operator or a
 * record that does not say. */
int32_t rv_import_op_args(event_context *ctx, const char *op, json_t *args);

gboolean rv_import_convert_event(event_context *ctx, json_t *object, rv_event *event,
                                 event_outcome *outcome);

#endif
