/* What a host name given to mpirun (--hosts, a hostfile) stands for on this machine:
** this machine itself, or another one, which mpirun must be able to reach. Rank 0 alone
** writes the store, which is this machine's: mpirun puts rank 0 on this machine when the
** hosts list it (in any place), else on another host, whose store would get the run. */
#ifndef MASKD_HOST_NAMES_H
#define MASKD_HOST_NAMES_H
#include <stddef.h>

/* Looks name (len bytes, not NUL-terminated) up as mpirun will: 0 when it is this machine
** (localhost, a 127.x.y.z or ::1 address, its host name or that name up to the first '.',
** an address of one of its interfaces, or a name that resolves to one: *local = 1) or
** resolves to an address (*local = 0); -1 when it does not resolve, with why (cap bytes)
** saying so ("its name does not resolve (Name or service not known)"). A name under
** .invalid never resolves (RFC 6761) and is not looked up. */
int host_names_lookup(const char *name, size_t len, int *local, char *why, size_t cap);
/* The hosts a hostfile names, as "a,b" (no slots; "" when none), into out (cap bytes,
** the names that fit); -1 when it cannot be read. A host is its line's first word; '#'
** starts a comment. */
int host_names_hostfile_list(const char *path, char *out, size_t cap);

#endif
