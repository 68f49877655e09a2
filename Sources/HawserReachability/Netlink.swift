// Netlink message framing, parsed defensively.
//
// A datagram from a NETLINK_ROUTE socket holds one or more messages, each a 16-byte header
// (length, type, flags, sequence, port id; host byte order) and a payload, padded to 4 bytes.
// Payloads of route, link and address messages are a fixed struct followed by attributes
// (length, type, value; also padded to 4). Nothing here trusts a length field: every length is
// checked against the bytes at hand, and a message that does not fit is an error naming what
// was wrong, never a crash or an out-of-bounds read. No IO: bytes in, values out.
import CHawser

/// Namespace for the pure netlink (rtnetlink) message parser used by ``RouteMonitor``.
public enum Netlink {
    /// One netlink message: its header fields and its payload (padding removed).
    public struct Message: Sendable, Hashable {
        /// `nlmsg_type`: `NLMSG_ERROR`, `NLMSG_DONE`, `RTM_NEWROUTE`, …
        public var type: UInt16
        /// `nlmsg_flags` (`NLM_F_MULTI`, `NLM_F_DUMP_INTR`, …).
        public var flags: UInt16
        /// `nlmsg_seq`: the sequence number of the request this answers (0 for most notifications).
        public var sequence: UInt32
        /// `nlmsg_pid`: the port id of the socket the message answers, 0 for the kernel's own.
        public var portID: UInt32
        /// The payload bytes, without the header and without trailing alignment padding.
        public var payload: [UInt8]

        /// Creates a message from its header fields and payload (tests build these to feed the parser).
        public init(type: UInt16, flags: UInt16, sequence: UInt32, portID: UInt32, payload: [UInt8]) {
            self.type = type
            self.flags = flags
            self.sequence = sequence
            self.portID = portID
            self.payload = payload
        }

        /// True for `NLMSG_DONE` (end of a multipart dump).
        public var isDone: Bool { self.type == CHAWSER_NLMSG_DONE }
        /// True for `NLMSG_ERROR` (an error or, with code 0, an acknowledgement).
        public var isError: Bool { self.type == CHAWSER_NLMSG_ERROR }
        /// True when the message is one part of a multipart (dump) answer.
        public var isMultipart: Bool { self.flags & CHAWSER_NLM_F_MULTI != 0 }
        /// True when the kernel says the dump this belongs to was interrupted by a change (redo it).
        public var dumpInterrupted: Bool { self.flags & CHAWSER_NLM_F_DUMP_INTR != 0 }

        /// For an `NLMSG_ERROR` message: the positive errno it carries (0 is an acknowledgement).
        public func errorCode() throws(ParseError) -> Int32 {
            guard self.isError else { throw ParseError("message type \(self.type) is not NLMSG_ERROR") }
            guard self.payload.count >= 4 else {
                throw ParseError("NLMSG_ERROR payload of \(self.payload.count) bytes is too short for its error code")
            }
            let raw = Int32(bitPattern: Netlink.u32(self.payload, 0))
            guard raw <= 0, raw != Int32.min else {
                throw ParseError("NLMSG_ERROR carries a positive error code \(raw)")
            }
            return -raw
        }
    }

