/* A terminal progress line for long commands: epoch, step/total, a bar, loss, rate
** and ETA, redrawn in place at most a few times a second on a TTY; on a pipe or file
** a plain line every few seconds instead, so logs stay readable. */
#ifndef MASKD_PROGRESS_H
#define MASKD_PROGRESS_H
#include <stdio.h>

typedef struct Progress {
  FILE *f;
  int tty;               /* redraw in place */
  int quiet;             /* print nothing */
  int drawn;             /* a bar is on the screen (a permanent line must clear it first) */
  double t0, last;       /* start and last draw */
  double interval;       /* seconds between draws */
  long step0;            /* step at start (a resumed run's rate counts only its own steps) */
  double ema;            /* smoothed seconds per step */
} Progress;

/* Starts a progress display on f (TTY detected); quiet = print nothing. */
void progress_init(Progress *p, FILE *f, int quiet, long first_step);
/* Reports a step: draws when due (always at the last step); step_seconds feeds the ETA. */
void progress_step(Progress *p, int epoch, int epochs, long step, long total, double loss, double tokens_per_s,
                   double step_seconds);
/* The same with another rate: rate per second in unit ("ex/s" for examples). */
void progress_step_rate(Progress *p, int epoch, int epochs, long step, long total, double loss, double rate,
                        const char *unit, double step_seconds);
/* Prints a permanent line (clearing the bar first). */
void progress_line(Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends the display (a newline after a bar). */
void progress_done(Progress *p);
/* "1h02m", "3m05s", "12s" into buf. */
void progress_format_duration(char *buf, size_t cap, double seconds);

#endif
