/*
 * table.c - the accuracy corpus's tables: each row's verdict against the
 * limits of accuracy.h, the Markdown that becomes docs/accuracy.md, and
 * the check that the documentation shows these very figures.
 */
#include "accuracy.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

void accuracy_report_init(accuracy_report *report)
{
    report->traces = g_array_new(FALSE, TRUE, sizeof(trace_row));
    report->pairs = g_array_new(FALSE, TRUE, sizeof(pair_row));
    report->jobs = g_array_new(FALSE, TRUE, sizeof(job_row));
}

void accuracy_report_clear(accuracy_report *report)
{
    for (guint i = 0; i < report->traces->len; i++) {
        trace_row *row = &g_array_index(report->traces, trace_row, i);
        g_free(row->name);
        g_free(row->failure);
    }
    for (guint i = 0; i < report->pairs->len; i++) {
        pair_row *row = &g_array_index(report->pairs, pair_row, i);
        g_free(row->pair);
        g_free(row->baseline);
        g_free(row->variant);
        g_free(row->opt);
        g_free(row->judge);
        g_free(row->known_miss);
        g_free(row->memory_known_miss);
        g_free(row->failure);
    }
    for (guint i = 0; i < report->jobs->len; i++) {
        job_row *row = &g_array_index(report->jobs, job_row, i);
        g_free(row->name);
        g_free(row->failure);
    }
    g_array_unref(report->traces);
    g_array_unref(report->pairs);
    g_array_unref(report->jobs);
}

/* What is wrong with a trace's figures, or NULL (g_free). */
static char *trace_verdict(const trace_row *row)
{
    if (row->failure) return g_strdup_printf("not replayed: %s", row->failure);
    GString *wrong = g_string_new(NULL);
    double limit = row->one_rank ? LIMIT_ONE_RANK : LIMIT_SINGLE_PROCESS;
    if (row->mean_error > limit) g_string_append_printf(wrong, "mean error over %.0f%%; ", 100 * limit);
    if (row->shift_plus_worst > LIMIT_CLOCK_SHIFT || row->shift_minus_worst > LIMIT_CLOCK_SHIFT)
        g_string_append_printf(wrong, "a clock shift moves a step over %.0f%%; ", 100 * LIMIT_CLOCK_SHIFT);
    if (llabs(row->idle30_move_ns) >= LIMIT_IDLE_NS || llabs(row->idle70_move_ns) >= LIMIT_IDLE_NS)
        g_string_append_printf(wrong, "an inserted idle moves the total %d ms or more; ", LIMIT_IDLE_NS / 1000000);
    if (row->speedup_move_worst > LIMIT_SPEEDUP_MOVE)
        g_string_append_printf(wrong, "a perturbation moves the what-if over %.0f%%; ", 100 * LIMIT_SPEEDUP_MOVE);
    if (wrong->len == 0) return g_string_free(wrong, TRUE), NULL;
    g_string_truncate(wrong, wrong->len - 2);
    return g_string_free(wrong, FALSE);
}

static char *pair_verdict(const pair_row *row)
{
    if (row->failure) return g_strdup_printf("not measured: %s", row->failure);
    if (fabs(row->error) > row->limit) return g_strdup_printf("error over %.0f%%", 100 * row->limit);
    if (fabs(row->error) > fabs(row->no_change_error) && row->known_miss == NULL)
        return g_strdup("further off than no change");
    return NULL;
}

static char *job_verdict(const job_row *row)
{
    if (row->failure) return g_strdup_printf("not replayed: %s", row->failure);
    if (row->mean_error > LIMIT_ONE_RANK) return g_strdup_printf("mean error over %.0f%%", 100 * LIMIT_ONE_RANK);
    return NULL;
}

static void cell_percent(GString *out, double value)
{
    if (value < 0) g_string_append(out, " - |");
    else g_string_append_printf(out, " %.2f%% |", 100 * value);
}

static void cell_ms(GString *out, int64_t ns, gboolean measured)
{
    if (!measured) g_string_append(out, " - |");
    else g_string_append_printf(out, " %+.3f ms |", ns / 1e6);
}

static void cell_verdict(GString *out, char *wrong, guint *failures)
{
    if (wrong) (*failures)++;
    g_string_append_printf(out, " %s |\n", wrong ? wrong : "ok");
    g_free(wrong);
}

