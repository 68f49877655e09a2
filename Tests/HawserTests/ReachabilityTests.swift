// NetworkReachabilityManager and the engine's RouteMonitor.
//
// The network tests create a network namespace of their own with a veth pair in it, watch it
// through the monitor's namespace support, and change it with iproute2's `ip`. They need root
// and `ip`: without them they fail with a message saying so (never a silent pass). Every
// namespace a test creates is deleted when the test ends, pass or fail.
import Foundation
import Hawser
import HawserCore
import HawserFoundation
import HawserTestServer
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

typealias Status = NetworkReachabilityManager.NetworkReachabilityStatus

// MARK: - Pure: the netlink parser on crafted bytes

@Suite("Netlink message parser")
struct NetlinkParserTests {
    // Kernel ABI numbers (linux/netlink.h, linux/rtnetlink.h): stable, so spelled out here.
    static let NLMSG_ERROR: UInt16 = 2
    static let NLMSG_DONE: UInt16 = 3
    static let RTM_NEWLINK: UInt16 = 16
    static let RTM_NEWROUTE: UInt16 = 24
    static let RTM_GETROUTE: UInt16 = 26
    static let NLM_F_MULTI: UInt16 = 2
    static let NLM_F_REQUEST: UInt16 = 1

    static func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func le16(_ v: UInt16) -> [UInt8] { [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)] }

    /// A message with `payload`, its length field set to `declared` (default: the real length),
    /// padded to 4 bytes unless `pad` is false.
    static func message(
        type: UInt16,
        flags: UInt16 = 0,
        seq: UInt32 = 1,
        pid: UInt32 = 0,
        payload: [UInt8],
        declared: Int? = nil,
        pad: Bool = true
    ) -> [UInt8] {
        var out =
            le32(UInt32(declared ?? 16 + payload.count)) + le16(type) + le16(flags) + le32(seq) + le32(pid) + payload
        if pad { while out.count % 4 != 0 { out.append(0) } }
        return out
    }

    static func attribute(_ type: UInt16, _ value: [UInt8], declared: Int? = nil) -> [UInt8] {
        var out = le16(UInt16(declared ?? 4 + value.count)) + le16(type) + value
        while out.count % 4 != 0 { out.append(0) }
        return out
    }

    static func rtmsg(family: UInt8 = 2, type: UInt8 = 1) -> [UInt8] {
        [family, 32, 0, 0, 254, 2, 0, type] + [0, 0, 0, 0]
    }

    @Test("a well-formed datagram of three messages, the last one unpadded, splits into three")
    func multipleMessages() throws {
        let a = Self.message(
            type: Self.RTM_NEWLINK,
            flags: Self.NLM_F_MULTI,
            seq: 7,
            pid: 99,
            payload: [1, 2, 3, 4, 5]
        )
        let b = Self.message(type: Self.RTM_NEWLINK, flags: Self.NLM_F_MULTI, seq: 7, pid: 99, payload: [])
        let c = Self.message(
            type: Self.NLMSG_DONE,
            flags: Self.NLM_F_MULTI,
            seq: 7,
            pid: 99,
            payload: [0, 0, 0],
            pad: false
        )
        #expect(a.count == 24)  // 21 bytes padded to 24
        let ms = try Netlink.messages(in: a + b + c)
        #expect(ms.count == 3)
        #expect(ms[0].payload == [1, 2, 3, 4, 5])  // padding is not payload
        #expect(ms[0].sequence == 7 && ms[0].portID == 99 && ms[0].isMultipart)
        #expect(ms[1].payload.isEmpty)
        #expect(ms[2].isDone && ms[2].payload == [0, 0, 0])
    }

    @Test("a length beyond the datagram is reported as truncated")
    func truncated() {
        let m = Self.message(type: Self.RTM_NEWROUTE, payload: Array(repeating: 0, count: 40))
        #expect(throws: Netlink.ParseError.self) { try Netlink.messages(in: Array(m.prefix(30))) }
        do {
            _ = try Netlink.messages(in: Array(m.prefix(30)))
        } catch {
            #expect(error.message.contains("truncated"))
            #expect(error.message.contains("56"))
        }
    }

    @Test("a length shorter than the header is rejected instead of looping")
    func shortLength() {
        for declared in [0, 4, 15] {
            let m = Self.message(type: Self.RTM_NEWROUTE, payload: [0, 0, 0, 0], declared: declared)
            #expect(throws: Netlink.ParseError.self) { try Netlink.messages(in: m) }
        }
    }

    @Test("trailing bytes too short for a header are rejected")
    func trailingGarbage() throws {
        let m = Self.message(type: Self.NLMSG_DONE, payload: [0, 0, 0, 0]) + [1, 2, 3, 4, 5, 6]
        #expect(throws: Netlink.ParseError.self) { try Netlink.messages(in: m) }
        #expect(throws: Netlink.ParseError.self) { try Netlink.messages(in: [1, 2, 3]) }
        #expect(try Netlink.messages(in: []).isEmpty)
    }

    @Test("NLMSG_ERROR carries a negative errno; zero is an acknowledgement; a short one is an error")
    func errorMessages() throws {
        let unreachable = Self.message(
            type: Self.NLMSG_ERROR,
            payload: Self.le32(UInt32(bitPattern: -ENETUNREACH)) + Array(repeating: 0, count: 16)
        )
        #expect(try Netlink.messages(in: unreachable)[0].errorCode() == ENETUNREACH)
        let ack = Self.message(type: Self.NLMSG_ERROR, payload: Self.le32(0) + Array(repeating: 0, count: 16))
        #expect(try Netlink.messages(in: ack)[0].errorCode() == 0)
        let short = Self.message(type: Self.NLMSG_ERROR, payload: [0xFF, 0xFF])
        #expect(throws: Netlink.ParseError.self) { try Netlink.messages(in: short)[0].errorCode() }
        let positive = Self.message(type: Self.NLMSG_ERROR, payload: Self.le32(5))
        #expect(throws: Netlink.ParseError.self) { try Netlink.messages(in: positive)[0].errorCode() }
        let notError = Self.message(type: Self.NLMSG_DONE, payload: Self.le32(0))
        #expect(throws: Netlink.ParseError.self) { try Netlink.messages(in: notError)[0].errorCode() }
    }

    @Test("route attributes: misaligned lengths are padded, the output interface is read, bad sizes are errors")
    func routeAttributes() throws {
        // A 5-byte attribute (padded to 8) before RTA_OIF must not shift RTA_OIF.
        let payload = Self.rtmsg(type: 1) + Self.attribute(99, [0xAA]) + Self.attribute(4, Self.le32(7))
        let route = try Netlink.Route(payload: payload)
        #expect(route.outputInterface == 7)
        #expect(route.type == 1 && route.family == 2)

        let badOIF = Self.rtmsg() + Self.attribute(4, [1, 0])
        #expect(throws: Netlink.ParseError.self) { try Netlink.Route(payload: badOIF) }
        let overlong = Self.rtmsg() + Self.attribute(4, Self.le32(7), declared: 40)
        #expect(throws: Netlink.ParseError.self) { try Netlink.Route(payload: overlong) }
        let tiny = Self.rtmsg() + Self.le16(2) + Self.le16(4)
        #expect(throws: Netlink.ParseError.self) { try Netlink.Route(payload: tiny) }
        let stub = Self.rtmsg() + [1, 2]
        #expect(throws: Netlink.ParseError.self) { try Netlink.Route(payload: stub) }
        #expect(throws: Netlink.ParseError.self) { try Netlink.Route(payload: [2, 32, 0]) }
    }

    @Test("a link message gives index, flags and name; a truncated one is an error")
    func link() throws {
        var fixed: [UInt8] = [0, 0] + Self.le16(1) + Self.le32(3) + Self.le32(0x10043) + Self.le32(0)
        fixed += Self.attribute(3, Array("veth0".utf8) + [0])
        let l = try Netlink.Link(payload: fixed)
        #expect(l.index == 3 && l.name == "veth0" && l.hardwareType == 1 && l.flags == 0x10043)
        #expect(throws: Netlink.ParseError.self) { try Netlink.Link(payload: Array(fixed.prefix(10))) }
    }

    @Test("an encoded RTM_GETROUTE request parses back to itself")
    func requestRoundTrip() throws {
        let bytes = Netlink.routeRequest(family: 2, destination: [10, 1, 2, 3], sequence: 42)
        #expect(bytes.count % 4 == 0)
        let ms = try Netlink.messages(in: bytes)
        #expect(ms.count == 1)
        #expect(ms[0].type == Self.RTM_GETROUTE && ms[0].sequence == 42 && ms[0].flags & Self.NLM_F_REQUEST != 0)
        let attrs = try Netlink.attributes(in: ms[0].payload, after: 12)
        #expect(attrs[1] == [10, 1, 2, 3])  // RTA_DST
        #expect(ms[0].payload[1] == 32)  // rtm_dst_len
    }
}

