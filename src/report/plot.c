/*
 * plot.c - draw step times and breakdowns to SVG with cairo (plot.h).
 *
 * Layout in points: a title, the per-step panel, a legend, and the
 * mean-step-by-phase panel; or, for a sweep, one panel with its curve.  Scales are computed from the data; the y axis
 * gets round tick values in milliseconds.
 */
#include "reverie/plot.h"
#include "reverie/output.h"
#include "reverie/job.h"
#include "reverie/error.h"
#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <string.h>

#define WIDTH 960.0
#define HEIGHT 620.0
#define LEFT 70.0
#define RIGHT 20.0

typedef struct { double r, g, b; } colour;

static const colour split_colours[RV_SPLIT_COUNT] = {
    { 0.30, 0.45, 0.69 },  /* CPU only: blue */
    { 0.33, 0.66, 0.41 },  /* GPU only: green */
    { 0.77, 0.68, 0.40 },  /* overlap: olive */
    { 0.80, 0.80, 0.80 },  /* idle: grey */
};
static const colour phase_colours[RV_PHASE_COUNT] = {
    { 0.51, 0.45, 0.70 }, { 0.80, 0.73, 0.45 }, { 0.39, 0.71, 0.80 }, { 0.87, 0.52, 0.32 }, { 0.60, 0.60, 0.60 },
};
static const char *const split_labels[RV_SPLIT_COUNT] = { "CPU only", "GPU only", "CPU+GPU overlap", "idle" };

typedef struct {
    double x, y, width, height;  /* plotting area: y is the bottom (value 0) */
    double max_ms;
} panel;

