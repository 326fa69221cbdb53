/* The hosts a training job may start ranks on (server/app/job_hosts.h): an operator's
** list is checked name by name (empty, '-' first, bad characters, slots, too long, too
** many refused); a run's hosts pass only when every name is listed (any case, any
** slots), with no list only "" (this machine) passes, and each refusal names the first
** host refused and the option, never the allowed names. */
#include <stdio.h>
#include <string.h>

#include "server/app/job_hosts.h"
#include "tests/unit/check.h"

/* Checks one list: accepted or refused, with a refusal's words in it. */
static void list_case(const char *name, const char *list, int ok, const char *words) {
  Err e = {0};
  int r = job_hosts_check_list(list, &e);
  check(ok ? r == 0 : r == -1 && strstr(e.msg, words) != NULL, name, "%s -> %d: %s", list ? list : "(null)", r, e.msg);
}

/* Checks one run's hosts against allowed: accepted, or refused naming refused_host and words. */
static void allow_case(const char *name, const char *hosts, const char *allowed, const char *refused_host,
                       const char *words) {
  Err e = {0};
  char refused[JOB_HOSTS_NAME_MAX + 1] = "unset";
  int r = job_hosts_allow(hosts, allowed, refused, sizeof refused, &e);
  /* A host refused is refused naming the option that would allow it; an entry without a name is malformed. */
  int ok = refused_host ? r == -1 && !strcmp(refused, refused_host) && strstr(e.msg, words) &&
                              (!*refused_host || strstr(e.msg, JOB_HOSTS_OPTION)) && e.kind == ERR_INVALID
                        : r == 0 && refused[0] == '\0';
  check(ok, name, "%s against %s -> %d, refused \"%s\": %s", hosts, allowed ? allowed : "(none)", r, refused, e.msg);
}

int main(void) {
  list_case("list_one", "h1", 1, "");
  list_case("list_several", "h1,node-2.example.org,gpu_3", 1, "");
  list_case("list_null", NULL, 0, "an empty list");
  list_case("list_empty", "", 0, "an empty list");
  list_case("list_empty_name_inside", "h1,,h2", 0, "an empty name");
  list_case("list_empty_name_first", ",h1", 0, "an empty name");
  list_case("list_empty_name_last", "h1,", 0, "an empty name");
  list_case("list_dash_first", "-oProxyCommand=x", 0, "starts with '-'");
  list_case("list_dash_later_name", "h1,-x", 0, "\"-x\" starts with '-'");
  list_case("list_dash_inside_name", "node-1", 1, "");
  list_case("list_space", "a b", 0, "' ' cannot be part");
  list_case("list_slash", "h1,a/b", 0, "'/' cannot be part");
  list_case("list_at", "user@h1", 0, "'@' cannot be part");
  list_case("list_slots", "h1:2", 0, "host names only");
  char longname[JOB_HOSTS_NAME_MAX + 2];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  list_case("list_name_too_long", longname, 0, "longer than 253");
  longname[JOB_HOSTS_NAME_MAX] = '\0';
  list_case("list_name_longest", longname, 1, "");
  static char many[JOB_HOSTS_MAX * 3 + 16];
  many[0] = '\0';
  for (int i = 0; i <= JOB_HOSTS_MAX; i++) strcat(many, i ? ",h" : "h");
  list_case("list_too_many", many, 0, "more than 256 names");
  many[strlen(many) - 2] = '\0';   /* JOB_HOSTS_MAX names */
  list_case("list_most", many, 1, "");

  check(job_hosts_count(NULL) == 0 && job_hosts_count("") == 0 && job_hosts_count("h1") == 1 &&
            job_hosts_count("h1,h2,h3") == 3,
        "count", "%d %d %d %d", job_hosts_count(NULL), job_hosts_count(""), job_hosts_count("h1"),
        job_hosts_count("h1,h2,h3"));

  allow_case("allow_this_machine_no_list", "", NULL, NULL, "");
  allow_case("allow_this_machine_with_list", "", "h1", NULL, "");
  allow_case("allow_null_hosts", NULL, NULL, NULL, "");
  allow_case("refuse_any_host_no_list", "h1:1", NULL, "h1", "this machine only");
  allow_case("refuse_localhost_no_list", "localhost:2", "", "localhost", "this machine only");
  allow_case("allow_listed", "h1:1,h2:1", "h1,h2", NULL, "");
  allow_case("allow_listed_any_order_and_slots", "h2:64,h1", "h1,h2", NULL, "");
  allow_case("allow_listed_any_case", "Node1.Example.ORG:2", "node1.example.org", NULL, "");
  allow_case("refuse_second_unlisted", "h1:1,h3:1", "h1,h2", "h3", "\"h3\" is not one of the hosts");
  allow_case("refuse_first_unlisted_first", "h4:1,h3:1", "h1,h2", "h4", "\"h4\"");
  allow_case("refuse_prefix_of_listed", "h:1", "h1,h2", "h", "\"h\"");
  allow_case("refuse_longer_than_listed", "h12:1", "h1,h2", "h12", "\"h12\"");
  allow_case("refuse_empty_entry", "h1,,h2", "h1,h2", "", "names no host");
  allow_case("refuse_slots_only", ":2", "h1", "", "names no host");
  /* The refusal names the host refused, never the others the operator allows. */
  Err e = {0};
  job_hosts_allow("h3:1", "secret-node,h1", NULL, 0, &e);
  check(strstr(e.msg, "h3") && !strstr(e.msg, "secret-node"), "refusal_hides_allowed_names", "%s", e.msg);
  return check_exit();
}
