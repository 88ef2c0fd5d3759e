/*
 * calibrate.c - `reverie calibrate TRACE... -o TABLE`: measure what
 * kernels of each class and size achieve in recordings of a GPU, into a
 * per-GPU efficiency table (efficiency.h) that hardware:gpu= reads.
 *
 * Each TRACE (or saved graph) is one recording: its GPU is the one its
 * deviceProperties name (--source-gpu where they name none), its fixed
 * per-kernel cost, idle gap and per-bucket efficiencies are measured, and
 * it is added under the path given.  --from starts from an existing table
 * (refining it: a recording of the same file, by SHA-256, is replaced).
 * All traces are measured before anything is written; the table is
 * written by the one writer (output.h): atomically, and never over an
 * input (a trace, the --from table).  -o and --force are the options every
 * command shares (output.c).
 */
#include "cli.h"
#include "reverie/documents.h"
#include "reverie/efficiency.h"
#include "reverie/output.h"
#include <jansson.h>
#include <string.h>

typedef struct {
    char *label, *gpu;
    gboolean replaced;
    rv_efficiency_recording summary;
} added;

static char *file_sha256(const char *path, GError **error)
{
    GMappedFile *file = g_mapped_file_new(path, FALSE, error);
    if (file == NULL) return NULL;
    char *sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)g_mapped_file_get_contents(file),
                                            g_mapped_file_get_length(file));
    g_mapped_file_unref(file);
    return sum;
}

/* The recording index of label in the table (after adding it). */
static guint index_of(const rv_efficiency_table *table, const char *sha256)
{
    for (guint i = 0; i < rv_efficiency_table_count(table); i++)
        if (strcmp(rv_efficiency_table_recording(table, i).sha256, sha256) == 0) return i;
    return 0;
}

static gboolean measure(rv_efficiency_table *table, const rv_gpu_catalogue *catalogue, const char *path,
                        const char *source_gpu, GArray *report, GError **error)
{
    if (strcmp(path, "-") == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "calibrate: give traces as files (a recording is known by its "
                    "file's SHA-256), not standard input");
        return FALSE;
    }
    char *sha256 = file_sha256(path, error);
    rv_graph *graph = sha256 ? rv_cli_load(path, error) : NULL;
    const rv_gpu *gpu = graph ? rv_gpu_of_graph(catalogue, graph, source_gpu, "--source-gpu", error) : NULL;
    gboolean ok = gpu != NULL;
    if (ok) {
        rv_cli_print_notes(graph);
        rv_cost_model *model = rv_cost_model_new(graph, gpu, FALSE);
        added entry = { g_strdup(path), g_strdup(gpu->id), FALSE, { 0 } };
        ok = rv_efficiency_table_add(table, model, path, sha256, &entry.replaced, error);
        if (ok) {
            entry.summary = rv_efficiency_table_recording(table, index_of(table, sha256));
            g_array_append_val(report, entry);
        } else {
            g_free(entry.label);
            g_free(entry.gpu);
        }
        rv_cost_model_free(model);
    }
    rv_graph_free(graph);
    g_free(sha256);
    return ok;
}

static gboolean write_table(FILE *file, gpointer data, GError **error)
{
    char *text = rv_efficiency_table_to_json(data);
    gboolean ok = fputs(text, file) >= 0;
    g_free(text);
    return ok;
}

static void print_report(const GArray *report, const rv_efficiency_table *table, const char *output)
{
    printf("%-10s %8s %8s %8s %8s %10s %10s  %s\n", "GPU", "kernels", "samples", "rejected", "buckets", "fixed (us)",
           "gap (us)", "recording");
    for (guint i = 0; i < report->len; i++) {
        const added *a = &g_array_index(report, added, i);
        char gap[32] = "-";
        if (a->summary.gap_ns >= 0) g_snprintf(gap, sizeof gap, "%.3f", a->summary.gap_ns / 1e3);
        printf("%-10s %8u %8u %8u %8u %10.2f %10s  %s%s\n", a->gpu, a->summary.kernels, a->summary.samples,
               a->summary.rejected, a->summary.buckets, a->summary.fixed_ns / 1e3, gap, rv_cli_shown(a->label),
               a->replaced ? " (replaced)" : "");
    }
    printf("%s: %u recordings\n", rv_cli_shown(output), rv_efficiency_table_count(table));
}

