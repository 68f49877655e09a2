// Definitions that need _GNU_SOURCE (which never reaches Swift's importer) or a
// packed struct Swift should not touch. See CHawser.h for the why of each.
#ifndef _GNU_SOURCE
#error "_GNU_SOURCE must be defined (Package.swift cSettings)"
#endif
#include "CHawser.h"  /* on any platform but Linux: the one error that says Hawser is Linux-only */
#if defined(__linux__)
#include <signal.h>
#include <time.h>

int CHawser_accept4(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int CHawser_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int maxevents, int timeout_ms) {
    struct epoll_event evs[256];
    if (maxevents > 256) maxevents = 256;
    int n = epoll_wait(epfd, evs, maxevents, timeout_ms);
    for (int i = 0; i < n; i++) {
        events[i] = evs[i].events;
        data[i] = evs[i].data.u64;
    }
    return n;
}

uint64_t CHawser_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void CHawser_ignore_sigpipe(void) {
    signal(SIGPIPE, SIG_IGN);
}

#include <pthread.h>
void CHawser_set_thread_name(const char *name) {
    char buf[16];
    size_t i = 0;
    for (; name[i] && i < 15; i++) buf[i] = name[i];
    buf[i] = 0;
    pthread_setname_np(pthread_self(), buf);
}

#endif /* __linux__ */
