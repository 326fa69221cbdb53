/* A training run's stop signals: see run_stop.h. */
#include "server/cli/run_stop.h"

#include <string.h>

volatile sig_atomic_t run_stop_signal;

static const int stop_signals[4] = {SIGINT, SIGTERM, SIGUSR1, SIGUSR2};

static void on_stop(int sig) { run_stop_signal = sig; }

void run_stop_install(void (*fn)(int), struct sigaction old[4]) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 4; i++) sigaction(stop_signals[i], &sa, old ? &old[i] : NULL);
}

void run_stop_catch(struct sigaction old[4]) { run_stop_install(on_stop, old); }

void run_stop_restore(const struct sigaction old[4]) {
  for (int i = 0; i < 4; i++) sigaction(stop_signals[i], &old[i], NULL);
}

const char *run_stop_name(int sig) { return sig == SIGINT || sig == SIGUSR2 ? "SIGINT" : "SIGTERM"; }
