/* Layer: store/ (this folder: store.c, the connection and schema, and a file per
** concept: blobs.c, tokenizers.c, datasets.c, runs.c, models.c, jobs.c, sharing
** store_db.h; load.c, sha256.c) uses the engine's public headers, never server/.
** (ARCHITECTURE.md)
**
** The store: one SQLite database (WAL, foreign keys on) that plays the part of
** the Hugging Face Hub and of the run tracker. It holds training runs with their
** per-step and per-epoch metrics, model repositories whose revisions are pushed
** checkpoints (weights, optional optimizer state, tokenizer; content-addressed
** blobs by sha256), tokenizers, datasets (shard sets with counts) and jobs.
**
** Every write is one transaction, so a killed process leaves the database as it
** was before or after the write, never between (a streamed push writes its blobs
** before its transaction, under keys nothing refers to: see StoreStream). The schema is versioned with
** PRAGMA user_version and migrated forward on open. A Store is one connection:
** use it from one thread at a time (open one per thread or process; WAL lets
** readers run while another connection writes).
**
** Lists and records come back as jansson values (the HTTP API's JSON); the caller
** json_decref()s them. Functions return 0 / an id >= 1 on success and -1 with a
** one-line message in err on failure. err's kind says which failure: ERR_NOT_FOUND
** (a lookup names nothing, a malformed name included), ERR_CONFLICT (a name taken,
** a job in a state that forbids the change), ERR_INVALID (an argument refused),
** ERR_TOO_LARGE, ERR_NOMEM, ERR_IO (SQLite failed), ERR_INTERNAL (damaged blobs), ERR_BUSY
** (another connection held the database locked past the busy timeout: 30 s, or
** $MASKD_BUSY_TIMEOUT_MS read by store_open; the same call may succeed later). */
#ifndef MASKD_STORE_H
#define MASKD_STORE_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

#define STORE_SCHEMA_VERSION 9

typedef struct Store Store;

/* The status of a run or a job, as the store keeps it (the runs and jobs tables'
** status columns, and the "status" of their JSON). A run is created, then running,
** then ends; a job is queued, then running, then ends. */
typedef enum StoreStatus {
  STORE_STATUS_CREATED,       /* a run made but not started (runs only) */
  STORE_STATUS_QUEUED,        /* a job waiting for the worker (jobs only) */
  STORE_STATUS_RUNNING,
  STORE_STATUS_DONE,
  STORE_STATUS_FAILED,
  STORE_STATUS_INTERRUPTED,   /* stopped by a signal or a dead process; a run can be resumed */
  STORE_STATUS_CANCELLED,
  STORE_STATUS_COUNT
} StoreStatus;

/* The status's name ("running"); "unknown" for a value outside the enum. */
const char *store_status_name(StoreStatus status);
/* The status named name (NULL allowed) into *out: 0, or -1 (*out untouched) when it names none. */
int store_status_parse(const char *name, StoreStatus *out);
/* 1 for the statuses that end a run or a job: done, failed, interrupted, cancelled. */
int store_status_ended(StoreStatus status);

/* Opens (creating if needed) and migrates the database at path. Opening an existing
** database at the current schema only reads: it does not wait on another connection's
** write transaction, and works on a file the user may only read (in a folder where
** SQLite can make its -shm and -wal files). */
Store *store_open(const char *path, Err *err);
/* Closes; NULL allowed. */
void store_close(Store *s);
/* 1 when a transaction is open on the connection (no public function leaves one), else 0. */
int store_in_transaction(const Store *s);
/* The schema version of the open database (STORE_SCHEMA_VERSION after open). */
int store_schema_version(Store *s);
/* PRAGMA integrity_check and foreign_key_check; 0 when both are clean. */
int store_integrity_check(Store *s, Err *err);