static void set_colour(cairo_t *cr, colour c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

static void text_at(cairo_t *cr, double x, double y, double size, const char *text, double align)
{
    cairo_text_extents_t extents;
    cairo_set_font_size(cr, size);
    cairo_text_extents(cr, text, &extents);
    cairo_move_to(cr, x - align * extents.x_advance, y);
    cairo_show_text(cr, text);
}

/* A round tick step (1, 2 or 5 times a power of ten) giving about 5 ticks. */
static double tick_step(double max)
{
    double raw = max / 5.0, power = pow(10.0, floor(log10(raw > 0 ? raw : 1.0)));
    double scaled = raw / power;
    return (scaled <= 1 ? 1 : scaled <= 2 ? 2 : scaled <= 5 ? 5 : 10) * power;
}

static void draw_axis(cairo_t *cr, const panel *p, const char *unit)
{
    double step = tick_step(p->max_ms);
    cairo_set_line_width(cr, 0.5);
    for (double v = 0; v <= p->max_ms * 1.0001; v += step) {
        double y = p->y - v / p->max_ms * p->height;
        cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
        cairo_move_to(cr, p->x, y);
        cairo_line_to(cr, p->x + p->width, y);
        cairo_stroke(cr);
        char label[32];
        g_snprintf(label, sizeof label, "%g", v);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text_at(cr, p->x - 6, y + 4, 10, label, 1.0);
    }
    cairo_save(cr);
    cairo_translate(cr, p->x - 48, p->y - p->height / 2);
    cairo_rotate(cr, -G_PI / 2);
    text_at(cr, 0, 0, 11, unit, 0.5);
    cairo_restore(cr);
}

/* One stacked bar from the bottom of the panel; returns its top. */
static double stacked_bar(cairo_t *cr, const panel *p, double x, double width, const int64_t *parts,
                          const colour *colours, int count)
{
    double y = p->y;
    for (int i = 0; i < count; i++) {
        double h = parts[i] / 1e6 / p->max_ms * p->height;
        if (h <= 0) continue;
        set_colour(cr, colours[i]);
        cairo_rectangle(cr, x, y - h, width, h);
        cairo_fill(cr);
        y -= h;
    }
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    cairo_set_line_width(cr, 0.6);
    cairo_rectangle(cr, x, y, width, p->y - y);
    cairo_stroke(cr);
    return y;
}

static int64_t step_ns(const rv_step_breakdown *step) { return step->end_ns - step->begin_ns; }

/* A step's label under its group: "#12" of "ProfilerStep#12". */
static const char *step_name(const rv_graph *graph, guint s)
{
    if (graph->steps->len == 0) return "whole trace";
    const char *name = rv_strings_get(graph->strings, g_array_index(graph->steps, rv_step, s).name);
    const char *hash = strrchr(name, '#');
    return hash ? hash : name;
}

static void draw_steps(cairo_t *cr, const panel *p, const char *const *names, const rv_plot_run *runs, guint count)
{
    guint steps = runs[0].breakdown->steps->len;
    double group = p->width / steps, bar = MIN(60.0, group * 0.8 / count);
    gboolean values = bar >= 22;
    draw_axis(cr, p, "step time (ms)");
    for (guint s = 0; s < steps; s++) {
        double left = p->x + s * group + (group - bar * count) / 2;
        for (guint r = 0; r < count; r++) {
            const rv_step_breakdown *step = &g_array_index(runs[r].breakdown->steps, rv_step_breakdown, s);
            double top = stacked_bar(cr, p, left + r * bar, bar - 2, step->split_ns, split_colours, RV_SPLIT_COUNT);
            char text[32];
            cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
            if (values) {
                g_snprintf(text, sizeof text, "%.1f", step_ns(step) / 1e6);
                text_at(cr, left + r * bar + (bar - 2) / 2, top - 3, 9, text, 0.5);
            }
            if (bar >= 10) {
                g_snprintf(text, sizeof text, "%c", g_ascii_toupper(runs[r].label[0]));
                text_at(cr, left + r * bar + (bar - 2) / 2, p->y + 11, 9, text, 0.5);
            }
        }
        if (steps <= 24 || s % (steps / 12 + 1) == 0)
            text_at(cr, p->x + s * group + group / 2, p->y + 24, 10, names[s], 0.5);
    }
}

static void draw_legend(cairo_t *cr, double x, double y, const char *const *labels, const colour *colours, int count)
{
    for (int i = 0; i < count; i++) {
        set_colour(cr, colours[i]);
        cairo_rectangle(cr, x, y - 9, 12, 10);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        text_at(cr, x + 16, y, 11, labels[i], 0.0);
        cairo_text_extents_t extents;
        cairo_text_extents(cr, labels[i], &extents);
        x += 16 + extents.x_advance + 18;
    }
}

/* The mean step per run, stacked by phase. */
static void draw_phases(cairo_t *cr, const panel *p, const rv_plot_run *runs, guint count)
{
    draw_axis(cr, p, "mean step (ms)");
    double bar = MIN(90.0, p->width / count * 0.5);
    for (guint r = 0; r < count; r++) {
        const GArray *steps = runs[r].breakdown->steps;
        int64_t parts[RV_PHASE_COUNT] = { 0 }, total = 0;
        for (guint s = 0; s < steps->len; s++) {
            const rv_step_breakdown *step = &g_array_index(steps, rv_step_breakdown, s);
            for (int ph = 0; ph < RV_PHASE_COUNT; ph++)
                for (int k = 0; k < RV_SPLIT_COUNT; k++) parts[ph] += step->phase_split_ns[ph][k] / (int64_t)steps->len;
            total += step_ns(step);
        }
        double x = p->x + (r + 0.5) * p->width / count - bar / 2;
        double top = stacked_bar(cr, p, x, bar, parts, phase_colours, RV_PHASE_COUNT);
        char text[64];
        g_snprintf(text, sizeof text, "%.2f ms", steps->len ? total / 1e6 / steps->len : 0.0);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        text_at(cr, x + bar / 2, top - 4, 10, text, 0.5);
        text_at(cr, x + bar / 2, p->y + 14, 11, runs[r].label, 0.5);
    }
}

static double max_step_ms(const rv_plot_run *runs, guint count)
{
    double max = 0;
    for (guint r = 0; r < count; r++)
        for (guint s = 0; s < runs[r].breakdown->steps->len; s++)
            max = MAX(max, step_ns(&g_array_index(runs[r].breakdown->steps, rv_step_breakdown, s)) / 1e6);
    return max > 0 ? max * 1.12 : 1.0;
}

static void draw(cairo_t *cr, const char *title, const char *const *names, const rv_plot_run *runs, guint count)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, WIDTH / 2, 22, 14, title, 0.5);
    GString *runs_line = g_string_new(NULL);
    for (guint r = 0; r < count; r++)
        g_string_append_printf(runs_line, "%s%c = %s", r ? ",  " : "bars: ", g_ascii_toupper(runs[r].label[0]), runs[r].label);
    text_at(cr, WIDTH / 2, 40, 11, runs_line->str, 0.5);
    g_string_free(runs_line, TRUE);
    double max = max_step_ms(runs, count);
    panel steps = { LEFT, 330, WIDTH - LEFT - RIGHT, 270, max };
    draw_steps(cr, &steps, names, runs, count);
    draw_legend(cr, LEFT, 380, split_labels, split_colours, RV_SPLIT_COUNT);
    const char *phases[RV_PHASE_COUNT];
    for (int p = 0; p < RV_PHASE_COUNT; p++) phases[p] = rv_phase_name(p);
    panel phase = { LEFT, HEIGHT - 40, (WIDTH - LEFT - RIGHT) * 0.6, 170, max };
    draw_phases(cr, &phase, runs, count);
    draw_legend(cr, LEFT + phase.width + 30, HEIGHT - 190, phases, phase_colours, 1);
    for (int p = 1; p < RV_PHASE_COUNT; p++)
        draw_legend(cr, LEFT + phase.width + 30, HEIGHT - 190 + 20 * p, phases + p, phase_colours + p, 1);
}

