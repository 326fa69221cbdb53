/* The ranks' builds, compared before anything else (rank_identity.h). */
#include "server/cli/rank_identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/run_config.h"
#include "store/sha256.h"

/* The record: "maskd-rank-id 1" at 0, the sha256 hex at 16, the layout word (hex) at 80,
** the host at 128. Its fields' places never move, so a later build can still read it. */
enum { ID_MAGIC = 0, ID_EXE = 16, ID_LAYOUT = 80, ID_HOST = 128 };
static const char id_magic[] = "maskd-rank-id 1";

/* The sizes of what the ranks broadcast, folded: two builds that differ here cannot run
** together even where their code does the same. */
static unsigned layout_word(void) {
  return (unsigned)sizeof(RunConfig) * 2654435761u ^ (unsigned)sizeof(Err) * 40503u;
}

/* sha256 of /proc/self/exe, streamed; "" when it cannot be read (then only the layout word and host speak). */
static void exe_sha256(char hex[65]) {
  hex[0] = '\0';
  FILE *f = fopen("/proc/self/exe", "rb");
  if (!f) return;
  StoreSha256 c;
  store_sha256_init(&c);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) store_sha256_update(&c, buf, n);
  unsigned char digest[32];
  if (!ferror(f)) store_sha256_final(&c, digest, hex);
  fclose(f);
}

int rank_identity_check(Dist *d, char exe[65], Err *err) {
  memset(exe, 0, 65);
  int world = dist_world(d);
  if (world == 1) return 0;   /* alone: nothing to compare with (exe stays "") */
  exe_sha256(exe);
  char mine[RANK_IDENTITY_BYTES];
  memset(mine, 0, sizeof mine);
  memcpy(mine + ID_MAGIC, id_magic, sizeof id_magic);
  memcpy(mine + ID_EXE, exe, 64);
  snprintf(mine + ID_LAYOUT, ID_HOST - ID_LAYOUT, "%08x", layout_word());
  snprintf(mine + ID_HOST, RANK_IDENTITY_BYTES - ID_HOST, "%s", dist_host(d));
  char *all = malloc((size_t)world * RANK_IDENTITY_BYTES);
  /* The others are waiting in the allgather: a rank that cannot take part ends them all. */
  if (!all) dist_abort(d, 1);
  int r = dist_allgather(d, mine, RANK_IDENTITY_BYTES, all, err);
  int first = -1, differ = 0;
  for (int q = 1; r == 0 && q < world; q++)
    if (memcmp(all + (size_t)q * RANK_IDENTITY_BYTES, all, ID_HOST)) {   /* magic, exe, layout */
      if (first < 0) first = q;
      differ++;
    }
  if (first > 0) {
    /* Every field is read within its own bytes (%.Ns), whatever another build put there. */
    const char *z = all, *f = all + (size_t)first * RANK_IDENTITY_BYTES;
    char more[48] = "";
    if (differ > 1) snprintf(more, sizeof more, " (and %d more rank%s)", differ - 1, differ > 2 ? "s" : "");
    r = err_setk(err, ERR_INVALID,
                 "the ranks run different maskd builds: rank %d on %.64s runs sha256 %.12s (layout %.8s)%s, rank 0 on %.64s "
                 "sha256 %.12s (layout %.8s): install the same maskd on every host",
                 first, f + ID_HOST, f + ID_EXE, f + ID_LAYOUT, more, z + ID_HOST, z + ID_EXE, z + ID_LAYOUT);
  }
  free(all);
  return r;
}