/* 0 when name is what a Hub repository name allows (letters, digits, - _ . and one
** namespace '/', not starting with . or -, no "..", at most 128); else -1 naming what. */
int store_check_name(const char *what, const char *name, Err *err);
/* store_check_name for the name of a repository to be made, which also may not have an
** owner named models, datasets or spaces (the Hub's URLs read those as a repository type). */
int store_check_new_repo_name(const char *what, const char *name, Err *err);
/* store_check_new_repo_name for a run's name (a run's model takes the same name), which also may
** not be all digits: GET /runs/{id}, cancel and resume read a number as a run's id. */
int store_check_run_name(const char *name, Err *err);

/* ---- blobs: content-addressed bytes (safetensors, tokenizer.json) ---- */
/* The largest blob stored or read back (a size beyond it in the store means damage). */
#define STORE_MAX_BLOB ((uint64_t)64 << 30)

/* Lower-case hex SHA-256 of len bytes into hex (65 bytes with the NUL). */
void store_sha256_hex(const void *data, size_t len, char hex[65]);
/* Stores bytes (once per content); hex receives their sha256. */
int store_blob_put(Store *s, const void *data, size_t len, char hex[65], Err *err);
/* The bytes of a blob (malloc'd, caller frees); checked against their sha256. */
int store_blob_get(Store *s, const char *hex, void **data, size_t *len, Err *err);
/* A blob read in place, a range at a time: no copy of it is held in memory. */
typedef struct StoreBlobReader StoreBlobReader;
/* Opens blob hex for reading; *len receives its size. The reader holds no transaction
** between reads: each read takes short read transactions of its own (one per chunk), so
** a slow reader (a download) never holds back WAL checkpoints, and s may serve other
** calls between reads. Blobs never change, so the bytes are those of one version; a blob
** deleted (store_gc) while it is read makes the next read fail with ERR_NOT_FOUND ("was
** deleted while it was read"). NULL with err set: missing, damaged chunks, ERR_IO. */
StoreBlobReader *store_blob_open(Store *s, const char *hex, uint64_t *len, Err *err);
/* Keeps blob hex from store_gc until store_blob_unpin(key) (or until this process is gone:
** its pins are swept then): a download pins what it streams, so a revision deleted meanwhile
** (a training run's keep-last) does not cut it. key receives the pin's name. ERR_NOT_FOUND
** when the blob is gone already; ERR_BUSY, ERR_IO. */
int store_blob_pin(Store *s, const char *hex, char key[65], Err *err);
/* Drops a pin of store_blob_pin (best effort: one left behind is swept with its process). */
void store_blob_unpin(Store *s, const char *key);
/* Copies n bytes at offset into dst; ERR_INVALID past the end, ERR_IO when SQLite fails. */
int store_blob_read(StoreBlobReader *r, uint64_t offset, void *dst, size_t n, Err *err);
/* Checks the bytes against the blob's sha256, as store_blob_get does: what was read
** front to back is already hashed, the rest is read now. -1 with err set when they differ. */
int store_blob_verify(StoreBlobReader *r, Err *err);
/* Frees the reader; NULL allowed. */
void store_blob_close(StoreBlobReader *r);
/* Deletes blobs no revision or tokenizer refers to; *removed (may be NULL) counts them.
** A stream being written (by any process) is kept; those of processes that are gone are
** dropped, not counted. Their pages stay in the file, free, for the next writes to reuse
** (a training's next checkpoint is as large as the one it dropped): store_compact gives
** them back to the file system. */
int store_gc(Store *s, int64_t *removed, Err *err);
/* Returns the file's free pages to the file system (incremental_vacuum), a few megabytes per
** write transaction with a pause between, so other writers are not held off for the
** whole of it; *freed (may be NULL) counts the bytes. */
int store_compact(Store *s, int64_t *freed, Err *err);

/* ---- tokenizers ---- */

/* Adds tokenizer.json text under a new name; returns its id. source_json (NULL: unknown)
** is a JSON object saying what it was made from ({"corpora": [{"name", "bytes", "sha256"}]});
** job is the job that made it (0: none). */
int64_t store_tokenizer_add(Store *s, const char *name, const char *tokenizer_json, int vocab_size,
                            const char *source_json, int64_t job, Err *err);
