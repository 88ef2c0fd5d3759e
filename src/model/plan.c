/*
 * plan.c - re-costing plans (costmodel.h): a change function says how
 * each GPU task changes (another GPU, dtype, size), and the plan holds each
 * task's new duration, its range and the term that decided it.
 *
 * Shaped kernels first, each by its own roofline (and, moving to another
 * GPU, by the terms of costmodel.h's ANOTHER GPU); then the unshaped ones,
 * like the shaped kernels of their class (their summed time before and
 * after, and the same for the range's ends), else by the peak ratio.
 */
#include "costmodel_private.h"
#include "reverie/checked.h"
#include "reverie/comm.h"
#include "reverie/efficiency.h"
#include "reverie/range.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include "reverie/transform.h"
#include <math.h>
#include <string.h>

#define MATRIX_GAIN_MAX 3.0    /* Daydream: AMP gains at most 3x on compute-bound kernels (Volta, Turing) */
/* Where no recording of a GPU says, a projected term's range spans this
 * factor either way: the per-class ratios of achieved to roofline time
 * between the H100 and MI300X recordings of one job (TimeSformer) lie
 * within 0.47 to 1.7 of each other, and the fixed costs of the shipped
 * recordings of one GPU within 2x (1.7 to 3 us on the MI300X). */
#define UNKNOWN_RANGE 2.0
#define WAVES_DECIDE 1.25      /* waves decided a kernel when they moved it by more than this factor */

static const char *const term_names[RV_TERM_COUNT] = { "", "fixed", "peak", "waves", "bandwidth", "cache", "class",
                                                            "link" };

const char *rv_cost_term_name(rv_cost_term term) { return term < RV_TERM_COUNT ? term_names[term] : "?"; }

rv_cost_change rv_cost_change_none(const rv_cost_model *model)
{
    return (rv_cost_change){ model->source, RV_DTYPE_UNKNOWN, 1, 1, 1, 1, 1, 1, 0, NULL, NULL };
}

gboolean rv_cost_gains_tf32(const rv_gpu *source, const rv_gpu *target, const rv_kernel_cost *cost, const char *mode)
{
    if (cost->dtype != RV_DTYPE_FP32 || !rv_cost_class_is_matmul(cost->cls) || strcmp(mode, "none") == 0) return FALSE;
    if (source->matrix_flops[RV_DTYPE_TF32] > 0 || target->matrix_flops[RV_DTYPE_TF32] <= 0) return FALSE;
    return cost->cls == RV_COST_CONV || strcmp(mode, "all") == 0;
}

/* A task's new time: its value, its range and what decided it, and the
 * fixed part of each (what the unshaped kernels of its class add theirs to). */
typedef struct {
    double ns, low, high;
    rv_cost_term term;
    double fixed, fixed_low, fixed_high;
} estimate;

/* How the target's fixed per-kernel cost is found, worked out once per pair of views. */
typedef enum { FIXED_OWN, FIXED_BY_PAIRS, FIXED_BY_RECORDINGS, FIXED_SAME_SMS } fixed_rule;
typedef struct {
    gboolean looked;
    const rv_gpu_efficiency *source, *target;
    fixed_rule rule;
    double value, low, high;  /* FIXED_BY_PAIRS: ratios; FIXED_BY_RECORDINGS: ns */
} fixed_cache;

/* A task costed after the shaped kernels: like those of class `follows`
 * (its own, or conv for a library's helper), under its change. */
typedef struct {
    int32_t task;
    uint8_t follows;
    rv_cost_change change;
} deferred;

typedef struct {
    const rv_cost_model *model;
    rv_cost_plan *plan;
    GArray *pending;                       /* deferred: tasks costed after the shaped ones */
    GHashTable *library_ops;               /* op string id -> 1 + rv_cost_op_is_library_convolution */
    /* the shaped kernels' variable time per class, before and after (and the range's ends) */
    double shaped_before[RV_COST_CLASS_COUNT], shaped_after[RV_COST_CLASS_COUNT];
    double shaped_low[RV_COST_CLASS_COUNT], shaped_high[RV_COST_CLASS_COUNT];
    fixed_cache fixed;
    GHashTable *shapes;                    /* shape_key -> shape_terms: the shaped kernels' duration-free terms */
} planning;

static rv_dtype target_dtype(const rv_kernel_cost *cost, const rv_cost_change *change)
{
    if (change->dtype == RV_DTYPE_UNKNOWN || cost->dtype == RV_DTYPE_UNKNOWN) return (rv_dtype)cost->dtype;
    return change->dtype;
}

static double size_ratio(rv_dtype from, rv_dtype to)
{
    int a = rv_dtype_bytes(from), b = rv_dtype_bytes(to);
    return a > 0 && b > 0 ? (double)b / a : 1.0;
}

static gboolean moves_gpu(const rv_cost_model *model, const rv_cost_change *change)
{
    return change->gpu != model->source;
}

/* The efficiency a kernel may reach on a unit it did not run on. */
static double efficiency_cap(const rv_cost_model *model, const rv_gpu *target, rv_cost_class cls, rv_unit unit,
                             rv_dtype dtype)
{
    guint samples = 0;
    double calibrated = rv_cost_model_efficiency(model, cls, unit, &samples);
    if (target == model->source && samples >= CALIBRATION_MIN_SAMPLES) return calibrated;
    if (unit == RV_UNIT_MATRIX && target->matrix_flops[dtype] > 0 && rv_gpu_matrix_peak(target, dtype, TRUE) <
                                                                     target->matrix_flops[dtype])
        return rv_gpu_matrix_peak(target, dtype, TRUE) / target->matrix_flops[dtype];
    return MATRIX_EFFICIENCY_DEFAULT;
}

double rv_cost_model_matmul_efficiency(const rv_cost_model *model, rv_cost_class cls, rv_unit unit, rv_dtype dtype)
{
    return efficiency_cap(model, model->source, cls, unit, dtype);
}

static gboolean same_compute(const rv_gpu *source, const rv_gpu *target, rv_unit unit, rv_dtype dtype);

