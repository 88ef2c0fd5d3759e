/*
 * reverie-gentrace: writes a synthetic PyTorch profiler (Kineto) trace of a
 * small data-parallel training job, for testing reverie on traces of any size
 * without a GPU.
 *
 * The job is an MLP of Linear+ReLU layers trained with MSE loss, DDP gradient
 * all-reduce over NCCL (rank 0 of 2) and Adam.  --mixed-layers makes the
 * layers differ in kind, in turn Linear, Conv2d (1x1) and attention (a
 * projection, a batched matmul and a softmax), so that the optimizations
 * that look for convolutions (vdnn) or Transformer blocks (tp-allreduce)
 * find them; --single-gpu leaves DDP out (no all-reduce), as a trace that
 * ddp or p3 would start from.  Every step has data loading,
 * a host-to-device copy, forward, a blocking loss.item(), backward on the
 * autograd thread with bucketed all-reduces on a second stream, a wait for
 * the all-reduces, and the optimizer step.
 *
 * --ranks N writes every rank of an N-rank job (a folder of rank<r>.json.gz):
 * each rank has its own random jitter and its own moment of entering the
 * recorded window, and every all-reduce is a rendezvous - on every rank it
 * ends when the last rank's kernel has started plus the transfer - found by
 * simulating the ranks until the collectives' ends stop moving.  The
 * record_param_comms operators then carry the process group's name and the
 * collective's sequence number, as PyTorch 2 writes them, and
 * --clock-skew-us puts each rank's host clock that much ahead of the
 * previous rank's.
 *
 * The job is simulated while it is written, so the timeline is causally
 * consistent and a replay should reproduce it: every CPU thread has a clock
 * that advances by call durations plus overheads; every CUDA stream has a
 * clock, and a GPU task starts only when its stream is free, its launch has
 * reached the GPU and every cross-stream event it waits on has fired.
 * Events are streamed out as they are produced (never held), so millions of
 * events cost no memory.  The output is deterministic for a given --seed.
 *
 * --profile-memory adds the [memory] instant events that
 * profile_memory=True writes: one per allocation and free of the caching
 * allocator on device 0, with the totals after it.  The tensors follow
 * PyTorch's lifetimes for this MLP: the weights exist before the first
 * step; each step copies its input and target in (freed at the step's
 * end, when the loop drops them), zero_grad sets the gradients to None
 * (frees them), addmm's output lives until ReLU has read it, ReLU's output
 * is kept for backward (ReLU and the next Linear save it) and freed by
 * ReluBackward; backward makes each layer's input gradient and its weight
 * and bias gradients (AccumulateGrad keeps those as .grad); Adam allocates
 * its two states per parameter lazily in the first step, and a temporary
 * (the square root) per parameter while it updates it.  Reserved memory is
 * the running maximum of allocated memory rounded up to 2 MiB.  Allocation
 * draws no random numbers, so the timeline is the same without the
 * option.  Only Linear layers are modelled (not with --mixed-layers), and
 * DDP's bucket buffers are not (gradients as bucket views).
 */

#include <glib.h>
#include <zlib.h>

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The job's fixed shape                                                     */
/* ------------------------------------------------------------------------ */

enum {
  HOST_PID = 1000,
  MAIN_TID = 1000,
  AUTOGRAD_TID = 1001,
  GPU_PID = 0, /* Kineto uses the device index as the GPU "pid" */
  COMPUTE_STREAM = 7,
  NCCL_STREAM = 20,
  WORLD_SIZE = 2,
  LAYERS_PER_BUCKET = 2,
  MAX_LAYERS = 4096,
  MAX_DEPTH = 16,
};

/* Samples per step (--batch; 64 by default).  Only shapes and the
 * [memory] events' sizes follow it: kernel times do not, so the timeline
 * of a seed is the same at any batch. */
static int batch_size = 64;
#define BATCH batch_size

/* --lengths LO..HI: each step's batch is an input length drawn anew (a
 * sequence model's tokens per iteration), and its GEMM time follows it:
 * the time at 64 rows (below) less a fixed 3 us, in proportion to the
 * rows.  Elementwise kernels follow their elements anyway.  0: off. */
static int varying_lo = 0, varying_hi = 0;
#define GEMM_FIXED_NS 3000

/* CUPTI runtime callback ids, as Kineto writes them in "cbid". */
enum {
  CBID_MEMCPY_ASYNC = 41,
  CBID_STREAM_SYNCHRONIZE = 131,
  CBID_EVENT_RECORD = 135,
  CBID_STREAM_WAIT_EVENT = 147,
  CBID_LAUNCH_KERNEL = 211,
};

/* Wall-clock start of the recording, in ns: an ordinary epoch time. */
#define TRACE_START_NS G_GINT64_CONSTANT(1712195495000000000)

#define ELEMENTWISE_KERNEL(functor, arrays)                                   \
  "void at::native::vectorized_elementwise_kernel<4, " functor                \
  ", at::detail::Array<char*, " #arrays "> >(int, " functor                  \
  ", at::detail::Array<char*, " #arrays ">)"

#define REDUCE_KERNEL(ops)                                                    \
  "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, " ops   \
  ", unsigned int, float, 4> >(at::native::ReduceOp<float, " ops              \
  ", unsigned int, float, 4>)"

static const char KERNEL_GEMM_FORWARD[] = "ampere_sgemm_128x64_tn";
static const char KERNEL_GEMM_GRAD_INPUT[] = "ampere_sgemm_128x64_nn";
static const char KERNEL_GEMM_GRAD_WEIGHT[] = "ampere_sgemm_128x128_nt";
static const char KERNEL_CONV_FORWARD[] =
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_"
    "tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel";
static const char KERNEL_CONV_DGRAD[] =
    "sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_"
    "tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel";
static const char KERNEL_CONV_WGRAD[] =
    "sm80_xmma_wgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_"
    "tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel";
static const char KERNEL_BMM[] = "ampere_sgemm_64x64_nn";
static const char KERNEL_NCCL_ALL_REDUCE[] =
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)";
static const char KERNEL_RELU[] = ELEMENTWISE_KERNEL(
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::"
    "TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::"
    "ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(float)#1}",
    2);
static const char KERNEL_RELU_BACKWARD[] = ELEMENTWISE_KERNEL(
    "at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::"
    "TensorIteratorBase&, float, float)::{lambda(float, float)#1}",
    3);
static const char KERNEL_MSE[] = ELEMENTWISE_KERNEL(
    "at::native::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::"
    "operator()() const::{lambda()#4}::operator()() const::{lambda(float, "
    "float)#1}",
    3);
static const char KERNEL_MSE_BACKWARD[] = ELEMENTWISE_KERNEL(
    "at::native::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar "
    "const&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() "
    "const::{lambda(float, float, float)#1}",
    4);
static const char KERNEL_MEAN[] =
    REDUCE_KERNEL("at::native::MeanOps<float, float, float, float>");
static const char KERNEL_SUM[] = REDUCE_KERNEL(
    "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
    "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>");
static const char KERNEL_SOFTMAX[] =
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, "
    "float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>"
    "(float*, float const*, int)";
static const char KERNEL_SOFTMAX_BACKWARD[] =
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, "
    "float, float, at::native::(anonymous namespace)::SoftMaxBackwardEpilogue>"
    "(float*, float const*, float const*, int)";
static const char KERNEL_FILL[] =
    ELEMENTWISE_KERNEL("at::native::FillFunctor<float>", 1);
static const char KERNEL_DIV_SCALAR[] = ELEMENTWISE_KERNEL(
    "at::native::AUnaryFunctor<float, float, float, at::native::"
    "binary_internal::DivFunctor<float> >",
    2);

/* ------------------------------------------------------------------------ */
/* Deterministic random numbers                                              */
/* ------------------------------------------------------------------------ */

/* splitmix64: tiny, fast, and identical on every platform and GLib version,
 * which keeps traces reproducible from --seed alone. */
typedef struct {
  guint64 state;
} Rng;