/* The tokenizer.json text (malloc'd) of a name; *id may be NULL. */
int store_tokenizer_get(Store *s, const char *name, char **tokenizer_json, int64_t *id, Err *err);
/* Oldest first: [{id, name, vocab_size, sha256 (of the tokenizer.json), created, job (or null),
** source (object or null)}] */
json_t *store_tokenizers_list(Store *s, Err *err);
/* One entry of store_tokenizers_list by name (ERR_NOT_FOUND when none). */
json_t *store_tokenizer_info(Store *s, const char *name, Err *err);

/* ---- datasets: shard sets ---- */

typedef struct StoreShard {
  const char *split;      /* "train", "validation", ... */
  const char *path;       /* shard file: its file name (what the store shows; never a host path) */
  int64_t n_samples;
} StoreShard;

/* Adds a dataset (its shards with their sample counts); tokenizer (a registered tokenizer's
** name) may be NULL. source_json (NULL: unknown) is a JSON object ({"corpora": [...],
** "tokenizer": {"name", "sha256"}}); job the job that made it (0: none). */
int64_t store_dataset_add(Store *s, const char *name, const char *tokenizer, int seq_len,
                          const StoreShard *shards, int n_shards, const char *source_json, int64_t job, Err *err);
/* Oldest first: [{id, name, tokenizer (or null), split (its shards' one split, null when
** several), seq_len, samples, shards (a count), created, job (or null), source (object or null)}] */
json_t *store_datasets_list(Store *s, Err *err);
/* One entry of store_datasets_list by name (ERR_NOT_FOUND when none), with
** splits: {split: {shards, samples}} and files: [{split, file, samples}]. */
json_t *store_dataset_get(Store *s, const char *name, Err *err);

/* ---- runs and metrics ---- */

/* A new run (status created) under name with its description; returns its id. */
int64_t store_run_create(Store *s, const char *name, const char *config_json, Err *err);
/* Sets the status: running (with the started time and the pid) or one that ends the run
** (with the finished time); error may be NULL. Running is set whatever the run's status
** was: to start a run that another process might start too (a resume), store_run_claim. */
int store_run_set_status(Store *s, int64_t run, StoreStatus status, const char *error, Err *err);
/* Claims a run for this process, atomically: marks it running (the started time, this
** pid) unless it is running in a live process or done, which is ERR_CONFLICT ("run R is
** already running (pid P)"); of two processes starting (resuming) one run at once,
** exactly one succeeds. A run left "running" by a process that is gone can be claimed. */
int store_run_claim(Store *s, int64_t run, Err *err);
/* Records progress: step of total_steps, in epoch. */
int store_run_progress(Store *s, int64_t run, int64_t step, int64_t total_steps, int64_t epoch, Err *err);
/* Replaces a run's description: a resumed run that moved to other ranks, hosts or
** grad_accum (the global batch unchanged) is described as it now runs. */
int store_run_set_config(Store *s, int64_t run, const char *config_json, Err *err);
/* A data-parallel run's ranks, hosts, per-rank and global tokens/s and communication
** times, as a JSON object (store_run_get returns it as "dist"); replaces the last one. */
int store_run_set_dist(Store *s, int64_t run, const char *dist_json, Err *err);
/* A run's results beyond its epochs, as a JSON object (a fine-tuning run's test
** metrics: {"test": {...}}); store_run_get returns it as "results"; replaces the last one. */
int store_run_set_results(Store *s, int64_t run, const char *results_json, Err *err);
/* Marks runs left "running" by a process that no longer exists as "interrupted"; *n counts them.
** Reads first: takes the write lock only when there is such a run (every maskd train start
** calls it, and need not wait behind another process's write transaction). */
int store_runs_recover(Store *s, int *n, Err *err);