static void find_fixed_rule(fixed_cache *c, const rv_gpu *source, const rv_cost_change *change, rv_cost_plan *plan,
                            double model_fixed)
{
    guint pairs = 0;
    c->looked = TRUE;
    c->source = change->source_efficiency;
    c->target = change->target_efficiency;
    /* the shortest a kernel lasts is the SMs', clocks' and front end's: on
     * the same SMs it is the trace's own (the H100 and H200 pairs' 5th
     * percentiles differ by x0.3 to x3.5 around x0.92, the spread of the
     * estimate; the encoder's microsecond kernels took the same time on
     * both) */
    if (same_compute(source, change->gpu, RV_UNIT_VECTOR, RV_DTYPE_FP32)) {
        c->rule = FIXED_SAME_SMS;
        plan->target_fixed_ns = plan->target_fixed_low_ns = plan->target_fixed_high_ns = model_fixed;
        plan->target_fixed_same_sms = TRUE;
        return;
    }
    if (rv_efficiency_fixed_ratio(c->source, c->target, &c->value, &c->low, &c->high, &pairs))
        c->rule = FIXED_BY_PAIRS;
    else if (c->target && rv_gpu_efficiency_fixed(c->target, &c->value, &c->low, &c->high))
        c->rule = FIXED_BY_RECORDINGS;
    else
        c->rule = FIXED_OWN;
    if (c->rule == FIXED_OWN) return;
    double scale = c->rule == FIXED_BY_PAIRS ? model_fixed : 1;
    plan->target_fixed_ns = c->value * scale;
    plan->target_fixed_low_ns = c->low * scale;
    plan->target_fixed_high_ns = c->high * scale;
    plan->target_fixed_by_pairs = c->rule == FIXED_BY_PAIRS;
    plan->target_fixed_pairs = pairs;
    plan->target_fixed_ratio = c->rule == FIXED_BY_PAIRS ? c->value : 0;
}

/* The fixed cost on the target, into e (costmodel.h, ANOTHER GPU): the
 * source's own on a GPU of the same SMs; else the source's own times the
 * ratio the two GPUs show on recordings of one job (pairs), else what the
 * target's recordings say, else the source's own; each with its range. */
static void target_fixed(planning *p, const rv_cost_change *change, double source_fixed, estimate *e)
{
    fixed_cache *c = &p->fixed;
    double model_fixed = (double)p->model->fixed_ns;
    if (!c->looked || c->source != change->source_efficiency || c->target != change->target_efficiency)
        find_fixed_rule(c, p->model->source, change, p->plan, model_fixed);
    switch (c->rule) {
    case FIXED_SAME_SMS:
        e->fixed = e->fixed_low = e->fixed_high = source_fixed;
        break;
    case FIXED_BY_PAIRS:
        e->fixed = source_fixed * c->value;
        e->fixed_low = source_fixed * c->low;
        e->fixed_high = source_fixed * c->high;
        break;
    case FIXED_BY_RECORDINGS:
        /* a kernel shorter than the source's fixed cost keeps that share of it */
        e->fixed = c->value * (model_fixed > 0 ? source_fixed / model_fixed : 1);
        e->fixed_low = c->low * (model_fixed > 0 ? source_fixed / model_fixed : 1);
        e->fixed_high = c->high * (model_fixed > 0 ? source_fixed / model_fixed : 1);
        break;
    default:
        e->fixed = source_fixed;
        e->fixed_low = source_fixed / UNKNOWN_RANGE;
        e->fixed_high = source_fixed * UNKNOWN_RANGE;
    }
}

/* The work of a kernel after the change, as a cost on the target (for its bucket there). */
static rv_kernel_cost cost_on_target(const rv_kernel_cost *cost, const rv_cost_change *change, rv_unit unit, rv_dtype to)
{
    rv_kernel_cost after = *cost;
    after.unit = (uint8_t)unit;
    after.dtype = (uint8_t)to;
    after.flops = cost->flops * change->flops_factor;
    after.bytes = cost->bytes * change->bytes_factor * size_ratio((rv_dtype)cost->dtype, to);
    return after;
}

/* E_A / E_B for a kernel, from both GPUs' tables, with the factors by
 * which its range reaches down and up (the spreads of the two
 * independent efficiencies, combined in quadrature of their logarithms).
 * FALSE when either table lacks the bucket. */
static gboolean table_ratio(const rv_cost_change *change, rv_cost_bucket on_source, rv_cost_bucket on_target,
                            double *ratio, double *down, double *up)
{
    rv_efficiency_pair pair;
    if (!rv_efficiency_bucket_ratio(change->source_efficiency, change->target_efficiency, on_source, on_target, &pair))
        return FALSE;
    double ea = pair.source, la = pair.source_low, ha = pair.source_high;
    double eb = pair.target, lb = pair.target_low, hb = pair.target_high;
    *ratio = ea / eb;
    double a_down = log(ea / MAX(la, 1e-12)), a_up = log(MAX(ha, ea) / ea);
    double b_down = log(eb / MAX(lb, 1e-12)), b_up = log(MAX(hb, eb) / eb);
    *down = exp(sqrt(a_down * a_down + b_up * b_up));
    *up = exp(sqrt(a_up * a_up + b_down * b_down));
    return TRUE;
}

static gboolean memory_bound_on(const rv_gpu *gpu, const rv_kernel_cost *cost, gboolean achievable);

/* A memory-bound kernel that reached only a share of its GPU's bandwidth
 * was held back by its SMs as much as by the memory (too few bytes in
 * flight, its own arithmetic and indexing): that share of its time moves
 * with the bandwidth (`memory_ratio`), the rest with the SMs' throughput,
 * whose datasheet measure is the fp32 vector peak (SMs x clock x lanes).
 * A streaming kernel at its bandwidth moves wholly with the memory; on
 * the H200, the H100's die with 1.43x the bandwidth, the H100's batch norms
 * at 35-50% of theirs gained 8-13%, not 30%. */
