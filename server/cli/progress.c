#include "server/cli/progress.h"
#include "engine/core/now.h"

#include <math.h>
#include <stdarg.h>
#include <unistd.h>

#include "engine/core/platform.h"

void progress_init(Progress *p, FILE *f, int quiet, long first_step) {
  p->f = f;
  p->tty = isatty(fileno(f));
  p->quiet = quiet;
  p->drawn = 0;
  p->t0 = p->last = now_monotonic();
  p->interval = p->tty ? 0.2 : 10.0;
  p->step0 = first_step;
  p->ema = 0;
}

void progress_format_duration(char *buf, size_t cap, double s) {
  if (!(s >= 0) || !isfinite(s)) { snprintf(buf, cap, "?"); return; }
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
  else snprintf(buf, cap, "%lds", t);
}

void progress_step(Progress *p, int epoch, int epochs, long step, long total, double loss, double tps, double dt) {
  progress_step_rate(p, epoch, epochs, step, total, loss, tps, "tok/s", dt);
}

void progress_step_rate(Progress *p, int epoch, int epochs, long step, long total, double loss, double rate,
                        const char *unit, double dt) {
  /* The first step of a process pays for page faults and thread start-up; the EMA
  ** forgets it within a few dozen steps. */
  p->ema = p->ema == 0 ? dt : 0.95 * p->ema + 0.05 * dt;
  if (p->quiet) return;
  double now = now_monotonic();
  /* The first step of the process is always shown (a log then starts at once), and the last. */
  if (now - p->last < p->interval && step != total && step != p->step0 + 1) return;
  p->last = now;
  char eta[32], el[32];
  progress_format_duration(eta, sizeof eta, p->ema * (double)(total - step));
  progress_format_duration(el, sizeof el, now - p->t0);
  if (p->tty) {
    enum { W = 24 };
    char bar[W + 1];
    int fill = total > 0 ? (int)((double)W * (double)step / (double)total) : 0;
    for (int i = 0; i < W; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : '.';
    bar[W] = 0;
    fprintf(p->f, "\r\033[2Kepoch %d/%d [%s] %ld/%ld loss %.4f %.0f %s %s<%s", epoch + 1, epochs, bar, step, total,
            loss, rate, unit, el, eta);
    p->drawn = 1;
  } else {
    fprintf(p->f, "epoch %d/%d step %ld/%ld loss %.4f %.0f %s elapsed %s eta %s\n", epoch + 1, epochs, step, total,
            loss, rate, unit, el, eta);
  }
  fflush(p->f);
}

void progress_line(Progress *p, const char *fmt, ...) {
  if (p->quiet) return;
  if (p->drawn) { fprintf(p->f, "\r\033[2K"); p->drawn = 0; }
  va_list ap;
  va_start(ap, fmt);
  vfprintf(p->f, fmt, ap);
  va_end(ap);
  fputc('\n', p->f);
  fflush(p->f);
}

void progress_done(Progress *p) {
  if (p->quiet) return;
  if (p->drawn) { fputc('\n', p->f); p->drawn = 0; }
  fflush(p->f);
}