typedef struct StoreStepMetric {
  int64_t step;
  double epoch;           /* fractional epoch, as Keras/Trainer report it */
  double loss, lr, grad_norm, tokens_per_s;
  double time;            /* unix seconds; 0 = now */
} StoreStepMetric;

typedef struct StoreEpochMetric {
  int64_t epoch;
  double train_loss, eval_loss, eval_accuracy, perplexity, eval_runtime;
  double time;            /* 0 = now */
  /* A classifier's epoch (cls = 1; 0 leaves these null, as a masked LM's): F1 scores
  ** and its most frequent confusions, a JSON array [{"true", "pred", "count"}] or NULL. */
  int cls;
  double macro_f1, weighted_f1;
  const char *confusion_json;
} StoreEpochMetric;

/* Appends step metrics (one transaction for all n). Non-finite values are stored as null. */
int store_step_metrics_add(Store *s, int64_t run, const StoreStepMetric *m, int n, Err *err);
/* Records one epoch's metrics (replacing an earlier record of the same epoch, as a resumed run re-evaluates). */
int store_epoch_metrics_add(Store *s, int64_t run, const StoreEpochMetric *m, Err *err);
/* The run's id for "ID" or a run name (the newest of that name); -1 if none. */
int64_t store_run_find(Store *s, const char *id_or_name, Err *err);
/* {id, name, status, config (object), created, started, finished, error, step, total_steps, epoch, pid, dist,
** results (object or null), claimed (when its latest process took it: started, or resumed; null before)} */
json_t *store_run_get(Store *s, int64_t run, Err *err);
/* Runs, newest first: [{id, name, status, created, started, finished, step, total_steps, epoch, error,
** last_loss, eval_loss}] */
json_t *store_runs_list(Store *s, Err *err);
/* {steps: [{step, epoch, loss, lr, grad_norm, tokens_per_s, time}] (step > since_step),
**  epochs: [{epoch, train_loss, eval_loss, eval_accuracy, perplexity, eval_runtime, time}]}; a
** classifier's epochs also carry eval_macro_f1, eval_weighted_f1 and confusion (an array). */
json_t *store_run_metrics(Store *s, int64_t run, int64_t since_step, Err *err);

/* ---- model repositories and revisions ---- */

/* A blob written while it is produced, so a push needs no copy of it in memory. */
typedef struct StoreBlobWriter StoreBlobWriter;
/* A streamed blob of len bytes (len >= 1): produce is called once, before the push's
** transaction, and must hand over exactly len bytes in order through
** store_blob_write(); 0, or -1 with err set. It holds no lock while it produces: each
** CHUNK_BYTES written go into the store in a short write transaction of their own,
** under a temporary key nothing refers to, so other writers wait for one chunk at most;
** the push's own transaction then makes them the revision's blob. A process killed
** meanwhile leaves those rows, which a later store_open, store_push or store_gc (of any
** process) drops once the process is gone; a live process's are never taken, unless
** untouched for an hour (a producer that stuck, or a pid reused), and then its push
** fails. */
typedef struct StoreStream {
  size_t len;
  int (*produce)(void *ctx, StoreBlobWriter *w, Err *err);
  void *ctx;
} StoreStream;
/* Appends n bytes to the blob being produced; more than its len, or a write after
** a failed one, is an error (and the push then fails and rolls back). */
int store_blob_write(StoreBlobWriter *w, const void *data, size_t n, Err *err);
/* store_blob_write with the writer as a void *: the write function of a CkptSink
** (engine/io/checkpoint.h), for a checkpoint streamed into a blob as it is serialised. */
int store_blob_sink(void *w, const void *data, size_t n, Err *err);