static double memory_split_ratio(const rv_gpu *source, const rv_gpu *target, double memory_ratio,
                                 double own_efficiency, const rv_cost_change *change)
{
    double share = own_efficiency < 1 ? own_efficiency : 1;
    double sms = rv_gpu_vector_peak(source, RV_DTYPE_FP32) /
                 (rv_gpu_vector_peak(target, RV_DTYPE_FP32) * change->flops_scale);
    return share * memory_ratio + (1 - share) * sms;
}

/* The split applies where the kernel does the same work on other
 * hardware or in another dtype: the SMs' share is per element, and a
 * narrower dtype does not take from it.  Where the work changes (batch
 * size, sequence, decode's one token), nothing in one recording says
 * whether that share is the SMs' throughput, which grows with the work, or
 * latency, which does not (a decoder's 5-10 us GEMMs at 5% of the
 * bandwidth): the roofline decides the whole kernel, as before. */
static gboolean splits(const rv_gpu *source, const rv_kernel_cost *cost, const rv_gpu *target,
                       const rv_kernel_cost *after, gboolean achievable, const rv_cost_change *change)
{
    return change->flops_factor == 1 && memory_bound_on(source, cost, achievable) &&
           memory_bound_on(target, after, achievable);
}

/* The same SMs: one vendor's GPUs with the same count and the same peaks
 * for the kernel's unit and dtype (the H100 and the H200 share the GH100
 * die).  The same kernels reach the same share of the same peaks on both,
 * so a ratio of the two GPUs' table efficiencies, read off whatever jobs
 * each recorded, would measure the jobs, not the GPUs. */
static gboolean same_compute(const rv_gpu *source, const rv_gpu *target, rv_unit unit, rv_dtype dtype)
{
    if (g_strcmp0(source->vendor, target->vendor) != 0 || source->sm_count != target->sm_count) return FALSE;
    if (unit == RV_UNIT_MATRIX) return rv_gpu_matrix_peak(source, dtype, FALSE) == rv_gpu_matrix_peak(target, dtype, FALSE);
    return rv_gpu_vector_peak(source, dtype) == rv_gpu_vector_peak(target, dtype);
}

/* What the memory's share of a memory-bound kernel moves by: the roofline's
 * ratio (`roofline_ratio`, the memory bandwidths and the bytes), except
 * for a working set inside the last-level cache of a GPU whose SMs and
 * cache the target shares: the cache serves it on both, at the same
 * bandwidth, so only the bytes move it.  On the H200 the H100's
 * in-cache kernels had been made 30% faster by a memory they do not wait
 * on: the encoder's, which the two GPUs ran equally, 0.4% faster; the
 * largest error over the 26 H100 <-> H200 directions went from 6.3% to
 * 3.5%. */
static double memory_ratio_of(const rv_gpu *source, const rv_gpu *target, const rv_kernel_cost *cost,
                              const rv_kernel_cost *after, double roofline_ratio)
{
    gboolean same_cache = source->cache_bytes > 0 && source->cache_bytes == target->cache_bytes &&
                          same_compute(source, target, RV_UNIT_VECTOR, RV_DTYPE_FP32);
    if (!same_cache || rv_cost_bucket_of(cost, source).variant != RV_BUCKET_IN_CACHE || cost->bytes <= 0)
        return roofline_ratio;
    return after->bytes / cost->bytes;
}

static gboolean memory_bound_on(const rv_gpu *gpu, const rv_kernel_cost *cost, gboolean achievable)
{
    double compute = rv_cost_roofline_s(gpu, cost->unit, cost->dtype, cost->flops, 0, achievable, 1, 1);
    double memory = rv_cost_roofline_s(gpu, cost->unit, cost->dtype, 0, cost->bytes, achievable, 1, 1);
    return memory > compute;
}

/*
 * What a shaped kernel's new time rests on that its recorded duration does
 * not change: its rooflines and wave shares before and after, its unit and
 * buckets, the efficiencies it is capped at or read from.  A trace repeats
 * the same kernels step after step with other durations, so these are
 * worked out once per distinct kernel (shape_key) and the per-task part
 * only mixes them with its duration - the same expressions in the same
 * order as before, so the plan is the same to the bit.
 */
typedef struct {
    rv_kernel_cost after;          /* its work on the target */
    gboolean unit_changed;
    double u_source, u_target;     /* wave shares (projected only; 1 on the same GPU) */
    double before_s, after_s;      /* rooflines before and after */
    double cap;                    /* efficiency_cap on the new unit (read where the unit changed) */
    gboolean splits;               /* the memory split applies (splits(), and on another GPU, one vendor) */
    double memory_ratio;           /* projected: memory_ratio_of() */
    gboolean same_compute;         /* projected: the same SMs for its unit and dtype */
    gboolean by_table;             /* projected: both efficiency tables have its buckets */
    double table, table_down, table_up;
    double compute_s, memory_s;    /* deciding_term's two rooflines on the target */
    gboolean in_cache;             /* its bucket on the target is the in-cache one */
} shape_terms;

/* Everything shape_terms is computed from, in a struct without padding,
 * zeroed before it is filled: hashed and compared as bytes. */
typedef struct {
    double flops, bytes, flops_factor, bytes_factor, flops_scale, memory_scale, link_scale, comm_bytes_factor;
    const void *gpu, *source_efficiency, *target_efficiency;
    rv_launch launch;
    int32_t change_dtype, comm_ranks;
    uint8_t cls, dtype, dtype_assumed, unit, aligned, autocast_fp32, shaped, library, fused, moved, has_launch, pad[5];
} shape_key;

G_STATIC_ASSERT(sizeof(shape_key) % sizeof(guint64) == 0);

/* A word at a time: this runs once per GPU task. */
static guint shape_key_hash(gconstpointer key)
{
    guint64 words[sizeof(shape_key) / sizeof(guint64)], hash = 0;
    memcpy(words, key, sizeof words);
    for (gsize i = 0; i < G_N_ELEMENTS(words); i++) hash = (hash ^ words[i]) * G_GUINT64_CONSTANT(0x100000001b3);
    return (guint)(hash ^ (hash >> 32));
}

static gboolean shape_key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(shape_key)) == 0;
}

