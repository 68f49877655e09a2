// The one place Hawser talks to the kernel about sockets and files.
//
// Errno policy (see docs/ARCHITECTURE.md):
//   EINTR                 retried, except for close() which is never retried
//   EAGAIN / EWOULDBLOCK  returned as IOResult.wouldBlock: a value, not an error
//   EINPROGRESS (connect) returned as .wouldBlock
//   everything else       thrown as IOError(errno, function)
// Files have their own wrapper with the same policy, FileDescriptor.swift (FileError names the
// operation and the path). Besides these two, errno is read only where a call of another kind
// is made: EventLoop.swift (epoll_create1, eventfd, epoll_ctl), HawserTLS's TLSStream.swift
// (errno after SSL_ERROR_SYSCALL), HawserReachability's RouteMonitor.swift (netlink sockets,
// namespaces) and HawserTestServer's TestProcesses.swift (waitpid). No other file reads errno.

import CHawser

#if canImport(Glibc)
import Glibc
#endif

/// An error returned by a system call, with the errno value and the call that failed.
public struct IOError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `errno` value.
    public var errnoCode: Int32
    /// The system call that failed.
    public var function: String

    /// Creates the error of a failed system call: `errnoCode` is the `errno` it left, `function`
    /// the call's name (for example `"connect"`).
    public init(errnoCode: Int32, function: String) {
        self.errnoCode = errnoCode
        self.function = function
    }

    public var description: String {
        let message = String(cString: strerror(self.errnoCode))
        return "\(self.function) failed: \(message) (errno \(self.errnoCode))"
    }
}

/// The result of a non-blocking call: either it did its work or the kernel had to say "not now".
@usableFromInline
package enum IOResult<T> {
    case processed(T)
    case wouldBlock
}

/// Namespace for the syscall wrappers. Each is `@inline(never)` so no ARC traffic can run between
/// the call and the errno read.
package enum Posix {
    @inline(never)
    package static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> IOResult<Int> {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return .processed(n) }
            let e = CHawser_errno()
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
            throw IOError(errnoCode: e, function: "read")
        }
    }

    @inline(never)
    package static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(IOError) -> IOResult<Int> {
        while true {
            let n = CHawser_send(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return .processed(n) }
            let e = CHawser_errno()
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
            throw IOError(errnoCode: e, function: "send")
        }
    }

    @inline(never)
    package static func writev(
        _ fd: Int32,
        _ iov: UnsafePointer<iovec>,
        _ count: Int32
    ) throws(IOError) -> IOResult<Int> {
        while true {
            let n = CHawser_writev(fd, iov, count)
            if n >= 0 { return .processed(n) }
            let e = CHawser_errno()
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
            throw IOError(errnoCode: e, function: "writev")
        }
    }

    /// Closes `fd`. Never retried on EINTR: on Linux the descriptor is gone either way.
    @inline(never)
    package static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// Sets SO_LINGER to 0, so that closing the socket resets the connection (RST) instead of
    /// draining unsent bytes.
    package static func setLingerZero(_ fd: Int32) {
        _ = CHawser_set_linger_zero(fd)
    }

    /// Removes a file (a Unix-domain socket's path). Errors are ignored: the path may be gone.
    package static func unlink(_ path: String) {
        _ = Glibc.unlink(path)
    }

    @inline(never)
    package static func socket(family: Int32) throws(IOError) -> Int32 {
        let fd = CHawser_socket_stream(family)
        if fd < 0 { throw IOError(errnoCode: CHawser_errno(), function: "socket") }
        return fd
    }

    /// Starts a non-blocking connect. `.wouldBlock` means "in progress": wait for writability,
    /// then read SO_ERROR.
    @inline(never)
    package static func connect(_ fd: Int32, _ address: SocketAddress) throws(IOError) -> IOResult<Void> {
        while true {
            let rc = address.withSockAddr { Glibc.connect(fd, $0, $1) }
            if rc == 0 { return .processed(()) }
            let e = CHawser_errno()
            if e == EINTR { continue }
            if e == EINPROGRESS || e == EAGAIN { return .wouldBlock }
            throw IOError(errnoCode: e, function: "connect")
        }
    }

    @inline(never)
    package static func socketError(_ fd: Int32) throws(IOError) -> Int32 {
        var value: Int32 = 0
        if CHawser_get_int_option(fd, SOL_SOCKET, SO_ERROR, &value) != 0 {
            throw IOError(errnoCode: CHawser_errno(), function: "getsockopt(SO_ERROR)")
        }
        return value
    }

    @inline(never)
    package static func setOption(_ fd: Int32, level: Int32, name: Int32, value: Int32) throws(IOError) {
        if CHawser_set_int_option(fd, level, name, value) != 0 {
            throw IOError(errnoCode: CHawser_errno(), function: "setsockopt")
        }
    }

    @inline(never)
    package static func bind(_ fd: Int32, _ address: SocketAddress) throws(IOError) {
        let rc = address.withSockAddr { Glibc.bind(fd, $0, $1) }
        if rc != 0 { throw IOError(errnoCode: CHawser_errno(), function: "bind") }
    }

    @inline(never)
    package static func listen(_ fd: Int32, backlog: Int32) throws(IOError) {
        if Glibc.listen(fd, backlog) != 0 { throw IOError(errnoCode: CHawser_errno(), function: "listen") }
    }

    @inline(never)
    package static func accept(_ fd: Int32) throws(IOError) -> IOResult<Int32> {
        while true {
            let rc = CHawser_accept4(fd, nil, nil)
            if rc >= 0 { return .processed(rc) }
            let e = CHawser_errno()
            if e == EINTR || e == ECONNABORTED { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
            throw IOError(errnoCode: e, function: "accept4")
        }
    }

    @inline(never)
    package static func localAddress(_ fd: Int32) throws(IOError) -> SocketAddress {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        if rc != 0 { throw IOError(errnoCode: CHawser_errno(), function: "getsockname") }
        return SocketAddress(storage: storage)
    }

    @inline(never)
    package static func shutdownWrite(_ fd: Int32) {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }
}

extension Posix {
    /// CLOCK_MONOTONIC in nanoseconds.
    @inline(__always)
    package static func monotonicNanoseconds() -> UInt64 { CHawser_monotonic_ns() }
}
