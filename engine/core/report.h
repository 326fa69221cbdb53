/* Progress as a long computation reports it to whoever watches it (a job's record in
** the store, say): a callback the engine calls now and then, never from an inner loop.
** phase names the step in words ("reading", "EM iterations"); done of total (total < 0:
** unknown) counts unit ("bytes", "iterations") from 0 where the phase first began (a phase
** may come back: EM iterations between prunings go on counting). The engine calls it at most a few times
** a second, or once per step of a phase whose steps are slower; the callee throttles
** further, must be quick, and cannot fail the computation. */
#ifndef MASKD_REPORT_H
#define MASKD_REPORT_H

typedef void (*ReportFn)(void *ctx, const char *phase, double done, double total, const char *unit);

#endif