static void trace_table(GString *out, const accuracy_report *report, guint *failures)
{
    g_string_append(out,
        "## Replay\n\n"
        "Every trace in `traces/`, built and replayed by the rules. *mean* and *worst* are per-step errors "
        "against the recording; *unexplained* is recorded time the rules have no cause for (GPU: tasks "
        "starting later than the rules allow; CPU: blocking calls that returned later than what they "
        "waited for). The perturbation columns say how far the replay moves when every GPU event is "
        "moved +10 ms or -5 ms (the largest move of a step) and when 20 ms of GPU idle is inserted at "
        "30% or 70% of the GPU time range (the move of the total); *what-if* is the speedup of every "
        "kernel twice as fast, and *moved* its largest relative move under the four perturbations.\n\n"
        "| trace | kind | steps | mean | worst | unexplained GPU | unexplained CPU | +10 ms clock | -5 ms clock "
        "| idle at 30% | idle at 70% | what-if | moved | verdict |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (guint i = 0; i < report->traces->len; i++) {
        const trace_row *row = &g_array_index(report->traces, trace_row, i);
        g_string_append_printf(out, "| `%s` | %s |", row->name, row->one_rank ? "one rank" : "one process");
        if (row->failure) {
            g_string_append(out, " | | | | | | | | | | |");
        } else {
            g_string_append_printf(out, " %u |", row->steps);
            cell_percent(out, row->mean_error);
            cell_percent(out, row->worst_error);
            g_string_append_printf(out, " %.3f ms | %.3f ms |", row->unexplained_gpu_ns / 1e6, row->unexplained_cpu_ns / 1e6);
            cell_percent(out, row->shift_plus_worst);
            cell_percent(out, row->shift_minus_worst);
            cell_ms(out, row->idle30_move_ns, row->shift_plus_worst >= 0);
            cell_ms(out, row->idle70_move_ns, row->shift_plus_worst >= 0);
            g_string_append_printf(out, " %.3fx |", row->speedup);
            cell_percent(out, row->speedup_move_worst);
        }
        cell_verdict(out, trace_verdict(row), failures);
    }
}

static void pair_table(GString *out, const accuracy_report *report, guint *failures)
{
    g_string_append(out,
        "\n## Recorded pairs\n\n"
        "Each pair in `traces/pairs/` is one job recorded twice, differing in one knob; `pair.json` in its "
        "folder names the what-if that predicts the second recording from the first. The commands are "
        "`reverie validate BASELINE VARIANT --opt ...`. *step* judges the steady step (the median of the "
        "steps after the first); *mean* the mean of those steps, the throughput where steps stall in turns (an "
        "input pipeline whose workers fall behind); *gpu* judges the GPU kernel time, for pairs recorded on different hosts, "
        "whose step the host decides; *timed* judges a variant that is a timing, not a trace (`FILE#JOB:VARIANT`, a "
        "line of `traces/record.py --no-profile`'s manifest: the job timed without the profiler), against "
        "`reverie whatif BASELINE --opt ...`'s mean step after the first. *range* is the prediction with every estimate at its low and at its "
        "high end, where the what-if gives one, and whether the recorded value lies inside. *no change* is the "
        "error of predicting the baseline unchanged.\n\n"
        "| pair | baseline -> variant | what-if | judged | recorded | predicted | range | error | no change | limit | verdict |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (guint i = 0; i < report->pairs->len; i++) {
        const pair_row *row = &g_array_index(report->pairs, pair_row, i);
        g_string_append_printf(out, "| %s | %s -> %s | %s | %s |", row->pair, row->baseline ? row->baseline : "",
                               row->variant ? row->variant : "", row->opt ? row->opt : "", row->judge ? row->judge : "");
        if (row->failure) {
            g_string_append(out, " | | | | | |");
        } else {
            g_string_append_printf(out, " %.3f ms | %.3f ms |", row->recorded_us / 1e3, row->predicted_us / 1e3);
            if (row->high_us >= 0)
                g_string_append_printf(out, " %.3f-%.3f ms (%s) |", row->low_us / 1e3, row->high_us / 1e3,
                                       row->recorded_us >= row->low_us && row->recorded_us <= row->high_us ? "holds it" : "misses it");
            else
                g_string_append(out, " - |");
            g_string_append_printf(out, " %+.2f%% | %+.2f%% | %.0f%% |", 100 * row->error, 100 * row->no_change_error,
                                   100 * row->limit);
        }
        char *wrong = pair_verdict(row);
        if (wrong == NULL && row->known_miss && fabs(row->error) > fabs(row->no_change_error))
            g_string_append_printf(out, " known miss, further off than no change: %s |\n", row->known_miss);
        else
            cell_verdict(out, wrong, failures);
    }
}

static void job_table(GString *out, const accuracy_report *report, guint *failures)
{
    g_string_append(out,
        "\n## Jobs replayed jointly\n\n"
        "Each folder of ranks (`rank0.json.gz`, ...) replayed as one job (`reverie simulate FOLDER`): "
        "per-step errors over every rank's steps.\n\n"
        "| folder | ranks | mean | worst | verdict |\n|---|---|---|---|---|\n");
    for (guint i = 0; i < report->jobs->len; i++) {
        const job_row *row = &g_array_index(report->jobs, job_row, i);
        g_string_append_printf(out, "| `%s` | %u |", row->name, row->ranks);
        cell_percent(out, row->failure ? -1 : row->mean_error);
        cell_percent(out, row->failure ? -1 : row->worst_error);
        cell_verdict(out, job_verdict(row), failures);
    }
}

