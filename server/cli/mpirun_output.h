/* What maskd train --ranks passes on of mpirun's standard error. mpirun runs without -q
** (which kept its launch errors, "not enough slots", "unable to reliably start one or more
** daemons", from the user altogether): its stderr comes through a pipe to the launcher,
** which forwards the ranks' lines (and ssh's) as they come and keeps mpirun's own words
** back: its boxed messages (between lines of dashes) and its "Forwarding signal" notes.
** Of the boxes, those that say a rank failed or died ("Primary job terminated normally",
** "mpirun detected/noticed ...", MPI_ABORT) are dropped (the rank said why, or the
** launcher does); the first other one is a launch error, which the launcher turns into
** one line. */
#ifndef MASKD_MPIRUN_OUTPUT_H
#define MASKD_MPIRUN_OUTPUT_H
#include <stddef.h>

typedef struct MpirunOutput {
  int out;                 /* where forwarded bytes go (the launcher's stderr) */
  char line[4096];         /* the line being read (a longer one is forwarded in pieces) */
  size_t n;
  int in_box;              /* between a box's opening and closing rule */
  char box[4096];          /* the box being read, its lines joined by '\n' */
  size_t box_n;
  char diagnostic[512];    /* the first launch error's summary; "" when none */
} MpirunOutput;

/* Starts a filter that forwards to file descriptor out. */
void mpirun_output_init(MpirunOutput *o, int out);
/* Takes n bytes of mpirun's stderr: forwards whole lines that are not mpirun's own. */
void mpirun_output_feed(MpirunOutput *o, const char *buf, size_t n);
/* Forwards a partial line held back (no more bytes came for now, or the pipe ended),
** unless it may still become one of mpirun's own lines. end != 0: the pipe ended. */
void mpirun_output_flush(MpirunOutput *o, int end);
/* The first launch error mpirun reported, as one line (its first paragraph, blanks
** collapsed, "This usually is caused by:" and the like cut); "" when there was none. */
const char *mpirun_output_diagnostic(const MpirunOutput *o);

#endif
