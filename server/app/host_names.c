/* What a host name given to mpirun stands for on this machine (host_names.h). */
#include "server/app/host_names.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* 1 when addr is a loopback address or one of this machine's interfaces' addresses. */
static int local_address(const struct sockaddr *addr) {
  if (addr->sa_family == AF_INET) {
    const struct in_addr *a = &((const struct sockaddr_in *)(const void *)addr)->sin_addr;
    if ((ntohl(a->s_addr) >> 24) == 127) return 1;
  } else if (addr->sa_family == AF_INET6) {
    if (IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr)) return 1;
  } else {
    return 0;
  }
  struct ifaddrs *ifs, *i;
  if (getifaddrs(&ifs) != 0) return 0;
  int found = 0;
  for (i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != addr->sa_family) continue;
    if (addr->sa_family == AF_INET)
      found = ((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr ==
              ((const struct sockaddr_in *)(const void *)addr)->sin_addr.s_addr;
    else
      found = !memcmp(&((const struct sockaddr_in6 *)(const void *)i->ifa_addr)->sin6_addr,
                      &((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr, sizeof(struct in6_addr));
  }
  freeifaddrs(ifs);
  return found;
}

int host_names_lookup(const char *name, size_t len, int *local, char *why, size_t cap) {
  char h[256], me[256];
  *local = 0;
  if (cap) why[0] = '\0';
  if (len == 0 || len >= sizeof h) {
    snprintf(why, cap, "not a host name");
    return -1;
  }
  memcpy(h, name, len);
  h[len] = '\0';
  if (!strcasecmp(h, "localhost")) return *local = 1, 0;
  if (gethostname(me, sizeof me - 1) == 0) {
    me[sizeof me - 1] = '\0';
    size_t short_len = strcspn(me, ".");
    if (!strcasecmp(h, me) || (strlen(h) == short_len && !strncasecmp(h, me, short_len))) return *local = 1, 0;
  }
  static const char invalid[] = ".invalid";
  if (len >= sizeof invalid - 1 && !strcasecmp(h + len - (sizeof invalid - 1), invalid)) {
    snprintf(why, cap, "its name does not resolve (a .invalid name never does)");
    return -1;
  }
  /* An address, or a name of one (/etc/hosts, DNS: as mpirun and ssh will resolve it). */
  struct addrinfo hints, *res = NULL, *r;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(h, NULL, &hints, &res);
  if (g != 0) {
    snprintf(why, cap, "its name does not resolve (%s)", gai_strerror(g));
    return -1;
  }
  for (r = res; r && !*local; r = r->ai_next) *local = local_address(r->ai_addr);
  freeaddrinfo(res);
  return 0;
}

int host_names_hostfile_list(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[1024];
  size_t n = 0;
  if (cap) out[0] = '\0';
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "#\r\n")] = '\0';
    char *w = line + strspn(line, " \t");
    size_t wl = strcspn(w, " \t");
    if (wl == 0) continue;
    if (n + wl + 2 > cap) break;
    if (n) out[n++] = ',';
    memcpy(out + n, w, wl);
    n += wl;
    out[n] = '\0';
  }
  fclose(f);
  return 0;
}
