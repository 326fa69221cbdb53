/* `maskd train --ranks N` (or --hosts / --hostfile) without mpirun: the launcher that
** runs the same command under Open MPI's mpirun and stays between it and the user. It
** checks the hosts first (each resolves, one is this machine, where the store is), relays
** stops (run_stop.h) and job control (Ctrl-Z, fg) to the ranks, passes mpirun's stderr
** through mpirun_output (its launch errors as one line, its boxes after a rank's own
** line held back), and after a rank's death marks the run interrupted, ready to resume. */
#ifndef MASKD_RANK_LAUNCH_H
#define MASKD_RANK_LAUNCH_H
#include "engine/train/run_config.h"

/* Runs `maskd` argv (argv[0] "train") under mpirun with rc's ranks and hosts (hostfile:
** mpirun's --hostfile, or NULL; ranks_given: --ranks was on the command line) and waits
** for it; db_path is the store whose run (resumed: its id; 0: a new run, rc's name) is
** recovered when the ranks die. Returns the
** exit status to give: mpirun's, 130 for a stop, 2 for refused hosts, 1 when it cannot start. */
int rank_launch(const RunConfig *rc, int64_t resumed, const char *db_path, const char *hostfile, int ranks_given, int argc,
                char **argv);

#endif
