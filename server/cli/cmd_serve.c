/* maskd serve: the HTTP API and the web page (server/http/http.h, server/routes_*.c). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "server/cli/commands.h"
#include "engine/core/now.h"
#include "server/app/app.h"
#include "server/http/static_files.h"

static void serve_usage(FILE *f) {
  fprintf(f,
          "usage: maskd serve [--host 127.0.0.1] [--port 8080] [--db PATH] [--token SECRET] [options]\n"
          "\n"
          "Serves the HTTP API (fill-mask, training jobs, runs, models) and the web page\n"
          "until SIGINT or SIGTERM. Prints \"listening on http://HOST:PORT/\" once ready.\n"
          "\n"
          "  --host H          numeric address to bind (default 127.0.0.1: this machine only)\n"
          "  --port P          port (default 8080; 0 picks a free one and prints it)\n"
          "  --db PATH         the store (default $MASKD_DB, else ./maskd.db)\n"
          "  --token SECRET    requests that change state need it: 'Authorization: Bearer SECRET',\n"
          "                    or the cookie that opening http://HOST:PORT/?token=SECRET sets\n"
          "                    (default $MASKD_TOKEN; none: no authentication)\n"
          "  --auth-reads      with a token, reads and fill-mask need it too (/healthz stays open)\n"
          "  --allowed-host NAME[:PORT]  answer requests whose Host is NAME too (repeatable; default:\n"
          "                    the bound address, and localhost/127.0.0.1/[::1] when it is loopback;\n"
          "                    '*': any). Other Hosts get 403 (DNS rebinding)\n"
          "  --allowed-origin URL  accept requests from this browser origin too, e.g. an HTTPS proxy's\n"
          "                    https://maskd.example.org (repeatable; default: the server's own only)\n"
          "  --data-dir DIR    the folder whose files jobs may read: corpora, and tokenizers, shard\n"
          "                    folders or config.json files, named by their path inside it\n"
          "                    (default: none; jobs then use only what the server made)\n"
          "  --work-dir DIR    where jobs write tokenizers/NAME, datasets/NAME and their logs\n"
          "                    (default: the store's path with .work appended)\n"
          "  --static DIR      the web page's files (default ./static, else next to the binary)\n"
          "  --max-body BYTES  largest request body (default 1048576)\n"
          "  --max-conns N     simultaneous connections (default 1024; more wait to be accepted)\n"
          "  --max-conns-per-ip N  simultaneous connections from one client address (default 128;\n"
          "                    more are closed at once)\n"
          "  --max-streams N   open event streams (GET /runs/ID/events) in all (default 64; 503 beyond)\n"
          "  --max-streams-per-ip N  open event streams per client address (default 16; 429 beyond)\n"
          "  --handler-threads N  requests handled at once (default 16; more wait their turn, in\n"
          "                    arrival order); /healthz is answered apart, even when all are busy\n"
          "  --header-timeout S  close a connection that has not sent a request's headers S seconds\n"
          "                    after it opened or got its last answer, however slowly it sends\n"
          "                    (default 10)\n"
          "  --body-timeout S  close a connection whose request body is not complete S seconds\n"
          "                    after its headers (default 30)\n"
          "  --timeout S       close a connection with no traffic for S seconds (default 60)\n"
          "  --request-timeout S  a fill-mask request still waiting for its model after S seconds\n"
          "                    (fractions allowed) answers 503; one already in a forward pass is\n"
          "                    answered (passes are bounded by the input limits). Default: no limit\n"
          "  --model NAME[@REV] fill-mask's model when a request names none (default: the\n"
          "                    newest revision of the most recently pushed model)\n"
          "  --cache N         models kept loaded for fill-mask (default 2)\n"
          "  --fill-threads N  threads of a fill-mask forward pass (default 1: requests are small,\n"
          "                    and on a busy machine thread hand-offs cost more than they save)\n"
          "  --no-batch        one request per pass (default: waiting requests share padded\n"
          "                    forward passes, whatever their parameters)\n"
          "  --batch-window-ms MS  a pass waits this long for more requests to join it (default 0:\n"
          "                    only requests that arrived while the model was busy share a pass)\n"
          "                    Requests are answered in arrival order; a pass takes the oldest\n"
          "                    waiting up to --max-tokens tokens (512 when that is 0)\n"
          "  --on-restart resume|interrupt  a training job that was running when the server died:\n"
          "                    queue it again as a resume of its run from its newest checkpoint, or\n"
          "                    leave it \"interrupted\" (default); a job's own \"on_restart\" wins\n"
          "  --stop-grace S    on SIGINT/SIGTERM a running job is asked to stop (training\n"
          "                    checkpoints first) and marked interrupted; after S seconds (default\n"
          "                    30, fractions allowed) it is killed\n"
          "  --no-worker       queue jobs but run none (another server's worker runs them)\n"
          "  --quiet           no access log on stderr\n"
          "Limits of one fill-mask request (shown on /healthz; over one, 413 naming it):\n");
  cli_fill_limits_help(f);
}

/* ./static when run from the repository, else ../static beside build/maskd. */
static char *find_static(const char *given, Err *err) {
  if (given) return static_root(given, err);
  char *r = static_root("static", NULL);
  if (r) return r;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 32);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      strcpy(slash, "/../static");
      r = static_root(exe, NULL);
      if (r) return r;
    }
  }
  err_set(err, "no static/ directory here or beside the binary (give --static DIR)");
  return NULL;
}