static json_t *json_report(const GArray *report, const rv_efficiency_table *table, const char *output)
{
    json_t *recordings = json_array();
    for (guint i = 0; i < report->len; i++) {
        const added *a = &g_array_index(report, added, i);
        json_t *entry = json_pack("{s:o,s:s,s:I,s:I,s:I,s:I,s:f,s:f,s:b}", "recording", rv_json_text(a->label),
                                  "gpu", a->gpu, "kernels", (json_int_t)a->summary.kernels, "samples",
                                  (json_int_t)a->summary.samples, "rejected", (json_int_t)a->summary.rejected,
                                  "buckets", (json_int_t)a->summary.buckets,
                                  "kernel_time_us", a->summary.kernel_ns / 1e3, "fixed_us", a->summary.fixed_ns / 1e3,
                                  "replaced", a->replaced);
        json_object_set_new(entry, "gap_us", a->summary.gap_ns >= 0 ? json_real(a->summary.gap_ns / 1e3) : json_null());
        json_array_append_new(recordings, entry);
    }
    return json_pack("{s:o,s:I,s:o}", "output", rv_json_text(output), "recordings_in_table",
                     (json_int_t)rv_efficiency_table_count(table), "added", recordings);
}

static void report_clear(GArray *report)
{
    for (guint i = 0; i < report->len; i++) {
        added *a = &g_array_index(report, added, i);
        g_free(a->label);
        g_free(a->gpu);
    }
    g_array_unref(report);
}

static int run_calibrate(char **traces, int count, const char *output, const char *from, const char *source_gpu,
                         gboolean as_json)
{
    GError *error = NULL;
    /* the traces are the run's inputs already (rv_cli_parse); so is the
     * table refined, which may not be replaced either - said before any
     * trace is measured */
    if (from) rv_output_note_input(from);
    if (!rv_output_check(output, rv_cli_output_flags(), &error)) return rv_cli_fail(error);
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(&error);
    rv_efficiency_table *table = catalogue == NULL ? NULL
                                 : from ? rv_efficiency_table_load(from, &error) : rv_efficiency_table_new();
    GArray *report = g_array_new(FALSE, FALSE, sizeof(added));
    gboolean ok = table != NULL;
    for (int i = 0; ok && i < count; i++) ok = measure(table, catalogue, traces[i], source_gpu, report, &error);
    ok = ok && rv_output_write(output, rv_cli_output_flags(), write_table, table, &error);
    int status = RV_EXIT_OK;
    if (!ok) status = rv_cli_fail(error);
    else if (as_json) rv_cli_print_json(json_report(report, table, output));
    else print_report(report, table, output);
    report_clear(report);
    rv_efficiency_table_free(table);
    rv_gpu_catalogue_free(catalogue);
    return status;
}

int rv_cmd_calibrate(int argc, char **argv)
{
    char *from = NULL, *source_gpu = NULL;
    gboolean as_json = FALSE;
    GOptionEntry entries[] = {
        { "from", 0, 0, G_OPTION_ARG_FILENAME, &from, "start from this table and add to it (a trace it already "
          "holds, by SHA-256, is measured again and replaced)", "TABLE.json" },
        { "source-gpu", 0, 0, G_OPTION_ARG_STRING, &source_gpu, "the traces' GPU, when their deviceProperties name "
          "none the catalogue knows", "NAME" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "print JSON (schema in docs/commands.md)", NULL },
        { NULL }
    };
    GOptionContext *context = g_option_context_new("TRACE|GRAPH... -o TABLE.json - measure per-GPU kernel "
                                                   "efficiencies for hardware:gpu=");
    rv_cli_add_entries(context, entries);
    g_option_context_set_description(context,
        "Each trace is a recording of some job on some GPU. Per recording: its fixed per-kernel\n"
        "cost (us), the idle gap between back-to-back kernels (us), and for each size bucket of\n"
        "its shaped kernels (class, unit, decade of FLOPs or bytes, in the last-level cache or not)\n"
        "the achieved fraction of the wave-aware roofline. hardware:gpu=NAME,efficiency=TABLE\n"
        "projects with it; without efficiency= it reads the shipped table (data/efficiency.json).\n"
        "A projection never reads a recording of the job it projects (the same operators and\n"
        "shapes): calibrate on other jobs of the GPU.\n\n"
        "Examples:\n"
        "  reverie calibrate my_h100_runs/*.json.gz -o h100.json\n"
        "  reverie calibrate new_run.json.gz --from h100.json -o h100-refined.json\n"
        "  reverie whatif job_on_a100.json.gz --opt hardware:gpu=H100-SXM,efficiency=h100-refined.json\n");
    int status = RV_EXIT_OK;
    if (!rv_cli_parse(context, &argc, &argv, &status)) goto out;
    if (argc < 2) { status = rv_cli_usage("calibrate", "give one or more traces or graphs"); goto out; }
    const char *output = rv_cli_output_path();
    if (output == NULL) { status = rv_cli_usage("calibrate", "give the table to write with -o TABLE.json"); goto out; }
    status = run_calibrate(argv + 1, argc - 1, output, from, source_gpu, as_json);
out:
    g_free(from);
    g_free(source_gpu);
    g_option_context_free(context);
    return status;
}
