// Network namespaces a test makes for itself (root only): a veth pair for reachability, and
// addresses that drop every packet for Happy Eyeballs.
import CHawser
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A network namespace made for one test (`ip netns add`, root only), removed by `delete()` or
/// when released. ``ipIn(_:)`` configures it; ``enter(_:)`` moves an event loop's thread into it,
/// so the sockets that loop opens live there.
public class NetworkNamespace: @unchecked Sendable {
    public let name: String
    private var deleted = false

    static let ipBinary = (["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"] as [String]).first {
        access($0, X_OK) == 0
    }

    /// `/var/run/netns/NAME`.
    public var path: String { "/var/run/netns/\(self.name)" }

    /// Makes the namespace `hawser-PREFIX-PID-TAG` and runs `configure` on it; a failure there
    /// deletes it again.
    init(prefix: String, configure: (NetworkNamespace) throws -> Void) throws {
        guard geteuid() == 0 else {
            throw NamespaceError("this test creates a network namespace and needs root (euid is \(geteuid()))")
        }
        guard Self.ipBinary != nil else {
            throw NamespaceError("iproute2's `ip` is not installed (apt-get install iproute2)")
        }
        self.name = "hawser-\(prefix)-\(getpid())-\(String(UInt32.random(in: 0..<0xFFFFFF), radix: 16))"
        try Self.ip(["netns", "add", self.name])
        do {
            try configure(self)
        } catch {
            self.delete()
            throw error
        }
    }

    deinit { self.delete() }

    /// `ip -n NAME args…`.
    public func ipIn(_ args: [String]) throws {
        try Self.ip(["-n", self.name] + args)
    }

    /// Moves `loop`'s thread into the namespace: sockets it opens from now on live there.
    public func enter(_ loop: EventLoop) throws {
        let path = self.path
        let rc = try loop.submitAndWait { () -> Int32 in
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return -1 }
            defer { close(fd) }
            return CHawser_setns_net(fd)
        }
        guard rc == 0 else { throw NamespaceError("setns into \(self.name) failed") }
    }

    public func delete() {
        guard !self.deleted else { return }
        self.deleted = true
        try? Self.ip(["netns", "del", self.name])
    }

    /// Runs `ip` and waits for it; a non-zero exit is an error with what `ip` printed.
    static func ip(_ args: [String]) throws {
        guard let ip = ipBinary else { throw NamespaceError("iproute2's `ip` is not installed") }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-ip-\(UUID().uuidString).log")
            .path
        defer { unlink(log) }
        let pid: pid_t
        do {
            pid = try ChildProcess.spawn(ip, args, stdout: log, stderr: log)
        } catch {
            throw NamespaceError("cannot run ip: \(error)")
        }
        let end = ChildProcess.wait(pid)
        if end.exitCode != 0 {
            let out = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw NamespaceError("ip \(args.joined(separator: " ")) failed (status \(end.status)): \(out)")
        }
    }
}

/// A namespace for the reachability tests: a veth pair `<a>`/`<b>` inside it, an IPv4 address
/// on `a`, both ends up.
public final class NamespaceFixture: NetworkNamespace, @unchecked Sendable {
    public let a: String
    public let b: String
    /// 10.N.0.0/24: `a` is 10.N.0.1.
    public let subnet: Int

    var addressOnA: String { "10.\(self.subnet).0.1" }
    public var gateway: String { "10.\(self.subnet).0.2" }

    public init() throws {
        let tag = String(UInt32.random(in: 0..<0xFFFFFF), radix: 16)
        let a = "hra\(tag)"
        let b = "hrb\(tag)"
        let subnet = Int.random(in: 100...250)
        self.a = a
        self.b = b
        self.subnet = subnet
        try super.init(prefix: "reach") { ns in
            try ns.ipIn(["link", "add", a, "type", "veth", "peer", "name", b])
            try ns.ipIn(["addr", "add", "10.\(subnet).0.1/24", "dev", a])
            try ns.ipIn(["link", "set", a, "up"])
            try ns.ipIn(["link", "set", b, "up"])
        }
    }
}

/// A namespace with loopback up and two addresses (`blackHoleV4`, `blackHoleV6`) whose packets
/// are silently dropped: a connect to them neither succeeds nor fails.
public final class BlackHoleNamespace: NetworkNamespace, @unchecked Sendable {
    public static let blackHoleV4 = "198.18.0.2"
    public static let blackHoleV6 = "fd00:68::2"

    public init() throws {
        try super.init(prefix: "he") { ns in
            // A veth pair: what is sent to the black-hole addresses leaves `bh0` with a MAC
            // address nobody has (a permanent neighbour entry, so no ARP or NDP is asked) and
            // `bh1` discards it.
            try ns.ipIn(["link", "set", "lo", "up"])
            try ns.ipIn(["link", "add", "bh0", "type", "veth", "peer", "name", "bh1"])
            try ns.ipIn(["link", "set", "bh0", "up"])
            try ns.ipIn(["link", "set", "bh1", "up"])
            try ns.ipIn(["addr", "add", "198.18.0.1/24", "dev", "bh0"])
            try ns.ipIn(["-6", "addr", "add", "fd00:68::1/64", "dev", "bh0", "nodad"])
            for address in [Self.blackHoleV4, Self.blackHoleV6] {
                try ns.ipIn(["neigh", "add", address, "lladdr", "02:00:00:00:68:02", "dev", "bh0", "nud", "permanent"])
            }
        }
    }
}

public struct NamespaceError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { self.description = d }
}
