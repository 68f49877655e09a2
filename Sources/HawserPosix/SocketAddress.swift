#if canImport(Glibc)
import Glibc
#endif

/// An IPv4, IPv6 or Unix-domain socket address.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline
    package enum Storage: Sendable, Hashable {
        case v4(host: UInt32, port: UInt16)  // both in network byte order
        case v6(host: [UInt8], port: UInt16, scope: UInt32)
        case unix(path: [UInt8])
    }

    /// The longest Unix-domain socket path (`sun_path` without its terminating NUL).
    public static let maximumUnixPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// A Unix-domain socket address. Returns nil for an empty path, a path with a NUL byte, or
    /// one longer than ``maximumUnixPathLength`` bytes.
    public init?(unixPath path: String) {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= Self.maximumUnixPathLength, !bytes.contains(0) else { return nil }
        self.storage = .unix(path: bytes)
    }

    @usableFromInline
    package var storage: Storage

    /// Parses a numeric IPv4 or IPv6 address (no name resolution). Returns nil if `host` is not a literal.
    public init?(ipAddress host: String, port: Int) {
        guard (0...65535).contains(port) else { return nil }
        var h = host
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        var a4 = in_addr()
        if inet_pton(AF_INET, h, &a4) == 1 {
            self.storage = .v4(host: a4.s_addr, port: UInt16(port).bigEndian)
            return
        }
        var a6 = in6_addr()
        if inet_pton(AF_INET6, h, &a6) == 1 {
            let bytes = withUnsafeBytes(of: &a6) { Array($0) }
            self.storage = .v6(host: bytes, port: UInt16(port).bigEndian, scope: 0)
            return
        }
        return nil
    }

    init(storage: sockaddr_storage) {
        var s = storage
        if Int32(s.ss_family) == AF_UNIX {
            let sun = withUnsafePointer(to: &s) {
                $0.withMemoryRebound(to: sockaddr_un.self, capacity: 1) { $0.pointee }
            }
            var path = sun.sun_path
            let bytes = withUnsafeBytes(of: &path) { raw in Array(raw.prefix(while: { $0 != 0 })) }
            self.storage = .unix(path: bytes)
        } else if Int32(s.ss_family) == AF_INET6 {
            let sin6 = withUnsafePointer(to: &s) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
            }
            var addr = sin6.sin6_addr
            let bytes = withUnsafeBytes(of: &addr) { Array($0) }
            self.storage = .v6(host: bytes, port: sin6.sin6_port, scope: sin6.sin6_scope_id)
        } else {
            let sin = withUnsafePointer(to: &s) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
            }
            self.storage = .v4(host: sin.sin_addr.s_addr, port: sin.sin_port)
        }
    }

    init(sockaddr pointer: UnsafePointer<sockaddr>, length: Int) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: min(length, dst.count)))
        }
        self.init(storage: storage)
    }

    /// The port, in host byte order (0 for a Unix-domain address).
    public var port: Int {
        switch self.storage {
        case .v4(_, let p): return Int(UInt16(bigEndian: p))
        case .v6(_, let p, _): return Int(UInt16(bigEndian: p))
        case .unix: return 0
        }
    }

    /// AF_INET, AF_INET6 or AF_UNIX.
    public var family: Int32 {
        switch self.storage {
        case .v4: return AF_INET
        case .v6: return AF_INET6
        case .unix: return AF_UNIX
        }
    }

    /// The path of a Unix-domain address; nil for IP addresses.
    public var unixPath: String? {
        if case .unix(let path) = self.storage { return String(decoding: path, as: UTF8.self) }
        return nil
    }

    /// The address as text, without the port (a Unix-domain address: its path).
    public var ipAddress: String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch self.storage {
        case .unix(let path):
            return String(decoding: path, as: UTF8.self)
        case .v4(let h, _):
            var a = in_addr(s_addr: h)
            inet_ntop(AF_INET, &a, &buf, socklen_t(buf.count))
        case .v6(let h, _, _):
            var a = in6_addr()
            withUnsafeMutableBytes(of: &a) { $0.copyBytes(from: h) }
            inet_ntop(AF_INET6, &a, &buf, socklen_t(buf.count))
        }
        let len = buf.firstIndex(of: 0) ?? buf.count
        return String(decoding: buf[0..<len].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String {
        switch self.storage {
        case .v4: return "\(self.ipAddress):\(self.port)"
        case .v6: return "[\(self.ipAddress)]:\(self.port)"
        case .unix(let path): return "unix:" + String(decoding: path, as: UTF8.self)
        }
    }

    /// Calls `body` with this address as a `sockaddr` and its length (for bind, connect, sendto).
    public func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch self.storage {
        case .v4(let h, let p):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = p
            sin.sin_addr = in_addr(s_addr: h)
            return withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .v6(let h, let p, let scope):
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = p
            sin6.sin6_scope_id = scope
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: h) }
            return withUnsafePointer(to: &sin6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        case .unix(let path):
            var sun = sockaddr_un()
            sun.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &sun.sun_path) { dst in dst.copyBytes(from: path.prefix(dst.count - 1)) }
            let length = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + path.count + 1
            return withUnsafePointer(to: &sun) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(length)) }
            }
        }
    }
}
