/* The launcher of a multi-rank run: see rank_launch.h. */
#include "server/cli/rank_launch.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/now.h"
#include "engine/dist/dist.h"
#include "server/app/host_names.h"
#include "server/cli/mpirun_output.h"
#include "server/cli/run_stop.h"
#include "store/store.h"

/* Job control for the ranks: mpirun runs in a process group of its own (a terminal's Ctrl-C
** reaches the launcher alone, which relays it), so a Ctrl-Z stopped the launcher and left
** mpirun and the ranks training. SIGTSTP is passed to mpirun, which stops every rank (it
** runs with orte_forward_job_control: SIGTSTP goes on as SIGSTOP, SIGCONT as SIGCONT),
** before the launcher stops itself; a SIGCONT to the launcher (fg, bg, kill -CONT) goes on. */
static volatile pid_t launched_mpirun;
static void relay_job_control(int sig) {
  int saved = errno;
  if (launched_mpirun > 0) kill(launched_mpirun, sig);
  if (sig == SIGTSTP) raise(SIGSTOP);   /* returns once continued; SIGCONT's handler relays that */
  errno = saved;
}

/* Waits up to ms for mpirun's stderr (fd, while open) and passes what came through out
** (NULL: as it is); returns whether the pipe is still open. */
static int pass_stderr(int fd, MpirunOutput *out, int open, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  if (!open || poll(&p, 1, ms) <= 0) {
    if (!open) { struct timespec pause = {0, (long)ms * 1000000L}; nanosleep(&pause, NULL); }
    else if (out) mpirun_output_flush(out, 0);   /* quiet for now: a partial line may be shown */
    return open;
  }
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return 0;
  if (out) mpirun_output_feed(out, buf, (size_t)n);
  else if (write(2, buf, (size_t)n) < 0) return 1;
  return 1;
}

/* (launched_mpirun: the launcher's mpirun, for the stop relay too.) */
static volatile sig_atomic_t relayed;      /* stop requests passed on so far */
static volatile sig_atomic_t relay_as;     /* what the first was passed on as: SIGUSR1 or SIGUSR2 */
static void relay_stop(int sig) {
  /* mpirun would answer SIGINT/SIGTERM by killing the ranks a second later, before they can
  ** push a checkpoint; it passes SIGUSR1 and SIGUSR2 on, which every rank takes as a stop
  ** request, of SIGTERM and of SIGINT (run_stop_name). */
  if (!relayed) relay_as = sig == SIGINT || sig == SIGUSR2 ? SIGUSR2 : SIGUSR1;
  if (launched_mpirun > 0) kill(launched_mpirun, relayed++ ? SIGTERM : relay_as);
}

/* 1 when the store holds the run (resumed: its id; 0: the newest of name, a new run)
** with the status "running" (neither known: it may be); 0 when it has ended or does not exist. */
static int left_running(Store *db, int64_t resumed, const char *name) {
  if (resumed <= 0 && !name[0]) return 1;
  Err e = {0};
  int64_t run = resumed > 0 ? resumed : store_run_find(db, name, &e);
  if (run <= 0) return 0;
  json_t *j = store_run_get(db, run, &e);
  const char *st = j ? json_string_value(json_object_get(j, "status")) : NULL;
  int running = !j || (st && !strcmp(st, "running"));
  json_decref(j);
  return running;
}

