/* What maskd train --ranks passes on of mpirun's standard error (mpirun_output.h). */
#include "server/cli/mpirun_output.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

void mpirun_output_init(MpirunOutput *o, int out) {
  memset(o, 0, sizeof *o);
  o->out = out;
}

static void put(MpirunOutput *o, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(o->out, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;   /* the terminal is gone: nothing else to do with the bytes */
    s += w;
    n -= (size_t)w;
  }
}

/* A box's rule: a line of dashes only (mpirun draws 74). */
static int is_rule(const char *s, size_t n) {
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
  if (n < 20) return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] != '-') return 0;
  return 1;
}

/* mpirun's note for each signal it passes on (the relay of a stop sends several). */
static const char forwarding[] = "mpirun: Forwarding signal";

/* The boxes that follow a rank's failure or death, or a host's loss during the run: not launch errors. */
static int after_launch(const char *box) {
  static const char *const said[] = {"Primary job", "mpirun detected that one or more processes",
                                     "mpirun noticed that process", "MPI_ABORT was invoked", "exited on signal",
                                     "has exited, but", "mpirun has exited due to process",
                                     /* a host lost while the ranks ran */
                                     "lost communication", "daemon has unexpectedly failed"};
  for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
    if (strstr(box, said[i])) return 1;
  return 0;
}

/* The box's first paragraph on one line; a closing "This usually is caused by:" (a list
** of guesses follows) is cut. */
static void summarise(MpirunOutput *o) {
  char *d = o->diagnostic;
  size_t cap = sizeof o->diagnostic, k = 0;
  int blank = 0;
  for (size_t i = 0; i < o->box_n && k + 1 < cap; i++) {
    char c = o->box[i];
    if (c == '\n') {
      if (i + 1 < o->box_n && o->box[i + 1] == '\n' && k > 0) break;   /* the paragraph ends */
      blank = k > 0;
      continue;
    }
    if (isspace((unsigned char)c)) { blank = k > 0; continue; }
    if (blank) { d[k++] = ' '; blank = 0; }
    if (k + 1 < cap) d[k++] = c;
  }
  d[k] = '\0';
  /* "...daemons. This usually is caused by:": the first sentence says it. */
  char *dot = k > 0 && d[k - 1] == ':' ? strrchr(d, '.') : NULL;
  if (dot && dot != d) dot[1] = '\0';
  if (k > 0 && d[strlen(d) - 1] == ':') d[strlen(d) - 1] = '\0';
  /* It follows "could not start N ranks: ": "There are not ..." reads "there are not ...". */
  if (isupper((unsigned char)d[0]) && islower((unsigned char)d[1])) d[0] = (char)tolower((unsigned char)d[0]);
}

static void end_line(MpirunOutput *o) {
  const char *s = o->line;
  size_t n = o->n;
  o->n = 0;
  if (is_rule(s, n)) {
    if (o->in_box) {   /* the box is complete */
      o->box[o->box_n < sizeof o->box ? o->box_n : sizeof o->box - 1] = '\0';
      /* A warning ("WARNING: An invalid value was given for oob_tcp_if_include") is not why. */
      if (!o->diagnostic[0] && !after_launch(o->box) && strncmp(o->box, "WARNING", 7)) summarise(o);
      o->box_n = 0;
    }
    o->in_box = !o->in_box;
    return;
  }
  if (o->in_box) {
    size_t room = sizeof o->box - 1 - o->box_n;
    if (n > room) n = room;
    memcpy(o->box + o->box_n, s, n);
    o->box_n += n;
    return;
  }
  if (n >= sizeof forwarding - 1 && !memcmp(s, forwarding, sizeof forwarding - 1)) return;
  put(o, s, n);
}

void mpirun_output_feed(MpirunOutput *o, const char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) {
    o->line[o->n++] = buf[i];
    if (buf[i] == '\n') end_line(o);
    else if (o->n == sizeof o->line - 1) {   /* no line of mpirun's is this long: a rank's */
      if (!o->in_box) put(o, o->line, o->n);
      o->n = 0;
    }
  }
}

/* At the end, a box whose closing rule never came is passed on as it is: it may be the
** only word of why (mpirun killed while writing it, or a rule of a remote daemon's). */
static void end_unclosed_box(MpirunOutput *o) {
  if (o->in_box && o->box_n > 0) put(o, o->box, o->box_n);
  o->in_box = 0;
  o->box_n = 0;
}

void mpirun_output_flush(MpirunOutput *o, int end) {
  if (end && o->n > 0) { o->line[o->n++] = '\n'; end_line(o); }
  if (end) { end_unclosed_box(o); return; }
  if (o->n == 0) return;
  /* A rank's prompt-like output without its newline yet is shown now; what may be a rule,
  ** a box's text or a note of mpirun's waits for its newline. */
  int maybe_mpirun = o->in_box || o->line[0] == '-' ||
                     !memcmp(o->line, forwarding, o->n < sizeof forwarding - 1 ? o->n : sizeof forwarding - 1);
  if (maybe_mpirun) return;
  put(o, o->line, o->n);
  o->n = 0;
}

const char *mpirun_output_diagnostic(const MpirunOutput *o) { return o->diagnostic; }
