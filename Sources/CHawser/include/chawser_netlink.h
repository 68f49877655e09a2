// Netlink (NETLINK_ROUTE) shims for Hawser's route monitor.
//
// The NLMSG_* / RTA_* / IFA_* / IFLA_* helpers are function-like macros that Swift cannot
// import, and several constants are anonymous enum cases of odd types. Everything here is
// static inline, stateless, and prefixed CHawser_ / CHAWSER_. The Swift side never trusts a
// length it reads from the kernel without checking it against the bytes it has: these helpers
// only do the alignment arithmetic and expose sizes.
#ifndef CHAWSER_NETLINK_H
#define CHAWSER_NETLINK_H
#if defined(__linux__) /* CHawser.h reports every other platform */

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_link.h>
#include <linux/if_addr.h>
#include <net/if.h>

// MARK: - Alignment and sizes
static inline uint32_t CHawser_NLMSG_ALIGN(uint32_t len) { return NLMSG_ALIGN(len); }
static inline uint32_t CHawser_NLMSG_HDRLEN(void) { return (uint32_t)NLMSG_HDRLEN; }
static inline uint32_t CHawser_RTA_ALIGN(uint32_t len) { return RTA_ALIGN(len); }
static inline uint32_t CHawser_RTA_HDRLEN(void) { return (uint32_t)RTA_LENGTH(0); }
static inline uint32_t CHawser_sizeof_nlmsgerr(void) { return (uint32_t)sizeof(struct nlmsgerr); }
static inline uint32_t CHawser_sizeof_rtmsg(void) { return (uint32_t)sizeof(struct rtmsg); }
static inline uint32_t CHawser_sizeof_ifinfomsg(void) { return (uint32_t)sizeof(struct ifinfomsg); }
static inline uint32_t CHawser_sizeof_ifaddrmsg(void) { return (uint32_t)sizeof(struct ifaddrmsg); }

// MARK: - Message types and flags
static const uint16_t CHAWSER_NLMSG_NOOP = NLMSG_NOOP;
static const uint16_t CHAWSER_NLMSG_ERROR = NLMSG_ERROR;
static const uint16_t CHAWSER_NLMSG_DONE = NLMSG_DONE;
static const uint16_t CHAWSER_NLMSG_OVERRUN = NLMSG_OVERRUN;
static const uint16_t CHAWSER_NLM_F_REQUEST = NLM_F_REQUEST;
static const uint16_t CHAWSER_NLM_F_MULTI = NLM_F_MULTI;
static const uint16_t CHAWSER_NLM_F_ACK = NLM_F_ACK;
static const uint16_t CHAWSER_NLM_F_DUMP = NLM_F_DUMP;
static const uint16_t CHAWSER_NLM_F_DUMP_INTR = NLM_F_DUMP_INTR;

static const uint16_t CHAWSER_RTM_NEWLINK = RTM_NEWLINK;
static const uint16_t CHAWSER_RTM_DELLINK = RTM_DELLINK;
static const uint16_t CHAWSER_RTM_GETLINK = RTM_GETLINK;
static const uint16_t CHAWSER_RTM_NEWADDR = RTM_NEWADDR;
static const uint16_t CHAWSER_RTM_DELADDR = RTM_DELADDR;
static const uint16_t CHAWSER_RTM_GETADDR = RTM_GETADDR;
static const uint16_t CHAWSER_RTM_NEWROUTE = RTM_NEWROUTE;
static const uint16_t CHAWSER_RTM_DELROUTE = RTM_DELROUTE;
static const uint16_t CHAWSER_RTM_GETROUTE = RTM_GETROUTE;

// Multicast groups (bit masks for nl_groups in bind).
static const uint32_t CHAWSER_RTMGRP_LINK = RTMGRP_LINK;
static const uint32_t CHAWSER_RTMGRP_IPV4_IFADDR = RTMGRP_IPV4_IFADDR;
static const uint32_t CHAWSER_RTMGRP_IPV4_ROUTE = RTMGRP_IPV4_ROUTE;
static const uint32_t CHAWSER_RTMGRP_IPV6_IFADDR = RTMGRP_IPV6_IFADDR;
static const uint32_t CHAWSER_RTMGRP_IPV6_ROUTE = RTMGRP_IPV6_ROUTE;