/* The hosts mpirun is given (--hosts, or a hostfile's names), checked before it starts:
** each must resolve, as mpirun and ssh will resolve it (a name that does not gave a vague
** message of mpirun's, then seconds of waiting for a rank 0 that never ran), and one of
** them must be this machine: rank 0 alone writes the store, which is here, and mpirun puts
** rank 0 on this machine when the hosts name it (wherever in the list), else on another
** host, whose store it would write. Says why in one line and returns 1 when not; else 0,
** with the hosts that are not this machine in remote (cap bytes, "a, b"; "" for none). */
static int hosts_check(const RunConfig *rc, const char *hostfile, char *remote, size_t cap) {
  char list[RUN_PATH_MAX], why[160];
  if (cap) remote[0] = '\0';
  if (!hostfile) snprintf(list, sizeof list, "%s", rc->hosts);
  else if (host_names_hostfile_list(hostfile, list, sizeof list)) {
    fprintf(stderr, "maskd train: --hostfile: %s: cannot read: %s\n", hostfile, strerror(errno));
    return 1;
  }
  int here = 0;
  for (const char *s = list; *s;) {
    size_t len = strcspn(s, ","), name = strcspn(s, ":,"), n = name < len ? name : len;
    int local = 0;
    if (host_names_lookup(s, n, &local, why, sizeof why)) {
      fprintf(stderr, "maskd train: host %.*s cannot be reached by mpirun: %s\n", (int)n, s, why);
      return 1;
    }
    here |= local;
    size_t used = strlen(remote);
    if (!local && used + n + 3 < cap) snprintf(remote + used, cap - used, "%s%.*s", used ? ", " : "", (int)n, s);
    s += len;
    if (*s) s++;
  }
  if (here) return 0;
  fprintf(stderr, "maskd train: %s %s: no host is this machine (%s), where the store is: rank 0, which alone writes "
                  "it, would run on %.*s; list this machine among the hosts (localhost, its name or address)\n",
          hostfile ? "--hostfile" : "--hosts", hostfile ? hostfile : rc->hosts, dist_host(NULL),
          (int)strcspn(list, ":,"), list);
  return 1;
}

