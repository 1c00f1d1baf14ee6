// CLinux: Linux calls that Swift's Glibc module does not expose (it is
// built without _GNU_SOURCE and without <sys/timex.h>). Part of glibc: no
// library to link.
#pragma once
#include <sys/timex.h>
#include <pthread.h>
#include <sys/eventfd.h>   // the panel sleeps in poll(2) on one

// Thread names show in `top -H` and in crash reports. glibc declares this
// only under _GNU_SOURCE.
extern int pthread_setname_np(pthread_t thread, const char *name);

/// The kernel's clock state from adjtimex(2), read-only (modes = 0):
/// TIME_ERROR (5) while the clock is not synchronised.
static inline int soundbox_clock_state(void) {
    struct timex tx = {0};
    return adjtimex(&tx);
}

// A pipe whose ends are close-on-exec from the start (a child spawned by
// another thread meanwhile must not inherit them). _GNU_SOURCE only.
extern int pipe2(int pipefd[2], int flags);
