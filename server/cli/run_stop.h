/* How a training run is asked to stop: SIGINT (Ctrl-C) and SIGTERM, and what mpirun
** passes on for them. A rank stops at the next step boundary with a checkpoint and the
** run "interrupted"; the launcher of --ranks relays the signal to mpirun (rank_launch.c).
** mpirun would kill the ranks on SIGINT/SIGTERM before they can checkpoint, but passes
** SIGUSR1 and SIGUSR2 on: the launcher sends SIGTERM as SIGUSR1 and SIGINT as SIGUSR2,
** so that the run records the signal the user sent (a Ctrl-C was stored as "stopped by
** SIGTERM"). */
#ifndef MASKD_RUN_STOP_H
#define MASKD_RUN_STOP_H
#include <signal.h>

/* The stop signal received (0: none yet); set by run_stop_catch's handler. */
extern volatile sig_atomic_t run_stop_signal;

/* Installs the recording handler for the four stop signals, saving the old actions into old when not NULL. */
void run_stop_catch(struct sigaction old[4]);
/* Installs fn for the four stop signals instead (the launcher's relay); old as run_stop_catch. */
void run_stop_install(void (*fn)(int), struct sigaction old[4]);
/* Puts back the actions run_stop_catch or run_stop_install saved. */
void run_stop_restore(const struct sigaction old[4]);
/* The signal the user sent, as a run's stop records it: "SIGINT" (Ctrl-C, or relayed as SIGUSR2), else "SIGTERM". */
const char *run_stop_name(int sig);

#endif