static const HttpRoute routes[] = {
  {"GET", "/healthz", route_healthz, HTTP_OPEN | HTTP_INLINE},
  {"GET", "/metrics", route_metrics, 0},
  {"POST", "/fill-mask", route_fill_mask, 0},
  {"GET", "/runs", route_runs, 0},
  {"POST", "/runs", route_submit_run, HTTP_WRITE},
  {"GET", "/runs/{id}", route_run, 0},
  {"GET", "/runs/{id}/metrics", route_run_metrics, 0},
  {"GET", "/runs/{id}/events", route_run_events, 0},
  {"POST", "/runs/{id}/cancel", route_cancel_run, HTTP_WRITE},
  {"POST", "/tokenizers", route_submit_tokenizer, HTTP_WRITE},
  {"POST", "/datasets", route_submit_dataset, HTTP_WRITE},
  {"GET", "/corpora", route_corpora, 0},
  {"GET", "/tokenizers", route_tokenizers, 0},
  {"GET", "/datasets", route_datasets, 0},
  {"GET", "/jobs", route_jobs, 0},
  {"GET", "/jobs/{id}", route_job, 0},
  {"POST", "/jobs/{id}/cancel", route_cancel_job, HTTP_WRITE},
  {"GET", "/models", route_models, 0},
  {"GET", "/models/{name}", route_model, 0},
  {"GET", "/models/{name}/resolve/{revision}/{file}", route_resolve, 0},
};

/* Raises the open-file limit so that max_conns connections fit beside the store's and
** the jobs' files; returns how many connections do fit. */
static unsigned fit_conns(unsigned max_conns) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return max_conns;
  rlim_t want = (rlim_t)max_conns + 256;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur >= want || rl.rlim_cur == RLIM_INFINITY) return max_conns;
  return rl.rlim_cur > 512 ? (unsigned)(rl.rlim_cur - 256) : 256;
}

#define MAX_ALLOWED 32