/* ---- a sweep's curve ------------------------------------------------- */

typedef struct {
    const char *title, *x_label;
    const rv_plot_point *points;
    guint count;
    double baseline_ms;
} curve;

static double point_x(const panel *p, guint i, guint count)
{
    return count > 1 ? p->x + 10 + i * (p->width - 20) / (count - 1) : p->x + p->width / 2;
}

static void draw_baseline(cairo_t *cr, const panel *p, double baseline_ms)
{
    double y = p->y - baseline_ms / p->max_ms * p->height, dash[] = { 6.0, 4.0 };
    cairo_set_source_rgb(cr, 0.45, 0.45, 0.45);
    cairo_set_line_width(cr, 1.2);
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, p->x, y);
    cairo_line_to(cr, p->x + p->width, y);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    char text[64];
    g_snprintf(text, sizeof text, "baseline %.2f ms", baseline_ms);
    text_at(cr, p->x + p->width - 4, y - 5, 10, text, 1.0);
}

/* The line through the variants that ran, a dot on each, and every value
 * on the x axis (about a dozen when there are many). */
static void draw_points(cairo_t *cr, const panel *p, const curve *c)
{
    set_colour(cr, split_colours[0]);
    cairo_set_line_width(cr, 1.8);
    gboolean drawing = FALSE;
    for (guint i = 0; i < c->count; i++) {
        if (!c->points[i].ok) { drawing = FALSE; continue; }
        double x = point_x(p, i, c->count), y = p->y - c->points[i].predicted_ms / p->max_ms * p->height;
        if (drawing) cairo_line_to(cr, x, y);
        else cairo_move_to(cr, x, y);
        drawing = TRUE;
    }
    cairo_stroke(cr);
    guint every = c->count / 12 + 1;
    for (guint i = 0; i < c->count; i++) {
        double x = point_x(p, i, c->count);
        if (c->points[i].ok) {
            set_colour(cr, split_colours[0]);
            cairo_arc(cr, x, p->y - c->points[i].predicted_ms / p->max_ms * p->height, 3.0, 0, 2 * G_PI);
            cairo_fill(cr);
        }
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        if (i % every == 0 || i == c->count - 1) text_at(cr, x, p->y + 16, 10, c->points[i].label, 0.5);
    }
}

static void draw_curve(cairo_t *cr, const curve *c)
{
    double max = c->baseline_ms;
    for (guint i = 0; i < c->count; i++)
        if (c->points[i].ok) max = MAX(max, c->points[i].predicted_ms);
    panel p = { LEFT, HEIGHT - 70, WIDTH - LEFT - RIGHT, HEIGHT - 140, max > 0 ? max * 1.12 : 1.0 };
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, WIDTH / 2, 22, 14, c->title, 0.5);
    draw_axis(cr, &p, "predicted time of all steps (ms)");
    draw_baseline(cr, &p, c->baseline_ms);
    draw_points(cr, &p, c);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, p.x + p.width / 2, p.y + 40, 11, c->x_label, 0.5);
}

/* ---- writing ----------------------------------------------------------- */

typedef void (*draw_fn)(cairo_t *cr, const void *data);

static cairo_status_t write_to_stream(void *file, const unsigned char *data, unsigned int length)
{
    return fwrite(data, 1, length, file) == length ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

typedef struct {
    draw_fn draw_it;
    const void *data;
} drawing;

static gboolean fill_svg(FILE *file, gpointer data, GError **error)
{
    const drawing *d = data;
    cairo_surface_t *surface = cairo_svg_surface_create_for_stream(write_to_stream, file, WIDTH, HEIGHT);
    cairo_t *cr = cairo_create(surface);
    d->draw_it(cr, d->data);
    cairo_destroy(cr);
    cairo_surface_finish(surface);
    cairo_status_t status = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (status == CAIRO_STATUS_SUCCESS) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "cannot draw the plot: %s", cairo_status_to_string(status));
    return FALSE;
}

/* Through the one writer (output.h): atomic, never over an input. */
static gboolean write_svg(const char *path, draw_fn draw_it, const void *data, GError **error)
{
    drawing d = { draw_it, data };
    return rv_output_write(path, RV_OUTPUT_REPLACE, fill_svg, &d, error);
}