static void fill_shape_key(shape_key *key, const rv_kernel_cost *cost, const rv_cost_change *change,
                           const rv_launch *launch, gboolean moved)
{
    memset(key, 0, sizeof *key);
    key->flops = cost->flops;
    key->bytes = cost->bytes;
    key->flops_factor = change->flops_factor;
    key->bytes_factor = change->bytes_factor;
    key->flops_scale = change->flops_scale;
    key->memory_scale = change->memory_scale;
    key->link_scale = change->link_scale;
    key->comm_bytes_factor = change->comm_bytes_factor;
    key->gpu = change->gpu;
    key->source_efficiency = change->source_efficiency;
    key->target_efficiency = change->target_efficiency;
    if (launch != NULL) key->launch = *launch;
    key->has_launch = launch != NULL;
    key->change_dtype = change->dtype;
    key->comm_ranks = change->comm_ranks;
    key->cls = cost->cls;
    key->dtype = cost->dtype;
    key->dtype_assumed = cost->dtype_assumed;
    key->unit = cost->unit;
    key->aligned = cost->aligned;
    key->autocast_fp32 = cost->autocast_fp32;
    key->shaped = cost->shaped;
    key->library = cost->library;
    key->fused = cost->fused;
    key->moved = (uint8_t)moved;
}

/* deciding_term's rooflines on the target (duration-free). */
static void deciding_rooflines(shape_terms *t, const rv_gpu *target, gboolean achievable, const rv_cost_change *change)
{
    const rv_kernel_cost *on_target = &t->after;
    t->compute_s = rv_cost_wave_roofline_s(target, on_target->unit, on_target->dtype, on_target->flops, 0, t->u_target,
                                           achievable, change->flops_scale, change->memory_scale);
    t->memory_s = rv_cost_roofline_s(target, on_target->unit, on_target->dtype, 0, on_target->bytes, achievable,
                                     change->flops_scale, change->memory_scale);
    t->in_cache = rv_cost_bucket_of(on_target, target).variant == RV_BUCKET_IN_CACHE;
}

/* What decided a shaped kernel's time on the target. */
static rv_cost_term deciding_term(const shape_terms *t, double fixed, double variable)
{
    if (fixed >= variable) return RV_TERM_FIXED;
    if (t->compute_s >= t->memory_s) {
        double waves = t->u_source / t->u_target;
        return waves > WAVES_DECIDE || waves < 1 / WAVES_DECIDE ? RV_TERM_WAVES : RV_TERM_PEAK;
    }
    return t->in_cache ? RV_TERM_CACHE : RV_TERM_BANDWIDTH;
}

/* Blocks per SM (CU) a kernel whose grid comes from the problem holds on
 * another vendor's GPU: as many as it held on the source, within the
 * target's thread and block limits.  The registers and shared memory the
 * source recorded are its own compiler's, and the target's kernel is not
 * recorded; counting them against the target's limits (48 KiB of an
 * H100's shared memory fills an MI300X CU's 64 KiB) made the same 16
 * blocks of BERT-small's attention fill 16 of 132 H100 SMs half as
 * much as 16 of 304 MI300X CUs: H100 -> MI300X -12.92%, -1.99% now, where
 * MI300X -> H100, whose ROCm trace records neither, was +0.64% both ways. */
static int blocks_per_sm_across(const rv_gpu *source, const rv_gpu *target, const rv_launch *launch)
{
    if (launch == NULL) return 0;
    rv_launch threads_only = *launch;
    threads_only.registers = 0;
    threads_only.shared_bytes = 0;
    int held = rv_cost_blocks_per_sm(source, launch, TRUE), room = rv_cost_blocks_per_sm(target, &threads_only, FALSE);
    return held > 0 && room > 0 ? MIN(held, room) : room;
}

/* shape_terms of a shaped kernel moved to another GPU. */
static void projected_terms(const rv_cost_model *model, const rv_kernel_cost *cost, const rv_cost_change *change,
                            const rv_launch *launch, shape_terms *t)
{
    const rv_gpu *source = model->source, *target = change->gpu;
    rv_dtype to = target_dtype(cost, change);
    rv_unit unit = rv_cost_unit_on(target, cost->cls, to, cost->aligned);
    gboolean achievable = rv_cost_model_use_achievable(model, target);
    gboolean same_vendor = g_strcmp0(source->vendor, target->vendor) == 0;
    t->u_source = rv_cost_wave_utilization(source, launch, TRUE);
    if (same_vendor) {
        t->u_target = rv_cost_wave_utilization(target, launch, TRUE);
    } else if (cost->library) {
        /* another vendor's library re-tiles: it keeps the share of the GPU it had */
        t->u_target = t->u_source;
    } else {
        t->u_target = rv_cost_wave_utilization_at(target, launch, blocks_per_sm_across(source, target, launch));
    }
    t->after = cost_on_target(cost, change, unit, to);
    t->before_s = rv_cost_wave_roofline_s(source, cost->unit, cost->dtype, cost->flops, cost->bytes, t->u_source,
                                          achievable, 1, 1);
    t->after_s = rv_cost_wave_roofline_s(target, unit, to, t->after.flops, t->after.bytes, t->u_target, achievable,
                                         change->flops_scale, change->memory_scale);
    t->unit_changed = unit != cost->unit;
    t->cap = t->unit_changed ? efficiency_cap(model, target, cost->cls, unit, to) : 0;
    t->splits = same_vendor && splits(source, cost, target, &t->after, achievable, change);
    double ratio = t->before_s > 0 ? t->after_s / t->before_s : 1;
    t->memory_ratio = t->splits ? memory_ratio_of(source, target, cost, &t->after, ratio) : 0;
    t->same_compute = same_compute(source, target, cost->unit, cost->dtype);
    t->by_table = !t->same_compute && table_ratio(change, rv_cost_bucket_of(cost, source),
                                                  rv_cost_bucket_of(&t->after, target), &t->table, &t->table_down,
                                                  &t->table_up);
    deciding_rooflines(t, target, achievable, change);
}

