/*
 * plan.c - `reverie plan TRACE --gpus N`: how to split the job over N GPUs
 * (parallel_plan.h): the tensor x pipeline x data splits, ZeRO stages,
 * micro-batches and checkpointing that fit in a GPU's memory, ranked by
 * their predicted step, and why the others do not.
 */
#include "cli.h"
#include "reverie/gpus.h"
#include "reverie/parallel_plan.h"
#include "reverie/units.h"
#include <jansson.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int gpus, gpus_per_node, max_tensor, max_pipeline, jobs, limit;
    char *gpu, *memory;
    char **with;
    gboolean as_json;
} plan_options;

static double gib(int64_t bytes) { return (double)bytes / 1073741824.0; }

static void progress(guint done, guint total, gpointer data)
{
    (void)data;
    fprintf(stderr, "\r\033[Kplan: %u/%u configurations", done, total);
    if (done == total) fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

static const char *memory_basis(const rv_plan *plan)
{
    return plan->memory_from_shapes ? "the memory model on each configuration's graph (shapes)"
                                    : "the recorded [memory] split, scaled (the trace has no shapes)";
}

static void print_config(const rv_plan_config *c, guint rank)
{
    char step[32] = "-", peak[32] = "-";
    if (c->predicted_ns >= 0) g_snprintf(step, sizeof step, "%.3f", c->predicted_ns / 1e6);
    if (c->peak_bytes >= 0) g_snprintf(peak, sizeof peak, "%.2f", gib(c->peak_bytes));
    printf("  %-5u %6d %8d %5d %4d %12d %10s %12s %10s\n", rank, c->tensor, c->pipeline, c->data, c->zero,
           c->microbatches, c->checkpoint ? "yes" : "no", step, peak);
}

static void print_table(const rv_graph *graph, const rv_plan_request *r, const rv_plan *plan, const plan_options *o)
{
    printf("%s: %d GPUs of %s, %.2f GiB each; the trace's step replays in %.3f ms\n", rv_cli_shown(graph->source),
           r->gpus, r->gpu->id, gib(r->memory_bytes), plan->baseline_ns / 1e6);
    printf("  searched %u configurations: tensor up to %d GPUs (a node's), pipeline up to %d stages (%s), 1F1B with "
           "P, 2P, 4P micro-batches, ZeRO 0-3, checkpointing where nothing else fits\n", plan->configs->len,
           plan->max_tensor, plan->max_pipeline,
           plan->blocks ? "a block a stage at least" : "no Transformer block found");
    printf("  memory: %s", memory_basis(plan));
    if (!plan->memory_from_shapes)
        printf(": %.2f GiB of model states before the step, %.2f GiB above it", gib(plan->recorded_states),
               gib(plan->recorded_activations));
    printf("\n  %u fit, ranked by predicted step:\n", plan->fitting);
    printf("  %-5s %6s %8s %5s %4s %12s %10s %12s %10s\n", "rank", "tensor", "pipeline", "data", "zero", "microbatches",
           "checkpoint", "step (ms)", "peak (GiB)");
    guint shown = 0;
    for (guint i = 0; i < plan->configs->len; i++) {
        const rv_plan_config *c = &g_array_index(plan->configs, rv_plan_config, i);
        if (c->verdict != RV_PLAN_FITS || (o->limit > 0 && shown >= (guint)o->limit)) continue;
        print_config(c, ++shown);
    }
    if (shown < plan->fitting) printf("  (%u more: --limit 0 lists all)\n", plan->fitting - shown);
    if (plan->fitting > 0)
        printf("  the first: --opt %s\n", rv_cli_shown(g_array_index(plan->configs, rv_plan_config, 0).specs));
    guint rejected = plan->configs->len - plan->fitting;
    if (rejected == 0) return;
    printf("  %u do not fit:\n", rejected);
    shown = 0;
    for (guint i = plan->fitting; i < plan->configs->len; i++) {
        const rv_plan_config *c = &g_array_index(plan->configs, rv_plan_config, i);
        if (o->limit > 0 && shown++ >= (guint)o->limit) {
            printf("    (%u more: --limit 0 lists all)\n", rejected - (guint)o->limit);
            break;
        }
        printf("    tensor %d, pipeline %d, data %d, zero %d, %d micro-batches%s: %s\n", c->tensor, c->pipeline,
               c->data, c->zero, c->microbatches, c->checkpoint ? ", checkpointed" : "", rv_cli_shown(c->why));
    }
}

static json_t *config_json(const rv_plan_config *c)
{
    json_t *item = json_pack("{s:i, s:i, s:i, s:i, s:i, s:b}", "tensor", c->tensor, "pipeline", c->pipeline, "data",
                             c->data, "zero", c->zero, "microbatches", c->microbatches, "checkpoint", c->checkpoint);
    json_object_set_new(item, "predicted_us", c->predicted_ns >= 0 ? json_real(c->predicted_ns / 1e3) : json_null());
    json_object_set_new(item, "peak_bytes", c->peak_bytes >= 0 ? json_integer(c->peak_bytes) : json_null());
    json_object_set_new(item, "opts", json_string(c->specs));
    if (c->why) json_object_set_new(item, "why", json_string(c->why));
    return item;
}

static void print_json(const rv_graph *graph, const rv_plan_request *r, const rv_plan *plan)
{
    json_t *fits = json_array(), *rejected = json_array();
    for (guint i = 0; i < plan->configs->len; i++) {
        const rv_plan_config *c = &g_array_index(plan->configs, rv_plan_config, i);
        json_array_append_new(c->verdict == RV_PLAN_FITS ? fits : rejected, config_json(c));
    }
    json_t *root = json_object();
    json_object_set_new(root, "source", json_string(graph->source));
    json_object_set_new(root, "gpus", json_integer(r->gpus));
    json_object_set_new(root, "gpu", json_string(r->gpu->id));
    json_object_set_new(root, "memory_bytes", json_integer(r->memory_bytes));
    json_object_set_new(root, "memory_from", json_string(plan->memory_from_shapes ? "shapes" : "recorded"));
    json_object_set_new(root, "baseline_us", json_real(plan->baseline_ns / 1e3));
    json_object_set_new(root, "blocks", json_integer(plan->blocks));
    json_object_set_new(root, "max_tensor", json_integer(plan->max_tensor));
    json_object_set_new(root, "max_pipeline", json_integer(plan->max_pipeline));
    json_object_set_new(root, "configurations", fits);
    json_object_set_new(root, "rejected", rejected);
    rv_cli_print_json(root);
}

/* The GPU to plan for and its memory: --gpu, else the trace's; --memory,
 * else its capacity.  A trace whose GPU the catalogue does not know is
 * taken as recorded on --gpu. */
static gboolean resolve_gpu(const rv_graph *graph, const plan_options *o, rv_gpu_catalogue *catalogue,
                            rv_plan_request *r, GError **error)
{
    GError *unknown = NULL;
    r->trace_gpu = rv_gpu_of_graph(catalogue, graph, NULL, "--gpu", &unknown);
    if (o->gpu) r->gpu = rv_gpu_find(catalogue, o->gpu, error);
    if (r->trace_gpu == NULL && r->gpu != NULL) {
        r->trace_gpu = r->gpu;
        r->trace_gpu_assumed = TRUE;
        fprintf(stderr, "reverie: note: %s names no GPU the catalogue knows: taken as recorded on %s\n",
                rv_cli_shown(graph->source), r->gpu->id);
    } else if (r->trace_gpu == NULL && o->gpu == NULL) {
        g_propagate_prefixed_error(error, g_steal_pointer(&unknown), "plan: ");
    } else if (o->gpu == NULL) {
        r->gpu = r->trace_gpu;
    }
    g_clear_error(&unknown);
    if (r->gpu == NULL) return FALSE;
    if (o->memory) return rv_parse_bytes(o->memory, &r->memory_bytes, error);
    r->memory_bytes = (int64_t)r->gpu->memory_bytes;
    return TRUE;
}

static int run(const char *path, const plan_options *o)
{
    GError *error = NULL;
    rv_plan plan = { 0 };
    rv_plan_request request = { o->gpus, NULL, NULL, FALSE, 0, o->gpus_per_node, o->max_tensor, o->max_pipeline, o->with,
                                (guint)o->jobs, isatty(STDERR_FILENO) ? progress : NULL, NULL };
    rv_gpu_catalogue *catalogue = NULL;
    rv_graph *graph = NULL;
    gboolean ok = rv_plan_check_gpus(o->gpus, o->gpus_per_node, &error);
    if (ok) {
        char *paths[] = { (char *)path };
        graph = rv_cli_load_job(paths, 1, TRUE, &error);
        ok = graph != NULL && (catalogue = rv_gpu_catalogue_load_default(&error)) != NULL &&
             resolve_gpu(graph, o, catalogue, &request, &error) && rv_plan_search(graph, &request, &plan, &error);
    }
    if (ok && o->as_json) print_json(graph, &request, &plan);
    else if (ok) print_table(graph, &request, &plan, o);
    int status = ok ? RV_EXIT_OK : rv_cli_fail(error);
    rv_plan_clear(&plan);
    rv_gpu_catalogue_free(catalogue);
    rv_graph_free(graph);
    return status;
}

int rv_cmd_plan(int argc, char **argv)
{
    plan_options o = { 0, 8, 0, 0, (int)MAX(g_get_num_processors(), 1), 20, NULL, NULL, NULL, FALSE };
    GOptionEntry entries[] = {
        { "gpus", 0, 0, G_OPTION_ARG_INT, &o.gpus, "GPUs to split the job over (required)", "N" },
        { "gpu", 0, 0, G_OPTION_ARG_STRING, &o.gpu, "the GPU (catalogue name; default: the trace's)", "NAME" },
        { "memory", 0, 0, G_OPTION_ARG_STRING, &o.memory, "memory per GPU (default: the GPU's capacity), e.g. 16GiB", "LIMIT" },
        { "with", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.with,
          "extra parameters for a plugin the plan uses (links, shapes), e.g. tp-allreduce:batch=8,seq=512,hidden=1024",
          "NAME:k=v,..." },
        { "gpus-per-node", 0, 0, G_OPTION_ARG_INT, &o.gpus_per_node, "GPUs in a node (default 8)", "N" },
        { "max-tensor", 0, 0, G_OPTION_ARG_INT, &o.max_tensor, "largest tensor-parallel degree (default: a node's GPUs)", "T" },
        { "max-pipeline", 0, 0, G_OPTION_ARG_INT, &o.max_pipeline,
          "most pipeline stages (default: the Transformer blocks per step)", "P" },
        { "jobs", 'j', 0, G_OPTION_ARG_INT, &o.jobs, "configurations replayed at once (default: the CPUs)", "N" },
        { "limit", 'n', 0, G_OPTION_ARG_INT, &o.limit, "rows of each table (default 20, 0: all)", "N" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &o.as_json, "print JSON (schema in docs/commands.md)", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH --gpus N - how to split the job over N GPUs");
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(context,
        "Each configuration (tensor x pipeline x data = N, ZeRO stage, micro-batches, checkpointing) is built\n"
        "from the optimizations tp-allreduce, pipeline (1F1B), ddp or world-size, zero and checkpoint (and\n"
        "hardware for another --gpu), its peak memory per GPU estimated, and the ones that fit replayed.\n"
        "Examples:\n"
        "  reverie plan trace.json.gz --gpus 64\n"
        "  reverie plan trace.json.gz --gpus 16 --gpu H100-SXM --memory 40GiB --json\n"
        "  reverie plan rank1.json.gz --gpus 64 --with tp-allreduce:batch=8,seq=512,hidden=1024 --with "
        "ddp:bandwidth=200Gbps\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc != 2) { status = rv_cli_usage("plan", "give one trace or graph"); goto out; }
    if (o.gpus == 0) { status = rv_cli_usage("plan", "give --gpus N, the GPUs to split the job over"); goto out; }
    if (o.max_tensor < 0 || o.max_pipeline < 0 || o.jobs < 1 || o.jobs > 1024 || o.limit < 0) {
        status = rv_cli_usage("plan", "--max-tensor, --max-pipeline and --limit take 0 or more, --jobs 1 to 1024");
        goto out;
    }
    status = run(argv[1], &o);
out:
    g_free(o.gpu);
    g_free(o.memory);
    g_strfreev(o.with);
    g_option_context_free(context);
    return status;
}
