/*
 * waves.c - the cost model's terms beyond the roofline that come from how
 * a kernel is launched and where its data lives (costmodel.h): occupancy,
 * wave quantization, and the size bucket a kernel's efficiency is kept in.
 *
 * Occupancy: an SM (CU) holds as many blocks of a kernel at once as its
 * limits allow - resident threads (a block takes whole warps), resident
 * blocks, registers (per thread, times the block's warps' threads) and
 * shared memory - the calculation of NVIDIA's occupancy calculator, over
 * the catalogue's per-SM limits (gpus.h).  Wave quantization: a grid of B
 * blocks on S SMs holding k blocks each runs in ceil(B / (S k)) waves, the
 * last one partly empty, so the compute units are busy B / (waves S k) of
 * the time - a grid of S + 1 one-block-per-SM blocks takes two full waves
 * for barely more work than one.
 */
#include "reverie/costmodel.h"
#include <math.h>

int rv_cost_blocks_per_sm(const rv_gpu *gpu, const rv_launch *launch, gboolean registers)
{
    if (launch == NULL || launch->threads == 0 || gpu->sm_max_threads <= 0) return 0;
    int warp = gpu->warp_size > 0 ? gpu->warp_size : 32;
    int64_t threads = ((int64_t)launch->threads + warp - 1) / warp * warp;  /* whole warps */
    int64_t blocks = gpu->sm_max_threads / threads;
    if (gpu->sm_max_blocks > 0) blocks = MIN(blocks, gpu->sm_max_blocks);
    if (registers && launch->registers > 0 && gpu->sm_registers > 0)
        blocks = MIN(blocks, gpu->sm_registers / ((int64_t)launch->registers * threads));
    if (launch->shared_bytes > 0 && gpu->sm_shared_bytes > 0)
        blocks = MIN(blocks, gpu->sm_shared_bytes / (int64_t)launch->shared_bytes);
    /* a kernel that ran fits one block per SM, whatever the arithmetic says */
    return blocks < 1 ? 1 : (int)blocks;
}

double rv_cost_wave_utilization(const rv_gpu *gpu, const rv_launch *launch, gboolean registers)
{
    return rv_cost_wave_utilization_at(gpu, launch, rv_cost_blocks_per_sm(gpu, launch, registers));
}

double rv_cost_wave_utilization_at(const rv_gpu *gpu, const rv_launch *launch, int per_sm)
{
    if (per_sm <= 0 || launch == NULL || gpu->sm_count <= 0 || launch->blocks == 0) return 1;
    double slots = (double)per_sm * gpu->sm_count;
    double waves = ceil(launch->blocks / slots);
    return launch->blocks / (waves * slots);
}

gboolean rv_cost_occupancy_shares(const rv_gpu *gpu, const rv_launch *launch, double shares[4])
{
    int per_sm = rv_cost_blocks_per_sm(gpu, launch, TRUE);
    if (per_sm <= 0 || gpu->sm_count <= 0 || gpu->sm_max_threads <= 0) return FALSE;
    double u = rv_cost_wave_utilization(gpu, launch, TRUE);
    int warp = gpu->warp_size > 0 ? gpu->warp_size : 32;
    double threads = (double)(((int64_t)launch->threads + warp - 1) / warp * warp);
    /* one block's use of each resource, as a share of one SM's */
    double use[4] = { threads / gpu->sm_max_threads, gpu->sm_max_blocks > 0 ? 1.0 / gpu->sm_max_blocks : 0,
                      launch->registers > 0 && gpu->sm_registers > 0 ? launch->registers * threads / gpu->sm_registers : 0,
                      launch->shared_bytes > 0 && gpu->sm_shared_bytes > 0 ? (double)launch->shared_bytes / gpu->sm_shared_bytes : 0 };
    for (int r = 0; r < 4; r++) {
        gboolean limits = use[r] > 0 && (per_sm + 1) * use[r] > 1;  /* another block would not fit */
        shares[r] = limits ? u : MIN(1.0, u * per_sm * use[r]);
    }
    return TRUE;
}

/* Only the compute term waits on waves: a memory-bound kernel's achieved
 * bandwidth as a function of its size is what the efficiency tables'
 * byte buckets measure (efficiency.h). */
double rv_cost_wave_roofline_s(const rv_gpu *gpu, rv_unit unit, rv_dtype dtype, double flops, double bytes,
                               double utilization, gboolean achievable, double flops_scale, double memory_scale)
{
    double u = utilization > 0 && utilization < 1 ? utilization : 1;
    return rv_cost_roofline_s(gpu, unit, dtype, flops / u, bytes, achievable, flops_scale, memory_scale);
}

static gboolean is_memory_bound_class(rv_cost_class cls)
{
    return !rv_cost_class_is_matmul(cls);
}

rv_cost_bucket rv_cost_bucket_of(const rv_kernel_cost *cost, const rv_gpu *gpu)
{
    rv_cost_bucket bucket = { cost->cls, cost->unit, RV_BUCKET_PLAIN, -1 };
    double work = is_memory_bound_class((rv_cost_class)cost->cls) ? cost->bytes : cost->flops;
    bucket.decade = (int8_t)(work >= 1 ? MIN(floor(log10(work)), 60) : 0);
    if (is_memory_bound_class((rv_cost_class)cost->cls) && gpu->cache_bytes > 0 && cost->bytes <= gpu->cache_bytes)
        bucket.variant = RV_BUCKET_IN_CACHE;
    else if (cost->cls == RV_COST_ATTENTION && cost->fused)
        bucket.variant = RV_BUCKET_FUSED;
    return bucket;
}

const char *rv_cost_bucket_variant_name(int variant)
{
    return variant == RV_BUCKET_IN_CACHE ? "in_cache" : variant == RV_BUCKET_FUSED ? "fused" : "";
}

int rv_cost_bucket_variant_from_name(const char *name)
{
    if (name == NULL || *name == '\0') return RV_BUCKET_PLAIN;
    if (g_strcmp0(name, "in_cache") == 0) return RV_BUCKET_IN_CACHE;
    if (g_strcmp0(name, "fused") == 0) return RV_BUCKET_FUSED;
    return -1;
}
