// Tests/Shims/clockshift.c: an LD_PRELOAD shim that moves the wall clock
// (CLOCK_REALTIME and what reads it) by SOUNDBOX_CLOCK_SHIFT_S seconds,
// forwards or back, and nothing else: the monotonic and boot clocks, and
// the rest of the process, are left alone (libfaketime, tried first, broke
// Swift's argument parsing). Tests/DaemonTests/ClockJumpTests.swift builds it.
//
//   cc -shared -fPIC -O2 -o clockshift.so Tests/Shims/clockshift.c -ldl
//   SOUNDBOX_CLOCK_SHIFT_S=-1700000000 LD_PRELOAD=./clockshift.so soundboxd ...
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long long shift(void) {
    const char *s = getenv("SOUNDBOX_CLOCK_SHIFT_S");
    return s ? atoll(s) : 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += shift();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    static int (*real)(struct timeval *restrict, void *restrict);
    if (!real) real = (int (*)(struct timeval *restrict, void *restrict))dlsym(RTLD_NEXT, "gettimeofday");
    int rc = real(tv, tz);
    if (rc == 0) tv->tv_sec += shift();
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
