/* The hosts a training job queued over HTTP may start ranks on. A run's "hosts"
** ("name:slots,name:slots") becomes mpirun's --host, and mpirun reaches every host but
** this one with ssh: so the operator chooses them (maskd serve --job-hosts LIST, which
** the worker hands to the job's maskd train), never the client that posts the run.
** Without a list a job runs on this machine only ("ranks" alone); with one, every host
** a job names must be in it. The server checks a run when it is posted or resumed, and
** the job's maskd train checks what it would launch, so a job queued under an older,
** wider list fails instead of reaching a host no longer allowed. */
#ifndef MASKD_JOB_HOSTS_H
#define MASKD_JOB_HOSTS_H
#include <stddef.h>
#include "engine/core/err.h"

/* The option that allows hosts, as every refusal names it. */
#define JOB_HOSTS_OPTION "maskd serve --job-hosts"
/* The longest host name (DNS allows 253 characters) and the most names a list holds. */
#define JOB_HOSTS_NAME_MAX 253
#define JOB_HOSTS_MAX 256

/* Checks an operator's list: 1 to JOB_HOSTS_MAX comma-separated names, each 1 to
** JOB_HOSTS_NAME_MAX letters, digits, '.', '-' or '_', not starting with '-' (no slots:
** those stay the job's); 0, or -1 with err naming the bad name and why. */
int job_hosts_check_list(const char *list, Err *err);
/* The number of names in a list job_hosts_check_list accepted; 0 for NULL or "". */
int job_hosts_count(const char *list);
/* Checks a run's hosts (run_config's "name[:slots],..."; "" = this machine, always
** allowed) against allowed (a list job_hosts_check_list accepted; NULL or "": none):
** 0 when every host is in it (names compared case-insensitively, as DNS compares them;
** slots are not limited), else -1 with err (ERR_INVALID) saying, without listing the
** allowed names, that this server starts ranks on this machine only, or which host is
** not allowed, and naming JOB_HOSTS_OPTION; refused (cap bytes, may be NULL) receives
** the first host refused ("" for an entry that names none). */
int job_hosts_allow(const char *hosts, const char *allowed, char *refused, size_t cap, Err *err);

#endif
