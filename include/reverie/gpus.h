/*
 * gpus.h - the GPU catalogue: what each device can do, as its vendor's
 * datasheet says, read from a data file rather than written into code.
 *
 * The catalogue (data/gpus.json, installed as $datadir/reverie/gpus.json)
 * lists, per GPU model: peak throughput per data type for the matrix units
 * (Tensor Cores, Matrix Cores) and the vector units, memory bandwidth and
 * capacity, SM/CU count, each SM's residency limits (threads, blocks,
 * registers, shared memory, warp size) and the last-level cache size, the
 * intra-node link (NVLink, Infinity Fabric) and PCIe bandwidth, and for
 * each figure the document it comes from.  Peaks
 * are dense (no structured sparsity).  Where a published measurement of the
 * maximum achievable matmul throughput exists (the "MAMF" tables), it is
 * kept beside the datasheet peak, with its own source; rv_gpu_matrix_peak
 * says which one a caller gets.
 *
 * The file is found, in order: the path in REVERIE_GPU_CATALOGUE; the
 * build tree's data/gpus.json when the running library is in a meson build
 * folder, else reverie/gpus.json beside the library (a wheel; paths.h);
 * the installed copy.  A file that is not such a catalogue is one RV_ERROR_INPUT line
 * naming the file and the entry.
 *
 * Names: a trace names its GPU in deviceProperties ("NVIDIA H100 80GB
 * HBM3", "Tesla V100-SXM2-32GB"); each entry lists the substrings that
 * identify it, and the longest match wins.  A user names a GPU by the
 * entry's id or one of its aliases ("H100-SXM", "h100", "MI300X"), case
 * and '-', '_', ' ' ignored; an unknown name is an error that lists the
 * known ones.
 */
#ifndef REVERIE_GPUS_H
#define REVERIE_GPUS_H

#include <glib.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* Data types the cost model tells apart (a kernel's compute or storage type). */
typedef enum {
    RV_DTYPE_UNKNOWN,
    RV_DTYPE_FP64,
    RV_DTYPE_FP32,
    RV_DTYPE_TF32,   /* fp32 storage, Tensor-Core math */
    RV_DTYPE_FP16,
    RV_DTYPE_BF16,
    RV_DTYPE_FP8,
    RV_DTYPE_INT8,
    RV_DTYPE_COUNT
} rv_dtype;

/* "fp32", "bf16", ...; "unknown" for RV_DTYPE_UNKNOWN. */
const char *rv_dtype_name(rv_dtype dtype);
/* The inverse ("float16" and "half" mean fp16, "bfloat16" bf16, "float32" fp32); -1 if unknown. */
int rv_dtype_from_name(const char *name);
/* Bytes per element in memory (tf32 is stored as fp32: 4); 0 for unknown. */
int rv_dtype_bytes(rv_dtype dtype);

typedef struct {
    char *id;                               /* "H100-SXM" */
    char *name;                             /* "NVIDIA H100 SXM5 80GB" */
    char *vendor;                           /* "nvidia", "amd" */
    GPtrArray *aliases;                     /* char*: other names a user may give */
    GPtrArray *match;                       /* char*: substrings of deviceProperties names */
    double matrix_flops[RV_DTYPE_COUNT];    /* FLOP/s, dense; 0: no matrix unit for the type */
    double vector_flops[RV_DTYPE_COUNT];    /* FLOP/s; 0: not published */
    double achievable_matrix_flops[RV_DTYPE_COUNT]; /* measured maximum (MAMF); 0: none published */
    gboolean matrix_any_shape;              /* half-precision GEMMs whose rows are no multiple of 8
                                               elements still run at the matrix rate; FALSE (every
                                               shipped GPU: gpus.json says why): at the vector rate */
    double memory_Bps;                      /* memory bandwidth, bytes/s */
    double memory_bytes;                    /* capacity */
    int sm_count;                           /* SMs (NVIDIA) or CUs (AMD); 0: not published */
    double link_Bps;                        /* intra-node GPU link, bytes/s as the datasheet counts it; 0: none */
    double pcie_Bps;                        /* host link, bytes/s as the datasheet counts it */
    char *note;                             /* what the entry stands for, when it needs saying */
    GHashTable *sources;                    /* field name -> the document its figure comes from */
    /* Each SM's (CU's) residency limits, for occupancy: how many blocks of
     * a kernel it holds at once.  0 where the catalogue does not say. */
    int sm_max_threads, sm_max_blocks, sm_registers, sm_shared_bytes, warp_size;
    double cache_bytes;                     /* last-level cache (L2, Infinity Cache); 0: not known */
} rv_gpu;

typedef struct rv_gpu_catalogue rv_gpu_catalogue;

/* Load a catalogue file.  NULL with RV_ERROR_INPUT on a file that is not one. */
rv_gpu_catalogue *rv_gpu_catalogue_load(const char *path, GError **error);
/* Load the catalogue found by the search order above. */
rv_gpu_catalogue *rv_gpu_catalogue_load_default(GError **error);
/* Where a data file of reverie's is (gpus.json, efficiency.json): the
 * environment variable `env` if set, else data/NAME of the meson build
 * folder the program runs from, else the install folder's (g_free). */
char *rv_data_file_path(const char *env, const char *name);
void rv_gpu_catalogue_free(rv_gpu_catalogue *catalogue);
/* The file it was read from. */
const char *rv_gpu_catalogue_path(const rv_gpu_catalogue *catalogue);
guint rv_gpu_catalogue_count(const rv_gpu_catalogue *catalogue);
const rv_gpu *rv_gpu_catalogue_get(const rv_gpu_catalogue *catalogue, guint index);
/* "A100-40GB, A100-80GB, A10G, ..." (g_free). */
char *rv_gpu_catalogue_known(const rv_gpu_catalogue *catalogue);

/* The entry a user means by `name` (id or alias).  NULL with an
 * RV_ERROR_USAGE error listing the known names when there is none. */
const rv_gpu *rv_gpu_find(const rv_gpu_catalogue *catalogue, const char *name, GError **error);
/* The entry whose match list best fits a deviceProperties name, or NULL. */
const rv_gpu *rv_gpu_match_device(const rv_gpu_catalogue *catalogue, const char *device_name);

/*
 * The GPU a graph was recorded on: the entry `given` names when it is not
 * NULL or empty (the user's source_gpu=), else the one matching the
 * graph's first deviceProperties name.  NULL with an RV_ERROR_USAGE error
 * asking for `parameter`= when the trace names no GPU, or names one the
 * catalogue does not know (the message lists the known ones).
 */
const rv_gpu *rv_gpu_of_graph(const rv_gpu_catalogue *catalogue, const rv_graph *graph, const char *given,
                              const char *parameter, GError **error);

/* Peak FLOP/s of the matrix units for a dtype: the achievable (measured)
 * figure when `achievable` is TRUE and one is published, else the
 * datasheet's; 0 when the GPU has no matrix unit for it. */
double rv_gpu_matrix_peak(const rv_gpu *gpu, rv_dtype dtype, gboolean achievable);
/* Peak FLOP/s of the vector units for a dtype; a type with no published
 * vector figure runs at the fp32 rate (conversions to fp32 and back). */
double rv_gpu_vector_peak(const rv_gpu *gpu, rv_dtype dtype);

G_END_DECLS

#endif