static guint64 rng_next(Rng *rng) {
  guint64 z = (rng->state += G_GUINT64_CONSTANT(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static gint64 rng_between(Rng *rng, gint64 low, gint64 high) {
  return low + (gint64)(rng_next(rng) % (guint64)(high - low + 1));
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

/* One writer for plain files, stdout, gzip and a null sink; the null sink
 * lets --events count a dry run without writing anything. */
typedef struct {
  FILE *file;
  gzFile gz;
  GString *buf; /* batches small writes into large ones */
  guint64 events;
  gboolean ok;
  gint64 clock_shift; /* added to every timestamp written: this host's clock */
} Writer;

#define WRITER_FLUSH_AT (1u << 20)

static void writer_flush(Writer *w) {
  gsize len = w->buf->len;
  if (len > 0 && w->gz && gzwrite(w->gz, w->buf->str, (unsigned)len) != (int)len)
    w->ok = FALSE;
  if (len > 0 && w->file && fwrite(w->buf->str, 1, len, w->file) != len)
    w->ok = FALSE;
  g_string_truncate(w->buf, 0);
}

static Writer *writer_new(void) {
  Writer *w = g_new0(Writer, 1);
  w->buf = g_string_sized_new(WRITER_FLUSH_AT + 65536);
  w->ok = TRUE;
  return w;
}

static Writer *writer_open(const char *path, GError **error) {
  Writer *w = writer_new();
  if (strcmp(path, "-") == 0) {
    w->file = stdout;
  } else if (g_str_has_suffix(path, ".gz")) {
    /* Level 1: traces compress well anyway, and level 6 triples the time. */
    w->gz = gzopen(path, "wb1");
    if (w->gz)
      gzbuffer(w->gz, 1u << 18);
  } else {
    w->file = fopen(path, "wb");
  }
  if (!w->file && !w->gz) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
                "cannot open %s: %s", path, g_strerror(errno));
    g_string_free(w->buf, TRUE);
    g_free(w);
    return NULL;
  }
  return w;
}

/* Closes the output and frees the writer; FALSE if any write failed. */
static gboolean writer_close(Writer *w) {
  writer_flush(w);
  gboolean ok = w->ok;
  if (w->gz && gzclose(w->gz) != Z_OK)
    ok = FALSE;
  if (w->file == stdout && fflush(stdout) != 0)
    ok = FALSE;
  if (w->file && w->file != stdout && fclose(w->file) != 0)
    ok = FALSE;
  g_string_free(w->buf, TRUE);
  g_free(w);
  return ok;
}

static void writer_text(Writer *w, const char *text) {
  g_string_append(w->buf, text);
}

/* Starts one element of traceEvents and returns the buffer to append to. */
static GString *event_begin(Writer *w) {
  g_string_append(w->buf, w->events++ ? ",\n  " : "\n  ");
  return w->buf;
}

static void event_end(Writer *w) {
  if (w->buf->len >= WRITER_FLUSH_AT)
    writer_flush(w);
}

/* Integers and times are formatted by hand: printf would dominate the run
 * time for millions of events. */
static void put_int(GString *out, gint64 value) {
  char digits[24];
  int n = 0;
  guint64 magnitude = value < 0 ? (guint64)(-(value + 1)) + 1 : (guint64)value;
  do {
    digits[n++] = (char)('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude);
  if (value < 0)
    g_string_append_c(out, '-');
  while (n)
    g_string_append_c(out, digits[--n]);
}

/* Nanoseconds as microseconds with three decimals, exactly. */
static void put_time(GString *out, gint64 ns) {
  char fraction[5] = {'.', 0, 0, 0, 0};
  put_int(out, ns / 1000);
  gint64 rest = ns % 1000;
  fraction[1] = (char)('0' + rest / 100);
  fraction[2] = (char)('0' + rest / 10 % 10);
  fraction[3] = (char)('0' + rest % 10);
  g_string_append_len(out, fraction, 4);
}

static void put_json_string(GString *out, const char *text) {
  g_string_append_c(out, '"');
  for (const char *c = text; *c; c++) {
    if (*c == '"' || *c == '\\')
      g_string_append_c(out, '\\');
    if ((unsigned char)*c < 0x20)
      g_string_append_printf(out, "\\u%04x", (unsigned char)*c);
    else
      g_string_append_c(out, *c);
  }
  g_string_append_c(out, '"');
}

static void put_key_int(GString *out, const char *key, gint64 value) {
  g_string_append(out, key);
  put_int(out, value);
}

/* A complete ("X") event; args_body is the inside of the args object. */
static void emit_complete(Writer *w, const char *cat, const char *name, int pid,
                          int tid, gint64 start, gint64 duration,
                          const char *args_body) {
  GString *out = event_begin(w);
  g_string_append(out, "{\"ph\": \"X\", \"cat\": \"");
  g_string_append(out, cat);
  g_string_append(out, "\", \"name\": ");
  put_json_string(out, name);
  put_key_int(out, ", \"pid\": ", pid);
  put_key_int(out, ", \"tid\": ", tid);
  g_string_append(out, ", \"ts\": ");
  put_time(out, start + w->clock_shift);
  g_string_append(out, ", \"dur\": ");
  put_time(out, duration);
  g_string_append(out, ", \"args\": {");
  g_string_append(out, args_body);
  g_string_append(out, "}}");
  event_end(w);
}

/* One end of a flow arrow: "s" at the source, "f" at the destination. */
static void emit_flow(Writer *w, char phase, const char *cat, gint64 id,
                      int pid, int tid, gint64 at) {
  GString *out = event_begin(w);
  g_string_append(out, phase == 's' ? "{\"ph\": \"s\"" : "{\"ph\": \"f\"");
  put_key_int(out, ", \"id\": ", id);
  put_key_int(out, ", \"pid\": ", pid);
  put_key_int(out, ", \"tid\": ", tid);
  g_string_append(out, ", \"ts\": ");
  put_time(out, at + w->clock_shift);
  g_string_append_printf(out, ", \"cat\": \"%s\", \"name\": \"%s\"", cat, cat);
  g_string_append(out, phase == 's' ? "}" : ", \"bp\": \"e\"}");
  event_end(w);
}

/* A metadata ("M") event naming or ordering a process or thread. */
static void emit_metadata(Writer *w, const char *what, int pid, int tid,
                          gint64 at, const char *args_body) {
  GString *out = event_begin(w);
  g_string_append_printf(out, "{\"name\": \"%s\", \"ph\": \"M\", \"ts\": ", what);
  put_time(out, at + w->clock_shift);
  put_key_int(out, ", \"pid\": ", pid);
  put_key_int(out, ", \"tid\": ", tid);
  g_string_append_printf(out, ", \"args\": {%s}}", args_body);
  event_end(w);
}

/* ------------------------------------------------------------------------ */
/* The model                                                                 */
/* ------------------------------------------------------------------------ */

typedef enum { LAYER_LINEAR, LAYER_CONV, LAYER_ATTENTION, LAYER_KINDS } LayerKind;

typedef struct {
  int layers;
  int width[MAX_LAYERS + 1]; /* layer i maps width[i] -> width[i + 1] */
  gboolean mixed;            /* layer kinds in turn, else all Linear */
  gboolean single_gpu;       /* no DDP: no all-reduce, no wait for one */
  gboolean profile_memory;   /* write [memory] events */
  int rank, world;           /* this rank of the data-parallel job */
  int unlike_rank;           /* this rank's first kernel has a name no other rank's has; -1: none */
} Model;

static LayerKind layer_kind(const Model *model, int layer) {
  return model->mixed ? (LayerKind)(layer % LAYER_KINDS) : LAYER_LINEAR;
}

/* Widths come from their own random stream so that the model does not
 * depend on how many timing draws the simulation makes. */
static void model_init(Model *model, int layers, gint64 seed) {
  static const int widths[] = {2048, 3072, 4096};
  Rng rng = {(guint64)seed ^ G_GUINT64_CONSTANT(0x5EEDF00DCAFE)};
  model->layers = layers;
  for (int i = 0; i <= layers; i++)
    model->width[i] = widths[rng_next(&rng) % G_N_ELEMENTS(widths)];
}

static gint64 weight_elements(const Model *model, int layer) {
  return (gint64)model->width[layer] * model->width[layer + 1];
}

/* ------------------------------------------------------------------------ */
/* The simulated machine                                                     */
/* ------------------------------------------------------------------------ */

/* An open CPU-side range (cpu_op, user_annotation or python_function): it is
 * written when it closes, because only then is its duration known. */
typedef struct {
  char name[128];
  const char *cat;
  gint64 start;
  gint64 external_id; /* what runtime calls inside it refer to */
  gint64 python_id;   /* of the innermost python_function, itself included */
  GString *args;
  gboolean has_children;
} Scope;

typedef struct {
  int tid;
  gint64 now;
  int depth;
  Scope stack[MAX_DEPTH];
} CpuThread;

typedef struct {
  int id;
  gint64 free_at; /* end of the last task, or of an event it must wait for */
} Stream;

/* The all-reduces of a job of several ranks (--ranks): collective k ends
 * at end[k] on every rank.  Each pass over the ranks records when each
 * rank's kernel k started; the next pass's end[k] is the latest of those
 * plus the transfer. */
typedef struct {
  gint64 *end;        /* per collective: when it ends everywhere; 0: not known yet */
  gint64 *latest;     /* per collective: the latest start seen in this pass */
  gint64 *transfer;   /* per collective: what the last arriver's kernel takes */
  int count, capacity;
} Rendezvous;

typedef struct {
  Writer *out;
  const Model *model;
  Rendezvous *rendezvous; /* NULL: one rank, the other's kernels recorded as they happened */
  int next_collective;
  Rng rng;
  CpuThread main_thread;
  CpuThread autograd_thread;
  Stream compute;
  Stream nccl;
  gint64 next_external_id;
  gint64 kernels_emitted;
  gint64 next_correlation;
  gint64 next_sequence;
  gint64 next_python_id;
  gint64 latest; /* the latest moment anything ends: for the Trace span */
  gint64 grads_reduced_at; /* when the last all-reduce of the step ends */
  gint64 *forward_sequence; /* per layer: the sequence numbers of addmm, */
  gint64 *relu_sequence;    /* relu and t, which link to their backward */
  gint64 *transpose_sequence;
  gint64 *bmm_sequence;     /* attention layers: bmm and softmax */
  gint64 *softmax_sequence;
  gint64 loss_sequence;
  /* --profile-memory: the allocator's totals and the tensors alive */
  gint64 mem_allocated, mem_reserved, next_addr;
  gint64 *weight_addr;      /* per layer: weight, bias */
  gint64 *grad_addr;        /* per layer: weight and bias gradients, 0: None */
  gint64 *state_addr;       /* per layer: Adam's two states of weight, then of bias; 0: not yet */
  gint64 *kept_addr;        /* per layer: ReLU's output, kept for backward */
  gint64 input_addr, target_addr, loss_addr, linear_out_addr, grad_addr_in;
} Sim;

static gint64 random_us(Sim *sim, int low_us, int high_us) {
  return rng_between(&sim->rng, (gint64)low_us * 1000, (gint64)high_us * 1000);
}

static void note_time(Sim *sim, gint64 t) {
  if (t > sim->latest)
    sim->latest = t;
}

static void cpu_thread_init(CpuThread *thread, int tid, gint64 now) {
  thread->tid = tid;
  thread->now = now;
  thread->depth = 0;
  for (int i = 0; i < MAX_DEPTH; i++)
    thread->stack[i].args = g_string_sized_new(256);
}

static void cpu_thread_clear(CpuThread *thread) {
  for (int i = 0; i < MAX_DEPTH; i++)
    g_string_free(thread->stack[i].args, TRUE);
}

static Scope *innermost(CpuThread *thread) {
  return thread->depth ? &thread->stack[thread->depth - 1] : NULL;
}

/* CPU time that passes before a new call on a thread.  Python-level code
 * (inside annotations and modules) costs far more between calls than C++
 * dispatch inside an operator; the first child starts just after its
 * parent. */
static gint64 overhead_before_call(Sim *sim, CpuThread *thread) {
  Scope *parent = innermost(thread);
  if (!parent)
    return random_us(sim, 2, 10);
  if (!parent->has_children) {
    parent->has_children = TRUE;
    return random_us(sim, 1, 3);
  }
  if (strcmp(parent->cat, "cpu_op") != 0)
    return random_us(sim, 2, 30);
  return random_us(sim, 1, 4);
}

static Scope *cpu_open(Sim *sim, CpuThread *thread, const char *cat,
                       const char *name) {
  g_assert(thread->depth < MAX_DEPTH);
  thread->now += overhead_before_call(sim, thread);
  Scope *parent = innermost(thread);
  Scope *scope = &thread->stack[thread->depth++];
  g_strlcpy(scope->name, name, sizeof scope->name);
  scope->cat = cat;
  scope->start = thread->now;
  scope->has_children = FALSE;
  g_string_truncate(scope->args, 0);
  if (strcmp(cat, "python_function") == 0) {
    /* Python events carry Python ids, not an External id of their own. */
    scope->external_id = parent ? parent->external_id : 0;
    scope->python_id = sim->next_python_id++;
    g_string_append_printf(scope->args,
                           "\"Python parent id\": %" G_GINT64_FORMAT
                           ", \"Python id\": %" G_GINT64_FORMAT
                           ", \"Python thread\": 0",
                           parent ? parent->python_id : 0, scope->python_id);
  } else {
    scope->python_id = parent ? parent->python_id : 0;
    scope->external_id = sim->next_external_id++;
    put_key_int(scope->args, "\"External id\": ", scope->external_id);
  }
  return scope;
}

/* Appends to the args of the innermost open scope. */
G_GNUC_PRINTF(2, 3)
static void scope_args(Scope *scope, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  g_string_append_vprintf(scope->args, format, ap);
  va_end(ap);
}

static void cpu_close(Sim *sim, CpuThread *thread) {
  Scope *scope = innermost(thread);
  g_assert(scope);
  /* A leaf's own work, or the return path after the last child. */
  thread->now += scope->has_children ? random_us(sim, 1, 3) : random_us(sim, 2, 8);
  emit_complete(sim->out, scope->cat, scope->name, HOST_PID, thread->tid,
                scope->start, thread->now - scope->start, scope->args->str);
  note_time(sim, thread->now);
  thread->depth--;
}

/* CPU work with no events of its own (Python code, collation, ...). */
static void cpu_busy(Sim *sim, CpuThread *thread, int low_us, int high_us) {
  thread->now += random_us(sim, low_us, high_us);
  Scope *parent = innermost(thread);
  if (parent)
    parent->has_children = TRUE;
}

static void cpu_leaf(Sim *sim, CpuThread *thread, const char *name,
                     const char *dims) {
  Scope *op = cpu_open(sim, thread, "cpu_op", name);
  if (dims)
    scope_args(op, ", %s", dims);
  cpu_close(sim, thread);
}

/* ---- --profile-memory ---- */

#define RESERVE_GRANULE (G_GINT64_CONSTANT(2) << 20)

static void emit_memory(Sim *sim, CpuThread *thread, gint64 bytes, gint64 addr) {
  GString *out = event_begin(sim->out);
  g_string_append(out, "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\"");
  put_key_int(out, ", \"pid\": ", HOST_PID);
  put_key_int(out, ", \"tid\": ", thread->tid);
  g_string_append(out, ", \"ts\": ");
  put_time(out, thread->now + sim->out->clock_shift);
  put_key_int(out, ", \"args\": {\"Total Reserved\": ", sim->mem_reserved);
  put_key_int(out, ", \"Total Allocated\": ", sim->mem_allocated);
  put_key_int(out, ", \"Bytes\": ", bytes);
  put_key_int(out, ", \"Addr\": ", addr);
  g_string_append(out, ", \"Device Id\": 0, \"Device Type\": 1}}");
  event_end(sim->out);
}

/* A new tensor of `bytes` on the GPU; its address (0 without the option). */
static gint64 mem_alloc(Sim *sim, CpuThread *thread, gint64 bytes) {
  if (!sim->model->profile_memory) return 0;
  gint64 addr = sim->next_addr;
  sim->next_addr += (bytes + 511) / 512 * 512;
  sim->mem_allocated += bytes;
  gint64 reserved = (sim->mem_allocated + RESERVE_GRANULE - 1) / RESERVE_GRANULE * RESERVE_GRANULE;
  sim->mem_reserved = MAX(sim->mem_reserved, reserved);
  emit_memory(sim, thread, bytes, addr);
  return addr;
}

/* Free the tensor at *addr (nothing if 0) and forget it. */
static void mem_free(Sim *sim, CpuThread *thread, gint64 *addr, gint64 bytes) {
  if (!sim->model->profile_memory || *addr == 0) return;
  sim->mem_allocated -= bytes;
  emit_memory(sim, thread, -bytes, *addr);
  *addr = 0;
}

/* ---- runtime calls ---- */

typedef struct {
  gint64 start;
  gint64 correlation;
  gint64 external_id;
} RuntimeCall;

static RuntimeCall runtime_begin(Sim *sim, CpuThread *thread) {
  thread->now += overhead_before_call(sim, thread);
  Scope *parent = innermost(thread);
  RuntimeCall call = {thread->now, sim->next_correlation++,
                      parent ? parent->external_id : 0};
  return call;
}

static void runtime_end(Sim *sim, CpuThread *thread, const RuntimeCall *call,
                        const char *name, int cbid, gint64 end) {
  char args[128];
  g_snprintf(args, sizeof args,
             "\"External id\": %" G_GINT64_FORMAT ", \"cbid\": %d, "
             "\"correlation\": %" G_GINT64_FORMAT,
             call->external_id, cbid, call->correlation);
  thread->now = end;
  emit_complete(sim->out, "cuda_runtime", name, HOST_PID, thread->tid,
                call->start, end - call->start, args);
  note_time(sim, end);
}

/* ---- GPU tasks ---- */

/* A task starts once its stream is free (including any cross-stream wait
 * folded into free_at) and its launch has reached the GPU. */
static gint64 gpu_schedule(Sim *sim, Stream *stream, gint64 launched_at,
                           gint64 duration) {
  gint64 ready = stream->free_at + random_us(sim, 1, 2);
  gint64 arrived = launched_at + random_us(sim, 4, 8);
  gint64 start = MAX(ready, arrived);
  stream->free_at = start + duration;
  note_time(sim, stream->free_at);
  return start;
}

static void emit_launch_flows(Sim *sim, const RuntimeCall *call, int tid,
                              const Stream *stream, gint64 gpu_start) {
  emit_flow(sim->out, 's', "ac2g", call->correlation, HOST_PID, tid, call->start);
  emit_flow(sim->out, 'f', "ac2g", call->correlation, GPU_PID, stream->id,
            gpu_start);
}

typedef struct {
  const char *name;
  gint64 duration;
  int grid;  /* blocks in x; y and z are 1 */
  int block; /* threads in x */
  int registers;
  int shared_memory;
} Kernel;

static void emit_kernel(Sim *sim, const Kernel *kernel, const Stream *stream,
                        const RuntimeCall *call, gint64 start) {
  enum { SMS = 108, WARPS_PER_SM = 64 };
  double blocks_per_sm = (double)kernel->grid / SMS;
  double warps_per_sm = blocks_per_sm * ((kernel->block + 31) / 32);
  int occupancy = (int)MIN(100.0, 100.0 * warps_per_sm / WARPS_PER_SM);
  char args[512];
  g_snprintf(args, sizeof args,
             "\"External id\": %" G_GINT64_FORMAT ", \"queued\": 0, "
             "\"device\": 0, \"context\": 1, \"stream\": %d, "
             "\"correlation\": %" G_GINT64_FORMAT ", \"registers per thread\": "
             "%d, \"shared memory\": %d, \"blocks per SM\": %.6g, "
             "\"warps per SM\": %.6g, \"grid\": [%d, 1, 1], \"block\": "
             "[%d, 1, 1], \"est. achieved occupancy %%\": %d",
             call->external_id, stream->id, call->correlation,
             kernel->registers, kernel->shared_memory, blocks_per_sm,
             warps_per_sm, kernel->grid, kernel->block, occupancy);
  /* --unlike-rank: that rank runs another program, as a rank that logs or
   * a pipeline's other stage does (one name is enough to tell them apart) */
  gboolean unlike = sim->model->rank == sim->model->unlike_rank && sim->kernels_emitted++ == 0;
  emit_complete(sim->out, "kernel", unlike ? "rank_own_kernel" : kernel->name, GPU_PID, stream->id, start,
                kernel->duration, args);
}

static void launch_kernel(Sim *sim, CpuThread *thread, Stream *stream,
                          const Kernel *kernel) {
  RuntimeCall call = runtime_begin(sim, thread);
  gint64 start = gpu_schedule(sim, stream, call.start, kernel->duration);
  runtime_end(sim, thread, &call, "cudaLaunchKernel", CBID_LAUNCH_KERNEL,
              call.start + random_us(sim, 3, 8));
  emit_kernel(sim, kernel, stream, &call, start);
  emit_launch_flows(sim, &call, thread->tid, stream, start);
}

/* GEMM time grows with the weight size: about 40 us for 2048x2048 and 200 us
 * for 4096x4096 at this batch size, so forward and backward are GPU-bound. */
static Kernel gemm_kernel(Sim *sim, const char *name, int rows, int cols) {
  gint64 base = 40000 + 160000 * ((gint64)rows * cols) / (4096 * 4096);
  if (varying_hi > 0)
    base = GEMM_FIXED_NS + (base - GEMM_FIXED_NS) * BATCH / 64;
  gint64 jitter = base / 20;
  Kernel kernel = {name, rng_between(&sim->rng, base - jitter, base + jitter),
                   ((rows + 127) / 128) * ((BATCH + 63) / 64), 256, 126, 49152};
  return kernel;
}

/* Memory-bound elementwise work: 2 us plus up to 8 us for 16M elements, so
 * the optimizer's many small kernels leave it launch-bound. */
static Kernel elementwise_kernel(Sim *sim, const char *name, gint64 elements) {
  gint64 duration = 2000 + 8000 * MIN(elements, 4096 * 4096) / (4096 * 4096) +
                    rng_between(&sim->rng, 0, 300);
  int grid = (int)MIN((elements + 511) / 512, 65535);
  Kernel kernel = {name, duration, MAX(grid, 1), 128, 16, 0};
  return kernel;
}

/* A ring all-reduce over 2 ranks moves about the bucket's size at the bus
 * bandwidth (~200 GB/s over NVLink), after a fixed start-up cost. */
static Kernel all_reduce_kernel(Sim *sim, gint64 bytes) {
  gint64 duration = 15000 + bytes / 200 + rng_between(&sim->rng, 0, 2000);
  Kernel kernel = {KERNEL_NCCL_ALL_REDUCE, duration, 16, 512, 96, 42024};
  return kernel;
}

static Kernel all_reduce_kernel_shape(gint64 bytes) {
  Kernel kernel = {KERNEL_NCCL_ALL_REDUCE, 15000 + bytes / 200, 16, 512, 96, 42024};
  return kernel;
}

/* A job's all-reduce: it starts when this rank's stream and launch allow
 * and ends when the last rank's has started and the transfer is done. */
static void launch_collective(Sim *sim, CpuThread *thread, Stream *stream, gint64 bytes) {
  Rendezvous *r = sim->rendezvous;
  int k = sim->next_collective++;
  if (k >= r->capacity) {
    r->capacity = MAX(64, 2 * r->capacity);
    r->end = g_renew(gint64, r->end, r->capacity);
    r->latest = g_renew(gint64, r->latest, r->capacity);
    r->transfer = g_renew(gint64, r->transfer, r->capacity);
    for (int i = r->count; i < r->capacity; i++) r->end[i] = r->latest[i] = r->transfer[i] = 0;
  }
  r->count = MAX(r->count, k + 1);
  /* the same on every rank: from the size and the collective's number only */
  r->transfer[k] = 15000 + bytes / 200 + (gint64)((guint64)(k + 1) * 2654435761u % 2000);
  Kernel kernel = all_reduce_kernel_shape(bytes);
  RuntimeCall call = runtime_begin(sim, thread);
  gint64 start = gpu_schedule(sim, stream, call.start, 0);
  r->latest[k] = MAX(r->latest[k], start);
  kernel.duration = MAX(r->transfer[k], r->end[k] - start);
  stream->free_at = start + kernel.duration;
  note_time(sim, stream->free_at);
  runtime_end(sim, thread, &call, "cudaLaunchKernel", CBID_LAUNCH_KERNEL,
              call.start + random_us(sim, 3, 8));
  emit_kernel(sim, &kernel, stream, &call, start);
  emit_launch_flows(sim, &call, thread->tid, stream, start);
}

static void emit_memcpy(Sim *sim, const char *name, const Stream *stream,
                        const RuntimeCall *call, gint64 start, gint64 duration,
                        gint64 bytes) {
  char args[320];
  g_snprintf(args, sizeof args,
             "\"External id\": %" G_GINT64_FORMAT ", \"device\": 0, "
             "\"context\": 1, \"stream\": %d, \"correlation\": %" G_GINT64_FORMAT
             ", \"bytes\": %" G_GINT64_FORMAT
             ", \"memory bandwidth (GB/s)\": %.6g",
             call->external_id, stream->id, call->correlation, bytes,
             (double)bytes / (double)duration);
  emit_complete(sim->out, "gpu_memcpy", name, GPU_PID, stream->id, start,
                duration, args);
}

/* cudaMemcpyAsync; returns when the copy ends on the GPU. */
static gint64 copy_async(Sim *sim, CpuThread *thread, Stream *stream,
                         const char *name, gint64 bytes, gint64 bytes_per_us) {
  RuntimeCall call = runtime_begin(sim, thread);
  gint64 duration = 1500 + bytes * 1000 / bytes_per_us +
                    rng_between(&sim->rng, 0, 800);
  gint64 start = gpu_schedule(sim, stream, call.start, duration);
  runtime_end(sim, thread, &call, "cudaMemcpyAsync", CBID_MEMCPY_ASYNC,
              call.start + random_us(sim, 5, 12));
  emit_memcpy(sim, name, stream, &call, start, duration, bytes);
  emit_launch_flows(sim, &call, thread->tid, stream, start);
  return start + duration;
}

/* cudaStreamSynchronize: returns a little after the stream drains. */
static void synchronize_stream(Sim *sim, CpuThread *thread, const Stream *stream) {
  RuntimeCall call = runtime_begin(sim, thread);
  gint64 end = MAX(call.start + random_us(sim, 2, 4),
                   stream->free_at + random_us(sim, 1, 10));
  /* MAX draws its winner's random term twice, so the winner can fall a
   * few us short of the loser: a call would end before it began.  (Kept
   * as is otherwise, so that every seed still gives the trace it gave.) */
  if (end < call.start)
    end = call.start + 1000;
  runtime_end(sim, thread, &call, "cudaStreamSynchronize",
              CBID_STREAM_SYNCHRONIZE, end);
}

/* cudaEventRecord: the event fires when the work queued so far is done. */
static gint64 record_event(Sim *sim, CpuThread *thread, const Stream *stream) {
  RuntimeCall call = runtime_begin(sim, thread);
  runtime_end(sim, thread, &call, "cudaEventRecord", CBID_EVENT_RECORD,
              call.start + random_us(sim, 2, 4));
  return stream->free_at;
}

/* cudaStreamWaitEvent: later work on the stream starts after the event. */
static void wait_event(Sim *sim, CpuThread *thread, Stream *stream,
                       gint64 event_fires_at) {
  RuntimeCall call = runtime_begin(sim, thread);
  runtime_end(sim, thread, &call, "cudaStreamWaitEvent", CBID_STREAM_WAIT_EVENT,
              call.start + random_us(sim, 2, 4));
  stream->free_at = MAX(stream->free_at, event_fires_at);
}

/* ---- autograd links ---- */

/* A forward op that records an autograd node: gets a sequence number and
 * the source end of its fwdbwd flow. */
static gint64 mark_forward_node(Sim *sim, Scope *op, int tid) {
  gint64 sequence = sim->next_sequence++;
  scope_args(op, ", \"Sequence number\": %" G_GINT64_FORMAT, sequence);
  emit_flow(sim->out, 's', "fwdbwd", sequence, HOST_PID, tid, op->start);
  return sequence;
}

/* "autograd::engine::evaluate_function: NODE" enclosing NODE, linked back to
 * the forward op by the fwdbwd flow; both stay open for the node's work. */
static void open_backward_node(Sim *sim, const char *node, gint64 sequence) {
  CpuThread *thread = &sim->autograd_thread;
  char wrapper[128];
  g_snprintf(wrapper, sizeof wrapper, "autograd::engine::evaluate_function: %s",
             node);
  Scope *outer = cpu_open(sim, thread, "cpu_op", wrapper);
  Scope *inner = cpu_open(sim, thread, "cpu_op", node);
  if (sequence < 0)
    return; /* AccumulateGrad has no forward op */
  scope_args(outer, ", \"Sequence number\": %" G_GINT64_FORMAT
             ", \"Fwd thread id\": 1", sequence);
  scope_args(inner, ", \"Sequence number\": %" G_GINT64_FORMAT
             ", \"Fwd thread id\": 1", sequence);
  emit_flow(sim->out, 'f', "fwdbwd", sequence, HOST_PID, thread->tid,
            inner->start);
}

static void close_backward_node(Sim *sim) {
  cpu_close(sim, &sim->autograd_thread);
  cpu_close(sim, &sim->autograd_thread);
}

/* ------------------------------------------------------------------------ */
/* One training step                                                         */
/* ------------------------------------------------------------------------ */

static int input_width(const Sim *sim) { return sim->model->width[0]; }
static int output_width(const Sim *sim) {
  return sim->model->width[sim->model->layers];
}

/* The DataLoader collates a batch (inputs, targets) on the CPU: no GPU
 * work at all. */
static void load_batch(Sim *sim) {
  CpuThread *thread = &sim->main_thread;
  static const char list_dims[] =
      "\"Input Dims\": [[], []], \"Input type\": [\"TensorList\", \"Scalar\"]";
  cpu_open(sim, thread, "user_annotation",
           "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  cpu_busy(sim, thread, 60, 200);
  for (int tensor = 0; tensor < 2; tensor++) {
    Scope *stack = cpu_open(sim, thread, "cpu_op", "aten::stack");
    scope_args(stack, ", %s", list_dims);
    cpu_busy(sim, thread, 5, 15);
    cpu_leaf(sim, thread, "aten::cat", list_dims);
    cpu_close(sim, thread);
  }
  cpu_busy(sim, thread, 20, 80);
  cpu_close(sim, thread);
}

/* tensor.to("cuda") from pageable memory. */
static gint64 copy_to_device(Sim *sim, int features) {
  CpuThread *thread = &sim->main_thread;
  gint64 addr;
  char dims[160];
  g_snprintf(dims, sizeof dims,
             "\"Input Dims\": [[%d, %d], [], [], [], [], [], [], []]",
             BATCH, features);
  Scope *to = cpu_open(sim, thread, "cpu_op", "aten::to");
  scope_args(to, ", %s", dims);
  Scope *to_copy = cpu_open(sim, thread, "cpu_op", "aten::_to_copy");
  scope_args(to_copy, ", %s", dims);
  cpu_leaf(sim, thread, "aten::empty_strided", NULL);
  addr = mem_alloc(sim, thread, (gint64)BATCH * features * 4);
  Scope *copy = cpu_open(sim, thread, "cpu_op", "aten::copy_");
  scope_args(copy, ", \"Input Dims\": [[%d, %d], [%d, %d], []], \"Input type\":"
             " [\"float\", \"float\", \"Scalar\"]",
             BATCH, features, BATCH, features);
  copy_async(sim, thread, &sim->compute, "Memcpy HtoD (Pageable -> Device)",
             (gint64)BATCH * features * 4, 12000);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
  return addr;
}

static void zero_grad(Sim *sim) {
  CpuThread *thread = &sim->main_thread;
  cpu_open(sim, thread, "user_annotation", "Optimizer.zero_grad#Adam.zero_grad");
  cpu_busy(sim, thread, 10, 40);
  for (int layer = 0; layer < sim->model->layers; layer++) { /* set_to_none */
    gint64 out = sim->model->width[layer + 1];
    mem_free(sim, thread, &sim->grad_addr[2 * layer], weight_elements(sim->model, layer) * 4);
    mem_free(sim, thread, &sim->grad_addr[2 * layer + 1], out * 4);
  }
  cpu_close(sim, thread);
}

/* linear's weight.t(): views only, no GPU work. */
static void transpose_weight(Sim *sim, int layer) {
  CpuThread *thread = &sim->main_thread;
  int in = sim->model->width[layer], out = sim->model->width[layer + 1];
  Scope *t = cpu_open(sim, thread, "cpu_op", "aten::t");
  scope_args(t, ", \"Input Dims\": [[%d, %d]], \"Input type\": [\"float\"]",
             out, in);
  sim->transpose_sequence[layer] = mark_forward_node(sim, t, thread->tid);
  Scope *transpose = cpu_open(sim, thread, "cpu_op", "aten::transpose");
  scope_args(transpose, ", \"Input Dims\": [[%d, %d], [], []], \"Input type\":"
             " [\"float\", \"Scalar\", \"Scalar\"]", out, in);
  cpu_leaf(sim, thread, "aten::as_strided", NULL);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
}

/* A Linear layer's GEMM (aten::linear -> addmm), under `module`. */
static void forward_addmm(Sim *sim, int layer) {
  CpuThread *thread = &sim->main_thread;
  int in = sim->model->width[layer], out = sim->model->width[layer + 1];
  Scope *linear = cpu_open(sim, thread, "cpu_op", "aten::linear");
  scope_args(linear, ", \"Input Dims\": [[%d, %d], [%d, %d], [%d]], "
             "\"Input type\": [\"float\", \"float\", \"float\"]",
             BATCH, in, out, in, out);
  transpose_weight(sim, layer);
  Scope *addmm = cpu_open(sim, thread, "cpu_op", "aten::addmm");
  scope_args(addmm, ", \"Input Dims\": [[%d], [%d, %d], [%d, %d], [], []], "
             "\"Input type\": [\"float\", \"float\", \"float\", \"Scalar\", "
             "\"Scalar\"]", out, BATCH, in, in, out);
  sim->forward_sequence[layer] = mark_forward_node(sim, addmm, thread->tid);
  sim->linear_out_addr = mem_alloc(sim, thread, (gint64)BATCH * out * 4);
  Kernel gemm = gemm_kernel(sim, KERNEL_GEMM_FORWARD, out, in);
  launch_kernel(sim, thread, &sim->compute, &gemm);
  cpu_close(sim, thread); /* addmm */
  cpu_close(sim, thread); /* linear */
}

/* A 1x1 convolution with the same weights as a Linear layer. */
static void forward_conv(Sim *sim, int layer) {
  CpuThread *thread = &sim->main_thread;
  int in = sim->model->width[layer], out = sim->model->width[layer + 1];
  char dims[200];
  g_snprintf(dims, sizeof dims, ", \"Input Dims\": [[%d, %d, 1, 1], [%d, %d, 1, 1], [%d]], "
             "\"Input type\": [\"float\", \"float\", \"float\"]", BATCH, in, out, in, out);
  Scope *conv = cpu_open(sim, thread, "cpu_op", "aten::conv2d");
  scope_args(conv, "%s", dims);
  Scope *cudnn = cpu_open(sim, thread, "cpu_op", "aten::cudnn_convolution");
  scope_args(cudnn, "%s", dims);
  sim->forward_sequence[layer] = mark_forward_node(sim, cudnn, thread->tid);
  Kernel gemm = gemm_kernel(sim, KERNEL_CONV_FORWARD, out, in);
  launch_kernel(sim, thread, &sim->compute, &gemm);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
}

/* One small op with one kernel, linked to its backward by `sequence`. */
static void forward_op(Sim *sim, const char *op_name, const char *dims,
                       const Kernel *kernel, gint64 *sequence) {
  CpuThread *thread = &sim->main_thread;
  Scope *op = cpu_open(sim, thread, "cpu_op", op_name);
  scope_args(op, ", %s", dims);
  *sequence = mark_forward_node(sim, op, thread->tid);
  launch_kernel(sim, thread, &sim->compute, kernel);
  cpu_close(sim, thread);
}

/* Attention: the projection, scores = bmm(q, k), then their softmax. */
static void forward_attention(Sim *sim, int layer) {
  int out = sim->model->width[layer + 1], heads = out / 64;
  char dims[160];
  forward_addmm(sim, layer);
  g_snprintf(dims, sizeof dims, "\"Input Dims\": [[%d, %d, 64], [%d, 64, %d]], "
             "\"Input type\": [\"float\", \"float\"]", heads, BATCH, heads, BATCH);
  Kernel scores = gemm_kernel(sim, KERNEL_BMM, BATCH * 8, out);
  forward_op(sim, "aten::bmm", dims, &scores, &sim->bmm_sequence[layer]);
  g_snprintf(dims, sizeof dims, "\"Input Dims\": [[%d, %d, %d], [], []], "
             "\"Input type\": [\"float\", \"Scalar\", \"Scalar\"]", heads, BATCH, BATCH);
  Kernel softmax = elementwise_kernel(sim, KERNEL_SOFTMAX, (gint64)heads * BATCH * BATCH);
  forward_op(sim, "aten::softmax", dims, &softmax, &sim->softmax_sequence[layer]);
}

static const char *const module_names[LAYER_KINDS] = {"Linear", "Conv2d", "Attention"};

static void forward_layer(Sim *sim, int layer) {
  CpuThread *thread = &sim->main_thread;
  LayerKind kind = layer_kind(sim->model, layer);
  char module[64];
  g_snprintf(module, sizeof module, "nn.Module: %s_%d", module_names[kind], layer);
  cpu_open(sim, thread, "python_function", module);
  if (kind == LAYER_CONV)
    forward_conv(sim, layer);
  else if (kind == LAYER_ATTENTION)
    forward_attention(sim, layer);
  else
    forward_addmm(sim, layer);
  cpu_close(sim, thread); /* module */
}

static void forward_relu(Sim *sim, int layer) {
  CpuThread *thread = &sim->main_thread;
  int out = sim->model->width[layer + 1];
  char module[64];
  g_snprintf(module, sizeof module, "nn.Module: ReLU_%d", layer);
  cpu_open(sim, thread, "python_function", module);
  Scope *relu = cpu_open(sim, thread, "cpu_op", "aten::relu");
  scope_args(relu, ", \"Input Dims\": [[%d, %d]], \"Input type\": [\"float\"]",
             BATCH, out);
  sim->relu_sequence[layer] = mark_forward_node(sim, relu, thread->tid);
  Scope *clamp = cpu_open(sim, thread, "cpu_op", "aten::clamp_min");
  scope_args(clamp, ", \"Input Dims\": [[%d, %d], []], \"Input type\": "
             "[\"float\", \"Scalar\"]", BATCH, out);
  sim->kept_addr[layer] = mem_alloc(sim, thread, (gint64)BATCH * out * 4);
  Kernel kernel = elementwise_kernel(sim, KERNEL_RELU, (gint64)BATCH * out);
  launch_kernel(sim, thread, &sim->compute, &kernel);
  mem_free(sim, thread, &sim->linear_out_addr, (gint64)BATCH * out * 4);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
}

static void forward(Sim *sim) {
  CpuThread *thread = &sim->main_thread;
  cpu_open(sim, thread, "user_annotation", "DistributedDataParallel.forward");
  for (int layer = 0; layer < sim->model->layers; layer++) {
    forward_layer(sim, layer);
    forward_relu(sim, layer);
  }
  cpu_close(sim, thread);
}

static void compute_loss(Sim *sim) {
  CpuThread *thread = &sim->main_thread;
  int out = output_width(sim);
  cpu_open(sim, thread, "python_function", "nn.Module: MSELoss_0");
  Scope *mse = cpu_open(sim, thread, "cpu_op", "aten::mse_loss");
  scope_args(mse, ", \"Input Dims\": [[%d, %d], [%d, %d], []], \"Input type\":"
             " [\"float\", \"float\", \"Scalar\"]", BATCH, out, BATCH, out);
  sim->loss_sequence = mark_forward_node(sim, mse, thread->tid);
  sim->loss_addr = mem_alloc(sim, thread, 4);
  Kernel squares = elementwise_kernel(sim, KERNEL_MSE, (gint64)BATCH * out);
  launch_kernel(sim, thread, &sim->compute, &squares);
  Kernel mean = elementwise_kernel(sim, KERNEL_MEAN, (gint64)BATCH * out);
  mean.grid = 1;
  mean.block = 512;
  launch_kernel(sim, thread, &sim->compute, &mean);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
}

/* loss.item(): a blocking device-to-host copy, so the CPU waits here for
 * the whole forward pass to finish on the GPU. */
static void read_loss(Sim *sim) {
  CpuThread *thread = &sim->main_thread;
  Scope *item = cpu_open(sim, thread, "cpu_op", "aten::item");
  scope_args(item, ", \"Input Dims\": [[]], \"Input type\": [\"float\"]");
  Scope *dense = cpu_open(sim, thread, "cpu_op", "aten::_local_scalar_dense");
  scope_args(dense, ", \"Input Dims\": [[]], \"Input type\": [\"float\"]");
  copy_async(sim, thread, &sim->compute, "Memcpy DtoH (Device -> Pageable)", 4,
             4000);
  synchronize_stream(sim, thread, &sim->compute);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
}

/* backward() seeds the gradient with ones_like on the main thread. */
static void seed_gradient(Sim *sim) {
  CpuThread *thread = &sim->main_thread;
  Scope *ones = cpu_open(sim, thread, "cpu_op", "aten::ones_like");
  scope_args(ones, ", \"Input Dims\": [[], [], [], [], [], []]");
  cpu_leaf(sim, thread, "aten::empty_like", NULL);
  sim->grad_addr_in = mem_alloc(sim, thread, 4);
  Scope *fill = cpu_open(sim, thread, "cpu_op", "aten::fill_");
  scope_args(fill, ", \"Input Dims\": [[], []], \"Input type\": [\"float\", "
             "\"Scalar\"]");
  Kernel kernel = elementwise_kernel(sim, KERNEL_FILL, 1);
  launch_kernel(sim, thread, &sim->compute, &kernel);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
}

/* A backward node whose one operator (with Input Dims `dims`) launches one
 * elementwise kernel over `elements`. */
static void backward_elementwise(Sim *sim, const char *node, gint64 sequence,
                                 const char *op_name, const char *dims,
                                 const char *kernel_name, gint64 elements) {
  CpuThread *thread = &sim->autograd_thread;
  open_backward_node(sim, node, sequence);
  Scope *op = cpu_open(sim, thread, "cpu_op", op_name);
  scope_args(op, ", %s", dims);
  Kernel kernel = elementwise_kernel(sim, kernel_name, elements);
  launch_kernel(sim, thread, &sim->compute, &kernel);
  cpu_close(sim, thread);
  close_backward_node(sim);
}

static void backward_loss(Sim *sim) {
  int out = output_width(sim);
  char dims[160];
  g_snprintf(dims, sizeof dims, "\"Input Dims\": [[], [%d, %d], [%d, %d], []], "
             "\"Input type\": [\"float\", \"float\", \"float\", \"Scalar\"]",
             BATCH, out, BATCH, out);
  gint64 grad = mem_alloc(sim, &sim->autograd_thread, (gint64)BATCH * out * 4);
  backward_elementwise(sim, "MseLossBackward0", sim->loss_sequence, "aten::mse_loss_backward", dims,
                       KERNEL_MSE_BACKWARD, (gint64)BATCH * out);
  mem_free(sim, &sim->autograd_thread, &sim->grad_addr_in, 4);
  sim->grad_addr_in = grad;
}

static void backward_relu(Sim *sim, int layer) {
  int out = sim->model->width[layer + 1];
  char dims[160];
  g_snprintf(dims, sizeof dims, "\"Input Dims\": [[%d, %d], [%d, %d], []], \"Input type\": "
             "[\"float\", \"float\", \"Scalar\"]", BATCH, out, BATCH, out);
  CpuThread *thread = &sim->autograd_thread;
  gint64 grad = mem_alloc(sim, thread, (gint64)BATCH * out * 4);
  backward_elementwise(sim, "ReluBackward0", sim->relu_sequence[layer], "aten::threshold_backward", dims,
                       KERNEL_RELU_BACKWARD, (gint64)BATCH * out);
  mem_free(sim, thread, &sim->grad_addr_in, (gint64)BATCH * out * 4);
  mem_free(sim, thread, &sim->kept_addr[layer], (gint64)BATCH * out * 4); /* its last reader is done */
  sim->grad_addr_in = grad;
}

static void backward_mm(Sim *sim, const char *kernel_name, int m, int k, int n,
                        int weight_rows, int weight_cols) {
  CpuThread *thread = &sim->autograd_thread;
  Scope *mm = cpu_open(sim, thread, "cpu_op", "aten::mm");
  scope_args(mm, ", \"Input Dims\": [[%d, %d], [%d, %d]], \"Input type\": "
             "[\"float\", \"float\"]", m, k, k, n);
  Kernel gemm = gemm_kernel(sim, kernel_name, weight_rows, weight_cols);
  launch_kernel(sim, thread, &sim->compute, &gemm);
  cpu_close(sim, thread);
}

/* AddmmBackward0: grad of the input (not needed for the first layer), of
 * the weight, and of the bias. */
static void backward_linear(Sim *sim, int layer) {
  CpuThread *thread = &sim->autograd_thread;
  int in = sim->model->width[layer], out = sim->model->width[layer + 1];
  open_backward_node(sim, "AddmmBackward0", sim->forward_sequence[layer]);
  gint64 grad_input = 0;
  if (layer > 0) {
    cpu_leaf(sim, thread, "aten::t", NULL);
    grad_input = mem_alloc(sim, thread, (gint64)BATCH * in * 4);
    backward_mm(sim, KERNEL_GEMM_GRAD_INPUT, BATCH, out, in, out, in);
  }
  cpu_leaf(sim, thread, "aten::t", NULL);
  sim->grad_addr[2 * layer] = mem_alloc(sim, thread, weight_elements(sim->model, layer) * 4);
  backward_mm(sim, KERNEL_GEMM_GRAD_WEIGHT, in, BATCH, out, out, in);
  sim->grad_addr[2 * layer + 1] = mem_alloc(sim, thread, (gint64)out * 4);
  Scope *sum = cpu_open(sim, thread, "cpu_op", "aten::sum");
  scope_args(sum, ", \"Input Dims\": [[%d, %d], [], [], []], \"Input type\": "
             "[\"float\", \"ScalarList\", \"Scalar\", \"\"]", BATCH, out);
  Kernel reduce = elementwise_kernel(sim, KERNEL_SUM, (gint64)BATCH * out);
  launch_kernel(sim, thread, &sim->compute, &reduce);
  cpu_close(sim, thread);
  mem_free(sim, thread, &sim->grad_addr_in, (gint64)BATCH * out * 4);
  sim->grad_addr_in = grad_input;
  close_backward_node(sim);

  open_backward_node(sim, "TBackward0", sim->transpose_sequence[layer]);
  cpu_leaf(sim, thread, "aten::t", NULL);
  close_backward_node(sim);
}

/* ConvolutionBackward0: one call, grad of the input (not for the first
 * layer), of the weight and of the bias. */
static void backward_conv(Sim *sim, int layer) {
  CpuThread *thread = &sim->autograd_thread;
  int in = sim->model->width[layer], out = sim->model->width[layer + 1];
  open_backward_node(sim, "ConvolutionBackward0", sim->forward_sequence[layer]);
  Scope *op = cpu_open(sim, thread, "cpu_op", "aten::convolution_backward");
  scope_args(op, ", \"Input Dims\": [[%d, %d, 1, 1], [%d, %d, 1, 1], [%d, %d, 1, 1]], "
             "\"Input type\": [\"float\", \"float\", \"float\"]", BATCH, out, BATCH, in, out, in);
  if (layer > 0) {
    Kernel dgrad = gemm_kernel(sim, KERNEL_CONV_DGRAD, out, in);
    launch_kernel(sim, thread, &sim->compute, &dgrad);
  }
  Kernel wgrad = gemm_kernel(sim, KERNEL_CONV_WGRAD, out, in);
  launch_kernel(sim, thread, &sim->compute, &wgrad);
  Kernel reduce = elementwise_kernel(sim, KERNEL_SUM, (gint64)BATCH * out);
  launch_kernel(sim, thread, &sim->compute, &reduce);
  cpu_close(sim, thread);
  close_backward_node(sim);
}

/* SoftmaxBackward0, then BmmBackward0 (the grads of both bmm inputs). */
static void backward_attention_scores(Sim *sim, int layer) {
  CpuThread *thread = &sim->autograd_thread;
  int out = sim->model->width[layer + 1], heads = out / 64;
  char dims[160];
  g_snprintf(dims, sizeof dims, "\"Input Dims\": [[%d, %d, %d], [%d, %d, %d], [], []]", heads, BATCH, BATCH,
             heads, BATCH, BATCH);
  backward_elementwise(sim, "SoftmaxBackward0", sim->softmax_sequence[layer], "aten::_softmax_backward_data",
                       dims, KERNEL_SOFTMAX_BACKWARD, (gint64)heads * BATCH * BATCH);
  open_backward_node(sim, "BmmBackward0", sim->bmm_sequence[layer]);
  for (int input = 0; input < 2; input++) {
    Scope *bmm = cpu_open(sim, thread, "cpu_op", "aten::bmm");
    scope_args(bmm, ", \"Input Dims\": [[%d, %d, %d], [%d, %d, 64]]", heads, BATCH, BATCH, heads, BATCH);
    Kernel gemm = gemm_kernel(sim, KERNEL_BMM, BATCH * 8, out);
    launch_kernel(sim, thread, &sim->compute, &gemm);
    cpu_close(sim, thread);
  }
  close_backward_node(sim);
}

static void backward_layer(Sim *sim, int layer) {
  LayerKind kind = layer_kind(sim->model, layer);
  if (kind == LAYER_CONV) {
    backward_conv(sim, layer);
    return;
  }
  if (kind == LAYER_ATTENTION)
    backward_attention_scores(sim, layer);
  backward_linear(sim, layer);
}

/* AccumulateGrad for a parameter whose .grad was set to None: it just
 * takes the incoming gradient, no GPU work. */
static void accumulate_grad(Sim *sim) {
  CpuThread *thread = &sim->autograd_thread;
  open_backward_node(sim, "torch::autograd::AccumulateGrad", -1);
  Scope *detach = cpu_open(sim, thread, "cpu_op", "aten::detach");
  scope_args(detach, ", \"Input Dims\": [[]], \"Input type\": [\"float\"]");
  cpu_leaf(sim, thread, "detach", NULL);
  cpu_close(sim, thread);
  close_backward_node(sim);
}

/* DDP's reducer when a bucket is full: scale the bucket, then all-reduce it
 * on the NCCL stream once the compute stream has produced it. */
static void all_reduce_bucket(Sim *sim, gint64 elements) {
  CpuThread *thread = &sim->autograd_thread;
  Scope *div = cpu_open(sim, thread, "cpu_op", "aten::div_");
  scope_args(div, ", \"Input Dims\": [[%" G_GINT64_FORMAT "], []], "
             "\"Input type\": [\"float\", \"Scalar\"]", elements);
  Kernel scale = elementwise_kernel(sim, KERNEL_DIV_SCALAR, elements);
  launch_kernel(sim, thread, &sim->compute, &scale);
  cpu_close(sim, thread);

  cpu_open(sim, thread, "cpu_op", "c10d::allreduce_");
  Scope *comms = cpu_open(sim, thread, "cpu_op", "record_param_comms");
  scope_args(comms, ", \"Collective name\": \"allreduce\", \"dtype\": "
             "\"Float\", \"In msg nelems\": %" G_GINT64_FORMAT
             ", \"Out msg nelems\": %" G_GINT64_FORMAT ", \"In split size\": "
             "[], \"Out split size\": [], \"Global rank start\": 0, "
             "\"Global rank stride\": 1, \"Group size\": %d",
             elements, elements, sim->model->world);
  if (sim->rendezvous)
    scope_args(comms, ", \"Process Group Name\": \"0\", \"Process Group "
               "Description\": \"default_pg\", \"Rank\": %d, \"Seq\": %d",
               sim->model->rank, sim->next_collective);
  gint64 bucket_ready = record_event(sim, thread, &sim->compute);
  wait_event(sim, thread, &sim->nccl, bucket_ready);
  cpu_open(sim, thread, "user_annotation", "nccl:all_reduce");
  if (sim->rendezvous) {
    launch_collective(sim, thread, &sim->nccl, elements * 4);
  } else {
    Kernel kernel = all_reduce_kernel(sim, elements * 4);
    launch_kernel(sim, thread, &sim->nccl, &kernel);
  }
  cpu_close(sim, thread);
  sim->grads_reduced_at = record_event(sim, thread, &sim->nccl);
  cpu_close(sim, thread);
  cpu_close(sim, thread);
}

/* The autograd engine's thread: nodes in reverse layer order, with an
 * all-reduce each time a bucket of layers has its gradients. */
static void run_autograd_engine(Sim *sim) {
  const Model *model = sim->model;
  gint64 bucket_elements = 0;
  backward_loss(sim);
  for (int layer = model->layers - 1; layer >= 0; layer--) {
    backward_relu(sim, layer);
    backward_layer(sim, layer);
    accumulate_grad(sim); /* weight */
    accumulate_grad(sim); /* bias */
    bucket_elements += weight_elements(model, layer) + model->width[layer + 1];
    int done_in_bucket = model->layers - layer;
    if (!model->single_gpu && (done_in_bucket % LAYERS_PER_BUCKET == 0 || layer == 0)) {
      all_reduce_bucket(sim, bucket_elements);
      bucket_elements = 0;
    }
  }
}

/* The main thread blocks in autograd::backward while the autograd thread
 * runs the graph, and resumes shortly after that thread's last call. */
static void backward(Sim *sim) {
  CpuThread *main_thread = &sim->main_thread;
  CpuThread *engine = &sim->autograd_thread;
  seed_gradient(sim);
  Scope *call = cpu_open(sim, main_thread, "cpu_op", "autograd::backward");
  engine->now = MAX(engine->now, call->start + random_us(sim, 10, 40));
  run_autograd_engine(sim);
  main_thread->now = engine->now + random_us(sim, 5, 20);
  call->has_children = TRUE; /* it waited; no extra leaf time */
  cpu_close(sim, main_thread);
}

/* DDP makes the compute stream wait for the last all-reduce before the
 * optimizer may read the averaged gradients. */
static void wait_for_gradients(Sim *sim) {
  CpuThread *thread = &sim->main_thread;
  cpu_open(sim, thread, "user_annotation", "ddp::wait_all_reduce");
  wait_event(sim, thread, &sim->compute, sim->grads_reduced_at);
  cpu_close(sim, thread);
}

typedef struct {
  const char *op;
  const char *kernel;
  int tensors;
  int scalars;
} AdamOp;

#define TENSOR_KERNEL(name, arrays)                                           \
  ELEMENTWISE_KERNEL("at::native::" name "<float>", arrays)

/* Adam's single-tensor path, per parameter, after the step count update. */
static const AdamOp ADAM_OPS[] = {
    {"aten::lerp_", TENSOR_KERNEL("lerp_kernel_scalar_weight", 3), 2, 1},
    {"aten::mul_", TENSOR_KERNEL("MulScalarFunctor", 2), 1, 1},
    {"aten::addcmul_", TENSOR_KERNEL("addcmul_cuda_kernel", 4), 3, 1},
    {"aten::sqrt", TENSOR_KERNEL("sqrt_kernel_cuda", 2), 1, 0},
    {"aten::div_", TENSOR_KERNEL("DivScalarFunctor", 2), 1, 1},
    {"aten::add_", TENSOR_KERNEL("CUDAFunctorOnSelf_add", 2), 1, 1},
    {"aten::addcdiv_", TENSOR_KERNEL("addcdiv_cuda_kernel", 4), 3, 1},
};

static void adam_op(Sim *sim, const AdamOp *spec, const char *shape,
                    gint64 elements) {
  CpuThread *thread = &sim->main_thread;
  Scope *op = cpu_open(sim, thread, "cpu_op", spec->op);
  scope_args(op, ", \"Input Dims\": [");
  for (int i = 0; i < spec->tensors + spec->scalars; i++)
    scope_args(op, "%s%s", i ? ", " : "", i < spec->tensors ? shape : "[]");
  scope_args(op, "], \"Input type\": [");
  for (int i = 0; i < spec->tensors + spec->scalars; i++)
    scope_args(op, "%s\"%s\"", i ? ", " : "", i < spec->tensors ? "float" : "Scalar");
  scope_args(op, "]");
  Kernel kernel = elementwise_kernel(sim, spec->kernel, elements);
  launch_kernel(sim, thread, &sim->compute, &kernel);
  cpu_close(sim, thread);
}

/* state: this parameter's two Adam states (allocated in the first step). */
static void adam_parameter(Sim *sim, const char *shape, gint64 elements, gint64 *state) {
  CpuThread *thread = &sim->main_thread;
  for (int s = 0; s < 2; s++)
    if (state[s] == 0) state[s] = mem_alloc(sim, thread, elements * 4);
  /* The step counter is a CPU tensor: no kernel. */
  cpu_leaf(sim, thread, "aten::add_",
           "\"Input Dims\": [[], [], []], \"Input type\": [\"float\", "
           "\"Scalar\", \"Scalar\"]");
  gint64 denominator = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(ADAM_OPS); i++) {
    if (strcmp(ADAM_OPS[i].op, "aten::sqrt") == 0) denominator = mem_alloc(sim, thread, elements * 4);
    adam_op(sim, &ADAM_OPS[i], shape, elements);
  }
  mem_free(sim, thread, &denominator, elements * 4);
}

static void optimizer_step(Sim *sim) {
  CpuThread *thread = &sim->main_thread;
  cpu_open(sim, thread, "user_annotation", "Optimizer.step#Adam.step");
  for (int layer = 0; layer < sim->model->layers; layer++) {
    int in = sim->model->width[layer], out = sim->model->width[layer + 1];
    char shape[32];
    g_snprintf(shape, sizeof shape, "[%d, %d]", out, in);
    adam_parameter(sim, shape, (gint64)out * in, &sim->state_addr[4 * layer]);
    g_snprintf(shape, sizeof shape, "[%d]", out);
    adam_parameter(sim, shape, out, &sim->state_addr[4 * layer + 2]);
  }
  cpu_close(sim, thread);
}

static void training_step(Sim *sim, int number) {
  CpuThread *thread = &sim->main_thread;
  char name[48];
  g_snprintf(name, sizeof name, "ProfilerStep#%d", number);
  cpu_open(sim, thread, "user_annotation", name);
  load_batch(sim);
  sim->input_addr = copy_to_device(sim, input_width(sim));
  sim->target_addr = copy_to_device(sim, output_width(sim));
  zero_grad(sim);
  forward(sim);
  compute_loss(sim);
  read_loss(sim);
  backward(sim);
  if (!sim->model->single_gpu)
    wait_for_gradients(sim);
  optimizer_step(sim);
  /* the loop drops this step's batch and loss */
  mem_free(sim, thread, &sim->loss_addr, 4);
  mem_free(sim, thread, &sim->input_addr, (gint64)BATCH * input_width(sim) * 4);
  mem_free(sim, thread, &sim->target_addr, (gint64)BATCH * output_width(sim) * 4);
  cpu_close(sim, thread);
}

/* ------------------------------------------------------------------------ */
/* The file around the steps                                                 */
/* ------------------------------------------------------------------------ */

static void write_header(Writer *w, const Model *model) {
  writer_text(w,
      "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\"id\": 0, "
      "\"name\": \"Synthetic GPU\", \"totalGlobalMem\": 85899345920, "
      "\"computeMajor\": 8, \"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, "
      "\"maxThreadsPerMultiprocessor\": 2048, \"regsPerBlock\": 65536, "
      "\"regsPerMultiprocessor\": 65536, \"warpSize\": 32, "
      "\"sharedMemPerBlock\": 49152, \"sharedMemPerMultiprocessor\": 167936, "
      "\"numSms\": 108, \"sharedMemPerBlockOptin\": 166912}\n  ],\n");
  if (!model->single_gpu) {
    GString *ranks = g_string_new(NULL);
    for (int r = 0; r < model->world; r++)
      g_string_append_printf(ranks, "%s%d", r ? ", " : "", r);
    GString *text = g_string_new(NULL);
    g_string_printf(text,
      "  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %d, "
      "\"world_size\": %d, \"pg_count\": 1, \"pg_config\": [{\"pg_name\": \"0\", "
      "\"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", "
      "\"pg_size\": %d, \"ranks\": [%s]}], \"nccl_version\": \"2.20.5\"},\n",
      model->rank, model->world, model->world, ranks->str);
    writer_text(w, text->str);
    g_string_free(text, TRUE);
    g_string_free(ranks, TRUE);
  }
  writer_text(w, "  \"traceEvents\": [");
}

static void write_thread_names(Writer *w, gint64 at) {
  static const struct {
    int pid, tid;
    const char *name;
  } threads[] = {
      {HOST_PID, MAIN_TID, "thread 1000 (python)"},
      {HOST_PID, AUTOGRAD_TID, "thread 1001 (pt_autograd_0)"},
      {GPU_PID, COMPUTE_STREAM, "stream 7 "},
      {GPU_PID, NCCL_STREAM, "stream 20 "},
  };
  char args[96];
  for (gsize i = 0; i < G_N_ELEMENTS(threads); i++) {
    g_snprintf(args, sizeof args, "\"name\": \"%s\"", threads[i].name);
    emit_metadata(w, "thread_name", threads[i].pid, threads[i].tid, at, args);
    g_snprintf(args, sizeof args, "\"sort_index\": %d", threads[i].tid);
    emit_metadata(w, "thread_sort_index", threads[i].pid, threads[i].tid, at, args);
  }
}

static void write_metadata(Writer *w, gint64 at) {
  emit_metadata(w, "process_name", HOST_PID, 0, at, "\"name\": \"python\"");
  emit_metadata(w, "process_labels", HOST_PID, 0, at, "\"labels\": \"CPU\"");
  emit_metadata(w, "process_sort_index", HOST_PID, 0, at, "\"sort_index\": 1000");
  emit_metadata(w, "process_name", GPU_PID, 0, at, "\"name\": \"python\"");
  emit_metadata(w, "process_labels", GPU_PID, 0, at, "\"labels\": \"GPU 0\"");
  emit_metadata(w, "process_sort_index", GPU_PID, 0, at,
                "\"sort_index\": 16777216");
  write_thread_names(w, at);
}

/* Kineto closes a trace with its profiler span and window markers; their
 * pids are strings, which a parser must accept. */
static void write_trace_span(Writer *w, gint64 start, gint64 end) {
  GString *out = event_begin(w);
  g_string_append(out, "{\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": ");
  put_time(out, start + w->clock_shift);
  g_string_append(out, ", \"dur\": ");
  put_time(out, end - start);
  g_string_append(out, ", \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\", "
                  "\"name\": \"PyTorch Profiler (0)\", \"args\": {\"Op count\": 0}}");
  out = event_begin(w);
  g_string_append(out, "{\"name\": \"Iteration Start: PyTorch Profiler\", "
                  "\"ph\": \"i\", \"s\": \"g\", \"pid\": \"Traces\", "
                  "\"tid\": \"Trace PyTorch Profiler\", \"ts\": ");
  put_time(out, start + w->clock_shift);
  g_string_append(out, "}");
  out = event_begin(w);
  g_string_append(out, "{\"name\": \"Record Window End\", \"ph\": \"i\", "
                  "\"s\": \"g\", \"pid\": \"\", \"tid\": \"\", \"ts\": ");
  put_time(out, end + 1000 + w->clock_shift);
  g_string_append(out, "}");
  event_end(w);
}

static void write_footer(Writer *w, int steps, int layers, gint64 seed) {
  GString *out = w->buf;
  g_string_append(out, "\n  ],\n  \"traceName\": ");
  char name[128];
  g_snprintf(name, sizeof name,
             "reverie-gentrace_seed%" G_GINT64_FORMAT "_steps%d_layers%d.pt.trace.json",
             seed, steps, layers);
  put_json_string(out, name);
  g_string_append(out, ",\n  \"displayTimeUnit\": \"ms\"\n}\n");
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                    */
/* ------------------------------------------------------------------------ */

static void sim_init(Sim *sim, Writer *out, const Model *model, gint64 seed,
                     gint64 entry_delay) {
  memset(sim, 0, sizeof *sim);
  sim->out = out;
  sim->model = model;
  sim->rng.state = (guint64)seed;
  gint64 start = TRACE_START_NS + random_us(sim, 0, 1000) + entry_delay;
  cpu_thread_init(&sim->main_thread, MAIN_TID, start);
  cpu_thread_init(&sim->autograd_thread, AUTOGRAD_TID, start);
  sim->compute.id = COMPUTE_STREAM;
  sim->nccl.id = NCCL_STREAM;
  sim->next_external_id = 1;
  sim->next_correlation = 135000;
  sim->next_sequence = 1;
  sim->next_python_id = 1;
  sim->latest = start;
  sim->forward_sequence = g_new0(gint64, model->layers);
  sim->relu_sequence = g_new0(gint64, model->layers);
  sim->transpose_sequence = g_new0(gint64, model->layers);
  sim->bmm_sequence = g_new0(gint64, model->layers);
  sim->softmax_sequence = g_new0(gint64, model->layers);
  sim->weight_addr = g_new0(gint64, 2 * model->layers);
  sim->grad_addr = g_new0(gint64, 2 * model->layers);
  sim->state_addr = g_new0(gint64, 4 * model->layers);
  sim->kept_addr = g_new0(gint64, model->layers);
  sim->next_addr = G_GINT64_CONSTANT(0x7f0000000000);
}

/* The model's parameters, on the GPU before the recorded window opens. */
static void allocate_weights(Sim *sim) {
  for (int layer = 0; layer < sim->model->layers; layer++) {
    sim->weight_addr[2 * layer] = mem_alloc(sim, &sim->main_thread, weight_elements(sim->model, layer) * 4);
    sim->weight_addr[2 * layer + 1] = mem_alloc(sim, &sim->main_thread, (gint64)sim->model->width[layer + 1] * 4);
  }
}

static void sim_clear(Sim *sim) {
  cpu_thread_clear(&sim->main_thread);
  cpu_thread_clear(&sim->autograd_thread);
  g_free(sim->forward_sequence);
  g_free(sim->relu_sequence);
  g_free(sim->transpose_sequence);
  g_free(sim->bmm_sequence);
  g_free(sim->softmax_sequence);
  g_free(sim->weight_addr);
  g_free(sim->grad_addr);
  g_free(sim->state_addr);
  g_free(sim->kept_addr);
}

/* An input length in [varying_lo, varying_hi]: log-normal around their
 * geometric mean with sigma 0.6 (sentence lengths in a corpus are skewed
 * to the right), clipped to the range.  Box-Muller on two draws. */
static int draw_length(Rng *rng) {
  double u1 = ((double)(rng_next(rng) >> 11) + 1.0) / 9007199254740993.0;
  double u2 = (double)(rng_next(rng) >> 11) / 9007199254740992.0;
  double normal = sqrt(-2.0 * log(u1)) * cos(2.0 * G_PI * u2);
  double median = sqrt((double)varying_lo * (double)varying_hi);
  double length = median * exp(0.6 * normal);
  return (int)CLAMP(length + 0.5, varying_lo, varying_hi);
}

/* Writes the whole trace; returns the number of events.  rendezvous is
 * NULL for one rank alone; entry_delay is when this rank enters the
 * recorded window, after the first. */
static guint64 generate(Writer *out, const Model *model, int steps, gint64 seed,
                        Rendezvous *rendezvous, gint64 entry_delay) {
  Sim sim;
  sim_init(&sim, out, model, seed, entry_delay);
  sim.rendezvous = rendezvous;
  gint64 trace_start = sim.main_thread.now - 500000;
  write_header(out, model);
  write_metadata(out, trace_start);
  allocate_weights(&sim);
  Rng lengths = {(guint64)seed ^ G_GUINT64_CONSTANT(0x1E9617F5)};
  for (int step = 1; step <= steps; step++) {
    if (varying_hi > 0)
      batch_size = draw_length(&lengths);
    training_step(&sim, step);
  }
  write_trace_span(out, trace_start, sim.latest);
  write_footer(out, steps, model->layers, seed);
  guint64 events = out->events;
  sim_clear(&sim);
  return events;
}

/* The event count is affine in the number of steps; two dry runs give it. */
static int steps_for_events(const Model *model, gint64 target, gint64 seed) {
  guint64 counts[2];
  for (int steps = 1; steps <= 2; steps++) {
    Writer *dry = writer_new();
    counts[steps - 1] = generate(dry, model, steps, seed, NULL, 0);
    writer_close(dry);
  }
  gint64 per_step = (gint64)(counts[1] - counts[0]);
  gint64 fixed = (gint64)counts[0] - per_step;
  gint64 steps = (target - fixed + per_step / 2) / per_step;
  return (int)CLAMP(steps, 1, G_MAXINT / 2);
}

typedef struct {
  char *output;
  int steps;
  int layers;
  gint64 events;
  gint64 seed;
  gboolean mixed;
  gboolean single_gpu;
  gboolean profile_memory;
  int batch;
  int ranks;            /* 0: one trace (rank 0 of 2); else a folder of this many */
  gint64 clock_skew_us; /* rank r's host clock is r times this ahead */
  gint64 entry_spread_us;
  char *lengths;        /* "LO..HI": each step's batch drawn from that range */
  int unlike_rank;      /* -1: every rank alike */
} Options;

/* ---- a job of several ranks ---- */

/* When rank r enters the recorded window after the first: its previous,
 * unrecorded step ended that much later (a fixed draw per seed and rank). */
static gint64 entry_delay(gint64 seed, int rank, gint64 spread_us) {
  Rng rng = {(guint64)seed * 7919u + (guint64)rank * 104729u + 1};
  for (int i = 0; i < 3; i++) rng_between(&rng, 0, 1);
  return spread_us > 0 ? rng_between(&rng, 0, spread_us * 1000) : 0;
}

static gint64 rank_seed(gint64 seed, int rank) { return seed + 1000 * (gint64)rank; }

/* Replays the ranks (writing nothing) until every collective's end stops
 * moving: pass i fixes at least the i-th collective. */
static void settle_rendezvous(Model *model, const Options *o, Rendezvous *r) {
  for (int pass = 0; pass < 100000; pass++) {
    for (int k = 0; k < r->count; k++) r->latest[k] = 0;
    for (int rank = 0; rank < o->ranks; rank++) {
      model->rank = rank;
      Writer *dry = writer_new();
      generate(dry, model, o->steps, rank_seed(o->seed, rank), r, entry_delay(o->seed, rank, o->entry_spread_us));
      writer_close(dry);
    }
    gboolean moved = FALSE;
    for (int k = 0; k < r->count; k++) {
      gint64 end = r->latest[k] + r->transfer[k];
      if (end != r->end[k]) moved = TRUE;
      r->end[k] = end;
    }
    if (!moved) return;
  }
}

static gboolean generate_job(Model *model, const Options *o, guint64 *events, GError **error) {
  if (g_mkdir_with_parents(o->output, 0755) != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot make %s: %s", o->output,
                g_strerror(errno));
    return FALSE;
  }
  Rendezvous r = {NULL, NULL, NULL, 0, 0};
  settle_rendezvous(model, o, &r);
  gboolean ok = TRUE;
  *events = 0;
  for (int rank = 0; rank < o->ranks && ok; rank++) {
    char *name = g_strdup_printf("rank%d.json.gz", rank);
    char *path = g_build_filename(o->output, name, NULL);
    Writer *out = writer_open(path, error);
    ok = out != NULL;
    if (ok) {
      out->clock_shift = rank * o->clock_skew_us * 1000;
      model->rank = rank;
      *events += generate(out, model, o->steps, rank_seed(o->seed, rank), &r,
                          entry_delay(o->seed, rank, o->entry_spread_us));
      ok = writer_close(out);
      if (!ok) g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO, "writing %s failed", path);
    }
    g_free(name);
    g_free(path);
  }
  g_free(r.end);
  g_free(r.latest);
  g_free(r.transfer);
  return ok;
}

static gboolean parse_options(int argc, char **argv, Options *options,
                              GError **error) {
  GOptionEntry entries[] = {
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &options->output,
       "Write the trace to FILE (\"-\" for stdout; gzip if it ends in .gz)",
       "FILE"},
      {"steps", 0, 0, G_OPTION_ARG_INT, &options->steps,
       "Number of training steps (default 3)", "N"},
      {"layers", 0, 0, G_OPTION_ARG_INT, &options->layers,
       "Number of Linear+ReLU layers (default 8)", "L"},
      {"events", 0, 0, G_OPTION_ARG_INT64, &options->events,
       "Choose the number of steps to write about N events (overrides --steps)",
       "N"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &options->seed,
       "Random seed: the same seed gives the same trace (default 1)", "S"},
      {"mixed-layers", 0, 0, G_OPTION_ARG_NONE, &options->mixed,
       "Layers of three kinds in turn: Linear, Conv2d (1x1), attention", NULL},
      {"single-gpu", 0, 0, G_OPTION_ARG_NONE, &options->single_gpu,
       "One GPU: no DDP all-reduce", NULL},
      {"profile-memory", 0, 0, G_OPTION_ARG_NONE, &options->profile_memory,
       "Write [memory] events as profile_memory=True does (Linear layers only)", NULL},
      {"batch", 0, 0, G_OPTION_ARG_INT, &options->batch,
       "Samples per step, in the shapes and memory sizes only (default 64)", "N"},
      {"ranks", 0, 0, G_OPTION_ARG_INT, &options->ranks,
       "Write every rank of an N-rank job: -o names a folder of rank<r>.json.gz", "N"},
      {"clock-skew-us", 0, 0, G_OPTION_ARG_INT64, &options->clock_skew_us,
       "With --ranks: rank r's host clock is r times this many us ahead (default 0)", "US"},
      {"entry-spread-us", 0, 0, G_OPTION_ARG_INT64, &options->entry_spread_us,
       "With --ranks: ranks enter the recorded window up to this many us apart (default 3000)", "US"},
      {"unlike-rank", 0, 0, G_OPTION_ARG_INT, &options->unlike_rank,
       "With --ranks: rank R's first kernel has a name the others' lack, so R runs another program "
       "(default -1: none)", "R"},
      {"lengths", 0, 0, G_OPTION_ARG_STRING, &options->lengths,
       "Each step's batch (a sequence model's input length) drawn from LO..HI, GEMM times following it",
       "LO..HI"},
      {NULL, 0, 0, 0, NULL, NULL, NULL},
  };
  GOptionContext *context = g_option_context_new("- write a synthetic Kineto trace");
  g_option_context_set_summary(context,
      "Writes a causally consistent PyTorch profiler trace of a small\n"
      "data-parallel training job (Linear+ReLU MLP, DDP over NCCL, Adam).");
  g_option_context_add_main_entries(context, entries, NULL);
  gboolean ok = g_option_context_parse(context, &argc, &argv, error);
  g_option_context_free(context);
  if (ok && argc > 1) {
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                "unexpected argument: %s", argv[1]);
    return FALSE;
  }
  if (ok && !options->output) {
    g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                        "missing -o FILE");
    return FALSE;
  }
  if (ok && (options->steps < 1 || options->layers < 1 ||
             options->layers > MAX_LAYERS || options->events < 0)) {
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                "need --steps >= 1, 1 <= --layers <= %d and --events >= 1",
                MAX_LAYERS);
    return FALSE;
  }
  if (ok && (options->batch < 1 || options->batch > 1000000)) {
    g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "need 1 <= --batch <= 1000000");
    return FALSE;
  }
  if (ok && options->profile_memory && options->mixed) {
    g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--profile-memory models Linear layers only: not with --mixed-layers");
    return FALSE;
  }
  if (ok && (options->ranks < 0 || options->ranks > 1024 || options->clock_skew_us < 0 ||
             options->clock_skew_us > 1000000000 || options->entry_spread_us < 0 ||
             options->entry_spread_us > 1000000000 || (options->ranks && options->single_gpu))) {
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                "need 0 <= --ranks <= 1024 (not with --single-gpu) and --clock-skew-us, "
                "--entry-spread-us from 0 to 1000000000");
    return FALSE;
  }
  if (ok && options->unlike_rank != -1 && (options->unlike_rank < 0 || options->unlike_rank >= options->ranks)) {
    g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--unlike-rank must be one of the --ranks");
    return FALSE;
  }
  if (ok && options->lengths &&
      (sscanf(options->lengths, "%d..%d", &varying_lo, &varying_hi) != 2 || varying_lo < 1 ||
       varying_hi < varying_lo || varying_hi > 1000000 || options->ranks || options->profile_memory)) {
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                "--lengths %s: need LO..HI with 1 <= LO <= HI <= 1000000 (not with --ranks or --profile-memory)",
                options->lengths);
    varying_lo = varying_hi = 0;
    return FALSE;
  }
  return ok;
}

