/* The registry: what a tokenizer or prepare job made goes into the store, so that
** GET /tokenizers and GET /datasets answer from it with where each came from.
**
** Before the worker starts a job's process it plans the job (registry_plan): the
** job's corpora (and a prepare job's tokenizer file) are resolved in the server's
** folders as the job will resolve them, and each is hashed (sha256, size). When the
** process has exited successfully, registry_register hashes them again (a file that
** changed meanwhile fails the job: what was made is not what the hashes say), reads
** what the job wrote (tokenizers/NAME/tokenizer.json, or datasets/NAME's manifest and
** shards, checked whole) and adds it to the store with its source and the job's id.
** A failure says why in one line that names no host path: the worker fails the job
** with it and removes the output folder.
**
** Output folders the store does not know (made by an older server, or by the command
** line in the work folder) are adopted at worker start with source null
** (registry_adopt), so the lists show everything a job may name. */
#ifndef MASKD_REGISTRY_H
#define MASKD_REGISTRY_H
#include <stdint.h>
#include "engine/core/err.h"
#include "server/app/workspace.h"
#include "store/store.h"

/* One file a job reads, as named in the job and as hashed before it ran. */
typedef struct RegistryFile {
  char name[WORKSPACE_PATH_MAX];   /* as the job named it ("wikitext-2/train.txt") */
  char path[WORKSPACE_PATH_MAX];   /* resolved (never shown) */
  uint64_t bytes;
  char sha256[65];
} RegistryFile;

typedef struct RegistryPlan {
  int dataset;                     /* 0: a tokenizer job, 1: a prepare job */
  char name[129];                  /* the output's name */
  RegistryFile corpora[64];        /* APP_JOB_MAX_INPUTS */
  int n_corpora;
  RegistryFile tokenizer;          /* a prepare job's tokenizer file */
} RegistryPlan;

/* Plans a job of kind "tokenizer" or "prepare" (others: 1, nothing to register): resolves
** and hashes what it reads. 0, 1, or -1 with why. */
int registry_plan(const Workspace *ws, const char *kind, const char *params_json, RegistryPlan *p, Err *err);
/* Registers what the job made in out_dir (its output folder) under job's id, after
** checking that what it read did not change. 0, or -1 with why (the job then fails). */
int registry_register(Store *s, const RegistryPlan *p, const char *out_dir, int64_t job, Err *err);
/* Adopts a finished output folder the store does not know: kind "tokenizers" or
** "datasets", name its folder's name; 0 (registered, or already known), -1 with why. */
int registry_adopt(Store *s, const char *kind, const char *name, const char *dir, Err *err);

#endif
