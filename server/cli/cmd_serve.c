/* maskd serve: the HTTP API and the web page (server/http/http.h, server/app/routes_*.c). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "server/cli/commands.h"
#include "engine/core/now.h"
#include "engine/nn/kernels_info.h"
#include "server/app/app.h"
#include "server/app/job_hosts.h"
#include "server/http/static_files.h"

#define MAX_ALLOWED 32
/* Repositories --precision-for may name. */
#define MAX_PRECISION_FOR 64

/* The command line, before it is spread over HttpConfig and App. */
typedef struct ServeArgs {
  const char *host, *db, *token, *static_dir, *data_dir, *work_dir, *model;
  const char *job_hosts;                           /* --job-hosts: "name,name" (job_hosts.h) */
  const char *hosts[MAX_ALLOWED], *origins[MAX_ALLOWED];
  int n_hosts, n_origins;
  int precision;                                   /* CLI_CHOICE: 0 fp32, 1 bf16 (ModelPrecision's values) */
  const char *precision_for[MAX_PRECISION_FOR];    /* "NAME=fp32|bf16" */
  int n_precision_for;
  long port, max_body, max_conns, max_conns_per_ip, max_streams, max_streams_per_ip, handler_threads;
  long header_timeout, body_timeout, timeout, max_upload;
  double request_timeout, stop_grace;
  int cache, fill_threads, window_ms, on_restart, auth_reads, quiet, no_worker, no_batch;
  FillMaskLimits limits;
  TextClassLimits tc_limits;                       /* POST /text-classification's */
} ServeArgs;

static void serve_defaults(void *p) {
  ServeArgs *a = p;
  memset(a, 0, sizeof *a);
  HttpConfig hc = http_default_config();
  a->host = hc.host;
  a->port = hc.port;
  a->max_body = (long)hc.max_body;
  a->max_upload = (long)hc.max_upload;
  a->max_conns = hc.max_conns;
  a->max_conns_per_ip = hc.max_conns_per_ip;
  a->max_streams = hc.max_streams;
  a->max_streams_per_ip = hc.max_streams_per_ip;
  a->handler_threads = hc.handler_threads;
  a->header_timeout = (long)hc.header_timeout_s;
  a->body_timeout = (long)hc.body_timeout_s;
  a->timeout = hc.timeout_s;
  a->token = getenv("MASKD_TOKEN");
  a->stop_grace = 30;
  a->cache = 2;
  a->fill_threads = 1;
  FillMaskOptions fill;
  fillmask_options_default(&fill);
  a->limits = fill.limits;
  TextClassOptions tco;
  textclass_options_default(&tco);
  a->tc_limits = tco.limits;
}

