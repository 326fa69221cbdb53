/* Jobs queued by maskd serve, read by the child process its worker starts for each kind:
**   maskd train           --db DB --job ID --work-dir W [--data-dir D]   (kind "train")
**   maskd tokenizer train --db DB --job ID --work-dir W [--data-dir D]   (kind "tokenizer")
**   maskd prepare         --db DB --job ID --work-dir W [--data-dir D]   (kind "prepare")
**   maskd finetune        --db DB --job ID --work-dir W [--data-dir D]   (kind "train" with
**                         "task": "text-classification")
** The description comes from the store's jobs table, not from a file or the command
** line. A job must be of the command's kind and claimed by a worker (running). Its names
** are resolved again inside the server's folders with server/app/workspace.h, as the HTTP
** handler resolved them when it queued the job: what the submission saw may have changed
** since. A training job's process links its run to the job itself (store_job_run_create,
** store_job_set_run). */
#ifndef MASKD_JOB_READ_H
#define MASKD_JOB_READ_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/train/run_config.h"
#include "server/app/app.h"
#include "server/app/workspace.h"
#include "store/store.h"

/* A tokenizer job: its corpora and where the tokenizer goes. */
typedef struct JobReadTokenizer {
  char *inputs[APP_JOB_MAX_INPUTS];   /* the corpora's paths (owned) */
  int n_inputs;
  int vocab_size;
  char out[WORKSPACE_PATH_MAX];       /* tokenizers/NAME/tokenizer.json in the work folder */
} JobReadTokenizer;

/* A prepare job: its tokenizer, corpus and shard folder. */
typedef struct JobReadPrepare {
  char tokenizer[WORKSPACE_PATH_MAX];  /* a registered tokenizer's file, or one in the data folder */
  char input[WORKSPACE_PATH_MAX];
  char out[WORKSPACE_PATH_MAX];        /* datasets/NAME in the work folder */
  char split[65];                      /* "train" when the job names none */
  long seq_len;                        /* 0 when the job names none: the command's default */
} JobReadPrepare;

/* --job's value and --work-dir as a command got them: the id into *job, or why not
** ("--job: "x" is not a job id", "--job needs --work-dir"). */
int job_read_id(const char *text, const char *work_dir, int64_t *job, Err *err);

/* Reads running train job `job`: a resume job writes its run's id into resume[cap]; any
** other applies its description over rc with the names (tokenizer, train, validation,
** a config that is no preset) resolved to paths inside the server's folders (data_dir
** may be NULL). */
int job_read_train(Store *db, int64_t job, const char *data_dir, const char *work_dir, RunConfig *rc, char *resume,
                   size_t cap, Err *err);
/* The "task" of a fine-tuning job's description (POST /runs {"task": ...}). */
#define JOB_TASK_TEXT_CLASSIFICATION "text-classification"
/* The data files of a fine-tuning job: each a file under the data folder. */
#define JOB_FINETUNE_FILES {"train", "validation", "test", "labels"}

/* Reads running text-classification job `job` (a train job whose "task" is
** JOB_TASK_TEXT_CLASSIFICATION): *params receives its description (a new reference)
** with the data files (train, validation, test, labels) resolved to paths in data_dir. */
int job_read_finetune(Store *db, int64_t job, const char *data_dir, const char *work_dir, json_t **params, Err *err);

/* Reads running tokenizer job `job` into t (zeroed first; job_read_tokenizer_free frees
** it, also after a failure): inputs resolved in data_dir, the output in the folder the
** worker made for the job's name. */
int job_read_tokenizer(Store *db, int64_t job, const char *data_dir, const char *work_dir, JobReadTokenizer *t,
                       Err *err);
/* Frees the paths job_read_tokenizer allocated; safe on a zeroed one. */
void job_read_tokenizer_free(JobReadTokenizer *t);
/* Reads running prepare job `job` into p: its input resolved in data_dir, its tokenizer
** among the work folder's tokenizers (else in data_dir), the output in the folder the
** worker made for the job's name. */
int job_read_prepare(Store *db, int64_t job, const char *data_dir, const char *work_dir, JobReadPrepare *p, Err *err);

#endif
