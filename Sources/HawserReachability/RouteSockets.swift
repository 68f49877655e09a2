import CHawser
import HawserPosix

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Sockets

/// The event and query sockets of one monitor.
struct RouteSockets: Sendable {
    var events: Int32
    var query: Int32

    static let groups =
        CHAWSER_RTMGRP_LINK | CHAWSER_RTMGRP_IPV4_IFADDR | CHAWSER_RTMGRP_IPV4_ROUTE
        | CHAWSER_RTMGRP_IPV6_IFADDR | CHAWSER_RTMGRP_IPV6_ROUTE

    func close() {
        Posix.close(self.events)
        Posix.close(self.query)
    }

    /// Opens both sockets, in `namespace` when given.
    static func open(namespace: String?) throws(RouteMonitorError) -> RouteSockets {
        guard let ns = namespace else { return try self.openHere() }
        // setns changes the calling thread's namespace: do it on a thread of our own that
        // exits afterwards, so no other code can ever run in the wrong namespace.
        let job = NamespaceJob(path: ns)
        let box = Unmanaged.passRetained(job)
        var tid = pthread_t()
        let rc = pthread_create(
            &tid,
            nil,
            { arg in
                let job = Unmanaged<NamespaceJob>.fromOpaque(arg!).takeRetainedValue()
                job.result = RouteSockets.openInNamespace(job.path)
                return nil
            },
            box.toOpaque()
        )
        guard rc == 0 else {
            box.release()
            throw RouteMonitorError("cannot start a thread to enter the network namespace", errnoCode: rc)
        }
        pthread_join(tid, nil)
        return try job.result!.get()
    }

    private final class NamespaceJob: @unchecked Sendable {
        let path: String
        var result: Result<RouteSockets, RouteMonitorError>?
        init(path: String) { self.path = path }
    }

    private static func openHere() throws(RouteMonitorError) -> RouteSockets {
        let ev = CHawser_netlink_open(self.groups)
        if ev < 0 { throw RouteMonitorError("cannot open a NETLINK_ROUTE socket", errnoCode: CHawser_errno()) }
        let q = CHawser_netlink_open(0)
        if q < 0 {
            let e = CHawser_errno()
            Posix.close(ev)
            throw RouteMonitorError("cannot open a NETLINK_ROUTE socket", errnoCode: e)
        }
        // A larger receive buffer makes dropped notifications (ENOBUFS) rarer; failure is harmless.
        _ = CHawser_set_int_option(ev, SOL_SOCKET, SO_RCVBUF, 1 << 20)
        return RouteSockets(events: ev, query: q)
    }

    private static func openInNamespace(_ path: String) -> Result<RouteSockets, RouteMonitorError> {
        let home = Glibc.open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
        if home < 0 {
            return .failure(
                RouteMonitorError("cannot open this thread's network namespace", errnoCode: CHawser_errno())
            )
        }
        defer { Posix.close(home) }
        let target = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        if target < 0 {
            return .failure(RouteMonitorError("cannot open network namespace '\(path)'", errnoCode: CHawser_errno()))
        }
        defer { Posix.close(target) }
        if CHawser_setns_net(target) != 0 {
            let e = CHawser_errno()
            let hint = e == EPERM ? " (needs CAP_SYS_ADMIN)" : e == EINVAL ? " (not a network namespace)" : ""
            return .failure(RouteMonitorError("cannot enter network namespace '\(path)'\(hint)", errnoCode: e))
        }
        let result = Result { () throws(RouteMonitorError) in try self.openHere() }
        // This thread ends right after; going back is for tidiness, not correctness.
        _ = CHawser_setns_net(home)
        return result
    }
}