#define OFF(f) offsetof(ServeArgs, f)
static const CliOpt serve_opts[] = {
  {.name = "--host", .kind = CLI_STRING, .off = OFF(host), .arg = "H", .def = CLI_DEFAULT,
   .help = "numeric address to bind; the default is this machine only"},
  {.name = "--port", .kind = CLI_LONG, .off = OFF(port), .lo = 0, .hi = 65535, .arg = "P", .def = CLI_DEFAULT,
   .help = "port (0 picks a free one and prints it)"},
  {.name = "--db", .kind = CLI_STRING, .off = OFF(db), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--token", .kind = CLI_STRING, .off = OFF(token), .arg = "SECRET", .def = "$MASKD_TOKEN; none: no authentication",
   .help = "requests that change state need it: 'Authorization: Bearer SECRET',\n"
           "or the cookie that opening http://HOST:PORT/?token=SECRET sets"},
  {.name = "--auth-reads", .kind = CLI_FLAG, .off = OFF(auth_reads),
   .help = "with a token, reads and fill-mask need it too (/healthz stays open)"},
  {.name = "--allowed-host", .kind = CLI_LIST, .off = OFF(hosts), .off2 = OFF(n_hosts), .hi = MAX_ALLOWED,
   .arg = "NAME[:PORT]",
   .help = "answer requests whose Host is NAME too (repeatable; default:\n"
           "the bound address, and localhost/127.0.0.1/[::1] when it is loopback;\n"
           "'*': any). Other Hosts get 403 (DNS rebinding)"},
  {.name = "--allowed-origin", .kind = CLI_LIST, .off = OFF(origins), .off2 = OFF(n_origins), .hi = MAX_ALLOWED,
   .arg = "URL",
   .help = "accept requests from this browser origin too, e.g. an HTTPS proxy's\n"
           "https://maskd.example.org or a web app's http://127.0.0.1:5173,\n"
           "and answer its pages' CORS requests (repeatable; default: the\n"
           "server's own only)"},
  {.name = "--data-dir", .kind = CLI_STRING, .off = OFF(data_dir), .arg = "DIR",
   .help = "the folder whose files jobs may read: corpora, and tokenizers, shard\n"
           "folders or config.json files, named by their path inside it\n"
           "(default: none; jobs then use only what the server made)"},
  {.name = "--job-hosts", .kind = CLI_STRING, .off = OFF(job_hosts), .arg = "NAME,NAME",
   .def = "none (jobs run on this machine only)",
   .help = "the other machines a training job may start ranks on (a run's\n"
           "\"hosts\", which mpirun reaches with ssh); a run naming any other host\n"
           "is refused (403), and a queued job whose hosts are no longer listed fails"},
  {.name = "--work-dir", .kind = CLI_STRING, .off = OFF(work_dir), .arg = "DIR",
   .def = "the store's path with .work appended", .help = "where jobs write tokenizers/NAME, datasets/NAME and their logs"},
  {.name = "--static", .kind = CLI_STRING, .off = OFF(static_dir), .arg = "DIR",
   .def = "./static, else next to the binary", .help = "the web page's files"},
  {.name = "--max-body", .kind = CLI_LONG, .off = OFF(max_body), .lo = 1, .hi = 1L << 30, .arg = "BYTES",
   .def = CLI_DEFAULT, .help = "largest request body"},
  {.name = "--max-upload", .kind = CLI_LONG, .off = OFF(max_upload), .lo = 1, .hi = 1L << 40, .arg = "BYTES",
   .def = CLI_DEFAULT,
   .help = "largest corpus upload (POST /corpora), streamed to the work folder;\n"
           "it may pause up to 30 s between bytes, however long it takes in all"},
  {.name = "--max-conns", .kind = CLI_LONG, .off = OFF(max_conns), .lo = 1, .hi = 100000, .arg = "N", .def = CLI_DEFAULT,
   .help = "simultaneous connections (more wait to be accepted)"},
  {.name = "--max-conns-per-ip", .kind = CLI_LONG, .off = OFF(max_conns_per_ip), .lo = 1, .hi = 100000, .arg = "N",
   .def = CLI_DEFAULT, .help = "simultaneous connections from one client address\n(more are closed at once)"},
  {.name = "--max-streams", .kind = CLI_LONG, .off = OFF(max_streams), .lo = 1, .hi = 100000, .arg = "N",
   .def = CLI_DEFAULT, .help = "open event streams (GET /runs/ID/events) in all (503 beyond)"},
  {.name = "--max-streams-per-ip", .kind = CLI_LONG, .off = OFF(max_streams_per_ip), .lo = 1, .hi = 100000, .arg = "N",
   .def = CLI_DEFAULT, .help = "open event streams per client address (429 beyond)"},
  {.name = "--handler-threads", .kind = CLI_LONG, .off = OFF(handler_threads), .lo = 1, .hi = 1024, .arg = "N",
   .def = CLI_DEFAULT,
   .help = "requests handled at once (more wait their turn, in arrival order);\n"
           "/healthz is answered apart, even when all are busy"},
  {.name = "--header-timeout", .kind = CLI_LONG, .off = OFF(header_timeout), .lo = 1, .hi = 3600, .arg = "S",
   .def = CLI_DEFAULT,
   .help = "close a connection that has not sent a request's headers S seconds\n"
           "after it opened or got its last answer, however slowly it sends"},
  {.name = "--body-timeout", .kind = CLI_LONG, .off = OFF(body_timeout), .lo = 1, .hi = 3600, .arg = "S",
   .def = CLI_DEFAULT, .help = "close a connection whose request body is not complete S seconds\nafter its headers"},
  {.name = "--timeout", .kind = CLI_LONG, .off = OFF(timeout), .lo = 1, .hi = 86400, .arg = "S", .def = CLI_DEFAULT,
   .help = "close a connection with no traffic for S seconds"},
  {.name = "--request-timeout", .kind = CLI_DOUBLE, .off = OFF(request_timeout), .flo = 0, .fhi = 86400,
   .open = CLI_OPEN_LO, .arg = "S", .def = "no limit",
   .help = "a fill-mask or text-classification request still waiting behind its\n"
           "model's busy passes S seconds (fractions allowed) after the model was\n"
           "ready answers 503; loading the model is not counted, and a request in a\n"
           "pass, or taken by an idle model, is answered (passes are bounded by the\n"
           "input limits)"},
  {.name = "--model", .kind = CLI_STRING, .off = OFF(model), .arg = "NAME[@REV]",
   .def = "per route, the most recently pushed model of its task",
   .help = "the model of a fill-mask or text-classification request that names\n"
           "none, on the route whose task it serves (the other route keeps its own)"},
  {.name = "--precision", .kind = CLI_CHOICE, .off = OFF(precision), .arg = "fp32|bf16", .def = "fp32",
   .help = "how served models keep their weights: float, or bfloat16 (the\n"
           "weight matrices only: half the memory, faster short requests; sums\n"
           "stay float, answers differ from fp32's in the last digits of scores)"},
  {.name = "--precision-for", .kind = CLI_LIST, .off = OFF(precision_for), .off2 = OFF(n_precision_for),
   .hi = MAX_PRECISION_FOR, .arg = "NAME=fp32|bf16",
   .help = "the model repository NAME (all its revisions) at this precision,\n"
           "whatever --precision says (repeatable; the start-up line lists them,\n"
           "\"fill-mask weights fp32 (NAME bf16)\"; /healthz shows only the default)"},
  {.name = "--cache", .kind = CLI_INT, .off = OFF(cache), .lo = 1, .hi = 64, .arg = "N", .def = CLI_DEFAULT,
   .help = "models kept loaded (fill-mask and text-classification); a request\n"
           "for another waits until one is idle, the least recently used goes"},
  {.name = "--fill-threads", .kind = CLI_INT, .off = OFF(fill_threads), .lo = 1, .hi = 256, .arg = "N", .def = CLI_DEFAULT,
   .help = "threads of a fill-mask forward pass (requests are small, and on a\n"
           "busy machine thread hand-offs cost more than they save)"},
  {.name = "--no-batch", .kind = CLI_FLAG, .off = OFF(no_batch),
   .help = "one request per pass (default: waiting requests share padded\n"
           "forward passes, whatever their parameters)"},
  {.name = "--batch-window-ms", .kind = CLI_INT, .off = OFF(window_ms), .lo = 0, .hi = 1000, .arg = "MS",
   .def = "0: only requests that arrived while the model was busy share a pass",
   .help = "a pass waits this long for more requests to join it.\n"
           "Requests are answered in arrival order; a pass takes the oldest\n"
           "waiting up to --max-tokens tokens (512 when that is 0)"},
  {.name = "--on-restart", .kind = CLI_CHOICE, .off = OFF(on_restart), .arg = "interrupt|resume", .def = CLI_DEFAULT,
   .help = "a training job running when the server died or stopped: leave it\n"
           "\"interrupted\", or queue it again (once) as a resume of its run from its\n"
           "newest checkpoint; a job's own \"on_restart\" wins"},
  {.name = "--stop-grace", .kind = CLI_DOUBLE, .off = OFF(stop_grace), .flo = 0, .fhi = 3600, .arg = "S",
   .def = CLI_DEFAULT,
   .help = "on SIGINT/SIGTERM a running job is asked to stop (training\n"
           "checkpoints first) and marked interrupted; after S seconds (fractions\n"
           "allowed) it is killed"},
  {.name = "--no-worker", .kind = CLI_FLAG, .off = OFF(no_worker),
   .help = "queue jobs but run none (another server's worker runs them)"},
  {.name = "--quiet", .kind = CLI_FLAG, .off = OFF(quiet), .help = "no access log on stderr"},
  {.kind = CLI_TEXT, .help = "Limits of one fill-mask request (shown on /healthz; over one, 413 naming it):"},
  CLI_FILL_LIMIT_OPTS(ServeArgs, limits),
  {.kind = CLI_TEXT, .help = "Limits of each text-classification request (POST /text-classification):"},
  {.name = "--classify-max-inputs", .kind = CLI_INT, .off = OFF(tc_limits.max_inputs), .hi = 1000000, .arg = "N",
   .def = CLI_DEFAULT, .help = "texts in one request (0 = no limit)"},
  {.name = "--classify-max-tokens", .kind = CLI_INT, .off = OFF(tc_limits.max_tokens), .hi = 1000000000, .arg = "N",
   .def = CLI_DEFAULT, .help = "tokens of a request's texts together, [CLS]/[SEP] counted, after\n"
                               "truncation (0 = no limit)"},
};
#undef OFF