/* A shaped kernel moved to another GPU (costmodel.h, ANOTHER GPU). */
static estimate projected(planning *p, const shape_terms *t, const rv_cost_change *change, double source_fixed,
                          double variable, gboolean *unit_changed, gboolean *by_table)
{
    const rv_gpu *source = p->model->source, *target = change->gpu;
    double before_s = t->before_s, after_s = t->after_s;
    double ratio = before_s > 0 ? after_s / before_s : 1, down = UNKNOWN_RANGE, up = UNKNOWN_RANGE;
    *unit_changed = t->unit_changed;
    *by_table = FALSE;
    if (*unit_changed && variable > 0 && before_s > 0) {
        /* an efficiency above 1 is work overcounted by at least that much (a
         * strided convolution counted at stride 1): the bound applies to the
         * work the kernel did, not to the shapes' count */
        double own = before_s * 1e9 / variable, cap = t->cap;
        double overcount = own > 1 ? own : 1;
        ratio = after_s * 1e9 / overcount / (own / overcount < cap ? own / overcount : cap) / variable;
    } else if (t->splits && variable > 0 && before_s > 0) {
        ratio = memory_split_ratio(source, target, t->memory_ratio, before_s * 1e9 / variable, change);
    } else if (!t->same_compute && t->by_table) {
        ratio *= t->table;
        down = t->table_down;
        up = t->table_up;
        *by_table = TRUE;
    }
    estimate e;
    target_fixed(p, change, source_fixed, &e);
    e.ns = e.fixed + variable * ratio;
    e.low = e.fixed_low + variable * ratio / down;
    e.high = e.fixed_high + variable * ratio * up;
    e.term = deciding_term(t, e.fixed, variable * ratio);
    return e;
}

/* shape_terms of a shaped kernel on its own GPU. */
static void same_gpu_terms(const rv_cost_model *model, const rv_kernel_cost *cost, const rv_cost_change *change,
                           shape_terms *t)
{
    rv_dtype to = target_dtype(cost, change);
    rv_unit unit = rv_cost_unit_on(change->gpu, cost->cls, to, cost->aligned);
    gboolean achievable = rv_cost_model_use_achievable(model, change->gpu);
    t->after = cost_on_target(cost, change, unit, to);
    t->before_s = rv_cost_roofline_s(model->source, cost->unit, cost->dtype, cost->flops, cost->bytes, achievable, 1, 1);
    t->after_s = rv_cost_roofline_s(change->gpu, unit, to, t->after.flops, t->after.bytes, achievable,
                                    change->flops_scale, change->memory_scale);
    t->unit_changed = unit != cost->unit;
    t->cap = t->unit_changed ? efficiency_cap(model, change->gpu, cost->cls, unit, to) : 0;
    t->splits = splits(model->source, cost, change->gpu, &t->after, achievable, change);
    t->u_source = t->u_target = 1;
    deciding_rooflines(t, change->gpu, achievable, change);
}

/* A shaped kernel on its own GPU (another dtype or size): its efficiency
 * kept, except that a memory-bound kernel's bytes move only the share of
 * its time that its bandwidth held (memory_split_ratio): a bf16 batch norm
 * moves half the bytes of an fp32 one with the same indexing per element.
 * On the recorded ResNet-50 (H100) the whole-kernel rule made autocast's
 * kernels 28% too fast. */
static estimate on_same_gpu(const rv_cost_model *model, const shape_terms *t, const rv_cost_change *change,
                            double fixed, double variable, gboolean *unit_changed)
{
    double before = t->before_s, after_s = t->after_s;
    *unit_changed = t->unit_changed;
    double new_variable = variable;
    if (before > 0 && !*unit_changed && variable > 0 && t->splits) {
        new_variable = variable * memory_split_ratio(model->source, change->gpu, after_s / before, before * 1e9 / variable,
                                                     change);
    } else if (before > 0 && (!*unit_changed || variable <= 0)) {
        new_variable = variable * after_s / before;
    } else if (before > 0) {
        double own = before * 1e9 / variable, cap = t->cap;
        new_variable = after_s * 1e9 / (own < cap ? own : cap);
    }
    estimate e = { fixed + new_variable, fixed + new_variable, fixed + new_variable, RV_TERM_NONE, fixed, fixed, fixed };
    e.term = deciding_term(t, fixed, new_variable);
    return e;
}

/* The duration-free terms of a shaped kernel: from the memo, or worked out
 * and kept there. */
static const shape_terms *terms_of(planning *p, int32_t id, const rv_kernel_cost *cost, const rv_cost_change *change,
                                   gboolean moved)
{
    const rv_launch *launch = moved ? rv_task_launch(p->model->graph, id) : NULL;
    shape_key key;
    fill_shape_key(&key, cost, change, launch, moved);
    shape_terms *terms = g_hash_table_lookup(p->shapes, &key);
    if (terms != NULL) return terms;
    terms = g_new0(shape_terms, 1);
    if (moved) projected_terms(p->model, cost, change, launch, terms);
    else same_gpu_terms(p->model, cost, change, terms);
    g_hash_table_insert(p->shapes, g_memdup2(&key, sizeof key), terms);
    return terms;
}

/* The peak ratio for a kernel no shapes describe and whose class has no shaped kernels. */
static double peak_ratio(const rv_cost_model *model, const rv_kernel_cost *cost, const rv_cost_change *change)
{
    rv_dtype to = target_dtype(cost, change);
    const rv_gpu *source = model->source, *target = change->gpu;
    if (!rv_cost_class_is_matmul(cost->cls)) {
        double bandwidth = source->memory_Bps / (target->memory_Bps * change->memory_scale);
        return bandwidth * size_ratio(cost->dtype, to) * change->bytes_factor;
    }
    rv_unit unit = rv_cost_unit_on(target, cost->cls, to, cost->aligned);
    gboolean achievable = rv_cost_model_use_achievable(model, target);
    double from_peak = cost->unit == RV_UNIT_MATRIX ? rv_gpu_matrix_peak(source, cost->dtype, achievable)
                                                    : rv_gpu_vector_peak(source, cost->dtype);
    double to_peak = unit == RV_UNIT_MATRIX ? rv_gpu_matrix_peak(target, to, achievable) : rv_gpu_vector_peak(target, to);
    double ratio = from_peak / (to_peak * change->flops_scale);
    if (unit == RV_UNIT_MATRIX && cost->unit == RV_UNIT_VECTOR) {
        /* onto matrix units: at most MATRIX_GAIN_MAX faster than the target's own vector units */
        double vector = from_peak / (rv_gpu_vector_peak(target, to) * change->flops_scale);
        ratio = MIN(vector, MAX(ratio, vector / MATRIX_GAIN_MAX));
    }
    return ratio * change->flops_factor;
}