// Attribute types.
static const uint16_t CHAWSER_RTA_DST = RTA_DST;
static const uint16_t CHAWSER_RTA_OIF = RTA_OIF;
static const uint16_t CHAWSER_RTA_PREFSRC = RTA_PREFSRC;
static const uint16_t CHAWSER_RTA_GATEWAY = RTA_GATEWAY;
static const uint16_t CHAWSER_IFLA_IFNAME = IFLA_IFNAME;
static const uint16_t CHAWSER_IFA_ADDRESS = IFA_ADDRESS;
static const uint16_t CHAWSER_IFA_LOCAL = IFA_LOCAL;

// Route types (rtm_type).
static const uint8_t CHAWSER_RTN_UNICAST = RTN_UNICAST;
static const uint8_t CHAWSER_RTN_LOCAL = RTN_LOCAL;

// Link flags (ifi_flags). IFF_LOWER_UP is in <linux/if.h>, which clashes with <net/if.h>.
static const uint32_t CHAWSER_IFF_UP = IFF_UP;
static const uint32_t CHAWSER_IFF_RUNNING = IFF_RUNNING;
static const uint32_t CHAWSER_IFF_LOOPBACK = IFF_LOOPBACK;
static const uint32_t CHAWSER_IFF_LOWER_UP = 1u << 16;

// Address flags (ifa_flags): an address still in duplicate-address detection cannot be used.
static const uint8_t CHAWSER_IFA_F_TENTATIVE = IFA_F_TENTATIVE;
static const uint8_t CHAWSER_IFA_F_DADFAILED = IFA_F_DADFAILED;

static const int CHAWSER_NETLINK_ROUTE = NETLINK_ROUTE;
static const int CHAWSER_CLONE_NEWNET = 0x40000000;  // CLONE_NEWNET; <sched.h> hides it without _GNU_SOURCE

// MARK: - Sockets

// A non-blocking, close-on-exec NETLINK_ROUTE socket bound to the given multicast groups
// (0 for a query-only socket). Returns the fd, or -1 with errno set.
static inline int CHawser_netlink_open(uint32_t groups) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct sockaddr_nl sa;
    memset(&sa, 0, sizeof(sa));
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = groups;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

// The port id the kernel gave the socket (replies to our requests carry it in nlmsg_pid).
static inline uint32_t CHawser_netlink_port_id(int fd) {
    struct sockaddr_nl sa;
    socklen_t len = sizeof(sa);
    memset(&sa, 0, sizeof(sa));
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0) return 0;
    return sa.nl_pid;
}

// Sends one request to the kernel (nl_pid 0). Returns bytes sent or -1 with errno.
static inline ssize_t CHawser_netlink_send(int fd, const void *buf, size_t len) {
    struct sockaddr_nl sa;
    memset(&sa, 0, sizeof(sa));
    sa.nl_family = AF_NETLINK;
    return sendto(fd, buf, len, 0, (struct sockaddr *)&sa, sizeof(sa));
}

// Receives one datagram. Returns its length, or -1 with errno (EAGAIN, ENOBUFS, …).
// MSG_TRUNC makes the return value the datagram's real length even when the buffer is smaller,
// so a truncated read is detected instead of parsed.
static inline ssize_t CHawser_netlink_recv(int fd, void *buf, size_t len) {
    return recv(fd, buf, len, MSG_TRUNC);
}

// setns(2) is _GNU_SOURCE-only in <sched.h>: declare it here (same signature as glibc's).
extern int setns(int fd, int nstype);
static inline int CHawser_setns_net(int fd) { return setns(fd, CHAWSER_CLONE_NEWNET); }

#endif /* __linux__ */
#endif