int cmd_serve(int argc, char **argv) {
  HttpConfig hc = http_default_config();
  const char *hosts[MAX_ALLOWED], *origins[MAX_ALLOWED];
  const char *db = NULL, *static_dir = NULL, *data_dir = NULL, *work_dir = NULL;
  hc.token = getenv("MASKD_TOKEN");
  App app;
  memset(&app, 0, sizeof app);
  app.job_stop_grace = 30;
  int no_worker = 0, cache = 2, batch = 1, fill_threads = 1, window_ms = 0, lim;
  FillMaskOptions fill_defaults;
  fillmask_options_default(&fill_defaults);
  FillMaskLimits limits = fill_defaults.limits;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { serve_usage(stdout); return 0; }
    else if (!strcmp(a, "--auth-reads")) { hc.auth_reads = 1; continue; }
    else if (!strcmp(a, "--quiet")) { app.quiet = 1; continue; }
    else if (!strcmp(a, "--no-worker")) { no_worker = 1; continue; }
    else if (!strcmp(a, "--no-batch")) { batch = 0; continue; }
    if (!v) { fprintf(stderr, "maskd serve: %s needs a value (maskd serve --help)\n", a); return 2; }
    i++;
    if ((lim = cli_fill_limit("serve", a, v, &limits))) { if (lim < 0) return 2; }
    else if (!strcmp(a, "--host")) hc.host = v;
    else if (!strcmp(a, "--db")) db = v;
    else if (!strcmp(a, "--token")) hc.token = v;
    else if (!strcmp(a, "--static")) static_dir = v;
    else if (!strcmp(a, "--data-dir")) data_dir = v;
    else if (!strcmp(a, "--work-dir")) work_dir = v;
    else if (!strcmp(a, "--model")) app.default_model = v;
    else if (!strcmp(a, "--allowed-host") || !strcmp(a, "--allowed-origin")) {
      int host = !strcmp(a, "--allowed-host");
      int *n_list = host ? &hc.n_allowed_hosts : &hc.n_allowed_origins;
      if (*n_list == MAX_ALLOWED) { fprintf(stderr, "maskd serve: at most %d %s\n", MAX_ALLOWED, a); return 2; }
      (host ? hosts : origins)[(*n_list)++] = v;
    }
    else if (!strcmp(a, "--header-timeout") || !strcmp(a, "--body-timeout")) {
      if (cli_parse_long(v, 1, 3600, &n)) { fprintf(stderr, "maskd serve: %s must be 1..3600 seconds, not '%s'\n", a, v); return 2; }
      if (!strcmp(a, "--header-timeout")) hc.header_timeout_s = (double)n;
      else hc.body_timeout_s = (double)n;
    }
    else if (!strcmp(a, "--handler-threads")) {
      if (cli_parse_long(v, 1, 1024, &n)) { fprintf(stderr, "maskd serve: --handler-threads must be 1..1024, not '%s'\n", v); return 2; }
      hc.handler_threads = (unsigned)n;
    }
    else if (!strcmp(a, "--max-conns-per-ip") || !strcmp(a, "--max-streams") || !strcmp(a, "--max-streams-per-ip")) {
      if (cli_parse_long(v, 1, 100000, &n)) { fprintf(stderr, "maskd serve: %s must be 1..100000, not '%s'\n", a, v); return 2; }
      if (!strcmp(a, "--max-conns-per-ip")) hc.max_conns_per_ip = (unsigned)n;
      else if (!strcmp(a, "--max-streams")) hc.max_streams = (unsigned)n;
      else hc.max_streams_per_ip = (unsigned)n;
    }
    else if (!strcmp(a, "--request-timeout")) {
      char *end;
      double t = strtod(v, &end);
      if (*end || !(t > 0 && t <= 86400)) { fprintf(stderr, "maskd serve: --request-timeout must be 0 < S <= 86400 seconds, not '%s'\n", v); return 2; }
      app.request_timeout = t;
    }
    else if (!strcmp(a, "--stop-grace")) {
      char *end;
      double t = strtod(v, &end);
      if (*end || !(t >= 0 && t <= 3600)) { fprintf(stderr, "maskd serve: --stop-grace must be 0 <= S <= 3600 seconds, not '%s'\n", v); return 2; }
      app.job_stop_grace = t;
    }
    else if (!strcmp(a, "--on-restart")) {
      if (strcmp(v, "resume") && strcmp(v, "interrupt")) { fprintf(stderr, "maskd serve: --on-restart must be resume or interrupt, not '%s'\n", v); return 2; }
      app.on_restart_resume = !strcmp(v, "resume");
    }
    else if (!strcmp(a, "--fill-threads")) {
      if (cli_parse_long(v, 1, 256, &n)) { fprintf(stderr, "maskd serve: --fill-threads must be 1..256, not '%s'\n", v); return 2; }
      fill_threads = (int)n;
    } else if (!strcmp(a, "--batch-window-ms")) {
      if (cli_parse_long(v, 0, 1000, &n)) { fprintf(stderr, "maskd serve: --batch-window-ms must be 0..1000, not '%s'\n", v); return 2; }
      window_ms = (int)n;
    } else if (!strcmp(a, "--cache")) {
      if (cli_parse_long(v, 1, 64, &n)) { fprintf(stderr, "maskd serve: --cache must be 1..64, not '%s'\n", v); return 2; }
      cache = (int)n;
    }
    else if (!strcmp(a, "--port")) {
      if (cli_parse_long(v, 0, 65535, &n)) { fprintf(stderr, "maskd serve: --port must be 0..65535, not '%s'\n", v); return 2; }
      hc.port = (int)n;
    } else if (!strcmp(a, "--max-body")) {
      if (cli_parse_long(v, 1, 1L << 30, &n)) { fprintf(stderr, "maskd serve: --max-body must be 1..2^30, not '%s'\n", v); return 2; }
      hc.max_body = (size_t)n;
    } else if (!strcmp(a, "--max-conns")) {
      if (cli_parse_long(v, 1, 100000, &n)) { fprintf(stderr, "maskd serve: --max-conns must be 1..100000, not '%s'\n", v); return 2; }
      hc.max_conns = (unsigned)n;
    } else if (!strcmp(a, "--timeout")) {
      if (cli_parse_long(v, 1, 86400, &n)) { fprintf(stderr, "maskd serve: --timeout must be 1..86400 seconds, not '%s'\n", v); return 2; }
      hc.timeout_s = (unsigned)n;
    } else {
      fprintf(stderr, "maskd serve: unknown option %s (maskd serve --help)\n", a);
      return 2;
    }
  }
  if (hc.token && !*hc.token) hc.token = NULL;
  hc.allowed_hosts = hosts;
  hc.allowed_origins = origins;
  unsigned fit = fit_conns(hc.max_conns);
  if (fit < hc.max_conns) {
    fprintf(stderr, "maskd serve: the open-file limit allows %u connections, not --max-conns %u: serving %u\n", fit,
            hc.max_conns, fit);
    hc.max_conns = fit;
  }
  if (hc.auth_reads && !hc.token) { fprintf(stderr, "maskd serve: --auth-reads needs --token\n"); return 2; }
  app.db_path = cli_db_path(db);
  app.started = now_wall();
  Err err = {0};
  app.static_root = find_static(static_dir, &err);
  if (!app.static_root) { fprintf(stderr, "maskd serve: %s\n", err.msg); return 1; }
  char exe[PATH_MAX];
  ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (exe_len <= 0) { free(app.static_root); fprintf(stderr, "maskd serve: cannot find its own binary\n"); return 1; }
  exe[exe_len] = '\0';
  app.exe = exe;
  /* Open (create, migrate) the store once now, so a bad --db fails at start, not per request. */
  Store *st = store_open(app.db_path, &err);
  if (!st) { free(app.static_root); fprintf(stderr, "maskd serve: %s\n", err.msg); return 1; }
  store_close(st);
  char work_default[PATH_MAX];
  snprintf(work_default, sizeof work_default, "%s.work", app.db_path);
  if (workspace_open(&app.ws, data_dir, work_dir ? work_dir : work_default, &err)) {
    free(app.static_root);
    fprintf(stderr, "maskd serve: %s\n", err.msg);
    return 1;
  }
  app.metrics = metrics_new();
  app.fill = fill_cache_new(cache, batch, window_ms * 1000, fill_threads, &limits, app.metrics);
  if (!app.metrics || !app.fill) {
    free(app.static_root);
    workspace_close(&app.ws);
    fprintf(stderr, "maskd serve: out of memory\n");
    return 1;
  }

  /* Block the stop signals before any thread starts, so every thread inherits the
  ** mask and only sigwait() below receives them. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  signal(SIGPIPE, SIG_IGN);

  hc.routes = routes;
  hc.n_routes = (int)(sizeof routes / sizeof routes[0]);
  hc.fallback = route_static;
  hc.observe = route_observe;
  hc.app = &app;
  app.http = http_start(&hc, &err);
  if (app.http && !no_worker && !(app.worker = worker_start(&app, &err))) {
    http_stop(app.http);
    app.http = NULL;
  }
  if (!app.http) {
    fprintf(stderr, "maskd serve: %s\n", err.msg);
    metrics_free(app.metrics);
    fill_cache_free(app.fill);
    free(app.static_root);
    workspace_close(&app.ws);
    return 1;
  }
  printf("maskd serve: listening on http://%s%s%s:%d/\n", strchr(hc.host, ':') ? "[" : "", hc.host,
         strchr(hc.host, ':') ? "]" : "", http_port(app.http));
  fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  fprintf(stderr, "maskd serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  worker_stop(app.worker);  /* a running job is stopped at its step boundary and marked interrupted */
  http_stop(app.http);
  fill_cache_free(app.fill);
  metrics_free(app.metrics);
  free(app.static_root);
  workspace_close(&app.ws);
  return 0;
}
