/*
 * memory_records.c - the builder's pass that keeps what a trace's [memory]
 * events (profile_memory=True) recorded: per device and step, the highest
 * allocated and reserved totals and what was allocated before the step's
 * first event.  The events themselves are not kept: a real trace holds tens
 * of thousands, and memory.h needs only these figures.
 */
#include "build.h"
#include "reverie/checked.h"

typedef struct {
    int64_t begin_ns, end_ns;
    int32_t step;
} step_span;

static gint compare_spans(gconstpointer a, gconstpointer b)
{
    const step_span *x = a, *y = b;
    return (x->begin_ns > y->begin_ns) - (x->begin_ns < y->begin_ns);
}

/* The steps' recorded spans by begin, for step_of's binary search. */
static GArray *step_spans(const rv_graph *graph)
{
    GArray *spans = g_array_sized_new(FALSE, FALSE, sizeof(step_span), graph->steps->len);
    for (guint s = 0; s < graph->steps->len; s++) {
        const rv_step *step = &g_array_index(graph->steps, rv_step, s);
        step_span span = { step->recorded_begin_ns, step->recorded_end_ns, (int32_t)s };
        g_array_append_val(spans, span);
    }
    g_array_sort(spans, compare_spans);
    return spans;
}

/* The step whose recorded span holds ts: the latest to begin at or before
 * it, if ts is not past its end (a step's end includes its GPU tail, which
 * may overlap the next step's CPU work: the later step wins); -1 outside
 * every step. */
static int32_t step_of(const GArray *spans, int64_t ts)
{
    guint low = 0, high = spans->len;
    while (low < high) {
        guint mid = low + (high - low) / 2;
        if (g_array_index(spans, step_span, mid).begin_ns <= ts) low = mid + 1;
        else high = mid;
    }
    if (low == 0) return -1;
    const step_span *span = &g_array_index(spans, step_span, low - 1);
    return ts <= span->end_ns ? span->step : -1;
}

/* The key of a (device, step) pair: devices are below 4096 (event.c). */
static int64_t *pair_key(int32_t device, int32_t step)
{
    int64_t *key = g_new(int64_t, 1);
    *key = (int64_t)device << 32 | (uint32_t)(step + 1);
    return key;
}

typedef struct {
    int64_t ts_ns, bytes;
    guint order;   /* file order, for equal times */
} sample;

typedef struct {
    guint record;
    int64_t first_ts;
    GArray *samples;   /* sample, for the running sum of Bytes */
} pair_state;

static void pair_state_free(gpointer data)
{
    pair_state *state = data;
    g_array_unref(state->samples);
    g_free(state);
}

static gint compare_samples(gconstpointer a, gconstpointer b)
{
    const sample *x = a, *y = b;
    if (x->ts_ns != y->ts_ns) return x->ts_ns < y->ts_ns ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* The highest running sum of Bytes over the events in time order: what the
 * step allocated above what it started with.  Old profilers write Bytes
 * without totals, so this is the one figure every [memory] trace gives. */
static int64_t peak_above_start(GArray *samples)
{
    g_array_sort(samples, compare_samples);
    int64_t sum = 0, peak = 0;
    for (guint i = 0; i < samples->len; i++) {
        sum = rv_saturating_add(sum, g_array_index(samples, sample, i).bytes);
        peak = MAX(peak, sum);
    }
    return peak;
}

static rv_memory_record *record_for(rv_graph *graph, GHashTable *index, const rv_event *event, int32_t step,
                                    guint order, gboolean *earliest)
{
    int32_t device = (int32_t)event->device;
    int64_t ts = event->ts_ns, *key = pair_key(device, step);
    sample added = { ts, event->bytes, order };
    pair_state *state = g_hash_table_lookup(index, key);
    if (state != NULL) {
        g_free(key);
        *earliest = ts < state->first_ts;
        if (*earliest) state->first_ts = ts;
        g_array_append_val(state->samples, added);
        return &g_array_index(graph->memory, rv_memory_record, state->record);
    }
    rv_memory_record fresh = { -1, -1, -1, 0, 0, device, step, 0 };
    state = g_new(pair_state, 1);
    *state = (pair_state){ graph->memory->len, ts, g_array_new(FALSE, FALSE, sizeof(sample)) };
    g_array_append_val(state->samples, added);
    g_hash_table_insert(index, key, state);
    g_array_append_val(graph->memory, fresh);
    *earliest = TRUE;
    return &g_array_index(graph->memory, rv_memory_record, graph->memory->len - 1);
}

/* Events in file order are in time order per thread, not across threads:
 * the peak is a maximum and needs no order, but "before the first event"
 * must take the earliest one. */
void rv_build_memory(builder *b)
{
    GHashTable *index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, pair_state_free);
    GArray *spans = step_spans(b->graph);
    const GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        const rv_event *event = &g_array_index(events, rv_event, i);
        if (event->kind != RV_EV_MEMORY) continue;
        gboolean earliest = FALSE;
        rv_memory_record *record = record_for(b->graph, index, event, step_of(spans, event->ts_ns), i, &earliest);
        record->events++;
        record->peak_allocated = MAX(record->peak_allocated, event->total_allocated);
        record->peak_reserved = MAX(record->peak_reserved, event->total_reserved);
        if (earliest)
            record->allocated_before = event->total_allocated >= 0 ? MAX(event->total_allocated - event->bytes, 0) : -1;
    }
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, index);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        pair_state *state = value;
        g_array_index(b->graph->memory, rv_memory_record, state->record).peak_above_start =
            peak_above_start(state->samples);
    }
    g_array_unref(spans);
    g_hash_table_destroy(index);
}
