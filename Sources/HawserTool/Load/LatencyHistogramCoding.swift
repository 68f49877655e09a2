// HdrHistogram's V2 encoding of a LatencyHistogram, so that --hdr-out logs and the histograms
// in --json reports are read by HdrHistogram's tools (HistogramLogProcessor, the Python and Go
// ports) and by `hawser load merge`.
//
// Uncompressed (all integers big-endian):
//   cookie 0x1c849313 (V2, LEB128 word size 8), payload length (4 bytes), normalizing index
//   offset (4, always 0 here), significant digits (4), lowest discernible value (8), highest
//   trackable value (8), integer-to-double conversion ratio (8, IEEE double 1.0), then the
//   payload: the counts from slot 0 to the slot of the largest value, each a ZigZag LEB128
//   number (at most 9 bytes, the ninth carrying 8 bits), a run of n > 1 empty slots written as -n.
// Compressed: cookie 0x1c849314, the length of the zlib stream (4 bytes), then the zlib
// (RFC 1950) deflate of the uncompressed encoding. Interval logs carry it in base64.

import CHawser

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why an encoded histogram could not be read.
struct HistogramDecodingError: Error, CustomStringConvertible {
    var description: String
}

extension LatencyHistogram {
    static let v2EncodingCookie: UInt32 = 0x1c84_9313
    static let v2CompressedEncodingCookie: UInt32 = 0x1c84_9314

