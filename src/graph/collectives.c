/*
 * collectives.c - what the graph knows about each NCCL/RCCL kernel: the
 * operation, its process group, sequence number, payload and the
 * parallelism it serves (graph.h's rv_collective_info).
 *
 * PyTorch writes a collective's description (kineto's ParamCommsUtils keys:
 * "Collective name", "Process Group Name", "Seq", "In msg nelems", ...) on
 * the NCCL kernel itself in recent versions, and on the record_param_comms
 * operator (inside a c10d:: operator) that launched it in older ones; the
 * oldest give only the c10d operator's name and Input Dims.  The importer
 * keeps each as one JSON text (trace.h's rv_event.comm); here the kernel's
 * own, then the innermost and the next enclosing operator's, fill each
 * field in that order.  What none of them says falls back to the kernel's
 * name (the operation), its stream (the group) and the trace's world size
 * (the group's size, left 0 here: job.c and the plugins decide).
 *
 * Each kernel gets its own record; job.c merges the records of the kernels
 * that are one collective on several ranks.
 */
#include "build.h"
#include "reverie/comm.h"
#include <jansson.h>
#include <string.h>

/* What one comm JSON text says; -1 / 0 / NULL where it says nothing. */
typedef struct {
    char *name;          /* "Collective name", or the c10d operator's */
    char *group, *description, *dtype;
    int32_t group_size;  /* "Group size", else the length of "Process Group Ranks" */
    int64_t seq, in_elements, out_elements, source_rank, target_rank;
    char *input_type;    /* c10d operators: the first tensor input's type */
    int64_t input_elements; /* c10d operators: the larger of the first two inputs, -1 if unknown */
} comm_facts;

static void facts_clear(gpointer data)
{
    comm_facts *facts = data;
    g_free(facts->name);
    g_free(facts->group);
    g_free(facts->description);
    g_free(facts->dtype);
    g_free(facts->input_type);
    g_free(facts);
}

static char *text_of(json_t *object, const char *key)
{
    json_t *value = json_object_get(object, key);
    if (json_is_string(value)) return g_strdup(json_string_value(value));
    if (json_is_integer(value)) return g_strdup_printf("%" JSON_INTEGER_FORMAT, json_integer_value(value));
    return NULL;
}

static int64_t integer_of(json_t *object, const char *key)
{
    json_t *value = json_object_get(object, key);
    if (json_is_integer(value)) return json_integer_value(value);
    if (json_is_real(value) && json_real_value(value) >= 0 && json_real_value(value) < 9e15)
        return (int64_t)json_real_value(value);
    if (json_is_string(value)) {
        char *end = NULL;
        gint64 number = g_ascii_strtoll(json_string_value(value), &end, 10);
        if (end != json_string_value(value) && *end == '\0') return number;
    }
    return -1;
}

/* "Process Group Ranks" is an array, or its text ("[0, 1, 2, 3]", with
 * "..." past 30 ranks): count the entries. */
static int32_t ranks_listed(json_t *object)
{
    json_t *value = json_object_get(object, "Process Group Ranks");
    if (json_is_array(value)) return (int32_t)MIN(json_array_size(value), (size_t)G_MAXINT32);
    if (!json_is_string(value) || strstr(json_string_value(value), "...") != NULL) return 0;
    int32_t count = 0;
    gboolean in_number = FALSE;
    for (const char *c = json_string_value(value); *c; c++) {
        gboolean digit = g_ascii_isdigit(*c);
        if (digit && !in_number) count++;
        in_number = digit;
    }
    return count;
}

/* Elements of the larger of an operator's first two inputs (c10d's
 * alltoall_base_(output, input, ...)), -1 if neither is a tensor shape. */
static int64_t larger_input(json_t *dims)
{
    int64_t elements = -1;
    for (size_t i = 0; json_is_array(dims) && i < 2 && i < json_array_size(dims); i++) {
        json_t *shape = json_array_get(dims, i);
        if (!json_is_array(shape) || json_array_size(shape) == 0) continue;
        int64_t product = 1;
        for (size_t d = 0; d < json_array_size(shape) && product > 0; d++) {
            json_t *extent = json_array_get(shape, d);
            int64_t value = json_is_integer(extent) ? json_integer_value(extent) : -1;
            product = value >= 0 && value < ((int64_t)1 << 40) && product < ((int64_t)1 << 40) ? product * value : -1;
        }
        elements = MAX(elements, product);
    }
    return elements;
}

