/* Slow disks, on demand: fsync and fdatasync sleep FSYNC_DELAY_US microseconds (default
 * 30000) before they sync. Preloaded into the agent by tests/stress/slow-fsync, it widens
 * every window between a state change being seen and being durable. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static void delay(void) {
    const char *e = getenv("FSYNC_DELAY_US");
    usleep(e ? (useconds_t)atoi(e) : 30000);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    delay();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    delay();
    return real(fd);
}
