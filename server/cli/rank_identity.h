/* The first thing the ranks of a maskd run say to each other: which maskd each one runs.
** Ranks of different builds (another host's older maskd, a rebuilt binary) may lay out
** the structures they broadcast otherwise (a RunConfig of another size): the first such
** collective then aborted inside MPI with MPI_ERR_TRUNCATE, before any check could name
** them. So right after dist_open, before any collective whose size is the build's, every
** rank sends one record of a size that never changes (RANK_IDENTITY_BYTES: the sha256 of
** its executable, its layout word, its host), and a mix is refused in one line. */
#ifndef MASKD_RANK_IDENTITY_H
#define MASKD_RANK_IDENTITY_H
#include "engine/core/err.h"
#include "engine/dist/dist.h"

/* The record's size: fixed for every build to come, so that any two can compare. */
#define RANK_IDENTITY_BYTES 256

/* Collective, the first of a run: fills exe (this executable's sha256, hex; "" for one rank) and returns 0
** when every rank runs the same executable; else -1 on every rank, with err naming the
** first rank that differs from rank 0, both hosts and both builds, and how many differ. */
int rank_identity_check(Dist *d, char exe[65], Err *err);

#endif