/* What a push carries; weights and config are required, the rest may be NULL / 0.
** Weights come as bytes or as a stream (exactly one), the optimizer state as at
** most one of the two; a streamed blob is stored as the same chunks and sha256 as
** the same bytes given whole. */
typedef struct StorePush {
  const char *message;            /* "Training in progress epoch 3" */
  const char *config_json;        /* config.json text */
  const void *weights; size_t weights_len;        /* model.safetensors bytes */
  const void *optimizer; size_t optimizer_len;    /* optimizer-state safetensors, for resume */
  const char *tokenizer_json;     /* tokenizer.json text */
  const char *tokenizer_config_json, *special_tokens_map_json;   /* an imported folder's side files (texts), kept as they were */
  int64_t run;                    /* producing run, 0 = none */
  int64_t step, epoch;
  const char *metrics_json;       /* JSON object, e.g. {"eval_loss": 2.3} */
  const StoreStream *weights_stream, *optimizer_stream;   /* instead of weights / optimizer */
  int new_repo;                   /* the repository must not exist yet: ERR_CONFLICT, nothing written, when
                                  ** it does (checked before streaming and again under the push's lock) */
  int best;                       /* the revision becomes its repository's best in the push's transaction */
} StorePush;

typedef struct StoreRevision {
  int64_t id, model_id, seq;      /* seq: 1, 2, ... within the model */
  char model[129];
  char commit[41];                /* hex id shown as the revision (like a Hub commit) */
  char weights[65], optimizer[65], tokenizer[65];   /* blob sha256s; "" when absent */
  char message[256];
  int64_t run, step, epoch;
  double created;                 /* the revision's time; model_created its repository's */
  double model_created;
} StoreRevision;

/* Creates the repository if needed; returns its id. */
int64_t store_model_create(Store *s, const char *name, Err *err);
/* Pushes a revision to model (created if needed); out may be NULL. The revision appears
** whole in one transaction or not at all (its streams are written before, see StoreStream).
** One repository serves one pipeline: a revision whose config.json names a sequence
** classifier (architectures *ForSequenceClassification) pushed where the newest revision
** is not one, or the other way round, is refused with ERR_CONFLICT, nothing written. */
int store_push(Store *s, const char *model, const StorePush *p, StoreRevision *out, Err *err);
/* Resolves "NAME", "NAME@main" (newest), "NAME@best" (store_model_set_best's), "NAME@N" (seq) or
** "NAME@<commit prefix>" (>= 4 hex). */
int store_resolve(Store *s, const char *spec, StoreRevision *out, Err *err);
/* A revision's file as the Hub serves it: "config.json", "model.safetensors",
** "tokenizer.json", "optimizer.safetensors", "metrics.json", and for a revision pushed with
** them "tokenizer_config.json", "special_tokens_map.json" (ERR_NOT_FOUND without); malloc'd bytes. */
int store_revision_file(Store *s, const StoreRevision *r, const char *file, void **data, size_t *len, Err *err);
/* The newest revision of a run that holds optimizer state (for resume); 1 when there is none. */
int store_run_checkpoint(Store *s, int64_t run, StoreRevision *out, Err *err);
/* Drops a revision's optimizer state (keep-last-N), or the whole revision; then collect blobs with store_gc(). */
int store_revision_drop_optimizer(Store *s, int64_t revision_id, Err *err);
int store_revision_delete(Store *s, int64_t revision_id, Err *err);
/* Replaces a revision's metrics (metrics.json) with a JSON object. */
int store_revision_set_metrics(Store *s, int64_t revision_id, const char *metrics_json, Err *err);
/* Marks a revision as its repository's best (a fine-tuning run's by validation macro-F1):
** NAME@best resolves to it, and the model's records show its seq as "best". */
int store_model_set_best(Store *s, int64_t revision_id, Err *err);
/* [{id, name, created, revisions, best (seq or null), last_commit, last_message, last_created}] */
json_t *store_models_list(Store *s, Err *err);
/* {id, name, created, best (seq or null), revisions: [{seq, commit, message, created, run, step, epoch, metrics, has_optimizer}]} newest first */
json_t *store_model_get(Store *s, const char *name, Err *err);

