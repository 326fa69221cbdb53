/* A training job queued by maskd serve, read by the maskd train child its worker starts
** (`maskd train --db DB --job ID --work-dir W [--data-dir D]`): the description comes
** from the store's jobs table, not from a file or the command line, and the child links
** its run to the job itself (store_job_run_create, store_job_set_run). */
#ifndef MASKD_TRAIN_JOB_H
#define MASKD_TRAIN_JOB_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/train/run_config.h"
#include "store/store.h"

/* Reads running train job `job`: a resume job writes its run's id into resume[cap]; any
** other applies its description over rc with the names (tokenizer, train, validation,
** a config that is no preset) resolved to paths inside the server's roots (data_dir may
** be NULL), as the HTTP handler resolved them when it queued the job. */
int train_job_read(Store *db, int64_t job, const char *data_dir, const char *work_dir, RunConfig *rc, char *resume,
                   size_t cap, Err *err);

#endif