static comm_facts *parse_facts(const char *text)
{
    comm_facts *facts = g_new0(comm_facts, 1);
    facts->seq = facts->in_elements = facts->out_elements = facts->source_rank = facts->target_rank = -1;
    facts->input_elements = -1;
    json_t *object = json_loads(text, 0, NULL);
    if (!json_is_object(object)) {
        json_decref(object);
        return facts;
    }
    facts->name = text_of(object, "Collective name");
    char *operator_name = text_of(object, "Operator");
    if (facts->name == NULL && operator_name && g_str_has_prefix(operator_name, "c10d::"))
        facts->name = g_strdup(operator_name + strlen("c10d::"));
    g_free(operator_name);
    facts->input_elements = larger_input(json_object_get(object, "Input Dims"));
    facts->group = text_of(object, "Process Group Name");
    facts->description = text_of(object, "Process Group Description");
    facts->dtype = text_of(object, "dtype");
    int64_t size = integer_of(object, "Group size");
    facts->group_size = size > 0 && size <= G_MAXINT32 ? (int32_t)size : ranks_listed(object);
    facts->seq = integer_of(object, "Seq");
    facts->in_elements = integer_of(object, "In msg nelems");
    facts->out_elements = integer_of(object, "Out msg nelems");
    facts->source_rank = integer_of(object, "Src Rank");
    facts->target_rank = integer_of(object, "Dst Rank");
    json_t *types = json_object_get(object, "Input type");
    for (size_t i = 0; json_is_array(types) && i < json_array_size(types) && facts->input_type == NULL; i++) {
        json_t *type = json_array_get(types, i);
        if (json_is_string(type) && *json_string_value(type)) facts->input_type = g_strdup(json_string_value(type));
    }
    json_decref(object);
    return facts;
}

/* Bytes per element of a dtype as record_param_comms ("Float", "BFloat16")
 * or Input type ("float", "c10::Half", "long int") spells it; 0 if unknown. */
static int element_bytes(const char *dtype)
{
    if (dtype == NULL) return 0;
    char *lower = g_ascii_strdown(dtype, -1);
    int bytes = 0;
    if (strstr(lower, "double") || strstr(lower, "long") || strstr(lower, "int64") || strstr(lower, "float64")) bytes = 8;
    else if (strstr(lower, "half") || strstr(lower, "bfloat16") || strstr(lower, "short") || strstr(lower, "16")) bytes = 2;
    else if (strstr(lower, "float") || strstr(lower, "int")) bytes = 4;
    else if (strstr(lower, "byte") || strstr(lower, "char") || strstr(lower, "bool") || strstr(lower, "8")) bytes = 1;
    g_free(lower);
    return bytes;
}

/* The operation as comm.h names it, from "Collective name" spellings
 * (allreduce, _allgather_base, reduce_scatter_tensor, alltoall_base,
 * all_to_allv, broadcast, send, recv); -1 if unknown.  *point_to_point is
 * set for send and recv. */
static int operation_of(const char *name, gboolean *point_to_point)
{
    *point_to_point = FALSE;
    if (name == NULL) return -1;
    char *key = g_ascii_strdown(name, -1);
    GString *squeezed = g_string_new(NULL);
    for (const char *c = key; *c; c++) if (*c != '_' && *c != '-' && *c != ' ') g_string_append_c(squeezed, *c);
    const char *k = squeezed->str;
    int op = -1;
    if (strstr(k, "reducescatter")) op = RV_COLL_REDUCE_SCATTER;
    else if (strstr(k, "allreduce")) op = RV_COLL_ALLREDUCE_RING;
    else if (strstr(k, "allgather")) op = RV_COLL_ALL_GATHER;
    else if (strstr(k, "alltoall")) op = RV_COLL_ALL_TO_ALL;
    else if (strstr(k, "broadcast")) op = RV_COLL_BROADCAST;
    else if (strcmp(k, "send") == 0 || strcmp(k, "recv") == 0 || strcmp(k, "sendrecv") == 0 ||
             strcmp(k, "isend") == 0 || strcmp(k, "irecv") == 0) {
        *point_to_point = TRUE;
        op = RV_COLL_BROADCAST; /* two ranks: one message, latency + bytes / bandwidth (comm.h) */
    }
    g_string_free(squeezed, TRUE);
    g_free(key);
    return op;
}