const CliSpec cli_spec_serve = {
  .name = "serve",
  .usage = "usage: maskd serve [--host 127.0.0.1] [--port 8080] [--db PATH] [--token SECRET] [options]\n"
           "\n"
           "Serves the HTTP API (fill-mask, training jobs, runs, models) and the web page\n"
           "until SIGINT or SIGTERM. Prints \"listening on http://HOST:PORT/\" once ready.\n"
           "\n",
  .opts = serve_opts,
  .n_opts = (int)(sizeof serve_opts / sizeof serve_opts[0]),
  .args_size = sizeof(ServeArgs),
  .defaults = serve_defaults,
  .col = 20,
};

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
  {"POST", "/text-classification", route_text_classification, 0},
  {"GET", "/runs", route_runs, 0},
  {"POST", "/runs", route_submit_run, HTTP_WRITE},
  {"GET", "/runs/{id}", route_run, 0},
  {"GET", "/runs/{id}/metrics", route_run_metrics, 0},
  {"GET", "/runs/{id}/events", route_run_events, 0},
  {"POST", "/runs/{id}/cancel", route_cancel_run, HTTP_WRITE},
  {"POST", "/tokenizers", route_submit_tokenizer, HTTP_WRITE},
  {"POST", "/datasets", route_submit_dataset, HTTP_WRITE},
  {"GET", "/corpora", route_corpora, 0},
  {"POST", "/corpora", route_upload_corpus, HTTP_WRITE | HTTP_UPLOAD},
  {"GET", "/corpora/{name}", route_corpus, 0},
  {"GET", "/tokenizers", route_tokenizers, 0},
  {"GET", "/tokenizers/{name}", route_tokenizer, 0},
  {"GET", "/datasets", route_datasets, 0},
  {"GET", "/datasets/{name}", route_dataset, 0},
  {"GET", "/jobs", route_jobs, 0},
  {"GET", "/jobs/{id}", route_job, 0},
  {"POST", "/jobs/{id}/cancel", route_cancel_job, HTTP_WRITE},
  {"GET", "/models", route_models, 0},
  {"GET", "/models/{name}", route_model, 0},
  {"GET", "/models/{owner}/{name}", route_model, 0},
  {"POST", "/models/{name}", route_model_pipeline, 0},
  {"POST", "/models/{owner}/{name}", route_model_pipeline, 0},
  /* The Hub's protocol (routes_hub.c), after maskd's own routes so that a repo named like
  ** one of them never shadows it; in each group (/models/..., /api/..., /...) the routes of
  ** "owner/name" repos before those of "name" repos: a last {x+} takes any number of
  ** segments, so a one-segment form tried first would read /o/resolve/resolve/main/f as
  ** repo o at revision resolve (a file there needs no folder). */
  {"GET", "/models/{owner}/{name}/resolve/{revision}/{file+}", route_hub_file, 0},
  {"GET", "/models/{owner}/{name}/raw/{revision}/{file+}", route_hub_file, 0},
  {"GET", "/models/{name}/resolve/{revision}/{file+}", route_hub_file, 0},
  {"GET", "/models/{name}/raw/{revision}/{file+}", route_hub_file, 0},
  {"GET", "/api/models", route_hub_models, 0},
  {"GET", "/api/whoami-v2", route_hub_whoami, 0},
  /* Before /api/models/{owner}/{name}, which would read it as model info of repo "x/refs":
  ** route_hub_refs answers that itself when such a repo exists, else x's refs. */
  {"GET", "/api/models/{name}/refs", route_hub_refs, 0},
  {"GET", "/api/models/{owner}/{name}", route_hub_model_info, 0},
  {"GET", "/api/models/{owner}/{name}/revision/{revision+}", route_hub_model_info, 0},
  {"GET", "/api/models/{owner}/{name}/tree/{revision}", route_hub_tree, 0},
  {"GET", "/api/models/{owner}/{name}/tree/{revision}/{path+}", route_hub_tree, 0},
  {"POST", "/api/models/{owner}/{name}/paths-info/{revision+}", route_hub_paths_info, HTTP_FORM},
  {"GET", "/api/models/{owner}/{name}/commits/{revision+}", route_hub_commits, 0},
  {"GET", "/api/models/{owner}/{name}/refs", route_hub_refs, 0},
  {"GET", "/api/models/{name}", route_hub_model_info, 0},
  {"GET", "/api/models/{name}/revision/{revision+}", route_hub_model_info, 0},
  {"GET", "/api/models/{name}/tree/{revision}", route_hub_tree, 0},
  {"GET", "/api/models/{name}/tree/{revision}/{path+}", route_hub_tree, 0},
  {"POST", "/api/models/{name}/paths-info/{revision+}", route_hub_paths_info, HTTP_FORM},
  {"GET", "/api/models/{name}/commits/{revision+}", route_hub_commits, 0},
  {"GET", "/{owner}/{name}/resolve/{revision}/{file+}", route_hub_file, 0},
  {"GET", "/{owner}/{name}/raw/{revision}/{file+}", route_hub_file, 0},
  {"GET", "/{name}/resolve/{revision}/{file+}", route_hub_file, 0},
  {"GET", "/{name}/raw/{revision}/{file+}", route_hub_file, 0},
};

