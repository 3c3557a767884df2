/* progress.c — see progress.h. */
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/clock.h"

static double env_seconds(const char *name, double dflt) {
    const char *v = getenv(name);
    char *end;
    double d = v && *v ? strtod(v, &end) : -1;
    return v && *v && !*end && d >= 0 ? d : dflt;
}

void cli_progress_start(cli_progress *p, const char *label, const char *unit, double delay_s, int enabled) {
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->unit = unit;
    p->enabled = enabled;
    p->tty = isatty(STDERR_FILENO);
    p->delay_s = env_seconds("MTPLX_PROGRESS_DELAY", delay_s);
    p->interval_s = env_seconds("MTPLX_PROGRESS_INTERVAL", 5.0);
    p->t0 = clock_now();
}

/* "12.3 MB" (decimal units), or a plain count when the unit is not bytes. */
static void amount(const cli_progress *p, char *buf, size_t n, double v) {
    if (p->unit) {
        snprintf(buf, n, "%.0f", v);
        return;
    }
    const char *u[] = {"B", "kB", "MB", "GB", "TB"};
    int i = 0;
    while (v >= 1000 && i < 4) v /= 1000, i++;
    snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static void eta_text(char *buf, size_t n, double s) {
    if (s < 0 || s > 1e7) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s / 60 % 60);
}

/* Draw one line for the current state; final = the work ended. Bytes read "12.3 MB / 46.0 MB",
 * counts "512/1707 tok". */
static void draw(cli_progress *p, double now, int final) {
    double el = now - p->t0;
    double rate = el > 0 ? (double)p->done / el : 0;
    char d[32], t[32], r[48], e[16], amt[96];
    amount(p, d, sizeof d, (double)p->done);
    amount(p, t, sizeof t, (double)p->total);
    amount(p, r, sizeof r, rate);
    if (p->unit && rate < 10) snprintf(r, sizeof r, "%.1f", rate); /* "0.2 shards/s", not "0 shards/s" */
    const char *u = p->unit ? p->unit : "";
    if (p->total) snprintf(amt, sizeof amt, p->unit ? "%s/%s %s" : "%s / %s%s", d, t, u);
    else snprintf(amt, sizeof amt, p->unit ? "%s %s" : "%s%s", d, u);
    snprintf(r + strlen(r), sizeof r - strlen(r), "%s%s/s", p->unit ? " " : "", u);
    eta_text(e, sizeof e, rate > 0 && p->total >= p->done ? (double)(p->total - p->done) / rate : -1);
    if (final) eta_text(e, sizeof e, el); /* the last line says how long it took */
    double frac = p->total ? (double)p->done / (double)p->total : 0;
    if (frac > 1) frac = 1;
    if (p->tty) {
        char bar[25];
        int fill = (int)(frac * 24 + 0.5);
        for (int i = 0; i < 24; i++) bar[i] = i < fill ? '#' : '.';
        bar[24] = 0;
        if (p->total)
            fprintf(stderr, "\r%-8s [%s] %s %3.0f%%  %s  %s %s\033[K", p->label, bar, amt, frac * 100, r,
                    final ? "in" : "ETA", e);
        else
            fprintf(stderr, "\r%-8s %s  %s\033[K", p->label, amt, r);
        if (final) fputc('\n', stderr);
    } else if (final) {
        fprintf(stderr, "%s: done, %s in %.1f s (%s)\n", p->label, amt, el, r);
    } else if (p->total) {
        fprintf(stderr, "%s: %s (%.0f%%), %s, ETA %s\n", p->label, amt, frac * 100, r, e);
    } else {
        fprintf(stderr, "%s: %s, %s\n", p->label, amt, r);
    }
    fflush(stderr);
    p->shown = 1;
    p->last = now;
}

static void on_progress(void *user, uint64_t done, uint64_t total) {
    cli_progress *p = user;
    p->done = done;
    p->total = total;
    if (!p->enabled || p->finished) return;
    double now = clock_now();
    if (now - p->t0 < p->delay_s) return;
    if (total && done >= total) { /* the end: a final line now, not when the caller gets back */
        draw(p, now, 1);
        p->finished = 1;
        return;
    }
    double gap = p->tty ? 0.1 : p->interval_s;
    if (!p->shown || now - p->last >= gap) draw(p, now, 0);
}

progress_sink cli_progress_sink(cli_progress *p) { return (progress_sink){on_progress, p}; }

void cli_progress_finish(cli_progress *p, int ok) {
    if (!p->enabled || !p->shown || p->finished) return;
    p->finished = 1;
    if (ok) {
        if (p->total) p->done = p->total;
        draw(p, clock_now(), 1);
    } else if (p->tty) {
        fputc('\n', stderr);
    }
}