// MARK: - Manager API without a namespace

@Suite("NetworkReachabilityManager API")
struct NetworkReachabilityManagerAPITests {
    @Test("statuses keep AFNetworking's raw values and strings; Ethernet is added; WWAN is never mapped to")
    func statusMapping() {
        #expect(Status.unknown.rawValue == -1 && Status.notReachable.rawValue == 0)
        #expect(Status.reachableViaWWAN.rawValue == 1 && Status.reachableViaWiFi.rawValue == 2)
        #expect(Status.reachableViaWiFi.localizedDescription == "Reachable via WiFi")
        #expect(Status.notReachable.localizedDescription == "Not Reachable")
        let wifi = NetworkInterface(index: 3, name: "wlan0", kind: .wifi)
        let eth = NetworkInterface(index: 2, name: "eth0", kind: .wired)
        let lo = NetworkInterface(index: 1, name: "lo", kind: .loopback)
        #expect(Status(.reachable(via: wifi)) == .reachableViaWiFi)
        #expect(Status(.reachable(via: eth)) == .reachableViaEthernet)
        #expect(Status(.reachable(via: lo)) == .reachableViaEthernet)
        #expect(Status(.notReachable(reason: "x")) == .notReachable)
        #expect(Status(.unknown) == .unknown)
    }

