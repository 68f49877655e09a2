// Content decoding (RFC 9110 §8.4): gzip and deflate through zlib, br through libbrotlidec
// (trait "Brotli", BrotliLayer.swift), zstd through libzstd (trait "Zstd", ZstdLayer.swift);
// streaming, bounded.
//
// A response body arrives in pieces; `ContentDecoder` undoes its content codings as the
// pieces arrive and hands the decoded bytes on in bounded chunks, never holding the body.
// Each coding is one decoder stream ("layer"); stacked codings chain the layers, the last
// coding applied being the first undone. Every layer writes into its own output buffer,
// allocated once, so the steady state does not allocate. The limits are enforced in one
// place (`DecoderState.deliver`), on the last layer's output, whatever the codings.
import CHawser
import HawserBase

/// Bounds on what decoding a body may produce, so that a decompression bomb is an error
/// and never an out-of-memory.
///
/// The defaults: at most 1 GiB decoded per body, and at most 1000 decoded bytes per
/// encoded byte once the output has passed 1 MiB. A single deflate stream cannot expand
/// by more than about 1032:1, so the ratio flags only near-maximal or stacked encodings
/// (a body of zeros, `gzip, gzip`), which real content almost never is; the floor keeps
/// small, highly compressible bodies (a 40-byte gzip of 100 KiB of spaces) from being
/// flagged. br and zstd can expand far more than deflate (a few bytes per megabyte of
/// zeros), and the same bounds stop them at the same points. Raise ``maxDecodedBytes`` for
/// large downloads served with a content coding.
public struct DecodingLimits: Sendable, Hashable {
    /// The most decoded bytes one body may produce.
    public var maxDecodedBytes: Int
    /// The most decoded bytes per encoded byte (checked once ``ratioCheckFloor`` is passed).
    public var maxExpansionRatio: Int
    /// Decoded size under which the ratio is not checked.
    public var ratioCheckFloor: Int

    /// Limits with the documented safe defaults for any argument left out.
    public init(maxDecodedBytes: Int = 1 << 30, maxExpansionRatio: Int = 1000, ratioCheckFloor: Int = 1 << 20) {
        self.maxDecodedBytes = maxDecodedBytes
        self.maxExpansionRatio = maxExpansionRatio
        self.ratioCheckFloor = ratioCheckFloor
    }

    /// 1 GiB, 1000:1 past 1 MiB.
    public static let `default` = DecodingLimits()
}

/// A content coding this build of Hawser decodes: gzip and deflate always, br with the
/// package trait `Brotli` and zstd with the trait `Zstd` (both on by default).
///
/// `allCases` is what the build decodes, in the order ``ContentDecoder/acceptEncoding``
/// offers them.
public enum ContentCoding: String, Sendable, Hashable, CaseIterable {
    /// gzip (RFC 1952), also sent as `x-gzip`; concatenated members are one body.
    case gzip
    /// deflate: RFC 1950 zlib-wrapped data, or (as many servers send) raw RFC 1951 data.
    case deflate
    #if Brotli
    /// br: Brotli (RFC 7932), one stream per body. Decoded by libbrotlidec (trait `Brotli`).
    case br
    #endif
    #if Zstd
    /// zstd: Zstandard (RFC 8878) frames, concatenated frames being one body, with a window of
    /// at most 8 MiB (RFC 9659). Decoded by libzstd (trait `Zstd`).
    case zstd
    #endif

    /// What a `Content-Encoding` token names (case-insensitive).
    enum Token {
        case coding(ContentCoding)
        case identity
        case unsupported
    }

    static func classify(_ token: Substring) -> Token {
        switch token.lowercased() {
        case "gzip", "x-gzip": return .coding(.gzip)
        case "deflate": return .coding(.deflate)
        #if Brotli
        case "br": return .coding(.br)
        #endif
        #if Zstd
        case "zstd": return .coding(.zstd)
        #endif
        case "identity": return .identity
        default: return .unsupported
        }
    }
}