    /// The uncompressed V2 encoding.
    func encodedV2() -> [UInt8] {
        var payload: [UInt8] = []
        let limit = self.totalCount == 0 ? 0 : self.countsIndex(self.maxValue) + 1
        var i = 0
        while i < min(limit, self.counts.count) {
            let count = self.counts[i]
            i += 1
            if count == 0 {
                var zeros: Int64 = 1
                while i < limit && self.counts[i] == 0 {
                    zeros += 1
                    i += 1
                }
                Self.putZigZag(zeros > 1 ? -zeros : 0, into: &payload)
            } else {
                Self.putZigZag(Int64(clamping: count), into: &payload)
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(40 + payload.count)
        Self.putBE(UInt64(Self.v2EncodingCookie), bytes: 4, into: &out)
        Self.putBE(UInt64(payload.count), bytes: 4, into: &out)
        Self.putBE(0, bytes: 4, into: &out)
        Self.putBE(UInt64(self.significantDigits), bytes: 4, into: &out)
        Self.putBE(self.lowestDiscernible, bytes: 8, into: &out)
        Self.putBE(self.highestTrackable, bytes: 8, into: &out)
        Self.putBE((1.0 as Double).bitPattern, bytes: 8, into: &out)
        out += payload
        return out
    }

    /// The compressed V2 encoding (what interval logs carry, in base64).
    func encodedCompressedV2() -> [UInt8] {
        let plain = self.encodedV2()
        var bound = compressBound(uLong(plain.count))
        var deflated = [UInt8](repeating: 0, count: Int(bound))
        let rc = deflated.withUnsafeMutableBufferPointer { out in
            plain.withUnsafeBufferPointer { inp in
                compress2(out.baseAddress, &bound, inp.baseAddress, uLong(plain.count), Z_DEFAULT_COMPRESSION)
            }
        }
        precondition(rc == Z_OK, "zlib compress2 failed (\(rc))")  // only on out of memory
        deflated.removeSubrange(Int(bound)...)
        var out: [UInt8] = []
        Self.putBE(UInt64(Self.v2CompressedEncodingCookie), bytes: 4, into: &out)
        Self.putBE(UInt64(deflated.count), bytes: 4, into: &out)
        return out + deflated
    }

    /// Base64 of the compressed V2 encoding.
    func encodedBase64() -> String {
        Data(self.encodedCompressedV2()).base64EncodedString()
    }

    /// A histogram from base64 of a compressed (or plain) V2 encoding.
    init(base64 text: String) throws(HistogramDecodingError) {
        guard let data = Data(base64Encoded: text.trimmingSpaces()) else {
            throw HistogramDecodingError(description: "not base64: \(text.prefix(40))")
        }
        try self.init(encoded: [UInt8](data))
    }

    /// A histogram from a compressed or plain V2 encoding.
    init(encoded bytes: [UInt8]) throws(HistogramDecodingError) {
        guard bytes.count >= 8 else { throw HistogramDecodingError(description: "encoded histogram too short") }
        let cookie = UInt32(Self.getBE(bytes, 0, 4))
        if cookie == Self.v2CompressedEncodingCookie {
            let length = Int(Self.getBE(bytes, 4, 4))
            guard length <= bytes.count - 8 else {
                throw HistogramDecodingError(description: "compressed length \(length) beyond the data")
            }
            let inflated = try Self.inflate(Array(bytes[8..<(8 + length)]))
            try self.init(plain: inflated)
        } else {
            try self.init(plain: bytes)
        }
    }

    private init(plain bytes: [UInt8]) throws(HistogramDecodingError) {
        guard bytes.count >= 40 else { throw HistogramDecodingError(description: "encoded histogram too short") }
        let cookie = UInt32(Self.getBE(bytes, 0, 4))
        guard cookie == Self.v2EncodingCookie else {
            throw HistogramDecodingError(
                description: "not an HdrHistogram V2 encoding (cookie 0x\(String(cookie, radix: 16)))"
            )
        }
        let payloadLength = Int(Self.getBE(bytes, 4, 4))
        let offset = Self.getBE(bytes, 8, 4)
        let digits = Int(Self.getBE(bytes, 12, 4))
        let lowest = Self.getBE(bytes, 16, 8)
        let highest = Self.getBE(bytes, 24, 8)
        guard payloadLength <= bytes.count - 40, offset == 0, (1...5).contains(digits), lowest >= 1,
            highest >= 2 * lowest, highest < UInt64(Int64.max) / 2
        else { throw HistogramDecodingError(description: "unsupported HdrHistogram V2 header") }
        self.init(lowestDiscernible: lowest, highestTrackable: highest, significantDigits: digits)
        var position = 40
        let end = 40 + payloadLength
        var index = 0
        while position < end {
            let value = try Self.getZigZag(bytes, &position, end)
            if value < 0 {
                index += Int(clamping: -value)
            } else {
                guard index < self.counts.count else {
                    throw HistogramDecodingError(description: "encoded counts beyond the histogram's range")
                }
                if value > 0 { self.setCount(atIndex: index, UInt64(value)) }
                index += 1
            }
        }
    }

    // MARK: - Bytes

    private static func putBE(_ v: UInt64, bytes: Int, into out: inout [UInt8]) {
        for k in stride(from: bytes - 1, through: 0, by: -1) {
            out.append(UInt8(truncatingIfNeeded: v >> UInt64(8 * k)))
        }
    }

    private static func getBE(_ b: [UInt8], _ at: Int, _ n: Int) -> UInt64 {
        var v: UInt64 = 0
        for k in 0..<n { v = v << 8 | UInt64(b[at + k]) }
        return v
    }

    private static func putZigZag(_ value: Int64, into out: inout [UInt8]) {
        var v = UInt64(bitPattern: (value << 1) ^ (value >> 63))
        for _ in 0..<8 {
            if v < 0x80 {
                out.append(UInt8(v))
                return
            }
            out.append(UInt8(v & 0x7f) | 0x80)
            v >>= 7
        }
        out.append(UInt8(truncatingIfNeeded: v))  // the ninth byte carries 8 bits
    }

    private static func getZigZag(_ b: [UInt8], _ p: inout Int, _ end: Int) throws(HistogramDecodingError) -> Int64 {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        for k in 0..<9 {
            guard p < end else { throw HistogramDecodingError(description: "truncated count in the encoding") }
            let byte = b[p]
            p += 1
            if k == 8 {
                v |= UInt64(byte) << 56
                break
            }
            v |= UInt64(byte & 0x7f) << shift
            shift += 7
            if byte & 0x80 == 0 { break }
        }
        return Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
    }

    private static func inflate(_ input: [UInt8]) throws(HistogramDecodingError) -> [UInt8] {
        var capacity = max(input.count * 8, 4096)
        while capacity <= 64 << 20 {
            var out = [UInt8](repeating: 0, count: capacity)
            var length = uLong(capacity)
            let rc = out.withUnsafeMutableBufferPointer { o in
                input.withUnsafeBufferPointer { i in
                    uncompress(o.baseAddress, &length, i.baseAddress, uLong(input.count))
                }
            }
            if rc == Z_OK {
                out.removeSubrange(Int(length)...)
                return out
            }
            guard rc == Z_BUF_ERROR && length == uLong(capacity) else {
                throw HistogramDecodingError(description: "the histogram's zlib data is corrupt (zlib \(rc))")
            }
            capacity *= 4
        }
        throw HistogramDecodingError(description: "the histogram's zlib data inflates beyond 64 MiB")
    }
}

extension String {
    /// Without leading and trailing spaces, tabs, CR and LF.
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        guard let first = self.firstIndex(where: { !isSpace($0) }), let last = self.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(self[first...last])
    }
}