    @Test("init?(address:) and init?(domain:) refuse what they cannot watch")
    func failableInits() {
        #expect(NetworkReachabilityManager(address: "not an address") == nil)
        #expect(NetworkReachabilityManager(address: "10.0.0.1") != nil)
        #expect(NetworkReachabilityManager(address: "::1") != nil)
        #expect(NetworkReachabilityManager(domain: "") == nil)
        #expect(NetworkReachabilityManager(domain: String(repeating: "a", count: 300)) == nil)
        #expect(NetworkReachabilityManager(domain: "example.com") != nil)
    }

    @Test("a namespace that does not exist is a typed error naming it")
    func missingNamespace() {
        do {
            _ = try NetworkReachabilityManager(
                target: .defaultRoute,
                networkNamespace: "/var/run/netns/hawser-no-such-namespace"
            )
            Issue.record("a missing namespace was accepted")
        } catch {
            #expect(error.message.contains("hawser-no-such-namespace"))
            #expect(error.errnoCode == ENOENT)
        }
    }
}

// MARK: - Recording and waiting

/// Records statuses from any thread; tests wait (bounded) for the sequence they expect.
final class StatusRecorder<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []
    private var waiters: [(id: Int, ready: ([T]) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextID = 0

    var all: [T] { self.lock.withLock { self.items } }

    func record(_ item: T) {
        let ready = self.lock.withLock { () -> [CheckedContinuation<Bool, Never>] in
            self.items.append(item)
            let (done, rest) = (
                self.waiters.filter { $0.ready(self.items) }, self.waiters.filter { !$0.ready(self.items) }
            )
            self.waiters = rest
            return done.map(\.continuation)
        }
        for c in ready { c.resume(returning: true) }
    }

    /// Waits until `ready(items)` holds, or `timeout` passes; returns whether it held.
    func wait(timeout: Duration = .seconds(15), until ready: @escaping ([T]) -> Bool) async -> Bool {
        let id = self.lock.withLock { () -> Int in
            self.nextID += 1
            return self.nextID
        }
        return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let now = self.lock.withLock { () -> Bool in
                if ready(self.items) { return true }
                self.waiters.append((id, ready, c))
                return false
            }
            if now {
                c.resume(returning: true)
                return
            }
            Task {
                try? await Task.sleep(for: timeout)
                let expired = self.lock.withLock { () -> CheckedContinuation<Bool, Never>? in
                    guard let i = self.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return self.waiters.remove(at: i).continuation
                }
                expired?.resume(returning: false)
            }
        }
    }
}