    /// Why bytes from a netlink socket could not be parsed.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// What was wrong, with the offending lengths.
        public var message: String
        /// Creates an error whose message names the malformed field and its lengths.
        public init(_ message: String) { self.message = message }
        public var description: String { "malformed netlink message: \(self.message)" }
    }

    /// The size of a netlink message header.
    public static let headerLength = 16

    /// Splits one datagram into its messages. Throws on a header that does not fit, a length
    /// shorter than the header or longer than the bytes left, or trailing bytes too short to be
    /// a header. Alignment padding after the last message may be absent (the kernel omits it).
    public static func messages(in bytes: [UInt8]) throws(ParseError) -> [Message] {
        var out: [Message] = []
        var offset = 0
        while offset < bytes.count {
            let left = bytes.count - offset
            guard left >= headerLength else {
                throw ParseError("\(left) trailing bytes at offset \(offset) are too short for a message header")
            }
            let length = Int(u32(bytes, offset))
            guard length >= headerLength else {
                throw ParseError("message at offset \(offset) declares length \(length), shorter than its header")
            }
            guard length <= left else {
                throw ParseError(
                    "message at offset \(offset) declares length \(length) but only \(left) bytes remain (truncated)"
                )
            }
            let type = u16(bytes, offset + 4)
            let flags = u16(bytes, offset + 6)
            let seq = u32(bytes, offset + 8)
            let pid = u32(bytes, offset + 12)
            out.append(
                Message(
                    type: type,
                    flags: flags,
                    sequence: seq,
                    portID: pid,
                    payload: Array(bytes[(offset + headerLength)..<(offset + length)])
                )
            )
            let aligned = Int(CHawser_NLMSG_ALIGN(UInt32(length)))
            offset += min(aligned, left)
        }
        return out
    }

    /// Parses the attributes that follow a fixed-size struct of `fixedLength` bytes in
    /// `payload`. Returns them by type (the nested and byte-order flag bits masked off); a later
    /// attribute of the same type replaces an earlier one.
    public static func attributes(in payload: [UInt8], after fixedLength: Int) throws(ParseError) -> [UInt16: [UInt8]] {
        let start = Int(CHawser_NLMSG_ALIGN(UInt32(fixedLength)))
        guard payload.count >= fixedLength else {
            throw ParseError("payload of \(payload.count) bytes is shorter than its \(fixedLength)-byte fixed header")
        }
        var out: [UInt16: [UInt8]] = [:]
        var offset = start
        while offset < payload.count {
            let left = payload.count - offset
            guard left >= 4 else {
                throw ParseError("\(left) trailing bytes at offset \(offset) are too short for an attribute header")
            }
            let length = Int(u16(payload, offset))
            let type = u16(payload, offset + 2) & 0x3FFF  // NLA_TYPE_MASK
            guard length >= 4 else {
                throw ParseError(
                    "attribute \(type) at offset \(offset) declares length \(length), shorter than its header"
                )
            }
            guard length <= left else {
                throw ParseError(
                    "attribute \(type) at offset \(offset) declares length \(length) but only \(left) bytes remain"
                )
            }
            out[type] = Array(payload[(offset + 4)..<(offset + length)])
            offset += min(Int(CHawser_RTA_ALIGN(UInt32(length))), left)
        }
        return out
    }

    // MARK: - Typed payloads

    /// The parts of an `rtmsg` (route) message the monitor uses.
    public struct Route: Sendable, Hashable {
        /// `rtm_family`: `AF_INET` (2) or `AF_INET6` (10).
        public var family: UInt8
        /// `rtm_type`: `RTN_UNICAST`, `RTN_LOCAL`, `RTN_UNREACHABLE`, …
        public var type: UInt8
        /// The outgoing interface (`RTA_OIF`), if the route has one.
        public var outputInterface: Int32?

        /// Parses the payload of an `RTM_NEWROUTE` message.
        public init(payload: [UInt8]) throws(ParseError) {
            let fixed = Int(CHawser_sizeof_rtmsg())
            let attrs = try Netlink.attributes(in: payload, after: fixed)
            self.family = payload[0]
            self.type = payload[7]
            if let oif = attrs[CHAWSER_RTA_OIF] {
                guard oif.count == 4 else { throw ParseError("RTA_OIF has \(oif.count) bytes, expected 4") }
                self.outputInterface = Int32(bitPattern: Netlink.u32(oif, 0))
            }
        }
    }

    /// The parts of an `ifinfomsg` (link) message the monitor uses.
    public struct Link: Sendable, Hashable {
        /// `ifi_index`: the kernel's index of the interface.
        public var index: Int32
        /// `ifi_type`, an `ARPHRD_*` value (1 is Ethernet, 772 loopback).
        public var hardwareType: UInt16
        /// `ifi_flags` (`IFF_UP`, `IFF_RUNNING`, `IFF_LOWER_UP`, …).
        public var flags: UInt32
        /// `IFLA_IFNAME`, without its NUL.
        public var name: String

        /// Parses the payload of an `RTM_NEWLINK` message.
        public init(payload: [UInt8]) throws(ParseError) {
            let fixed = Int(CHawser_sizeof_ifinfomsg())
            let attrs = try Netlink.attributes(in: payload, after: fixed)
            self.hardwareType = Netlink.u16(payload, 2)
            self.index = Int32(bitPattern: Netlink.u32(payload, 4))
            self.flags = Netlink.u32(payload, 8)
            let raw = attrs[CHAWSER_IFLA_IFNAME] ?? []
            self.name = String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// The parts of an `ifaddrmsg` (address) message the monitor uses.
    public struct Address: Sendable, Hashable {
        /// `ifa_family`: `AF_INET` (2) or `AF_INET6` (10).
        public var family: UInt8
        /// `ifa_flags` (`IFA_F_TENTATIVE`, `IFA_F_DADFAILED`, …).
        public var flags: UInt8
        /// `ifa_index`: the index of the interface the address is on.
        public var index: Int32

        /// Parses the payload of an `RTM_NEWADDR` message.
        public init(payload: [UInt8]) throws(ParseError) {
            let fixed = Int(CHawser_sizeof_ifaddrmsg())
            _ = try Netlink.attributes(in: payload, after: fixed)
            self.family = payload[0]
            self.flags = payload[2]
            self.index = Int32(bitPattern: Netlink.u32(payload, 4))
        }

        /// False while duplicate-address detection runs or after it failed.
        public var isUsable: Bool { self.flags & (CHAWSER_IFA_F_TENTATIVE | CHAWSER_IFA_F_DADFAILED) == 0 }
    }

    // MARK: - Building requests

    /// Encodes a request: header (with `NLM_F_REQUEST` added) and payload, padded to 4 bytes.
    public static func request(type: UInt16, flags: UInt16, sequence: UInt32, payload: [UInt8]) -> [UInt8] {
        let length = headerLength + payload.count
        var out: [UInt8] = []
        out.reserveCapacity(Int(CHawser_NLMSG_ALIGN(UInt32(length))))
        appendU32(&out, UInt32(length))
        appendU16(&out, type)
        appendU16(&out, flags | CHAWSER_NLM_F_REQUEST)
        appendU32(&out, sequence)
        appendU32(&out, 0)
        out += payload
        while out.count % 4 != 0 { out.append(0) }
        return out
    }

    /// An `RTM_GETROUTE` request for the route to `destination` (`family` AF_INET or AF_INET6,
    /// `destination` its raw address bytes; empty asks for the route to the unspecified address,
    /// i.e. the default route).
    public static func routeRequest(family: UInt8, destination: [UInt8], sequence: UInt32) -> [UInt8] {
        var payload = [UInt8](repeating: 0, count: Int(CHawser_sizeof_rtmsg()))
        payload[0] = family
        payload[1] = UInt8(destination.count * 8)  // rtm_dst_len
        if !destination.isEmpty {
            let length = Int(CHawser_RTA_HDRLEN()) + destination.count
            appendU16(&payload, UInt16(length))
            appendU16(&payload, CHAWSER_RTA_DST)
            payload += destination
            while payload.count % 4 != 0 { payload.append(0) }
        }
        return request(type: CHAWSER_RTM_GETROUTE, flags: 0, sequence: sequence, payload: payload)
    }

    /// A dump request (`RTM_GETLINK` or `RTM_GETADDR`) over every family.
    public static func dumpRequest(type: UInt16, sequence: UInt32) -> [UInt8] {
        let size = type == CHAWSER_RTM_GETLINK ? CHawser_sizeof_ifinfomsg() : CHawser_sizeof_ifaddrmsg()
        return request(
            type: type,
            flags: CHAWSER_NLM_F_DUMP,
            sequence: sequence,
            payload: [UInt8](repeating: 0, count: Int(size))
        )
    }

    // MARK: - Host-order integers (netlink uses the host's byte order)

    @inline(__always)
    static func u16(_ b: [UInt8], _ i: Int) -> UInt16 {
        UInt16(littleEndian: UInt16(b[i]) | UInt16(b[i + 1]) << 8)
    }

    @inline(__always)
    static func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(littleEndian: UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24)
    }

    static func appendU16(_ out: inout [UInt8], _ v: UInt16) {
        let le = v.littleEndian
        out.append(UInt8(truncatingIfNeeded: le))
        out.append(UInt8(truncatingIfNeeded: le >> 8))
    }

    static func appendU32(_ out: inout [UInt8], _ v: UInt32) {
        let le = v.littleEndian
        for s in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: le >> UInt32(s))) }
    }
}
