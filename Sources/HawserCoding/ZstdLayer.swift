// zstd (RFC 8878, RFC 9659) through libzstd, under the package trait "Zstd".
#if Zstd
import CZstd
import HawserBase

/// zstd being undone: one ZSTD_DCtx and its output buffer.
///
/// A body is one or more frames (skippable frames are skipped by libzstd); zero bytes between
/// and after frames are padding (no frame starts with one). The window is capped at 8 MiB,
/// the most RFC 9659 lets an HTTP sender use, so a frame cannot make the decoder reserve
/// more (libzstd's own default is 128 MiB).
final class ZstdLayer: DecodeLayer {
    /// RFC 9659: the zstd content coding's window is at most 8 MiB (2^23 bytes).
    static let maxWindowLog: Int32 = 23

    let coding = ContentCoding.zstd
    private let context: OpaquePointer
    private let buffer: UnsafeMutableRawPointer
    private let capacity = ContentDecoder.chunkSize
    private(set) var consumed = 0
    /// Inside a frame (bytes of it seen, its end not yet).
    private var inFrame = false
    /// The longest frame header (ZSTD_FRAMEHEADERSIZE_MAX): magic, descriptor, window,
    /// dictionary id, content size.
    static let maxFrameHeaderSize = 18
    /// Bytes of the current frame still to be handed over one at a time.
    private var headerBytesLeft = 0
    private var frames = 0

    init() throws(HawserError) {
        guard let context = ZSTD_createDCtx() else {
            throw HawserError(.cannotDecodeContent, "zstd: the zstd decoder cannot start (out of memory)")
        }
        let rc = ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, Self.maxWindowLog)
        guard ZSTD_isError(rc) == 0 else {
            ZSTD_freeDCtx(context)
            throw HawserError(.cannotDecodeContent, "zstd: cannot set the window limit (\(Self.errorName(rc)))")
        }
        self.context = context
        self.buffer = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit {
        ZSTD_freeDCtx(self.context)
        self.buffer.deallocate()
    }

    var incompleteReason: String? {
        guard self.inFrame else { return nil }
        return self.frames == 0
            ? "truncated stream (the body ended before the end of the compressed data)"
            : "truncated stream (the body ended inside frame \(self.frames + 1))"
    }

    private static func errorName(_ rc: Int) -> String { String(cString: ZSTD_getErrorName(rc)) }

    private func failure(_ rc: Int) -> HawserError {
        switch ZSTD_getErrorCode(rc) {
        case ZSTD_error_frameParameter_windowTooLarge:
            return HawserError(
                .cannotDecodeContent,
                "zstd: the frame needs a window larger than 8 MiB (RFC 9659 caps the zstd content coding's window at 8 MiB)"
            )
        case ZSTD_error_memory_allocation:
            return HawserError(.cannotDecodeContent, "zstd: zstd is out of memory")
        case ZSTD_error_dictionary_wrong:
            return HawserError(
                .cannotDecodeContent,
                "zstd: corrupt data: the frame needs a dictionary, which HTTP does not provide"
            )
        default:
            // libzstd's words can depend on how much input it had at once (its single-pass and
            // buffered paths check a block differently): they go last, in parentheses.
            return HawserError(.cannotDecodeContent, "zstd: corrupt data (libzstd: \(Self.errorName(rc)))")
        }
    }

    func feed(
        _ input: UnsafeRawBufferPointer,
        _ downstream: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) {
        guard var p = input.baseAddress else { return }
        var n = input.count
        while n > 0 {
            if !self.inFrame {
                if self.frames > 0 {
                    let skip = zeroPadding(p, n)
                    self.consumed += skip
                    p += skip
                    n -= skip
                    if n == 0 { return }
                }
                self.inFrame = true
                self.headerBytesLeft = Self.maxFrameHeaderSize
            }
            // A frame's header goes to libzstd one byte per call, so that what it does never
            // depends on how the body was split: handed a whole frame at once, it may decode it
            // in one pass that checks more than its streaming path does (and drops its output
            // on an error); and when a header it has buffered is bad, it looks for a legacy
            // (v0.5-v0.7) frame at the start of the call's input, wherever that falls, which one
            // byte can never be. A legacy frame at the start of a body is refused as the
            // unknown frame it is for RFC 8878.
            if self.headerBytesLeft > 0 {
                self.headerBytesLeft -= 1
                let used = try self.decompress(p, 1, downstream)
                p += used
                n -= used
                continue
            }
            let used = try self.decompress(p, n, downstream)
            p += used
            n -= used
        }
    }

    /// Runs the decoder over `count` bytes at `p` until they are consumed or the frame ends,
    /// draining all output. Returns the bytes consumed.
    private func decompress(
        _ p: UnsafeRawPointer,
        _ count: Int,
        _ downstream: (UnsafeRawBufferPointer) throws(HawserError) -> Void
    ) throws(HawserError) -> Int {
        var inBuffer = ZSTD_inBuffer(src: p, size: count, pos: 0)
        while true {
            var outBuffer = ZSTD_outBuffer(dst: self.buffer, size: self.capacity, pos: 0)
            let before = inBuffer.pos
            let rc = ZSTD_decompressStream(self.context, &outBuffer, &inBuffer)
            self.consumed += inBuffer.pos - before
            // Output first, also before an error (the same for any split of the input).
            if outBuffer.pos > 0 {
                try downstream(UnsafeRawBufferPointer(start: self.buffer, count: outBuffer.pos))
            }
            if ZSTD_isError(rc) != 0 { throw self.failure(rc) }
            if rc == 0 {
                // The frame is decoded and flushed.
                self.inFrame = false
                self.frames += 1
                return inBuffer.pos
            }
            // A full output buffer may leave output pending: go round again.
            if outBuffer.pos == self.capacity { continue }
            if inBuffer.pos == count { return count }
            if inBuffer.pos == before && outBuffer.pos == 0 {
                throw HawserError(.cannotDecodeContent, "zstd: corrupt data: the decoder made no progress")
            }
        }
    }
}
#endif