// MARK: - Descriptor accounting

/// `expectNoFDLeak` with the shared loops made first: their descriptors are not the test's.
private func expectNoDescriptorLeak(_ body: () async throws -> Void) async throws {
    _ = EventLoopGroup.shared.loops.count
    try await expectNoFDLeak("in a reachability test", body)
}

// MARK: - Network tests

extension ManagerNetworkTests {
    @Suite("Reachability in a network namespace", .serialized)
    struct ReachabilityNamespaceTests {
        /// Statuses with consecutive repeats removed (the manager itself never repeats one).
        static func lastIs(_ s: Status) -> ([Status]) -> Bool { { $0.last == s } }

        @Test(
            "default route: reachable, not reachable without carrier or with the link down, reachable again; every channel sees it"
        )
        func defaultRouteFollowsTheLink() async throws {
            try await expectNoDescriptorLeak {
                let ns = try NamespaceFixture()
                defer { ns.delete() }
                try ns.ipIn(["route", "add", "default", "via", ns.gateway, "dev", ns.a])

                let manager = try NetworkReachabilityManager(target: .defaultRoute, networkNamespace: ns.path)
                #expect(manager.networkReachabilityStatus == .unknown)
                let blockSeen = StatusRecorder<Status>()
                let observerSeen = StatusRecorder<NetworkReachabilityManager.Change>()
                let notified = StatusRecorder<Status>()
                let streamed = StatusRecorder<Status>()
                manager.setReachabilityStatusChangeBlock { blockSeen.record($0) }
                let token = manager.addObserver { observerSeen.record($0) }
                let center = NotificationCenter.default.addObserver(
                    forName: .reachabilityDidChange,
                    object: manager,
                    queue: nil
                ) { n in
                    if let s = n.userInfo?[NetworkReachabilityManager.statusUserInfoKey] as? Status {
                        notified.record(s)
                    }
                }
                defer { NotificationCenter.default.removeObserver(center) }
                let stream = manager.changes()
                let reader = Task { for await c in stream { streamed.record(c.status) } }
                defer { reader.cancel() }

                #expect(manager.startMonitoring())
                #expect(
                    await blockSeen.wait(until: Self.lastIs(.reachableViaEthernet)),
                    "never reachable: \(blockSeen.all)"
                )
                #expect(
                    manager.isReachable && manager.isReachableViaEthernet && !manager.isReachableViaWiFi
                        && !manager.isReachableViaWWAN
                )
                #expect(manager.interface?.name == ns.a)
                #expect(manager.interface?.kind == .wired)  // a veth has Ethernet's hardware type
                #expect(manager.localizedNetworkReachabilityStatusString == "Reachable via Ethernet")