typedef struct {
    const char *title;
    const char *const *names;   /* one per step drawn */
    const rv_plot_run *runs;
    guint count;
} steps_plot;

static void draw_steps_plot(cairo_t *cr, const void *data)
{
    const steps_plot *plot = data;
    draw(cr, plot->title, plot->names, plot->runs, plot->count);
}

/* ---- a job of several ranks ------------------------------------------- */

/* The job's k-th step is as long as its slowest rank's k-th (report.h's
 * rv_job_step_times): the step, of all ranks' k-th, whose window is the
 * longest in this run; -1 past the last step any rank has. */
static int32_t slowest_kth_step(const rv_graph *graph, const rv_breakdown *breakdown, guint k)
{
    guint ranks = rv_graph_rank_count(graph);
    guint *seen = g_new0(guint, ranks + 1);
    int32_t best = -1;
    for (guint s = 0; s < graph->steps->len && s < breakdown->steps->len; s++) {
        int32_t rank = rv_task_rank_index(graph, &g_array_index(graph->tasks, rv_task,
                                                                g_array_index(graph->steps, rv_step, s).begin_marker));
        guint slot = rank >= 0 && (guint)rank < ranks ? (guint)rank : ranks;
        if (seen[slot]++ != k) continue;
        if (best < 0 || step_ns(&g_array_index(breakdown->steps, rv_step_breakdown, s)) >
                            step_ns(&g_array_index(breakdown->steps, rv_step_breakdown, best)))
            best = (int32_t)s;
    }
    g_free(seen);
    return best;
}

/* Each run's breakdowns of the job's steps (the slowest rank's each time,
 * copied by value: use_ns stays the run's), and the steps' labels. */
static guint job_view(const rv_graph *graph, const rv_plot_run *runs, guint count, rv_breakdown *views,
                      GPtrArray *names)
{
    guint steps = 0;
    for (guint r = 0; r < count; r++) {
        views[r] = (rv_breakdown){ runs[r].breakdown->resource_count, g_array_new(FALSE, TRUE, sizeof(rv_step_breakdown)) };
        for (guint k = 0;; k++) {
            int32_t s = slowest_kth_step(graph, runs[r].breakdown, k);
            if (s < 0) break;
            g_array_append_val(views[r].steps, g_array_index(runs[r].breakdown->steps, rv_step_breakdown, s));
            if (r == 0) g_ptr_array_add(names, (gpointer)step_name(graph, (guint)s));
        }
        steps = r == 0 ? views[r].steps->len : MIN(steps, views[r].steps->len);
    }
    for (guint r = 0; r < count; r++) g_array_set_size(views[r].steps, steps);
    return steps;
}

static void draw_curve_plot(cairo_t *cr, const void *data)
{
    draw_curve(cr, data);
}

gboolean rv_plot_write_svg(const char *path, const char *title, const rv_graph *graph, const rv_plot_run *runs,
                           guint count, GError **error)
{
    if (count == 0 || runs[0].breakdown->steps->len == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: nothing to plot (no steps)", path);
        return FALSE;
    }
    count = MIN(count, 3);
    GPtrArray *names = g_ptr_array_new();
    rv_breakdown views[3];
    rv_plot_run job_runs[3];
    if (rv_graph_rank_count(graph) > 1) {
        /* one group per step of the job, as --json's steps list them */
        job_view(graph, runs, count, views, names);
        for (guint r = 0; r < count; r++) job_runs[r] = (rv_plot_run){ runs[r].label, &views[r] };
    } else {
        for (guint s = 0; s < runs[0].breakdown->steps->len; s++) g_ptr_array_add(names, (gpointer)step_name(graph, s));
    }
    steps_plot plot = { title, (const char *const *)names->pdata, rv_graph_rank_count(graph) > 1 ? job_runs : runs, count };
    gboolean ok = names->len > 0 ? write_svg(path, draw_steps_plot, &plot, error) : FALSE;
    if (names->len == 0) g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: nothing to plot (no step every rank has)", path);
    for (guint r = 0; rv_graph_rank_count(graph) > 1 && r < count; r++) g_array_unref(views[r].steps);
    g_ptr_array_unref(names);
    return ok;
}

gboolean rv_plot_curve_svg(const char *path, const char *title, const char *x_label, const rv_plot_point *points,
                           guint count, double baseline_ms, GError **error)
{
    guint ok = 0;
    for (guint i = 0; i < count; i++) ok += points[i].ok;
    if (ok == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_INPUT, "%s: nothing to plot (no variant ran)", path);
        return FALSE;
    }
    curve c = { title, x_label, points, count, baseline_ms };
    return write_svg(path, draw_curve_plot, &c, error);
}