/* SIGINT and SIGTERM stop the run as they stop a one-process run (at a step boundary,
** with a checkpoint); a second one ends it at once. With a hostfile, --ranks is the
** count; without, the hostfile's slots are. */
int rank_launch(const RunConfig *rc, int64_t resumed, const char *db_path, const char *hostfile, int ranks_given, int argc,
                char **argv) {
  char exe[4096], np[32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) { fprintf(stderr, "maskd train: cannot find this program's path for mpirun\n"); return 1; }
  exe[n] = '\0';
  long ranks = rc->ranks > 1 || hostfile ? rc->ranks : rc->hosts[0] ? run_config_host_slots(rc->hosts) : 1;
  /* On this machine, more ranks than CPUs only slow the run: twice the CPUs at most,
  ** given as --ranks or as the slots of hosts that are this machine (a hostfile is mpirun's). */
  Err ce = {0};
  /* mpirun opens the hostfile itself and blocks on a FIFO, where no stop reached it:
  ** the file is checked here, as every file option is, without blocking. */
  int hf = hostfile ? files_open_regular(hostfile, NULL, &ce) : -2;
  if (hf == -1) {
    fprintf(stderr, "maskd train: --hostfile: %s\n", ce.msg);
    return 2;
  }
  if (hf >= 0) close(hf);
  if (!hostfile && run_config_check_local_ranks(rc, &ce)) {
    fprintf(stderr, "maskd train: %s\n", ce.msg);
    return 2;
  }
  char remote[512] = "";
  if ((hostfile || rc->hosts[0]) && hosts_check(rc, hostfile, remote, sizeof remote)) return 2;
  snprintf(np, sizeof np, "%ld", ranks);
  const char **v = calloc((size_t)argc + 24, sizeof *v);
  if (!v) { fprintf(stderr, "maskd train: out of memory\n"); return 1; }
  int k = 0;
  v[k++] = "mpirun";
  /* Not -q: that hid mpirun's launch errors too ("not enough slots": exit 1, no word).
  ** Its stderr goes through mpirun_output, which keeps back the boxes it prints after a
  ** rank's failure (that rank's one line says why) and says a launch error in one line. */
  /* Root is the user in containers and CI; mpirun refuses it unless told. */
  if (geteuid() == 0) v[k++] = "--allow-run-as-root";
  /* --ranks N is N ranks: with a hostfile too (--ranks 1 ran the file's slots); a hostfile
  ** of fewer slots is mpirun's launch error, said in one line below. */
  if (ranks > 1 || ranks_given || !hostfile) { v[k++] = "-np"; v[k++] = np; }
  /* maskd places its own threads; mpirun's default binds each rank to one core. */
  v[k++] = "--bind-to"; v[k++] = "none";
  if (hostfile) { v[k++] = "--hostfile"; v[k++] = hostfile; }
  else if (rc->hosts[0]) { v[k++] = "--host"; v[k++] = rc->hosts; }
  else v[k++] = "--oversubscribe";   /* this machine: more ranks than cores is slow, not wrong */
  /* A kernel level chosen here is every rank's (same_everywhere refuses a mix): mpirun
  ** gives local ranks this environment, but ranks on other hosts only what -x names. */
  if (getenv("MASKD_ISA")) { v[k++] = "-x"; v[k++] = "MASKD_ISA"; }
  /* A Ctrl-Z of the launcher stops the ranks (relay_job_control). */
  v[k++] = "--mca"; v[k++] = "orte_forward_job_control"; v[k++] = "1";
  v[k++] = exe;
  for (int i = 0; i < argc; i++) v[k++] = argv[i];   /* argv[0] is "train" */
  fflush(NULL);
  /* Stopped before any rank exists: nothing to start, nothing recorded. */
  if (run_stop_signal) {
    free(v);
    fprintf(stderr, "maskd train: stopped by %s before the run began; nothing was recorded\n",
            run_stop_name(run_stop_signal));
    return 130;
  }
  int pipefd[2], errfd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) { free(v); fprintf(stderr, "maskd train: pipe: %s\n", strerror(errno)); return 1; }
  if (pipe2(errfd, O_CLOEXEC) != 0) {
    free(v);
    close(pipefd[0]); close(pipefd[1]);
    fprintf(stderr, "maskd train: pipe: %s\n", strerror(errno));
    return 1;
  }
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    /* Its own process group: a terminal's Ctrl-C reaches this launcher alone, which relays it. */
    setpgid(0, 0);
    /* A launcher killed outright (SIGKILL, the OOM killer) relays nothing: mpirun and the
    ** ranks would go on as orphans, writing to the store, and a --resume would be refused
    ** "still running". Its death reaches mpirun as the relay's first signal, SIGUSR1,
    ** which it passes on: the ranks stop at a step boundary with a checkpoint, the run
    ** "interrupted". The launcher may already be gone before this was set: then no mpirun. */
    if (prctl(PR_SET_PDEATHSIG, SIGUSR1) != 0 || getppid() != launcher) _exit(1);
    /* mpirun's stderr is the launcher's pipe; a launcher gone (SIGKILL) must not take
    ** mpirun with it on its next write (SIGPIPE) before it has passed the stop on. */
    signal(SIGPIPE, SIG_IGN);
    if (dup2(errfd[1], 2) < 0) _exit(127);
    execvp("mpirun", (char *const *)v);
    int e = errno;
    if (write(pipefd[1], &e, sizeof e) < 0) _exit(127);
    _exit(127);
  }
  free(v);
  close(pipefd[1]);
  close(errfd[1]);
  if (pid < 0) {
    close(pipefd[0]); close(errfd[0]);
    fprintf(stderr, "maskd train: fork: %s\n", strerror(errno));
    return 1;
  }
  int exec_errno = 0;
  ssize_t got = read(pipefd[0], &exec_errno, sizeof exec_errno);   /* 0 bytes: exec succeeded */
  close(pipefd[0]);
  int status = 0;
  if (got == (ssize_t)sizeof exec_errno) {
    close(errfd[0]);
    waitpid(pid, &status, 0);
    fprintf(stderr, "maskd train: --ranks %ld needs Open MPI's mpirun (Debian: apt-get install openmpi-bin): %s\n",
            ranks, strerror(exec_errno));
    return 1;
  }
  launched_mpirun = pid;
  run_stop_install(relay_stop, NULL);
  struct sigaction jc;
  memset(&jc, 0, sizeof jc);
  jc.sa_handler = relay_job_control;
  sigemptyset(&jc.sa_mask);
  jc.sa_flags = SA_RESTART;
  sigaction(SIGTSTP, &jc, NULL);
  sigaction(SIGCONT, &jc, NULL);
  if (run_stop_signal) relay_stop(run_stop_signal);   /* asked before mpirun was there to pass it on */
  /* mpirun passes a SIGUSR1 on only to the ranks it has started: one that came while it
  ** was starting them was lost, and the run trained on. So a stop, once asked, is asked
  ** again each second until mpirun ends (a rank takes more stop requests as one). */
  double asked = 0;
  MpirunOutput *out = malloc(sizeof *out);
  if (out) mpirun_output_init(out, 2);
  for (int open_err = 1;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (relayed == 1) {
      double now = now_monotonic();
      if (asked == 0) asked = now;
      else if (now - asked >= 1.0) { kill(pid, relay_as); asked = now; }
    }
    open_err = pass_stderr(errfd[0], out, open_err, 50);
  }
  /* What mpirun (or an ssh it started) wrote last; a process it left holding the pipe
  ** does not keep the launcher past half a second. */
  for (double end = now_monotonic() + 0.5; now_monotonic() < end && pass_stderr(errfd[0], out, 1, 50);) {}
  if (out) mpirun_output_flush(out, 1);
  close(errfd[0]);
  /* mpirun is reaped: its pid may be another process's now. */
  launched_mpirun = 0;
  signal(SIGTSTP, SIG_DFL);
  signal(SIGCONT, SIG_DFL);
  char diagnostic[512] = "";
  if (out) snprintf(diagnostic, sizeof diagnostic, "%s", mpirun_output_diagnostic(out));
  free(out);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  /* A stop asked while a rank was still loading (before its handler) ended it: a stop. */
  int raw = code, early_stop = relayed && (raw == 128 + SIGUSR1 || raw == 128 + SIGUSR2);
  if (early_stop || relayed > 1) code = 130;
  if (raw != 0 && diagnostic[0]) {
    /* mpirun failed before any rank ran (it starts them only once every host is up):
    ** nothing to recover, and its reason, which -q kept from the user, is the line. */
    /* Its daemons' failure names no host: the hosts it had to reach are named here. */
    int daemons = strstr(diagnostic, "daemon") != NULL && remote[0];
    size_t dl = strlen(diagnostic);
    if (daemons && dl && diagnostic[dl - 1] == '.') diagnostic[dl - 1] = '\0';
    fprintf(stderr, "maskd train: mpirun could not start %ld ranks: %s%s%s%s\n", ranks, diagnostic,
            daemons ? " (the hosts other than this machine: " : "", daemons ? remote : "", daemons ? ")" : "");
    return code ? code : 1;
  }
  if (raw != 0 && (raw != 130 || relayed > 1)) {
    /* A rank died or could not start, or a second stop ended them at once (mpirun then
    ** exits 1, and -q keeps its own words): the run, left "running" by a rank 0 that was
    ** killed, is marked interrupted now, ready to resume; one line says what happened. */
    Err e = {0};
    int recovered = 0;
    Store *db = store_open(db_path, &e);
    /* mpirun may end a moment before the rank 0 it killed is gone: look again for a few
    ** seconds, while the run is left "running". One that ended, or that rank 0 never
    ** recorded (a rank refused it at the start), has nothing to recover: every such
    ** refusal waited the whole 5 s before its line. */
    for (int tries = 0; db && tries < 50 && !recovered; tries++) {
      if (store_runs_recover(db, &recovered, &e) || recovered || !left_running(db, resumed, rc->name)) break;
      struct timespec pause = {0, 100000000};
      nanosleep(&pause, NULL);
    }
    store_close(db);
    char why[96] = "";
    if (relayed > 1) snprintf(why, sizeof why, " (stopped at once by a second stop signal)");
    else if (early_stop) snprintf(why, sizeof why, " (stopped while the ranks started)");
    else if (raw > 128 && raw - 128 < NSIG)
      snprintf(why, sizeof why, " (a rank ended on signal %d: %s)", raw - 128, strsignal(raw - 128));
    /* Otherwise the ranks said why themselves (a rank's failure is its one line, a stop
    ** at the start rank 0's), unless a signal ended one. */
    if (recovered && rc->name[0])
      fprintf(stderr, "maskd train: the ranks of run \"%s\" ended with status %d%s; it is "
                      "interrupted and continues with: maskd train --resume %s\n", rc->name, code, why, rc->name);
    else if (raw > 128 && !early_stop) fprintf(stderr, "maskd train: the ranks ended with status %d%s\n", code, why);
  }
  return code;
}