                // The peer goes down: `a` loses its carrier but keeps its routes.
                try ns.ipIn(["link", "set", ns.b, "down"])
                #expect(
                    await blockSeen.wait(until: Self.lastIs(.notReachable)),
                    "carrier loss not seen: \(blockSeen.all)"
                )
                #expect(!manager.isReachable)
                // Observers run after the block, on the same queue: wait for the observer's copy.
                #expect(await observerSeen.wait { $0.last?.status == .notReachable })
                #expect(observerSeen.all.last?.reason?.contains("no carrier") == true, "\(observerSeen.all)")
                try ns.ipIn(["link", "set", ns.b, "up"])
                #expect(
                    await blockSeen.wait(until: Self.lastIs(.reachableViaEthernet)),
                    "carrier return not seen: \(blockSeen.all)"
                )

                // `a` itself goes down: the kernel drops its routes.
                try ns.ipIn(["link", "set", ns.a, "down"])
                #expect(await blockSeen.wait(until: Self.lastIs(.notReachable)), "link down not seen: \(blockSeen.all)")
                try ns.ipIn(["link", "set", ns.a, "up"])
                try ns.ipIn(["route", "replace", "default", "via", ns.gateway, "dev", ns.a])
                #expect(
                    await blockSeen.wait(until: Self.lastIs(.reachableViaEthernet)),
                    "link up not seen: \(blockSeen.all)"
                )

                let expected: [Status] = [
                    .reachableViaEthernet, .notReachable, .reachableViaEthernet, .notReachable, .reachableViaEthernet,
                ]
                #expect(blockSeen.all == expected)
                #expect(
                    await observerSeen.wait { $0.map(\.status) == expected },
                    "observer saw \(observerSeen.all.map(\.status))"
                )
                #expect(await notified.wait { $0 == expected }, "notification saw \(notified.all)")
                #expect(await streamed.wait { $0 == expected }, "stream saw \(streamed.all)")
                manager.removeObserver(token)
                manager.stopMonitoring()
                #expect(!manager.isMonitoring)
            }
        }

        @Test("a host address routed via the veth follows the link; an address off every route is not reachable")
        func hostAddress() async throws {
            try await expectNoDescriptorLeak {
                let ns = try NamespaceFixture()
                defer { ns.delete() }
                let onLink = SocketAddress(ipAddress: "10.\(ns.subnet).0.77", port: 0)!
                let manager = try NetworkReachabilityManager(target: .address(onLink), networkNamespace: ns.path)
                let seen = StatusRecorder<Status>()
                manager.setReachabilityStatusChangeBlock { seen.record($0) }
                manager.startMonitoring()
                #expect(await seen.wait(until: Self.lastIs(.reachableViaEthernet)), "\(seen.all)")
                #expect(manager.interface?.name == ns.a)
                try ns.ipIn(["link", "set", ns.a, "down"])
                #expect(await seen.wait(until: Self.lastIs(.notReachable)), "\(seen.all)")
                try ns.ipIn(["link", "set", ns.a, "up"])
                #expect(await seen.wait(until: Self.lastIs(.reachableViaEthernet)), "\(seen.all)")
                manager.stopMonitoring()

                // No default route in the namespace: an address elsewhere has no route at all.
                let far = SocketAddress(ipAddress: "192.0.2.200", port: 0)!
                let farManager = try NetworkReachabilityManager(target: .address(far), networkNamespace: ns.path)
                let farSeen = StatusRecorder<NetworkReachabilityManager.Change>()
                farManager.addObserver { farSeen.record($0) }
                farManager.startMonitoring()
                #expect(await farSeen.wait { $0.last?.status == .notReachable }, "\(farSeen.all)")
                #expect(farSeen.all.last?.reason?.contains("192.0.2.200") == true, "\(farSeen.all)")
                farManager.stopMonitoring()
            }
        }

        @Test("a host name is resolved and its route followed (localhost over the namespace's loopback)")
        func hostName() async throws {
            try await expectNoDescriptorLeak {
                let ns = try NamespaceFixture()
                defer { ns.delete() }
                // A new namespace's loopback starts down: localhost has no usable route yet.
                let manager = try NetworkReachabilityManager(target: .host("localhost"), networkNamespace: ns.path)
                let seen = StatusRecorder<NetworkReachabilityManager.Change>()
                manager.addObserver { seen.record($0) }
                manager.startMonitoring()
                #expect(await seen.wait { $0.last?.status == .notReachable }, "\(seen.all)")
                try ns.ipIn(["link", "set", "lo", "up"])
                #expect(await seen.wait { $0.last?.status == .reachableViaEthernet }, "\(seen.all)")
                #expect(manager.interface?.kind == .loopback)
                #expect(manager.interface?.name == "lo")
                manager.stopMonitoring()
            }
        }

        @Test(
            "no callback after stopMonitoring returns, also when it is called from the status block; monitoring restarts"
        )
        func noCallbackAfterStop() async throws {
            try await expectNoDescriptorLeak {
                let ns = try NamespaceFixture()
                defer { ns.delete() }
                let queue = DispatchQueue(label: "reachability-test")
                let onLink = SocketAddress(ipAddress: "10.\(ns.subnet).0.9", port: 0)!
                let manager = try NetworkReachabilityManager(
                    target: .address(onLink),
                    networkNamespace: ns.path,
                    callbackQueue: queue
                )
                let seen = StatusRecorder<Status>()
                manager.setReachabilityStatusChangeBlock { [weak manager] status in
                    manager?.stopMonitoring()  // from inside the block: must not deadlock
                    seen.record(status)
                }
                manager.startMonitoring()
                #expect(await seen.wait { $0.count == 1 }, "\(seen.all)")
                #expect(!manager.isMonitoring)

                // A witness on the same loop and queue sees the next change; by then, and after
                // the queue has drained, the stopped manager must still have seen only one.
                let witness = try NetworkReachabilityManager(
                    target: .address(onLink),
                    networkNamespace: ns.path,
                    callbackQueue: queue,
                    eventLoop: manager.eventLoop
                )
                let witnessed = StatusRecorder<Status>()
                witness.setReachabilityStatusChangeBlock { witnessed.record($0) }
                witness.startMonitoring()
                #expect(await witnessed.wait { $0.last == .reachableViaEthernet })
                try ns.ipIn(["link", "set", ns.a, "down"])
                #expect(await witnessed.wait { $0.last == .notReachable })
                queue.sync {}
                #expect(seen.all == [.reachableViaEthernet])
                witness.stopMonitoring()

                // Restarting works and opens new sockets.
                manager.setReachabilityStatusChangeBlock { seen.record($0) }
                #expect(manager.startMonitoring())
                #expect(await seen.wait { $0.last == .notReachable }, "\(seen.all)")
                manager.stopMonitoring()
            }
        }

        @Test(
            "deinit stops monitoring and closes the sockets; a deleted namespace makes startMonitoring fail with the reason"
        )
        func deinitAndDeletedNamespace() async throws {
            try await expectNoDescriptorLeak {
                let ns = try NamespaceFixture()
                defer { ns.delete() }
                do {
                    let manager = try NetworkReachabilityManager(target: .defaultRoute, networkNamespace: ns.path)
                    let seen = StatusRecorder<Status>()
                    manager.setReachabilityStatusChangeBlock { seen.record($0) }
                    manager.startMonitoring()
                    #expect(await seen.wait { !$0.isEmpty })
                    // dropped here, still monitoring
                }
                let later = try NetworkReachabilityManager(target: .defaultRoute, networkNamespace: ns.path)
                later.stopMonitoring()
                ns.delete()
                // `later` was created (sockets opened) before the deletion and still works once;
                // after a stop, a restart must reopen in the namespace, which is gone.
                #expect(later.startMonitoring())
                later.stopMonitoring()
                #expect(!later.startMonitoring())
                #expect(
                    later.monitoringError?.message.contains(ns.name) == true,
                    "\(String(describing: later.monitoringError))"
                )
            }
        }

        @Test("the route to 127.0.0.1 in this process's own namespace is reachable via loopback")
        func ownNamespaceLoopback() async throws {
            try await expectNoDescriptorLeak {
                let monitor = try RouteMonitor(target: .address(SocketAddress(ipAddress: "127.0.0.1", port: 0)!))
                let seen = StatusRecorder<RouteStatus>()
                try monitor.start { seen.record($0) }
                #expect(await seen.wait { !$0.isEmpty })
                if case .reachable(let via) = seen.all.first {
                    #expect(via.kind == .loopback)
                } else {
                    Issue.record("127.0.0.1 not reachable: \(seen.all)")
                }
                #expect(monitor.status == seen.all.first)
                monitor.stop()
                #expect(!monitor.isRunning)
            }
        }
    }
}
