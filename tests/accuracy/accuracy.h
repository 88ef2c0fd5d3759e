/*
 * accuracy.h - the parts of the accuracy corpus (accuracy.c): one trace's
 * replay and perturbations (corpus.c), the recorded pairs and the folders
 * of ranks through the command line (pairs.c), and the tables with their
 * limits (table.c).
 */
#ifndef REVERIE_TESTS_ACCURACY_H
#define REVERIE_TESTS_ACCURACY_H

#include <glib.h>
#include <stdint.h>

/* The limits the suite fails on, and where they come from. */
#define LIMIT_SINGLE_PROCESS 0.03    /* mean per-step replay error, one process */
#define LIMIT_ONE_RANK 0.05          /* mean per-step replay error, one rank of a larger job */
#define LIMIT_CLOCK_SHIFT 0.01       /* largest per-step move under a clock shift */
#define LIMIT_IDLE_NS 5000000        /* largest move of the total under an inserted idle */
#define LIMIT_SPEEDUP_MOVE 0.02      /* largest relative move of a GPU what-if's speedup */
#define LIMIT_MEMORY_MEDIAN 0.20     /* median |error| of the memory model's peak over the traces */
#define LIMIT_MEMORY_UNCHANGED 0.02  /* two recordings' peaks this close are one peak */
#define LIMIT_MEMORY_CHANGE 0.25     /* a memory what-if's change (variant / baseline) against the recorded one */

/* One trace, as measured. */
typedef struct {
    char *name;                 /* relative to the traces folder */
    gboolean one_rank;          /* a rank of a job of several (distributedInfo) */
    guint steps;
    double mean_error, worst_error;
    int64_t unexplained_gpu_ns, unexplained_cpu_ns, recorded_total_ns;
    /* perturbations: -1 where the trace has no GPU events to move */
    double shift_plus_worst, shift_minus_worst;   /* largest per-step move */
    int64_t idle30_move_ns, idle70_move_ns;       /* move of the total */
    double speedup;                               /* kernels x0.5, unperturbed */
    double speedup_move_worst;                    /* over the four perturbations */
    /* peak memory: the model's estimate and the recorded peak ([memory]
     * events), bytes; -1 where the trace gives none */
    int64_t memory_estimate_bytes, memory_recorded_bytes;
    char *failure;              /* NULL when the trace could not be measured */
} trace_row;

/* One prediction of a recorded pair. */
typedef struct {
    char *pair, *baseline, *variant, *opt, *judge; /* judge: "step" or "gpu" */
    double limit;                                   /* on |error| */
    double recorded_us, predicted_us, error, no_change_error;
    double low_us, high_us;     /* the predicted range; high < 0 when the what-if gives none */
    char *known_miss;           /* pair.json's "known_miss": why it is further off than no change, or NULL */
    /* peak memory (validate's "memory"), bytes, -1 where unknown: the
     * baseline's estimate and recording, the prediction, the variant's recording */
    int64_t memory_baseline_estimate, memory_baseline_recorded, memory_predicted, memory_variant;
    char *memory_known_miss;    /* pair.json's "memory_known_miss": why its peak is further off, or NULL */
    char *failure;
} pair_row;

/* A folder of ranks replayed jointly. */
typedef struct {
    char *name;
    guint ranks;
    double mean_error, worst_error;  /* over every rank's steps */
    char *failure;
} job_row;

typedef struct {
    GArray *traces;   /* trace_row */
    GArray *pairs;    /* pair_row */
    GArray *jobs;     /* job_row */
} accuracy_report;

void accuracy_report_init(accuracy_report *report);
void accuracy_report_clear(accuracy_report *report);

/* g_ptr_array_sort's comparison of two names. */
gint accuracy_compare_names(gconstpointer a, gconstpointer b);
/* Every *.json.gz under dir, relative, sorted (g_ptr_array_unref). */
GPtrArray *accuracy_trace_paths(const char *dir);
/* One trace's replay and perturbations (safe to run beside others). */
trace_row accuracy_measure_trace(const char *dir, const char *name);
/* Call measure(index, data) for every index below count, on as many
 * threads as there are cores (GThreadPool), and return when all are done.
 * Each call must write only its own index's slot, so that the tables keep
 * their order whatever order the calls finish in. */
void accuracy_run_parallel(guint count, void (*measure)(guint index, gpointer data), gpointer data);
/* traces/pairs/NAME/pair.json says which what-if predicts which file. */
void accuracy_measure_pairs(accuracy_report *report, const char *dir, const char *reverie);
/* Each folder holding rank*.json.gz. */
void accuracy_measure_jobs(accuracy_report *report, const char *dir, const char *reverie);

/* Print, write the Markdown, compare with docs; the exit status. */
int accuracy_report_finish(const accuracy_report *report, const char *output, const char *docs);

#endif