/* How store_models_query orders repositories (ties, and equal values, by name ascending). */
typedef enum StoreModelSort { STORE_SORT_NAME, STORE_SORT_CREATED, STORE_SORT_MODIFIED } StoreModelSort;
/* A search of the repositories, as the Hub's GET /api/models filters, sorts and pages them. */
typedef struct StoreModelQuery {
  const char *search;       /* a substring of the name, any case; NULL: any */
  const char *author;       /* the owner: names "author/..."; NULL: any */
  const char *pipeline;     /* "fill-mask" or "text-classification", as the newest revision's
                            ** config.json names it (the first architecture *ForSequenceClassification
                            ** or *ForMaskedLM); NULL: any */
  StoreModelSort sort;
  int descending;
  int64_t offset, limit;    /* the page: at most limit (>= 0) rows from offset (>= 0) */
} StoreModelQuery;
/* The page of repositories with at least one revision that match q: [{name, created (the repository's),
** last_modified (its newest revision's created), commit, seq (the newest's), has_tokenizer, pipeline_tag
** (or null), architectures (array or null), model_type (or null)}]; *total (may be NULL) counts every match. */
json_t *store_models_query(Store *s, const StoreModelQuery *q, int64_t *total, Err *err);
/* The history of revision seq of repository model_id: its revisions from seq back to the first,
** newest first, the page [offset, offset + limit): [{seq, commit, message, created}]; *total
** (may be NULL) counts the whole history. */
json_t *store_revision_history(Store *s, int64_t model_id, int64_t seq, int64_t offset, int64_t limit, int64_t *total,
                               Err *err);

/* ---- jobs ---- */

/* Queues a job of kind tokenizer, prepare or train with its description; returns its id. */
int64_t store_job_submit(Store *s, const char *kind, const char *params_json, Err *err);
/* Takes the oldest queued job and marks it running: 0 and fills the outputs (strings
** malloc'd), 1 when the queue is empty, -1 on error. */
int store_job_claim(Store *s, int64_t *job, char **kind, char **params_json, Err *err);
/* Links a job to the run it works on (a resumed run). */
int store_job_set_run(Store *s, int64_t job, int64_t run, Err *err);
/* Creates a run as store_run_create does and links the running job to it, in one
** transaction: a job's run is the one it made, never one matched afterwards. */
int64_t store_job_run_create(Store *s, int64_t job, const char *name, const char *config_json, Err *err);
/* The run a job is linked to: its id, 0 when none yet, -1 on error (no such job). */
int64_t store_job_run(Store *s, int64_t job, Err *err);
/* Ends a running job with a status that ends it (store_status_ended); error may be NULL. */
int store_job_finish(Store *s, int64_t job, StoreStatus status, const char *error, Err *err);
/* Cancels: a queued job at once; a running one is flagged for its worker to stop. */
int store_job_cancel(Store *s, int64_t job, Err *err);
/* 1 when cancellation of job was requested, 0 if not, -1 on error. */
int store_job_cancel_requested(Store *s, int64_t job, Err *err);
/* 1 when a running job works on run (its final status may still change), 0 if none, -1 on error. */
int store_run_has_running_job(Store *s, int64_t run, Err *err);
/* Marks jobs left "running" (by a dead worker) "interrupted"; *n counts them. Reads first, as
** store_runs_recover. */
int store_jobs_recover(Store *s, int *n, Err *err);
/* A running job's progress, a JSON object ({"phase", "done", "total", "unit", "rate", "eta_s"}),
** replacing the last; NULL clears it. ERR_CONFLICT when the job is not running, ERR_NOT_FOUND
** when there is none, ERR_TOO_LARGE over 4096 bytes. */
int store_job_progress(Store *s, int64_t job, const char *progress_json, Err *err);
/* {id, kind, status, params (object), run, created, started, finished, error, cancel_requested,
** progress (object or null: the last the job's process wrote)} */
json_t *store_job_get(Store *s, int64_t job, Err *err);
/* Jobs, newest first. */
json_t *store_jobs_list(Store *s, Err *err);

#endif
