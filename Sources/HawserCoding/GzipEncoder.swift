// gzip for request bodies that opt in (`Content-Encoding: gzip` on the request).
import CHawser
import HawserBase

/// Streaming gzip (RFC 1952) compressor for request bodies.
///
/// ```swift
/// var gzip = try GzipEncoder()
/// try gzip.encode(part) { out in send(out) }   // any number of times
/// try gzip.finish { out in send(out) }         // writes the rest and the trailer
/// ```
///
/// Output goes to the sink in chunks of at most ``chunkSize`` bytes, valid only during
/// the call. The zlib stream is released when the last copy goes away (copies share it).
public struct GzipEncoder {
    /// The most bytes one call of the sink receives.
    public static let chunkSize = 32 * 1024
    private let state: DeflateState

    /// - Parameter level: zlib compression level, 1 (fastest) … 9 (smallest); 6 is zlib's default.
    /// - Throws: `.invalidRequest` for a level outside 0…9 or when zlib cannot start.
    public init(level: Int = 6) throws(HawserError) {
        guard (0...9).contains(level) else {
            throw HawserError(.invalidRequest, "gzip level \(level) is outside 0…9")
        }
        self.state = try DeflateState(level: Int32(level))
    }

    /// Compresses `input`, handing compressed bytes (if any are ready) to `sink`.
    public mutating func encode(
        _ input: UnsafeRawBufferPointer,
        into sink: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        try self.state.run(input, flush: Z_NO_FLUSH, sink)
    }

    /// Flushes everything and writes the gzip trailer. Encoding after `finish` is an error.
    public mutating func finish(into sink: (UnsafeRawBufferPointer) throws(HawserError) -> Void) throws(HawserError) {
        try self.state.run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH, sink)
    }

    /// The whole of `bytes`, gzip-compressed.
    public static func compress(_ bytes: [UInt8], level: Int = 6) throws(HawserError) -> [UInt8] {
        var encoder = try GzipEncoder(level: level)
        var out: [UInt8] = []
        // Array.withUnsafeBytes rethrows untyped errors: carry the typed one out by hand.
        let failure: HawserError? = bytes.withUnsafeBytes { raw in
            do throws(HawserError) { try encoder.encode(raw) { out.append(contentsOf: $0) } } catch { return error }
            return nil
        }
        if let failure { throw failure }
        try encoder.finish { out.append(contentsOf: $0) }
        return out
    }
}

/// The deflate z_stream at a fixed address, freed in deinit.
final class DeflateState {
    private let stream: UnsafeMutablePointer<z_stream>
    private let buffer: UnsafeMutableRawPointer
    private let capacity = GzipEncoder.chunkSize
    private var finished = false

    init(level: Int32) throws(HawserError) {
        self.stream = .allocate(capacity: 1)
        self.stream.initialize(to: z_stream())
        let rc = CHawser_deflateInit2(self.stream, level, 15 + 16)
        guard rc == Z_OK else {
            self.stream.deinitialize(count: 1)
            self.stream.deallocate()
            throw HawserError(.invalidRequest, "gzip: zlib deflateInit2 failed (\(rc))")
        }
        self.buffer = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit {
        deflateEnd(self.stream)
        self.stream.deinitialize(count: 1)
        self.stream.deallocate()
        self.buffer.deallocate()
    }

    func run(
        _ input: UnsafeRawBufferPointer,
        flush: Int32,
        _ sink: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        if self.finished { throw HawserError(.invalidRequest, "gzip encoder used after finish()") }
        let s = self.stream
        var used = 0
        while true {
            let avail = min(input.count - used, Int(UInt32.max))
            s.pointee.next_in = input.baseAddress.map {
                UnsafeMutablePointer(mutating: ($0 + used).assumingMemoryBound(to: Bytef.self))
            }
            s.pointee.avail_in = uInt(avail)
            s.pointee.next_out = self.buffer.assumingMemoryBound(to: Bytef.self)
            s.pointee.avail_out = uInt(self.capacity)
            let rc = deflate(s, flush)
            used += avail - Int(s.pointee.avail_in)
            let produced = self.capacity - Int(s.pointee.avail_out)
            if rc == Z_STREAM_ERROR {
                throw HawserError(.invalidRequest, "gzip: zlib deflate failed")
            }
            if produced > 0 { try sink(UnsafeRawBufferPointer(start: self.buffer, count: produced)) }
            if rc == Z_STREAM_END {
                self.finished = true
                return
            }
            // With room left in the output, deflate has taken all the input it can for now.
            if produced < self.capacity && used == input.count && flush == Z_NO_FLUSH { return }
        }
    }
}