/// Streaming decoder for one response body's `Content-Encoding`.
///
/// ```swift
/// var decoder = try ContentDecoder(contentEncoding: "gzip", limits: .default)
/// try decoder.decode(bytes) { chunk in consume(chunk) }   // as often as bytes arrive
/// try decoder.finish()                                      // at the end of the body
/// ```
///
/// - `decode` hands decoded bytes to the sink in chunks of at most ``chunkSize`` bytes;
///   the sink's buffer is only valid during the call. Any split of the input gives the
///   same decoded bytes.
/// - Errors are `HawserError` with code `.cannotDecodeContent` and a message naming the
///   coding and what was wrong (corrupt data, truncation, a limit). After an error the
///   decoder stays failed and throws the same error again. A br or zstd error ends with the
///   library's own words in parentheses, e.g. `zstd: corrupt data (libzstd: Unknown frame
///   descriptor)`: they can depend on how the bytes were split, what comes before them cannot.
///   In a stack of codings with zstd, which coding reports corrupt data can depend on the
///   split too (libzstd drops what it decoded in a call that fails).
/// - gzip accepts concatenated members (one body), zero bytes of padding after a member
///   (as `gzip -d` does), nothing else after it. deflate tells zlib-wrapped from raw data
///   by the first two bytes (a valid RFC 1950 header means wrapped). Trailing zero bytes
///   after a deflate stream are ignored, any other trailing byte is an error.
/// - br (trait `Brotli`) is one stream; trailing zero bytes are ignored, any other trailing
///   byte is an error. zstd (trait `Zstd`) accepts concatenated and skippable frames (one
///   body) and zero padding between frames; a frame that needs a window larger than 8 MiB
///   (RFC 9659), a dictionary, or is a legacy frame (before RFC 8878) is refused.
/// - An empty body decodes to nothing without error (servers send `Content-Encoding:
///   gzip` with empty bodies).
/// - The decoder streams are released when the last copy of the decoder goes away; copies
///   share one stream state, so keep one copy.
public struct ContentDecoder {
    /// The most bytes one call of the sink receives.
    public static let chunkSize = 32 * 1024
    /// Codings stacked deeper than this are refused (curl has the same kind of bound).
    public static let maxStackedCodings = 5
    /// The `Accept-Encoding` value that offers what this decoder handles: every
    /// ``ContentCoding`` of the build, `gzip, deflate, br, zstd` with the default traits.
    public static let acceptEncoding = ContentCoding.allCases.map(\.rawValue).joined(separator: ", ")

    /// The coding names a `Content-Encoding` value may use in this build (for messages).
    static let decodableNames = ContentCoding.allCases.flatMap { $0 == .gzip ? ["gzip", "x-gzip"] : [$0.rawValue] }
        .joined(separator: ", ")

    /// The codings in the order they are undone (the reverse of the header's order).
    public let codings: [ContentCoding]
    private let state: DecoderState

    /// A decoder for a `Content-Encoding` field value, e.g. `gzip`, `x-gzip`, `br`, `zstd`,
    /// `gzip, deflate` (undone deflate first), `identity` (no coding: bytes pass through).
    ///
    /// - Throws: `.cannotDecodeContent` for a coding other than those of ``ContentCoding``
    ///   (and x-gzip and identity), for more than ``maxStackedCodings`` codings, or when a
    ///   decoder library cannot start.
    public init(contentEncoding: String, limits: DecodingLimits = .default) throws(HawserError) {
        let codings = try Self.codings(in: contentEncoding)
        self.codings = codings.reversed()
        self.state = try DecoderState(codings: self.codings, limits: limits)
    }

    /// Whether a `Content-Encoding` value names only codings this decoder undoes
    /// (and not too many of them). An empty value or `identity` is decodable: it is no coding.
    public static func canDecode(contentEncoding: String) -> Bool {
        (try? Self.codings(in: contentEncoding)) != nil
    }

    /// The codings of a field value in the header's order (application order), identity dropped.
    static func codings(in value: String) throws(HawserError) -> [ContentCoding] {
        var out: [ContentCoding] = []
        for element in value.split(separator: ",", omittingEmptySubsequences: false) {
            let token = element.trimmingHTTPWhitespace()
            if token.isEmpty { continue }  // RFC 9110 §5.6.1: empty list elements are ignored
            switch ContentCoding.classify(token) {
            case .coding(let coding): out.append(coding)
            case .identity: continue
            case .unsupported:
                throw HawserError(
                    .cannotDecodeContent,
                    "unsupported content coding \"\(token)\" (this build of Hawser decodes \(Self.decodableNames))"
                )
            }
        }
        if out.count > Self.maxStackedCodings {
            throw HawserError(
                .cannotDecodeContent,
                "\(out.count) stacked content codings (at most \(Self.maxStackedCodings) are decoded)"
            )
        }
        return out
    }