/* Does a process group's name or description name a parallelism?  Words
 * are split at anything that is not a letter ("tp_group", "TENSOR_MODEL"). */
static rv_parallelism parallelism_named(const char *text)
{
    if (text == NULL) return RV_PARALLEL_UNKNOWN;
    static const struct { const char *word; rv_parallelism parallelism; } words[] = {
        { "tp", RV_PARALLEL_TENSOR }, { "tensor", RV_PARALLEL_TENSOR }, { "pp", RV_PARALLEL_PIPELINE },
        { "pipe", RV_PARALLEL_PIPELINE }, { "pipeline", RV_PARALLEL_PIPELINE }, { "ep", RV_PARALLEL_EXPERT },
        { "expert", RV_PARALLEL_EXPERT }, { "moe", RV_PARALLEL_EXPERT }, { "dp", RV_PARALLEL_DATA },
        { "data", RV_PARALLEL_DATA }, { "ddp", RV_PARALLEL_DATA }, { "fsdp", RV_PARALLEL_DATA },
    };
    char *lower = g_ascii_strdown(text, -1);
    rv_parallelism found = RV_PARALLEL_UNKNOWN;
    for (char *word = lower; *word && found == RV_PARALLEL_UNKNOWN;) {
        while (*word && !g_ascii_isalpha(*word)) word++;
        char *end = word;
        while (*end && g_ascii_isalpha(*end)) end++;
        char saved = *end;
        *end = '\0';
        for (gsize i = 0; i < G_N_ELEMENTS(words) && found == RV_PARALLEL_UNKNOWN; i++)
            if (strcmp(word, words[i].word) == 0) found = words[i].parallelism;
        *end = saved;
        word = end;
    }
    g_free(lower);
    return found;
}

/* graph.h's rule when the group does not say: point-to-point is pipeline,
 * all-to-all expert (or embedding) parallel, an all-reduce in the forward
 * pass tensor parallel, the rest data parallel. */
static rv_parallelism parallelism_of_operation(int op, gboolean point_to_point, rv_phase phase)
{
    if (point_to_point) return RV_PARALLEL_PIPELINE;
    switch (op) {
    case RV_COLL_ALL_TO_ALL: return RV_PARALLEL_EXPERT;
    case RV_COLL_ALLREDUCE_RING: case RV_COLL_ALLREDUCE_TREE: case RV_COLL_ALLREDUCE_HIER:
        return phase == RV_PHASE_FORWARD ? RV_PARALLEL_TENSOR : RV_PARALLEL_DATA;
    case RV_COLL_REDUCE_SCATTER: case RV_COLL_ALL_GATHER: case RV_COLL_BROADCAST: return RV_PARALLEL_DATA;
    default: return RV_PARALLEL_UNKNOWN;
    }
}

typedef struct {
    builder *b;
    GHashTable *parsed;   /* comm string id -> comm_facts */
    const comm_facts *sources[3];
    int count;
} fact_sources;

static const comm_facts *facts_for(fact_sources *f, int32_t comm)
{
    gpointer found = g_hash_table_lookup(f->parsed, GINT_TO_POINTER(comm));
    if (found) return found;
    comm_facts *facts = parse_facts(rv_strings_get(f->b->graph->strings, comm));
    g_hash_table_insert(f->parsed, GINT_TO_POINTER(comm), facts);
    return facts;
}

/* The kernel's own facts, then its launch call's operators', innermost first. */
static void gather_sources(fact_sources *f, int32_t task)
{
    f->count = 0;
    const rv_event *event = builder_event(f->b, task);
    if (event && event->comm >= 0) f->sources[f->count++] = facts_for(f, event->comm);
    int32_t launch = g_array_index(f->b->task_launch, int32_t, task);
    if (launch < 0) return;
    comm_scope scope = g_array_index(f->b->task_comm, comm_scope, launch);
    if (scope.inner >= 0) f->sources[f->count++] = facts_for(f, scope.inner);
    if (scope.outer >= 0) f->sources[f->count++] = facts_for(f, scope.outer);
}

#define FIRST_OF(f, field, none, out)                                                          \
    do {                                                                                       \
        for (int i_ = 0; i_ < (f)->count; i_++)                                                \
            if ((f)->sources[i_]->field != (none)) { (out) = (f)->sources[i_]->field; break; } \
    } while (0)