/* Descriptors a connection may hold: its socket, and while it downloads weights the
** store connection the download reads on (the database and its WAL file). Counted as
** one, 340 downloads at once used up the default limit of 1024 connections' files:
** downloads answered 500 and the server stopped accepting. */
#define FDS_PER_CONN 3
/* Raises the open-file limit so that max_conns connections fit beside the store's and
** the jobs' files; returns how many connections do fit. */
static unsigned fit_conns(unsigned max_conns) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return max_conns;
  rlim_t want = (rlim_t)max_conns * FDS_PER_CONN + 256;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur >= want || rl.rlim_cur == RLIM_INFINITY) return max_conns;
  return rl.rlim_cur > 256 + 32 * FDS_PER_CONN ? (unsigned)((rl.rlim_cur - 256) / FDS_PER_CONN) : 32;
}

/* Splits each --precision-for "NAME=fp32|bf16" into names[i] (pointing into buf,
** which holds copies) and per[i]; 0, or -1 after printing the one-line refusal. */
static int parse_precision_for(const ServeArgs *a, char buf[][160], const char **names, ModelPrecision *per) {
  for (int i = 0; i < a->n_precision_for; i++) {
    const char *v = a->precision_for[i], *eq = strrchr(v, '=');
    Err e = {0};
    if (!eq || strlen(v) >= sizeof buf[i]) {
      fprintf(stderr, "maskd serve: --precision-for: expected NAME=fp32|bf16, got '%s'\n", v);
      return -1;
    }
    snprintf(buf[i], sizeof buf[i], "%.*s", (int)(eq - v), v);
    if (store_check_name("--precision-for", buf[i], &e)) { fprintf(stderr, "maskd serve: %s\n", e.msg); return -1; }
    if (model_precision_parse(eq + 1, &per[i])) {
      fprintf(stderr, "maskd serve: --precision-for %s: expected fp32 or bf16, got '%s'\n", buf[i], eq + 1);
      return -1;
    }
    names[i] = buf[i];
  }
  return 0;
}

