/* Clocks, in seconds as doubles. now_monotonic for durations and deadlines (it never
** jumps), now_wall for times a person or the store reads (unix seconds). */
#ifndef MASKD_NOW_H
#define MASKD_NOW_H

/* Seconds on CLOCK_MONOTONIC: only differences mean anything. */
double now_monotonic(void);
/* Unix seconds on CLOCK_REALTIME (may jump when the clock is set). */
double now_wall(void);

#endif
