/* What the HTTP API may read and where it writes. The API names things; it never
** takes a host path. Two roots, both fixed by the operator when the server starts:
**
**   data root  (--data-dir, read-only, optional): corpora, and tokenizers, shard
**              folders or config.json files the operator put there, named by their
**              path relative to the root ("wikitext-2/train.txt");
**   work root  (--work-dir, default <db>.work): what the server's jobs make, named
**              by the job's "name": tokenizers/NAME/tokenizer.json, datasets/NAME/,
**              and the jobs' logs in jobs/; the corpora uploaded (POST /corpora),
**              corpora/NAME, and their temporary files while they arrive, uploads/.
**
** A corpus is named either way: an uploaded one by its NAME (found first), a file of the
** data root by its path there. An upload may not take a name that either already has.
**
** Every name is checked as text first (no absolute paths, no "." or ".." segment,
** nothing starting with '-', no control characters, no NUL), then resolved with realpath(), and the result must
** still lie inside its root: a symbolic link that leads out counts as missing, so an
** answer never tells whether a file outside the roots exists. Resolution does not
** read files (stat only); whatever reads them runs in the job. */
#ifndef MASKD_WORKSPACE_H
#define MASKD_WORKSPACE_H
#include <jansson.h>
#include <stddef.h>
#include "engine/core/err.h"

#define WORKSPACE_PATH_MAX 4096

/* Why a name did not resolve. err's kind says it for the HTTP layer's table: a bad
** or unknown name is ERR_INVALID (a job's field that names nothing: 422), a name
** taken ERR_CONFLICT (409). */
typedef enum WorkspaceStatus {
  WORKSPACE_OK = 0,
  WORKSPACE_BAD_NAME = -1,    /* not a name this kind of thing may have */
  WORKSPACE_NOT_FOUND = -2,   /* no such thing inside the roots */
  WORKSPACE_EXISTS = -3,      /* an output name already taken */
  WORKSPACE_IO = -4           /* the work folder cannot be written */
} WorkspaceStatus;

typedef struct Workspace {
  char *data_root;            /* canonical data root, or NULL: no corpora can be named */
  char *work_root;            /* canonical work root */
} Workspace;

/* Canonicalises both roots, creating the work root and its sub-folders (mode 0700). */
int workspace_open(Workspace *w, const char *data_dir, const char *work_dir, Err *err);
/* Frees what workspace_open allocated; safe on a zeroed Workspace. */
void workspace_close(Workspace *w);

/* 1 when name is a registered name: letters, digits, - _ . (not first), at most 64. */
int workspace_name_ok(const char *name);

/* Each resolver writes the absolute path into path[cap] and returns WORKSPACE_OK,
** or a WorkspaceStatus with the reason in err (naming the field, never a host path). */

/* A corpus: an uploaded one (work root corpora/NAME), else a regular file under the data root. */
int workspace_corpus(const Workspace *w, const char *field, const char *name, char *path, size_t cap, Err *err);
/* A tokenizer: a registered one (tokenizers/NAME/tokenizer.json in the work root), else a
** tokenizer.json file, or a folder holding one, under the data root. */
int workspace_tokenizer(const Workspace *w, const char *field, const char *name, char *path, size_t cap, Err *err);
/* A dataset (a shard folder): a registered one (datasets/NAME), else a folder under the data root. */
int workspace_dataset(const Workspace *w, const char *field, const char *name, char *path, size_t cap, Err *err);
/* A model config.json under the data root (presets are the caller's business). */
int workspace_config(const Workspace *w, const char *field, const char *name, char *path, size_t cap, Err *err);
/* The folder a job named name writes, kind "tokenizers" or "datasets": refused with
** WORKSPACE_EXISTS when something already has that name. Does not create it. */
int workspace_output(const Workspace *w, const char *kind, const char *name, char *path, size_t cap, Err *err);
/* The folder a running job named name writes, kind "tokenizers" or "datasets": the one
** its worker made before starting it (workspace_output, then mkdir), read again by the
** job's process; ERR_NOT_FOUND when it is not a folder there (a link counts as none). */
int workspace_job_output(const Workspace *w, const char *kind, const char *name, char *path, size_t cap, Err *err);
/* Where an upload named name goes (work root corpora/NAME): WORKSPACE_BAD_NAME (ERR_INVALID)
** for a name that is not a registered name, WORKSPACE_EXISTS (ERR_CONFLICT) when an uploaded
** corpus or a data-root file has that name. Does not create it. */
int workspace_corpus_upload(const Workspace *w, const char *name, char *path, size_t cap, Err *err);
/* work_root/uploads, where uploads arrive, into path[cap]. */
int workspace_upload_dir(const Workspace *w, char *path, size_t cap, Err *err);
/* work_root/jobs/file into path[cap]. */
int workspace_job_file(const Workspace *w, const char *file, char *path, size_t cap, Err *err);

/* The corpora a job may name, for GET /corpora: the uploaded ones and the regular files
** under the data root (three levels), each {"name", "bytes", "uploaded": true|false} (a
** data-root file of an uploaded corpus's name is left out: the name resolves to the
** upload), sorted by name. At most limit entries; NULL when out of memory. (Tokenizers
** and datasets are listed from the store's registry: server/app/registry.h.) */
json_t *workspace_corpora(const Workspace *w, int limit);

/* What the API answers never holds a host path. Removes every "ROOT/" (work root, then
** data root) from text in place, so a path inside them reads as the name inside. */
void workspace_scrub(const Workspace *w, char *text);
/* The same over every string in v (objects and arrays, recursively), replacing those that
** change; v is changed in place and returned. */
json_t *workspace_scrub_json(const Workspace *w, json_t *v);

#endif