/* A collective: the bandwidth part scales with its bytes and the link; the
 * latency part (comm.h's model for zero bytes) stays. */
static double comm_ns(const rv_cost_model *model, const rv_task *task, const rv_cost_change *change)
{
    const rv_gpu *source = model->source, *target = change->gpu;
    double from = source->link_Bps > 0 ? source->link_Bps : source->pcie_Bps;
    double to = (target->link_Bps > 0 ? target->link_Bps : target->pcie_Bps) * change->link_scale;
    int ranks = change->comm_ranks > 1 ? change->comm_ranks
                : model->graph->world_size > 1 ? (int)model->graph->world_size : 2;
    const char *name = rv_strings_get(model->graph->strings, task->name);
    int collective = rv_collective_from_kernel_name(name);
    rv_link link = rv_link_make(from / 2, rv_link_preset_find("nvlink-h100")->latency_ns, 1.0);
    int64_t latency = rv_collective_time_ns(collective >= 0 ? (rv_collective)collective : RV_COLL_ALLREDUCE_RING, 0,
                                            ranks, &link);
    double fixed = latency > 0 && latency < task->duration_ns ? (double)latency : 0;
    return fixed + ((double)task->duration_ns - fixed) * change->comm_bytes_factor * from / to;
}

/* Add a time to a class's totals, which are only shown: an efficiency
 * table of odd but accepted figures (a target bucket at 10^-27 of its
 * roofline) can project a kernel beyond int64, where llround's result is
 * unspecified and the sum overflowed; the totals saturate instead, and the
 * plan's durations themselves are refused when it is applied. */
static void add_shown(int64_t *total, double ns)
{
    int64_t rounded;
    if (!rv_checked_round(ns, &rounded)) rounded = isnan(ns) ? 0 : ns > 0 ? INT64_MAX : INT64_MIN;
    *total = rv_saturating_add(*total, rounded);
}

/* Keep a task's estimate in the plan and count it in its class. */
static void record(planning *p, int32_t id, rv_cost_class cls, const rv_task *task, estimate e)
{
    g_array_index(p->plan->new_ns, double, id) = e.ns;
    g_array_index(p->plan->low_ns, double, id) = MIN(e.low, e.ns);
    g_array_index(p->plan->high_ns, double, id) = MAX(e.high, e.ns);
    g_array_index(p->plan->terms, uint8_t, id) = (uint8_t)e.term;
    rv_cost_class_stats *stats = &p->plan->classes[cls];
    stats->tasks++;
    stats->recorded_ns += task->duration_ns;
    add_shown(&stats->predicted_ns, e.ns);
    add_shown(&stats->predicted_low_ns, MIN(e.low, e.ns));
    add_shown(&stats->predicted_high_ns, MAX(e.high, e.ns));
    add_shown(&stats->term_ns[e.term], e.ns);
}

static estimate exact(double ns, rv_cost_term term) { return (estimate){ ns, ns, ns, term, 0, 0, 0 }; }

/* A GEMM recorded in another precision, moved onto fp16/bf16, with rows
 * that are no multiple of 8 elements: the libraries load such an operand
 * an element at a time.  On the H100 the recorded bf16 GEMMs of a
 * 50,257-word vocabulary ran cuBLAS's `..._align1` kernels at 10-15% of the
 * bf16 peak, where its aligned GEMMs of the same job reached 50-77%; so
 * every shipped GPU's matrix_any_shape is false and they are costed at the
 * vector rate (rv_cost_unit_on).  Counted for the notes. */
static gboolean moves_onto_unaligned_half(const rv_kernel_cost *cost, const rv_cost_change *change)
{
    gboolean to_half = change->dtype == RV_DTYPE_FP16 || change->dtype == RV_DTYPE_BF16;
    gboolean from_half = cost->dtype == RV_DTYPE_FP16 || cost->dtype == RV_DTYPE_BF16;
    return to_half && !from_half && cost->cls == RV_COST_GEMM && !cost->aligned;
}

static void plan_shaped(planning *p, int32_t id, const rv_kernel_cost *cost, const rv_cost_change *change,
                        const rv_task *task)
{
    const rv_cost_model *model = p->model;
    double fixed = (double)MIN(task->duration_ns, model->fixed_ns), variable = (double)task->duration_ns - fixed;
    gboolean unit_changed = FALSE, by_table = FALSE, moved = moves_gpu(model, change);
    const shape_terms *terms = terms_of(p, id, cost, change, moved);
    estimate e = moved ? projected(p, terms, change, fixed, variable, &unit_changed, &by_table)
                       : on_same_gpu(model, terms, change, fixed, variable, &unit_changed);
    /* the class's variable time after: what its unshaped kernels follow */
    p->shaped_before[cost->cls] += variable;
    p->shaped_after[cost->cls] += MAX(e.ns - e.fixed, 0);
    p->shaped_low[cost->cls] += MAX(e.low - e.fixed_low, 0);
    p->shaped_high[cost->cls] += MAX(e.high - e.fixed_high, 0);
    if (moves_onto_unaligned_half(cost, change)) {
        p->plan->unaligned_half++;
        p->plan->unaligned_half_ns += task->duration_ns;
    }
    rv_cost_class_stats *stats = &p->plan->classes[cost->cls];
    stats->shaped++;
    stats->unit_changes += unit_changed;
    stats->by_table += by_table;
    if (variable <= 0) stats->at_floor++;
    record(p, id, (rv_cost_class)cost->cls, task, e);
}

/* Cost `id` after the shaped kernels, like those of class `cls`. */
static void defer(planning *p, int32_t id, const rv_cost_change *change, rv_cost_class cls)
{
    deferred later = { id, (uint8_t)cls, *change };
    g_array_append_val(p->pending, later);
}

