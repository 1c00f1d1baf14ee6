// bench/flushdelay.c: an LD_PRELOAD shim that makes every flush as slow as
// an SD card's and counts them (bench/README.md, "Flushes").
//
//   cc -shared -fPIC -O2 -o flushdelay.so bench/flushdelay.c
//   SOUNDBOX_FLUSH_DELAY_MS=30 SOUNDBOX_FLUSH_COUNT=/tmp/flushes LD_PRELOAD=./flushdelay.so soundboxd ...
//
// fsync, fdatasync, syncfs and sync_file_range first do the real call,
// then add one to the counter in the file SOUNDBOX_FLUSH_COUNT (if set:
// an 8-byte little-endian number, updated in place, so a benchmark or a
// test can read it while the program runs), then sleep
// SOUNDBOX_FLUSH_DELAY_MS (default 0) milliseconds — or, if
// SOUNDBOX_FLUSH_DELAY_FILE is set, the number of milliseconds that file
// holds at the time of the call (a test slows flushes down mid-run).
// Tests/DaemonTests/FlushTests.swift builds and uses it too.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long delay_ns = -1;
static _Atomic uint64_t *counter;

static void setup(void) {
    if (delay_ns >= 0) return;
    const char *d = getenv("SOUNDBOX_FLUSH_DELAY_MS");
    delay_ns = d ? atol(d) * 1000000L : 0;
    const char *path = getenv("SOUNDBOX_FLUSH_COUNT");
    if (path) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0 && ftruncate(fd, 8) == 0) {
            void *m = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m != MAP_FAILED) counter = m;
        }
        if (fd >= 0) close(fd);
    }
}

static long current_delay_ns(void) {
    const char *path = getenv("SOUNDBOX_FLUSH_DELAY_FILE");
    if (!path) return delay_ns;
    char text[32] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    return n > 0 ? atol(text) * 1000000L : 0;
}

static void after_flush(void) {
    setup();
    if (counter) atomic_fetch_add(counter, 1);
    long ns = current_delay_ns();
    if (ns > 0) {
        struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
        while (nanosleep(&ts, &ts) != 0) {}
    }
}

#define WRAP(ret, name, params, args)                              \
    ret name params {                                              \
        static ret (*real) params;                                 \
        if (!real) real = (ret (*) params)dlsym(RTLD_NEXT, #name); \
        ret r = real args;                                         \
        after_flush();                                             \
        return r;                                                  \
    }

WRAP(int, fsync, (int fd), (fd))
WRAP(int, fdatasync, (int fd), (fd))
WRAP(int, syncfs, (int fd), (fd))
WRAP(int, sync_file_range, (int fd, off64_t offset, off64_t nbytes, unsigned int flags), (fd, offset, nbytes, flags))