/* Payload per rank: S as comm.h defines it (the all-gather's output, every
 * other operation's input), from the message sizes, else from the c10d
 * operator's first two inputs. */
static int64_t payload_of(const fact_sources *f, int op)
{
    int64_t in = -1, out = -1;
    char *dtype = NULL;
    FIRST_OF(f, in_elements, -1, in);
    FIRST_OF(f, out_elements, -1, out);
    FIRST_OF(f, dtype, NULL, dtype);
    if (dtype == NULL) FIRST_OF(f, input_type, NULL, dtype);
    int size = element_bytes(dtype);
    int64_t elements = op == RV_COLL_ALL_GATHER ? MAX(in, out) : in;
    if (elements < 0) elements = MAX(in, out);
    if (elements < 0) FIRST_OF(f, input_elements, -1, elements); /* oldest traces: the operator's shapes */
    if (elements <= 0 || size == 0 || elements > ((int64_t)1 << 50)) return 0;
    return elements * size;
}

static int32_t group_of(fact_sources *f, const rv_task *kernel)
{
    char *name = NULL;
    FIRST_OF(f, group, NULL, name);
    rv_strings *strings = f->b->graph->strings;
    if (name != NULL) return rv_strings_intern(strings, name);
    /* unnamed: each process group has its own NCCL stream */
    const rv_resource *stream = &g_array_index(f->b->graph->resources, rv_resource, kernel->resource);
    char *fallback = g_strdup_printf("stream %" G_GINT64_FORMAT, stream->thread);
    int32_t id = rv_strings_intern(strings, fallback);
    g_free(fallback);
    return id;
}

static rv_collective_info describe(fact_sources *f, const rv_task *kernel)
{
    rv_collective_info info = { 0 };
    char *name = NULL, *description = NULL, *group = NULL;
    FIRST_OF(f, name, NULL, name);
    FIRST_OF(f, description, NULL, description);
    FIRST_OF(f, group, NULL, group);
    gboolean point_to_point = FALSE;
    int op = operation_of(name, &point_to_point);
    int by_kernel = rv_collective_from_kernel_name(rv_strings_get(f->b->graph->strings, kernel->name));
    /* the kernel's symbol says ring or tree; the operator only "allreduce" */
    if (by_kernel >= 0 && (op < 0 || (op == RV_COLL_ALLREDUCE_RING && by_kernel == RV_COLL_ALLREDUCE_TREE)))
        op = by_kernel;
    info.op = op >= 0 ? (uint8_t)op : RV_COLLECTIVE_OP_UNKNOWN;
    info.bytes = payload_of(f, op);
    info.seq = -1;
    FIRST_OF(f, seq, -1, info.seq);
    FIRST_OF(f, group_size, 0, info.group_size);
    info.group = group_of(f, kernel);
    info.peer = -1;
    if (point_to_point) {
        int64_t source = -1, target = -1;
        FIRST_OF(f, source_rank, -1, source);
        FIRST_OF(f, target_rank, -1, target);
        int64_t self = f->b->trace->rank;
        int64_t peer = source >= 0 && source != self ? source : target;
        if (peer >= 0 && peer <= G_MAXINT32) info.peer = (int32_t)peer;
        if (info.group_size == 0) info.group_size = 2;
    }
    rv_parallelism named = parallelism_named(description);
    if (named == RV_PARALLEL_UNKNOWN) named = parallelism_named(group);
    info.parallelism = (uint8_t)(named != RV_PARALLEL_UNKNOWN ? named
                                 : parallelism_of_operation(op, point_to_point, (rv_phase)kernel->phase));
    info.rendezvous = -1;
    info.participants = 1;
    info.matched_by = RV_MATCH_NONE;
    return info;
}

void rv_build_collectives(builder *b)
{
    fact_sources f = { b, g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, facts_clear), { NULL }, 0 };
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        rv_task *task = rv_graph_task(b->graph, id);
        if (task->kind != RV_TASK_COMM || !builder_is_gpu_task(task) || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
        gather_sources(&f, id);
        rv_collective_info info = describe(&f, task);
        task->collective = rv_graph_add_collective(b->graph, &info);
    }
    g_hash_table_destroy(f.parsed);
}