/* A kernel that a library convolution launched under another class's name
 * (cuDNN's nchwToNhwc, MIOpen's batched_transpose), moving to another
 * vendor's GPU: the target's library picks its own algorithm and layout,
 * with helpers of its own or none, so these follow the convolutions (the
 * rule the waves term keeps for a library's tiles).  On one vendor the
 * same library runs the same helpers, costed by their own class. */
static gboolean is_library_helper(planning *p, const rv_task *task, const rv_kernel_cost *cost,
                                  const rv_cost_change *change)
{
    if (!moves_gpu(p->model, change) || g_strcmp0(p->model->source->vendor, change->gpu->vendor) == 0) return FALSE;
    if (cost->cls == RV_COST_CONV || !rv_cost_class_is_costed((rv_cost_class)cost->cls) || task->op <= 0) return FALSE;
    gpointer known = g_hash_table_lookup(p->library_ops, GINT_TO_POINTER(task->op));
    if (known == NULL) {
        gboolean library = rv_cost_op_is_library_convolution(rv_strings_get(p->model->graph->strings, task->op));
        known = GINT_TO_POINTER(1 + library);
        g_hash_table_insert(p->library_ops, GINT_TO_POINTER(task->op), known);
    }
    return GPOINTER_TO_INT(known) == 2;
}

static void plan_task(planning *p, int32_t id, const rv_kernel_cost *cost, const rv_cost_change *change)
{
    const rv_cost_model *model = p->model;
    const rv_task *task = &g_array_index(model->graph->tasks, rv_task, id);
    if (cost->cls == RV_COST_UNKNOWN) {
        p->plan->unknown_tasks++;
        p->plan->unknown_ns += task->duration_ns;
        return;
    }
    if (cost->dtype_assumed && change->dtype != RV_DTYPE_UNKNOWN && cost->cls != RV_COST_COMM &&
        cost->cls != RV_COST_HOST_COPY)
        p->plan->assumed_dtype++;
    if (change->dtype == RV_DTYPE_BF16 && cost->dtype != RV_DTYPE_BF16 && cost->cls == RV_COST_NORM &&
        rv_cost_name_is_cudnn_batch_norm(rv_strings_get(model->graph->strings, task->name))) {
        p->plan->bf16_batch_norms++;
        p->plan->bf16_batch_norms_ns += task->duration_ns;
    }
    if (cost->cls == RV_COST_COMM) {
        record(p, id, RV_COST_COMM, task, exact(comm_ns(model, task, change), RV_TERM_LINK));
    } else if (cost->cls == RV_COST_HOST_COPY) {
        double ns = (double)task->duration_ns * change->bytes_factor * model->source->pcie_Bps / change->gpu->pcie_Bps;
        record(p, id, RV_COST_HOST_COPY, task, exact(ns, RV_TERM_LINK));
    } else if (is_library_helper(p, task, cost, change)) {
        defer(p, id, change, RV_COST_CONV);
    } else if (!cost->shaped) {
        defer(p, id, change, (rv_cost_class)cost->cls);
    } else {
        plan_shaped(p, id, cost, change, task);
    }
}

/* Unshaped kernels: like their class's shaped ones, else by the peak ratio. */
static void plan_pending(planning *p)
{
    for (guint i = 0; i < p->pending->len; i++) {
        const deferred *later = &g_array_index(p->pending, deferred, i);
        int32_t id = later->task;
        const rv_cost_change *change = &later->change;
        rv_kernel_cost cost_as = *rv_cost_model_kernel(p->model, id);
        const rv_task *task = &g_array_index(p->model->graph->tasks, rv_task, id);
        uint8_t follows = later->follows;
        /* a library's helper follows its convolutions where some have shapes */
        if (follows != cost_as.cls && p->shaped_before[follows] > 0) {
            cost_as.cls = follows;
            p->plan->library_helpers++;
            p->plan->library_helpers_ns += task->duration_ns;
        }
        const rv_kernel_cost *cost = &cost_as;
        double fixed = (double)MIN(task->duration_ns, p->model->fixed_ns), variable = (double)task->duration_ns - fixed;
        gboolean moved = moves_gpu(p->model, change);
        estimate e = { 0, 0, 0, RV_TERM_NONE, fixed, fixed, fixed };
        if (moved) target_fixed(p, change, fixed, &e);
        double ratio, low, high;
        rv_cost_term term;
        if (p->shaped_before[cost->cls] > 0) {
            ratio = p->shaped_after[cost->cls] / p->shaped_before[cost->cls];
            low = p->shaped_low[cost->cls] / p->shaped_before[cost->cls];
            high = p->shaped_high[cost->cls] / p->shaped_before[cost->cls];
            term = RV_TERM_CLASS;
            p->plan->classes[cost->cls].by_class_ratio++;
        } else {
            ratio = peak_ratio(p->model, cost, change);
            low = moved ? ratio / UNKNOWN_RANGE : ratio;
            high = moved ? ratio * UNKNOWN_RANGE : ratio;
            term = rv_cost_class_is_matmul(cost->cls) ? RV_TERM_PEAK : RV_TERM_BANDWIDTH;
            p->plan->classes[cost->cls].by_peak_ratio++;
        }
        e.ns = e.fixed + variable * ratio;
        e.low = e.fixed_low + variable * low;
        e.high = e.fixed_high + variable * high;
        e.term = e.fixed >= variable * ratio ? RV_TERM_FIXED : term;
        record(p, id, (rv_cost_class)cost->cls, task, e);
    }
}

static GArray *filled_array(guint length, double value)
{
    GArray *array = g_array_sized_new(FALSE, FALSE, sizeof(double), length);
    g_array_set_size(array, length);
    for (guint t = 0; t < length; t++) g_array_index(array, double, t) = value;
    return array;
}

