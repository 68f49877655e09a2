// br (RFC 7932) through libbrotlidec, under the package trait "Brotli".
#if Brotli
import CBrotli
import HawserBase

/// br being undone: one BrotliDecoderState and its output buffer.
///
/// A brotli stream has no concatenation: after its last meta-block, zero bytes are padding
/// (as after a deflate stream) and anything else is an error. The window is at most 16 MiB
/// (the large-window extension is not enabled), so the decoder's memory is bounded whatever
/// the stream says.
final class BrotliLayer: DecodeLayer {
    let coding = ContentCoding.br
    private let state: OpaquePointer
    private let buffer: UnsafeMutableRawPointer
    private let capacity = ContentDecoder.chunkSize
    private(set) var consumed = 0
    private var started = false
    private var ended = false

    init() throws(HawserError) {
        guard let state = BrotliDecoderCreateInstance(nil, nil, nil) else {
            throw HawserError(.cannotDecodeContent, "br: the brotli decoder cannot start (out of memory)")
        }
        self.state = state
        self.buffer = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit {
        BrotliDecoderDestroyInstance(self.state)
        self.buffer.deallocate()
    }

    var incompleteReason: String? {
        self.started && !self.ended
            ? "truncated stream (the body ended before the end of the compressed data)" : nil
    }

    private func corrupt(_ what: String) -> HawserError {
        HawserError(.cannotDecodeContent, "br: corrupt data: \(what)")
    }

    /// The decoder's error, in words where brotli's name is not enough.
    private var failure: HawserError {
        let code = BrotliDecoderGetErrorCode(self.state)
        // BROTLI_DECODER_ERROR_ALLOC_* are -30 ... -21.
        if code.rawValue <= -21 && code.rawValue >= -30 {
            return HawserError(.cannotDecodeContent, "br: brotli is out of memory")
        }
        var name = String(cString: BrotliDecoderErrorString(code))
        while name.first == "_" { name.removeFirst() }
        // libbrotlidec's name for the error can depend on how much input it had at once (a
        // corrupt length read whole or byte by byte): it goes last, in parentheses.
        return HawserError(.cannotDecodeContent, "br: corrupt data (libbrotlidec: \(name))")
    }

    func feed(
        _ input: UnsafeRawBufferPointer,
        _ downstream: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        guard let base = input.baseAddress, input.count > 0 else { return }
        if self.ended { return try self.trailing(base, input.count) }
        self.started = true
        var nextIn: UnsafePointer<UInt8>? = base.assumingMemoryBound(to: UInt8.self)
        var availIn = input.count
        while true {
            var nextOut: UnsafeMutablePointer<UInt8>? = self.buffer.assumingMemoryBound(to: UInt8.self)
            var availOut = self.capacity
            let before = availIn
            let result = BrotliDecoderDecompressStream(self.state, &availIn, &nextIn, &availOut, &nextOut, nil)
            self.consumed += before - availIn
            let produced = self.capacity - availOut
            // Output first, also before an error (the same for any split of the input).
            if produced > 0 {
                try downstream(UnsafeRawBufferPointer(start: self.buffer, count: produced))
            }
            switch result {
            case BROTLI_DECODER_RESULT_SUCCESS:
                self.ended = true
                if availIn > 0, let rest = nextIn { try self.trailing(UnsafeRawPointer(rest), availIn) }
                return
            case BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT:
                // Brotli takes all the input before asking for more.
                return
            case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT:
                continue
            default:
                throw self.failure
            }
        }
    }

    /// Bytes after the end of the stream: zero padding is skipped, anything else is an error.
    private func trailing(_ p: UnsafeRawPointer, _ count: Int) throws(HawserError) {
        let skip = zeroPadding(p, count)
        self.consumed += skip
        if skip < count { throw self.corrupt("data after the end of the brotli stream") }
    }
}
#endif
