// CLinux: Linux calls that Swift's Glibc module does not expose (it is
// built without _GNU_SOURCE and without <sys/timex.h>). Part of glibc: no
// library to link.
#pragma once
#include <sys/timex.h>
#include <pthread.h>
#include <sys/eventfd.h>   // the panel sleeps in poll(2) on one
// The routing netlink (links, addresses, routes): the MQTT client watches it.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

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

// epoll(2) for a loop over thousands of sockets (the fleet simulator):
// struct epoll_event is packed on x86-64, so Swift sees only plain values.
#include <sys/epoll.h>
#include <stdint.h>
static const uint32_t soundbox_epoll_in = EPOLLIN, soundbox_epoll_out = EPOLLOUT,
                      soundbox_epoll_err = EPOLLERR, soundbox_epoll_hup = EPOLLHUP;
static inline int soundbox_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int soundbox_epoll_set(int ep, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event e = { .events = events, .data.u64 = data };
    return epoll_ctl(ep, op, fd, &e);
}
static inline int soundbox_epoll_add(int ep, int fd, uint32_t events, uint64_t data) { return soundbox_epoll_set(ep, EPOLL_CTL_ADD, fd, events, data); }
static inline int soundbox_epoll_del(int ep, int fd) { return epoll_ctl(ep, EPOLL_CTL_DEL, fd, 0); }
// Up to `max` (at most 256) ready sockets: their data and events.
static inline int soundbox_epoll_wait(int ep, uint64_t *data, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event ev[256];
    int n = epoll_wait(ep, ev, max > 256 ? 256 : max, timeout_ms);
    for (int i = 0; i < n; i++) { data[i] = ev[i].data.u64; events[i] = ev[i].events; }
    return n;
}