static double mib(int64_t bytes) { return bytes / 1048576.0; }

static double ratio_error(int64_t value, int64_t reference) { return (double)value / (double)reference - 1; }

static gint compare_doubles(gconstpointer a, gconstpointer b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The memory model's peak against each trace's recorded one. */
static void memory_trace_table(GString *out, const accuracy_report *report, guint *failures)
{
    g_string_append(out,
        "\n## Peak memory\n\n"
        "The memory model's peak (`reverie memory`: from the operators' Input Dims) against the peak the trace "
        "recorded (its `[memory]` events' highest `Total Allocated`), for every trace that has both.\n\n"
        "| trace | estimate | recorded | error |\n|---|---|---|---|\n");
    GArray *errors = g_array_new(FALSE, FALSE, sizeof(double));
    guint within10 = 0, within25 = 0;
    for (guint i = 0; i < report->traces->len; i++) {
        const trace_row *row = &g_array_index(report->traces, trace_row, i);
        if (row->memory_estimate_bytes <= 0 || row->memory_recorded_bytes <= 0) continue;
        double error = ratio_error(row->memory_estimate_bytes, row->memory_recorded_bytes), magnitude = fabs(error);
        g_array_append_val(errors, magnitude);
        within10 += magnitude <= 0.10;
        within25 += magnitude <= 0.25;
        g_string_append_printf(out, "| `%s` | %.1f MiB | %.1f MiB | %+.1f%% |\n", row->name,
                               mib(row->memory_estimate_bytes), mib(row->memory_recorded_bytes), 100 * error);
    }
    g_array_sort(errors, compare_doubles);
    double median = errors->len ? g_array_index(errors, double, errors->len / 2) : 0;
    g_string_append_printf(out,
        "\n%u traces: the median error is %.1f%%; %u within 10%%, %u within 25%%. The suite fails if the median "
        "passes %.0f%% (a bound on regressions, not a target).\n",
        errors->len, 100 * median, within10, within25, 100 * LIMIT_MEMORY_MEDIAN);
    if (median > LIMIT_MEMORY_MEDIAN) {
        (*failures)++;
        fprintf(stderr, "accuracy: the median memory estimate error %.1f%% passes %.0f%%\n", 100 * median,
                100 * LIMIT_MEMORY_MEDIAN);
    }
    g_array_unref(errors);
}

/* A pair whose what-if moves the model's peak or whose recordings' peaks
 * differ: a memory prediction to judge. */
static gboolean memory_moves(const pair_row *row)
{
    if (row->failure || row->memory_predicted <= 0 || row->memory_variant <= 0 || row->memory_baseline_estimate <= 0 ||
        row->memory_baseline_recorded <= 0)
        return FALSE;
    return row->memory_predicted != row->memory_baseline_estimate ||
           fabs(ratio_error(row->memory_variant, row->memory_baseline_recorded)) > LIMIT_MEMORY_UNCHANGED;
}

/* The same prediction judged on another figure (pair.json lists it once
 * per judge): one memory row is enough. */
static gboolean memory_row_shown(const accuracy_report *report, guint index)
{
    const pair_row *row = &g_array_index(report->pairs, pair_row, index);
    for (guint i = 0; i < index; i++) {
        const pair_row *earlier = &g_array_index(report->pairs, pair_row, i);
        if (memory_moves(earlier) && g_strcmp0(earlier->pair, row->pair) == 0 &&
            g_strcmp0(earlier->baseline, row->baseline) == 0 && g_strcmp0(earlier->variant, row->variant) == 0 &&
            g_strcmp0(earlier->opt, row->opt) == 0)
            return TRUE;
    }
    return FALSE;
}

/* The change's direction: -1 down, 1 up, 0 within LIMIT_MEMORY_UNCHANGED. */
static int direction(double change)
{
    return change > 1 + LIMIT_MEMORY_UNCHANGED ? 1 : change < 1 - LIMIT_MEMORY_UNCHANGED ? -1 : 0;
}

/* What is wrong with a pair's memory prediction, or NULL; a known miss
 * is shown in *known unless the prediction moves the opposite way to the
 * recording (one that stays put, as a GPU what-if's does, may stand). */
static char *memory_pair_verdict(const pair_row *row, const char **known)
{
    double predicted = (double)row->memory_predicted / (double)row->memory_baseline_estimate;
    double recorded = (double)row->memory_variant / (double)row->memory_baseline_recorded;
    *known = NULL;
    if (fabs(predicted / recorded - 1) <= LIMIT_MEMORY_CHANGE) return NULL;
    if (row->memory_known_miss && direction(predicted) * direction(recorded) >= 0) {
        *known = row->memory_known_miss;
        return NULL;
    }
    return g_strdup_printf("the change is off by more than %.0f%%", 100 * LIMIT_MEMORY_CHANGE);
}

static void memory_pair_table(GString *out, const accuracy_report *report, guint *failures)
{
    g_string_append_printf(out,
        "\nThe pairs whose what-if moves the model's peak, or whose two recordings' peaks differ by more than "
        "%.0f%%: the peak `reverie validate` predicts for the variant against the variant's recorded one. "
        "*change* is the variant's peak over the baseline's, as the model predicts it (its estimates) and as "
        "recorded; the suite fails where the predicted change is off the recorded one by more than %.0f%%, "
        "unless the pair's `memory_known_miss` states why and the prediction does not move the opposite way to the recording. "
        "(Pairs of one trace's recordings that differ in nothing memory sees, such as the GPU model or the "
        "DataLoader's workers, are left out: their error is the trace's, above.)\n\n"
        "| pair | baseline -> variant | what-if | recorded | predicted | error | no change | change predicted | change recorded | verdict |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n",
        100 * LIMIT_MEMORY_UNCHANGED, 100 * LIMIT_MEMORY_CHANGE);
    for (guint i = 0; i < report->pairs->len; i++) {
        const pair_row *row = &g_array_index(report->pairs, pair_row, i);
        if (!memory_moves(row) || memory_row_shown(report, i)) continue;
        g_string_append_printf(out, "| %s | %s -> %s | %s | %.1f MiB | %.1f MiB | %+.1f%% | %+.1f%% | %.3fx | %.3fx |",
                               row->pair, row->baseline, row->variant, row->opt, mib(row->memory_variant),
                               mib(row->memory_predicted), 100 * ratio_error(row->memory_predicted, row->memory_variant),
                               100 * ratio_error(row->memory_baseline_recorded, row->memory_variant),
                               (double)row->memory_predicted / (double)row->memory_baseline_estimate,
                               (double)row->memory_variant / (double)row->memory_baseline_recorded);
        const char *known = NULL;
        char *wrong = memory_pair_verdict(row, &known);
        if (known) g_string_append_printf(out, " known miss: %s |\n", known);
        else cell_verdict(out, wrong, failures);
    }
}

static GString *render(const accuracy_report *report, guint *failures)
{
    GString *out = g_string_new(NULL);
    g_string_append_printf(out,
        "# Accuracy\n\n"
        "This page is written by the test suite's `accuracy` suite (`meson test -C build --suite accuracy`; "
        "`ninja -C build accuracy-docs` rewrites it), which fails when a figure passes its limit or this "
        "page no longer shows what the suite measures. Limits: mean per-step replay error %.0f%% for one "
        "process and %.0f%% for one rank of a larger job replayed without its peers; a clock shift may move "
        "no step more than %.0f%%; an inserted idle may move the total less than %d ms; no perturbation may "
        "move a GPU what-if's speedup %.0f%% or more; each pair's limit is in its row. A pair "
        "prediction further off than predicting no change fails too, unless its pair.json states the cause "
        "(a known miss, shown in the verdict); its limit still holds, as a bound on regressions.\n\n",
        100 * LIMIT_SINGLE_PROCESS, 100 * LIMIT_ONE_RANK, 100 * LIMIT_CLOCK_SHIFT, LIMIT_IDLE_NS / 1000000,
        100 * LIMIT_SPEEDUP_MOVE);
    trace_table(out, report, failures);
    pair_table(out, report, failures);
    job_table(out, report, failures);
    memory_trace_table(out, report, failures);
    memory_pair_table(out, report, failures);
    return out;
}

/* Write text to path through a temporary beside it. */
static gboolean write_file(const char *path, const GString *text)
{
    GError *error = NULL;
    if (g_file_set_contents(path, text->str, (gssize)text->len, &error)) return TRUE;
    fprintf(stderr, "accuracy: %s\n", error->message);
    g_error_free(error);
    return FALSE;
}

int accuracy_report_finish(const accuracy_report *report, const char *output, const char *docs)
{
    guint failures = 0;
    GString *text = render(report, &failures);
    fputs(text->str, stdout);
    int status = write_file(output, text) ? 0 : 1;
    if (failures) {
        fprintf(stderr, "accuracy: %u rows over their limits (see the verdict column)\n", failures);
        status = 1;
    }
    char *shown = NULL;
    if (docs != NULL && (!g_file_get_contents(docs, &shown, NULL, NULL) || strcmp(shown, text->str) != 0)) {
        fprintf(stderr, "accuracy: %s does not show these figures: run `ninja -C build accuracy-docs`\n", docs);
        status = 1;
    }
    g_free(shown);
    g_string_free(text, TRUE);
    return status;
}