int main(int argc, char **argv) {
  Options options = {NULL, 3, 8, 0, 1, FALSE, FALSE, FALSE, 64, 0, 0, 3000, NULL, -1};
  GError *error = NULL;
  /* Only the character set: numbers in the JSON must keep a '.' point. */
  setlocale(LC_CTYPE, "");
  if (!parse_options(argc, argv, &options, &error)) {
    g_printerr("reverie-gentrace: %s (try --help)\n", error->message);
    g_error_free(error);
    return 2;
  }
  static Model model; /* large: keep it off the stack */
  model_init(&model, options.layers, options.seed);
  model.mixed = options.mixed;
  model.single_gpu = options.single_gpu;
  model.profile_memory = options.profile_memory;
  batch_size = options.batch;
  model.rank = 0;
  model.world = options.ranks > 0 ? options.ranks : WORLD_SIZE;
  model.unlike_rank = options.unlike_rank;
  if (options.events > 0)
    options.steps = steps_for_events(&model, options.events, options.seed);
  if (options.ranks > 0) {
    guint64 written = 0;
    if (!generate_job(&model, &options, &written, &error)) {
      g_printerr("reverie-gentrace: %s\n", error->message);
      g_error_free(error);
      return 1;
    }
    g_printerr("reverie-gentrace: wrote %d ranks, %" G_GUINT64_FORMAT " events, %d steps, %d layers to %s\n",
               options.ranks, written, options.steps, options.layers, options.output);
    g_free(options.output);
    return 0;
  }

  Writer *out = writer_open(options.output, &error);
  if (!out) {
    g_printerr("reverie-gentrace: %s\n", error->message);
    g_error_free(error);
    return 1;
  }
  guint64 events = generate(out, &model, options.steps, options.seed, NULL, 0);
  if (!writer_close(out)) {
    g_printerr("reverie-gentrace: writing %s failed\n", options.output);
    return 1;
  }
  if (strcmp(options.output, "-") != 0)
    g_printerr("reverie-gentrace: wrote %" G_GUINT64_FORMAT
               " events, %d steps, %d layers to %s\n",
               events, options.steps, options.layers, options.output);
  g_free(options.output);
  return 0;
}