/* Runs the server the command line describes until a stop signal; the exit status. */
static int serve(const ServeArgs *a) {
  HttpConfig hc = http_default_config();
  App app;
  memset(&app, 0, sizeof app);
  hc.host = a->host;
  hc.port = (int)a->port;
  hc.token = a->token;
  hc.auth_reads = a->auth_reads;
  hc.allowed_hosts = a->hosts;
  hc.n_allowed_hosts = a->n_hosts;
  hc.allowed_origins = a->origins;
  hc.n_allowed_origins = a->n_origins;
  hc.max_body = (size_t)a->max_body;
  hc.max_upload = (unsigned long long)a->max_upload;
  hc.max_conns = (unsigned)a->max_conns;
  hc.max_conns_per_ip = (unsigned)a->max_conns_per_ip;
  hc.max_streams = (unsigned)a->max_streams;
  hc.max_streams_per_ip = (unsigned)a->max_streams_per_ip;
  hc.handler_threads = (unsigned)a->handler_threads;
  hc.header_timeout_s = (double)a->header_timeout;
  hc.body_timeout_s = (double)a->body_timeout;
  hc.timeout_s = (unsigned)a->timeout;
  app.quiet = a->quiet;
  app.default_model = a->model;
  app.request_timeout = a->request_timeout;
  app.job_stop_grace = a->stop_grace;
  app.on_restart_resume = a->on_restart == 1;
  app.job_hosts = a->job_hosts;
  const char *db = a->db, *static_dir = a->static_dir, *data_dir = a->data_dir, *work_dir = a->work_dir;
  int no_worker = a->no_worker, cache = a->cache, batch = !a->no_batch, fill_threads = a->fill_threads;
  int window_ms = a->window_ms;
  FillMaskLimits limits = a->limits;
  if (hc.token && !*hc.token) hc.token = NULL;
  unsigned fit = fit_conns(hc.max_conns);
  if (fit < hc.max_conns) {
    fprintf(stderr, "maskd serve: the open-file limit allows %u connections, not --max-conns %u: serving %u\n", fit,
            hc.max_conns, fit);
    hc.max_conns = fit;
  }
  if (hc.auth_reads && !hc.token) { fprintf(stderr, "maskd serve: --auth-reads needs --token\n"); return 2; }
  char pf_buf[MAX_PRECISION_FOR][160];
  const char *pf_names[MAX_PRECISION_FOR];
  ModelPrecision pf_per[MAX_PRECISION_FOR];
  if (parse_precision_for(a, pf_buf, pf_names, pf_per)) return 2;
  Err err = {0};
  if (a->job_hosts && job_hosts_check_list(a->job_hosts, &err)) {
    fprintf(stderr, "maskd serve: --job-hosts: %s\n", err.msg);
    return 2;
  }
  ModelPrecision precision = a->precision ? MODEL_BF16 : MODEL_FP32;
  app.db_path = cli_db_path(db);
  app.started = now_wall();
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
  char upload_dir[WORKSPACE_PATH_MAX];
  if (workspace_upload_dir(&app.ws, upload_dir, sizeof upload_dir, &err)) {
    free(app.static_root);
    workspace_close(&app.ws);
    fprintf(stderr, "maskd serve: %s\n", err.msg);
    return 1;
  }
  hc.upload_dir = upload_dir;
  app.max_upload = hc.max_upload;
  app.metrics = metrics_new();
  app.fill = fill_cache_new(cache, batch, window_ms * 1000, fill_threads, &limits, app.metrics);
  if (app.fill) fill_cache_set_textclass_limits(app.fill, &a->tc_limits);
  if (!app.metrics || !app.fill || app_metrics_kernels_info(app.metrics) ||
      fill_cache_set_precision(app.fill, precision, pf_names, pf_per, a->n_precision_for)) {
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
  char kernels[256];
  kernels_info_line(kernels, sizeof kernels);
  printf("maskd serve: %s\n", kernels);
  /* The precision of the models fill-mask serves, beside the kernels that run them. */
  printf("maskd serve: fill-mask weights %s", model_precision_name(precision));
  for (int i = 0; i < a->n_precision_for; i++)
    printf("%s%s %s", i ? ", " : " (", pf_names[i], model_precision_name(pf_per[i]));
  printf("%s\n", a->n_precision_for ? ")" : "");
  /* The operator's console may name the hosts; the open routes only count them (/healthz). */
  if (a->job_hosts) printf("maskd serve: training jobs may start ranks on this machine and %s\n", a->job_hosts);
  else printf("maskd serve: training jobs start ranks on this machine only (--job-hosts allows others)\n");
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

int cmd_serve(int argc, char **argv) {
  ServeArgs *args = malloc(sizeof *args);
  if (!args) { fprintf(stderr, "maskd serve: out of memory\n"); return 1; }
  serve_defaults(args);
  int parsed = cli_parse(&cli_spec_serve, "serve", -1, argc, argv, 1, args, NULL, NULL);
  if (parsed) { free(args); return parsed > 0 ? 0 : 2; }
  int status = serve(args);
  free(args);
  return status;
}
