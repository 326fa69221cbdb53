/* What maskd train --ranks passes on of mpirun's stderr (server/cli/mpirun_output.h), fed
** mpirun's real texts (Open MPI 4.1): a rank's lines come through as they are, also when
** read in pieces; mpirun's "Forwarding signal" notes and the boxes it prints after a rank
** failed or died are kept back and are no launch error; a launch error's box is kept back
** and said in one line (not enough slots; daemons that could not start, whose "This
** usually is caused by:" list is cut); a WARNING box is not taken for the reason; a
** partial line is shown when nothing more comes, unless it may become mpirun's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/cli/mpirun_output.h"
#include "tests/unit/check.h"

#define RULE "--------------------------------------------------------------------------\n"

/* Feeds text in pieces of `piece` bytes (0: at once) with the pipe ended after; what was
** forwarded into got (cap bytes), the diagnostic into diag. */
static void run(const char *text, size_t piece, char *got, size_t cap, char *diag, size_t dcap) {
  int fd[2];
  if (pipe(fd)) { perror("pipe"); exit(1); }
  MpirunOutput *o = malloc(sizeof *o);
  mpirun_output_init(o, fd[1]);
  size_t n = strlen(text);
  for (size_t i = 0; i < n;) {
    size_t k = piece && n - i > piece ? piece : n - i;
    mpirun_output_feed(o, text + i, k);
    i += k;
  }
  mpirun_output_flush(o, 1);
  snprintf(diag, dcap, "%s", mpirun_output_diagnostic(o));
  free(o);
  close(fd[1]);
  ssize_t r = read(fd[0], got, cap - 1);
  got[r > 0 ? r : 0] = '\0';
  close(fd[0]);
}

int main(void) {
  char got[8192], diag[512];
  const char *ranks = "run 1 \"d\": 20 steps\n2 ranks (global batch 2 x 8 x 1): rank 0 on vm, rank 1 on vm\n";
  for (size_t piece = 0; piece <= 7; piece += 7) {
    run(ranks, piece, got, sizeof got, diag, sizeof diag);
    check(!strcmp(got, ranks) && !diag[0], piece ? "rank_lines_in_pieces_forwarded" : "rank_lines_forwarded", "got '%s', diag '%s'", got, diag);
  }

  const char *failed = "maskd train: rank 0 on vm: train: no full batch\n" RULE
                       "Primary job  terminated normally, but 1 process returned\n"
                       "a non-zero exit code. Per user-direction, the job has been aborted.\n" RULE RULE
                       "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
                       "the job to be terminated. The first process to do so was:\n\n  Process name: [[15432,1],1]\n"
                       "  Exit code:    3\n" RULE "mpirun: Forwarding signal 10 to job\n" RULE
                       "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).\n" RULE;
  run(failed, 5, got, sizeof got, diag, sizeof diag);
  check(!strcmp(got, "maskd train: rank 0 on vm: train: no full batch\n") && !diag[0], "after_failure_boxes_kept_back",
        "got '%s', diag '%s'", got, diag);

  const char *slots = RULE "There are not enough slots available in the system to satisfy the 4\n"
                      "slots that were requested by the application:\n\n  /work/build/maskd\n\n"
                      "Either request fewer slots for your application, or make more slots\navailable for use.\n" RULE;
  run(slots, 0, got, sizeof got, diag, sizeof diag);
  check(!got[0] && !strcmp(diag, "there are not enough slots available in the system to satisfy the 4 slots that were "
                                 "requested by the application"),
        "not_enough_slots_said_in_one_line", "got '%s', diag '%s'", got, diag);

  const char *daemons = "ssh: Could not resolve hostname b: Name or service not known\n" RULE
                        "WARNING: An invalid value was given for oob_tcp_if_include. This\nvalue will be ignored.\n" RULE RULE
                        "ORTE was unable to reliably start one or more daemons.\nThis usually is caused by:\n\n"
                        "* not finding the required libraries and/or binaries on\n  one or more nodes.\n" RULE;
  run(daemons, 3, got, sizeof got, diag, sizeof diag);
  check(!strcmp(got, "ssh: Could not resolve hostname b: Name or service not known\n") &&
            !strcmp(diag, "ORTE was unable to reliably start one or more daemons."),
        "daemons_said_warning_skipped", "got '%s', diag '%s'", got, diag);

  /* A partial line: shown when nothing more comes, unless it may be mpirun's own. */
  int fd[2];
  if (pipe(fd)) return 1;
  MpirunOutput *o = malloc(sizeof *o);
  mpirun_output_init(o, fd[1]);
  mpirun_output_feed(o, "epoch 1", 7);
  mpirun_output_flush(o, 0);
  mpirun_output_feed(o, "--------", 8);
  mpirun_output_flush(o, 0);
  mpirun_output_feed(o, "mpirun: Forw", 12);
  mpirun_output_flush(o, 0);
  close(fd[1]);
  ssize_t r = read(fd[0], got, sizeof got - 1);
  got[r > 0 ? r : 0] = '\0';
  close(fd[0]);
  free(o);
  check(!strcmp(got, "epoch 1"), "partial_line_shown_unless_mpiruns", "got '%s'", got);

  /* A box whose closing rule never came (mpirun killed while writing it, or a line of a
  ** remote daemon's that drew a rule alone) is not swallowed: its text comes out at the end. */
  char got2[1024], diag2[512];
  run("epoch 1\n" RULE "ORTE was unable to reliably start one or more daemons.\n", 0, got2, sizeof got2, diag2,
      sizeof diag2);
  check(!strcmp(got2, "epoch 1\nORTE was unable to reliably start one or more daemons.\n") && !diag2[0],
        "unclosed_box_shown_at_end", "got '%s', diag '%s'", got2, diag2);
  return check_exit();
}
