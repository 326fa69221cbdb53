/* Git's object id of a file's bytes (a blob): SHA-1 of "blob <size>\0" and the bytes,
** as the Hub's tree and ETags name files that are not LFS. */
#ifndef MASKD_STORE_GIT_OID_H
#define MASKD_STORE_GIT_OID_H
#include <stddef.h>

/* The blob id of data[0..len) as 40 lower-case hex digits (41 bytes with the NUL). */
void store_git_blob_oid(const void *data, size_t len, char hex[41]);

#endif
