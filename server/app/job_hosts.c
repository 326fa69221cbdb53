/* The hosts a training job may start ranks on (server/app/job_hosts.h). */
#include "server/app/job_hosts.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The length of the entry at s: up to the next ',' or the end. */
static size_t entry_len(const char *s) { return strcspn(s, ","); }

int job_hosts_check_list(const char *list, Err *err) {
  if (!list || !*list) return err_setk(err, ERR_INVALID, "an empty list (give host names, or leave the option out)");
  int n = 0;
  for (const char *s = list;; s++) {
    size_t len = entry_len(s);
    if (len == 0) return err_setk(err, ERR_INVALID, "an empty name in \"%s\"", list);
    if (len > JOB_HOSTS_NAME_MAX)
      return err_setk(err, ERR_INVALID, "\"%.32s...\" is longer than %d characters", s, JOB_HOSTS_NAME_MAX);
    /* It goes on mpirun's command line: a name that starts with '-' would read as an option. */
    if (*s == '-') return err_setk(err, ERR_INVALID, "\"%.*s\" starts with '-': not a host name", (int)len, s);
    for (size_t i = 0; i < len; i++)
      if (!isalnum((unsigned char)s[i]) && !strchr(".-_", s[i]))
        return err_setk(err, ERR_INVALID, s[i] == ':' ? "\"%.*s\": host names only (a job's slots are its own)"
                                                      : "\"%.*s\": '%c' cannot be part of a host name",
                        (int)len, s, s[i]);
    if (++n > JOB_HOSTS_MAX) return err_setk(err, ERR_INVALID, "more than %d names", JOB_HOSTS_MAX);
    s += len;
    if (!*s) return 0;
  }
}

int job_hosts_count(const char *list) {
  if (!list || !*list) return 0;
  int n = 1;
  for (const char *s = list; *s; s++) n += *s == ',';
  return n;
}

/* 1 when name (len bytes) is one of list's names. */
static int listed(const char *list, const char *name, size_t len) {
  for (const char *s = list; s && *s;) {
    size_t n = entry_len(s);
    if (n == len && !strncasecmp(s, name, len)) return 1;
    s += n;
    if (*s) s++;
  }
  return 0;
}

int job_hosts_allow(const char *hosts, const char *allowed, char *refused, size_t cap, Err *err) {
  if (refused && cap) refused[0] = '\0';
  for (const char *s = hosts ? hosts : ""; *s;) {
    size_t len = entry_len(s), name = strcspn(s, ":,");
    if (name > len) name = len;
    if (!listed(allowed, s, name)) {
      if (refused && cap) snprintf(refused, cap, "%.*s", (int)name, s);
      if (name == 0) return err_setk(err, ERR_INVALID, "hosts: an entry names no host (name:slots,name:slots)");
      if (!allowed || !*allowed)
        return err_setk(err, ERR_INVALID,
                        "hosts: this server starts ranks on this machine only, not on \"%.*s\" (\"ranks\" alone runs "
                        "them here; the operator allows hosts with " JOB_HOSTS_OPTION ")",
                        (int)name, s);
      return err_setk(err, ERR_INVALID, "hosts: \"%.*s\" is not one of the hosts this server allows (" JOB_HOSTS_OPTION ")",
                      (int)name, s);
    }
    s += len;
    if (*s) s++;
  }
  return 0;
}
