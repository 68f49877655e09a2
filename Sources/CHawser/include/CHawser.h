// CHawser: the lean C-interop layer of Hawser.
//
// Only what Swift cannot import, or cannot import conveniently: function-like
// macros, _GNU_SOURCE-only functions, and flag constants that glibc declares as
// enums of odd types. No policy, no allocation, no state. Every symbol is
// prefixed CHawser_ / CHAWSER_.
#ifndef CHAWSER_H
#define CHAWSER_H

// Hawser is Linux-only. On any other platform this is the one error a build shows: nothing
// below is even read, so no missing <sys/epoll.h> follows it.
#if !defined(__linux__)
#error "Hawser runs on Linux only: its engine is built on epoll, eventfd, timerfd and netlink, which this platform does not have. Build it on Linux, or cross-compile with a Linux Swift SDK."
#else

#include <stdint.h>
#include <stddef.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <zlib.h>

// MARK: - SHA-256, the one digest helper the Swift modules share (the cache's file names, TLS
// fingerprints and public-key pins). EVP_Digest wants a non-null pointer even for zero bytes.
static inline int CHawser_sha256(const void *data, size_t count, unsigned char out[32]) {
    static const unsigned char empty = 0;
    unsigned int length = 0;
    return EVP_Digest(count > 0 ? data : &empty, count, out, &length, EVP_sha256(), NULL);
}

// MARK: - epoll flags as plain integers (glibc declares them as EPOLL_EVENTS enum cases)
static const uint32_t CHAWSER_EPOLLIN = EPOLLIN;
static const uint32_t CHAWSER_EPOLLOUT = EPOLLOUT;
static const uint32_t CHAWSER_EPOLLERR = EPOLLERR;
static const uint32_t CHAWSER_EPOLLHUP = EPOLLHUP;
static const uint32_t CHAWSER_EPOLLRDHUP = EPOLLRDHUP;
static const uint32_t CHAWSER_EPOLLET = EPOLLET;
static const int CHAWSER_EPOLL_CTL_ADD = EPOLL_CTL_ADD;
static const int CHAWSER_EPOLL_CTL_MOD = EPOLL_CTL_MOD;
static const int CHAWSER_EPOLL_CTL_DEL = EPOLL_CTL_DEL;

// epoll_event is packed on x86_64; building it in C keeps Swift out of that layout.
static inline int CHawser_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event e;
    e.events = events;
    e.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &e);
}

// Fills parallel arrays so Swift never touches the packed struct.
int CHawser_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int maxevents, int timeout_ms);

static inline int CHawser_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int CHawser_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

// MARK: - sockets
// SOCK_STREAM / SOCK_NONBLOCK / SOCK_CLOEXEC are __socket_type enum cases in Swift.
static inline int CHawser_socket_stream(int family) {
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}
static inline int CHawser_socket_dgram_netlink(int protocol) {
    return socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
}
// accept4 is _GNU_SOURCE only: invisible to Swift's Glibc module (defined in shims.c).
int CHawser_accept4(int fd, struct sockaddr *addr, socklen_t *len);
static inline int CHawser_set_int_option(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof(value));
}
static inline int CHawser_get_int_option(int fd, int level, int name, int *value) {
    socklen_t len = sizeof(*value);
    return getsockopt(fd, level, name, value, &len);
}
// SO_LINGER with a zero timeout: close() then sends RST (used by fault servers).
static inline int CHawser_set_linger_zero(int fd) {
    struct linger l = { 1, 0 };
    return setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}
// send() without SIGPIPE (MSG_NOSIGNAL is an anonymous enum value in Swift).
static inline ssize_t CHawser_send(int fd, const void *buf, size_t len) {
    return send(fd, buf, len, MSG_NOSIGNAL);
}
// writev through sendmsg so MSG_NOSIGNAL applies to gathered writes too.
static inline ssize_t CHawser_writev(int fd, const struct iovec *iov, int iovcnt) {
    struct msghdr m = {0};
    m.msg_iov = (struct iovec *)iov;
    m.msg_iovlen = (size_t)iovcnt;
    return sendmsg(fd, &m, MSG_NOSIGNAL);
}
static inline int CHawser_errno(void) { return errno; }
static inline void CHawser_set_errno(int e) { errno = e; }

// Monotonic nanoseconds (CLOCK_MONOTONIC); one cheap vDSO call.
uint64_t CHawser_monotonic_ns(void);

// Names the calling thread (pthread_setname_np is _GNU_SOURCE only); truncated to 15 bytes.
void CHawser_set_thread_name(const char *name);

// Process-wide: ignore SIGPIPE once (a write to a reset socket must be an error, not death).
void CHawser_ignore_sigpipe(void);

// MARK: - OpenSSL macro shims (function-like macros Swift cannot import)
static inline long CHawser_SSL_set_tlsext_host_name(SSL *s, const char *name) { return SSL_set_tlsext_host_name(s, name); }
static inline long CHawser_SSL_CTX_set_min_proto_version(SSL_CTX *c, int v) { return SSL_CTX_set_min_proto_version(c, v); }
static inline long CHawser_SSL_CTX_set_max_proto_version(SSL_CTX *c, int v) { return SSL_CTX_set_max_proto_version(c, v); }
static inline long CHawser_SSL_CTX_set_session_cache_mode(SSL_CTX *c, long m) { return SSL_CTX_set_session_cache_mode(c, m); }
static inline long CHawser_BIO_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
static inline int CHawser_OPENSSL_free(void *p) { OPENSSL_free(p); return 0; }

// MARK: - zlib macro shims
static inline int CHawser_inflateInit2(z_streamp s, int window_bits) { return inflateInit2(s, window_bits); }
static inline int CHawser_deflateInit2(z_streamp s, int level, int window_bits) {
    return deflateInit2(s, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
}

#endif /* __linux__ */

// MARK: - Area headers (this file is the module's umbrella header: others are included here)
// Included on every platform (each is empty but for Linux), so the umbrella stays complete and
// a build elsewhere shows the one #error above and nothing else.
#if __has_include("chawser_tls.h")
#include "chawser_tls.h"
#endif
#if __has_include("chawser_trust.h")
#include "chawser_trust.h"
#endif
#if __has_include("chawser_zlib.h")
#include "chawser_zlib.h"
#endif
#if __has_include("chawser_auth.h")
#include "chawser_auth.h"
#endif
#if __has_include("chawser_netlink.h")
#include "chawser_netlink.h"
#endif
#if __has_include("chawser_executor.h")
#include "chawser_executor.h"
#endif

#endif