rv_cost_plan *rv_cost_model_plan(const rv_cost_model *model, rv_cost_change_fn decide, gpointer data)
{
    rv_cost_plan *plan = g_new0(rv_cost_plan, 1);
    guint tasks = (guint)rv_graph_task_count(model->graph);
    plan->new_ns = filled_array(tasks, -1);
    plan->low_ns = filled_array(tasks, -1);
    plan->high_ns = filled_array(tasks, -1);
    plan->terms = g_array_sized_new(FALSE, TRUE, sizeof(uint8_t), tasks);
    g_array_set_size(plan->terms, tasks);
    plan->target_fixed_ns = -1;
    planning p;
    memset(&p, 0, sizeof p);
    p.model = model;
    p.plan = plan;
    p.pending = g_array_new(FALSE, FALSE, sizeof(deferred));
    p.library_ops = g_hash_table_new(g_direct_hash, g_direct_equal);
    p.shapes = g_hash_table_new_full(shape_key_hash, shape_key_equal, g_free, g_free);
    for (int32_t id = 0; id < (int32_t)tasks; id++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, id);
        rv_cost_change change = rv_cost_change_none(model);
        if (cost != NULL && decide(model->graph, id, cost, &change, data)) plan_task(&p, id, cost, &change);
    }
    plan_pending(&p);
    g_array_unref(p.pending);
    g_hash_table_destroy(p.library_ops);
    g_hash_table_destroy(p.shapes);
    return plan;
}

void rv_cost_plan_free(rv_cost_plan *plan)
{
    if (plan == NULL) return;
    g_array_unref(plan->new_ns);
    g_array_unref(plan->low_ns);
    g_array_unref(plan->high_ns);
    g_array_unref(plan->terms);
    g_free(plan);
}

guint rv_cost_plan_changed(const rv_cost_plan *plan)
{
    guint changed = 0;
    for (guint t = 0; t < plan->new_ns->len; t++) changed += g_array_index(plan->new_ns, double, t) >= 0;
    return changed;
}

gboolean rv_cost_plan_apply(rv_graph *graph, const rv_cost_plan *plan, const char *cause, GError **error)
{
    /* sized once and written in place: an append is a call per task */
    GArray *durations = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), plan->new_ns->len);
    g_array_set_size(durations, plan->new_ns->len);
    gboolean ok = TRUE;
    guint checked = 0;
    for (; ok && checked < plan->new_ns->len; checked++) {
        double ns = g_array_index(plan->new_ns, double, checked);
        int64_t duration = -1;
        if (ns >= 0) ok = rv_task_duration_from(graph, (int32_t)checked, ns, cause, &duration, error);
        g_array_index(durations, int64_t, checked) = duration;
    }
    g_array_set_size(durations, checked);
    for (guint t = 0; ok && t < durations->len; t++) {
        int64_t duration = g_array_index(durations, int64_t, t);
        if (duration < 0) continue;
        rv_transform_set_duration(graph, (int32_t)t, duration);
        double ns = g_array_index(plan->new_ns, double, t), low = g_array_index(plan->low_ns, double, t),
               high = g_array_index(plan->high_ns, double, t);
        if (ns > 0 && (low < ns || high > ns)) rv_duration_range_set(graph, (int32_t)t, low / ns, high / ns);
    }
    g_array_unref(durations);
    return ok;
}

void rv_cost_plan_describe(const rv_cost_plan *plan, const char *indent, GString *out)
{
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        const rv_cost_class_stats *s = &plan->classes[c];
        if (s->tasks == 0) continue;
        char *before = rv_format_duration(s->recorded_ns), *after = rv_format_duration(s->predicted_ns);
        g_string_append_printf(out, "%s%-11s %6u tasks %12s -> %-12s", indent, rv_cost_class_name((rv_cost_class)c),
                               s->tasks, before, after);
        if (c == RV_COST_COMM || c == RV_COST_HOST_COPY) g_string_append(out, " (link ratio)");
        else g_string_append_printf(out, " (%u by shapes, %u like their class, %u by peak ratio%s)", s->shaped,
                                    s->by_class_ratio, s->by_peak_ratio, s->unit_changes ? ", some change unit" : "");
        g_string_append_c(out, '\n');
        g_free(before);
        g_free(after);
    }
    if (plan->unaligned_half) {
        char *time = rv_format_duration(plan->unaligned_half_ns);
        g_string_append_printf(out,
                               "%s%u GEMMs with shapes (%s recorded) have rows that are no multiple of 8 elements: in half "
                               "precision the libraries run them with unaligned kernels, costed here at the GPU's "
                               "non-Tensor rate where its catalogue entry says so (matrix_any_shape false); pad the "
                               "dimension to a multiple of 8 to avoid them\n",
                               indent, plan->unaligned_half, time);
        g_free(time);
    }
    if (plan->library_helpers) {
        char *time = rv_format_duration(plan->library_helpers_ns);
        g_string_append_printf(out,
                               "%s%u kernels (%s recorded) that library convolutions launched under other names "
                               "(layout transposes, workspace setup) follow the convolutions onto another vendor's "
                               "GPU, whose library runs helpers of its own or none: counted as conv above\n",
                               indent, plan->library_helpers, time);
        g_free(time);
    }
    if (plan->bf16_batch_norms) {
        /* the evidence is one network's recordings (traces/recorded/h100:
         * ResNet-50 fp32, amp bf16, amp fp16; torch 2.11): a note, not a
         * factor fitted to them */
        char *time = rv_format_duration(plan->bf16_batch_norms_ns);
        g_string_append_printf(out,
                               "%s%u cuDNN batch-norm kernels (%s) are costed as cuDNN's in bf16, but PyTorch runs "
                               "bf16 batch norm with its own kernels instead: on an H100 ResNet-50 they took 1,060 "
                               "kernels and 36.3 ms in five steps against cuDNN's 530 kernels in 30.2 ms (fp32) and "
                               "22.1 ms (fp16), so the prediction is likely optimistic there (fp16 keeps cuDNN)\n",
                               indent, plan->bf16_batch_norms, time);
        g_free(time);
    }
    if (plan->unknown_tasks) {
        char *time = rv_format_duration(plan->unknown_ns);
        g_string_append_printf(out, "%sunknown     %6u kernels %s the classifier does not know: left as recorded\n",
                               indent, plan->unknown_tasks, time);
        g_free(time);
    }
}