    /// Decoded bytes handed to sinks so far.
    public var decodedByteCount: Int { self.state.decodedCount }
    /// Encoded bytes consumed so far.
    public var encodedByteCount: Int { self.state.encodedCount }

    /// Decodes the next piece of the body, handing decoded bytes to `sink` in chunks of at
    /// most ``chunkSize`` bytes (valid only during the call).
    ///
    /// - Throws: `.cannotDecodeContent` when the data is corrupt, or decoding passes
    ///   ``DecodingLimits``; any error `sink` throws (the decoder is failed afterwards).
    public mutating func decode(
        _ input: UnsafeRawBufferPointer,
        into sink: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        try self.state.decode(input, sink)
    }

    /// Ends the body: throws `.cannotDecodeContent` if a coded stream is incomplete
    /// (the body was truncated). Decoding after `finish` is an error.
    public mutating func finish() throws(HawserError) {
        try self.state.finish()
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs (HTTP's OWS).
    func trimmingHTTPWhitespace() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}

// MARK: - Decoder state

/// The layers plus counters and the failed/finished state; a class so the decoder streams
/// have one owner and are freed in `deinit` on every path.
final class DecoderState {
    let layers: [any DecodeLayer]
    let limits: DecodingLimits
    var decodedCount = 0
    var error: HawserError?
    var finished = false
    /// Encoded bytes handed over in previous `decode` calls (passthrough counting).
    private var passthroughIn = 0

    init(codings: [ContentCoding], limits: DecodingLimits) throws(HawserError) {
        var layers: [any DecodeLayer] = []
        layers.reserveCapacity(codings.count)
        for coding in codings { layers.append(try makeLayer(coding)) }
        self.layers = layers
        self.limits = limits
    }

    var encodedCount: Int { self.layers.first?.consumed ?? self.passthroughIn }

    func decode(
        _ input: UnsafeRawBufferPointer,
        _ sink: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        if let error = self.error { throw error }
        if self.finished { throw HawserError(.cannotDecodeContent, "content decoder used after finish()") }
        if input.isEmpty { return }
        do {
            if self.layers.isEmpty {
                self.passthroughIn += input.count
                try self.deliver(input, sink)
            } else {
                try self.push(input, layer: 0, sink)
            }
        } catch {
            self.error = error
            throw error
        }
    }

    /// Feeds `input` to layer `index`, its output to the next layer, the last one's to the sink.
    private func push(
        _ input: UnsafeRawBufferPointer,
        layer index: Int,
        _ sink: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        let next = index + 1
        if next == self.layers.count {
            try self.layers[index].feed(input) { (out) throws(HawserError) in try self.deliver(out, sink) }
        } else {
            try self.layers[index].feed(input) { (out) throws(HawserError) in try self.push(out, layer: next, sink) }
        }
    }

    @inline(__always)
    private func deliver(
        _ out: UnsafeRawBufferPointer,
        _ sink: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        let total = self.decodedCount + out.count
        if total > self.limits.maxDecodedBytes {
            throw HawserError(
                .cannotDecodeContent,
                "decoded body exceeds the limit of \(self.limits.maxDecodedBytes) bytes (decompression bomb?)",
                underlying: DecodingLimitError.maxDecodedBytes
            )
        }
        if total > self.limits.ratioCheckFloor {
            let encoded = max(self.encodedCount, 1)
            let (bound, overflow) = encoded.multipliedReportingOverflow(by: self.limits.maxExpansionRatio)
            if !overflow && total > bound {
                throw HawserError(
                    .cannotDecodeContent,
                    "decoded body expands more than \(self.limits.maxExpansionRatio):1 (\(total) bytes from \(encoded); decompression bomb?)",
                    underlying: DecodingLimitError.maxExpansionRatio
                )
            }
        }
        self.decodedCount = total
        try sink(out)
    }

    func finish() throws(HawserError) {
        if let error = self.error { throw error }
        if self.finished { return }
        for layer in self.layers {
            if let problem = layer.incompleteReason {
                let error = HawserError(.cannotDecodeContent, "\(layer.coding.rawValue): \(problem)")
                self.error = error
                throw error
            }
        }
        self.finished = true
    }
}

/// Which limit a bomb hit (the `underlying` of the `.cannotDecodeContent` error).
public enum DecodingLimitError: Error, Sendable, Hashable {
    /// ``DecodingLimits/maxDecodedBytes`` was passed.
    case maxDecodedBytes
    /// ``DecodingLimits/maxExpansionRatio`` was passed (after the floor).
    case maxExpansionRatio
}

// MARK: - Layers

/// One content coding being undone: a decoder stream and its output buffer, both at fixed
/// addresses for the layer's life.
protocol DecodeLayer: AnyObject {
    /// The coding this layer undoes (error messages name it).
    var coding: ContentCoding { get }
    /// Encoded bytes consumed by this layer.
    var consumed: Int { get }
    /// Why the stream would be incomplete if the body ended now, or nil.
    var incompleteReason: String? { get }
    /// Consumes all of `input`, handing output downstream in chunks of at most
    /// ``ContentDecoder/chunkSize`` bytes.
    func feed(
        _ input: UnsafeRawBufferPointer,
        _ downstream: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError)
}

/// The layer that undoes `coding`.
func makeLayer(_ coding: ContentCoding) throws(HawserError) -> any DecodeLayer {
    switch coding {
    case .gzip, .deflate: return try InflateLayer(coding)
    #if Brotli
    case .br: return try BrotliLayer()
    #endif
    #if Zstd
    case .zstd: return try ZstdLayer()
    #endif
    }
}

/// The number of zero bytes at the start of `count` bytes at `p` (padding after a stream).
func zeroPadding(_ p: UnsafeRawPointer, _ count: Int) -> Int {
    var skip = 0
    while skip < count && p.load(fromByteOffset: skip, as: UInt8.self) == 0 { skip += 1 }
    return skip
}

// MARK: - One zlib inflate stream

/// gzip or deflate being undone: a z_stream at a fixed address and its output buffer.
final class InflateLayer: DecodeLayer {
    enum Phase {
        /// Nothing received yet (deflate: flavour not yet known).
        case fresh
        /// deflate: one byte seen, flavour decided by the second.
        case sniffing(UInt8)
        /// Inside a gzip member or deflate stream.
        case inStream
        /// After the end of a member/stream: zero padding, or (gzip) the next member.
        case ended
    }

    let coding: ContentCoding
    private let stream: UnsafeMutablePointer<z_stream>
    private let buffer: UnsafeMutableRawPointer
    private let capacity = ContentDecoder.chunkSize
    private var phase = Phase.fresh
    /// Encoded bytes consumed by this layer (zlib's total_in restarts with every member).
    private(set) var consumed = 0
    private var members = 0

    init(_ coding: ContentCoding) throws(HawserError) {
        self.coding = coding
        self.stream = .allocate(capacity: 1)
        self.stream.initialize(to: z_stream())
        // gzip only (15+16), or zlib-wrapped deflate; raw deflate switches with inflateReset2.
        let rc = CHawser_inflateInit2(self.stream, coding == .gzip ? 15 + 16 : 15)
        guard rc == Z_OK else {
            self.stream.deinitialize(count: 1)
            self.stream.deallocate()
            throw HawserError(.cannotDecodeContent, "\(coding.rawValue): zlib inflateInit2 failed (\(rc))")
        }
        self.buffer = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit {
        inflateEnd(self.stream)
        self.stream.deinitialize(count: 1)
        self.stream.deallocate()
        self.buffer.deallocate()
    }

    /// Why the stream would be incomplete if the body ended now, or nil.
    var incompleteReason: String? {
        switch self.phase {
        case .fresh, .ended: return nil
        case .sniffing: return "truncated stream (the body ended after 1 byte)"
        case .inStream:
            return self.members == 0
                ? "truncated stream (the body ended before the end of the compressed data)"
                : "truncated stream (the body ended inside member \(self.members + 1))"
        }
    }

    private func corrupt(_ what: String) -> HawserError {
        HawserError(.cannotDecodeContent, "\(self.coding.rawValue): corrupt data: \(what)")
    }

    private var zlibMessage: String {
        if let m = self.stream.pointee.msg { return String(cString: m) }
        return "unknown zlib error"
    }

    /// Consumes all of `input`, handing output downstream in chunks of at most `capacity`.
    func feed(
        _ input: UnsafeRawBufferPointer,
        _ downstream: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        guard var p = input.baseAddress else { return }
        var n = input.count
        while n > 0 {
            switch self.phase {
            case .fresh where self.coding == .deflate:
                if n == 1 {
                    self.phase = .sniffing(p.load(as: UInt8.self))
                    self.consumed += 1
                    return
                }
                try self.chooseDeflateFlavour(p.load(as: UInt8.self), p.load(fromByteOffset: 1, as: UInt8.self))
                self.phase = .inStream
            case .fresh:
                self.phase = .inStream
            case .sniffing(let first):
                try self.chooseDeflateFlavour(first, p.load(as: UInt8.self))
                self.phase = .inStream
                var byte = first
                try withUnsafeBytes(of: &byte) { (one) throws(HawserError) in
                    _ = try self.inflateRun(one.baseAddress!, 1, downstream)
                }
                // The stashed byte was counted when it arrived.
                self.consumed -= 1
            case .inStream:
                let used = try self.inflateRun(p, n, downstream)
                p += used
                n -= used
            case .ended:
                // Zero padding after a member is skipped; anything else is the next gzip
                // member (zlib checks its magic) or, for deflate, an error.
                let skip = zeroPadding(p, n)
                self.consumed += skip
                p += skip
                n -= skip
                if n == 0 { return }
                if self.coding == .deflate {
                    throw self.corrupt("data after the end of the deflate stream")
                }
                guard inflateReset(self.stream) == Z_OK else { throw self.corrupt("zlib inflateReset failed") }
                self.phase = .inStream
            }
        }
    }

    private func chooseDeflateFlavour(_ b0: UInt8, _ b1: UInt8) throws(HawserError) {
        // RFC 1950 §2.2: CM = 8, CINFO ≤ 7, and CMF·256 + FLG a multiple of 31.
        let wrapped = b0 & 0x0F == 8 && b0 >> 4 <= 7 && (UInt16(b0) << 8 | UInt16(b1)) % 31 == 0
        if !wrapped {
            guard inflateReset2(self.stream, -15) == Z_OK else { throw self.corrupt("zlib inflateReset2 failed") }
        }
    }

    /// Runs inflate over `count` bytes at `p` until they are consumed or the stream ends,
    /// draining all output. Returns the bytes consumed.
    private func inflateRun(
        _ p: UnsafeRawPointer,
        _ count: Int,
        _ downstream: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) -> Int {
        let s = self.stream
        var used = 0
        while true {
            let avail = min(count - used, Int(UInt32.max))
            s.pointee.next_in = UnsafeMutablePointer(mutating: (p + used).assumingMemoryBound(to: Bytef.self))
            s.pointee.avail_in = uInt(avail)
            s.pointee.next_out = self.buffer.assumingMemoryBound(to: Bytef.self)
            s.pointee.avail_out = uInt(self.capacity)
            let rc = inflate(s, Z_NO_FLUSH)
            let took = avail - Int(s.pointee.avail_in)
            let produced = self.capacity - Int(s.pointee.avail_out)
            used += took
            self.consumed += took
            // Output first, also when zlib then reports an error: what it produced before the
            // bad byte is the same for any split of the input, so errors surface at the same
            // point of the stream (in this layer or one below) however the bytes arrived.
            if produced > 0 {
                try downstream(UnsafeRawBufferPointer(start: self.buffer, count: produced))
            }
            switch rc {
            case Z_OK, Z_BUF_ERROR:
                break
            case Z_STREAM_END:
                self.phase = .ended
                self.members += 1
            case Z_NEED_DICT:
                throw self.corrupt("the stream needs a preset dictionary, which HTTP does not provide")
            case Z_DATA_ERROR:
                throw self.corrupt(self.zlibMessage)
            case Z_MEM_ERROR:
                throw HawserError(.cannotDecodeContent, "\(self.coding.rawValue): zlib is out of memory")
            default:
                throw HawserError(
                    .cannotDecodeContent,
                    "\(self.coding.rawValue): zlib inflate failed (\(rc): \(self.zlibMessage))"
                )
            }
            if rc == Z_STREAM_END { return used }
            // A full output buffer may leave output pending inside zlib: go round again.
            if produced == self.capacity { continue }
            if used == count { return used }
            if took == 0 && produced == 0 {
                // No progress with input and output space left: zlib would say so with an
                // error; never spin.
                throw self.corrupt("inflate made no progress")
            }
        }
    }
}
