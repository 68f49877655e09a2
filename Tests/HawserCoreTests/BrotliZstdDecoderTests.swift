// br and zstd through ContentDecoder (package traits "Brotli" and "Zstd"), against streams made
// by the libraries' own encoders (libbrotlienc, libzstd).
#if Brotli && Zstd
import CBrotli
import CZstd
import HawserCore
import Testing

// MARK: - Helpers: the reference encoders

/// `bytes` compressed by libbrotlienc at `quality` (0...11) with a window of 2^`lgwin` bytes.
func brotli(_ bytes: [UInt8], quality: Int32 = 5, lgwin: Int32 = 22) -> [UInt8] {
    var size = BrotliEncoderMaxCompressedSize(bytes.count) + 64
    var out = [UInt8](repeating: 0, count: size)
    let ok = bytes.withUnsafeBufferPointer { i in
        out.withUnsafeMutableBufferPointer { o in
            BrotliEncoderCompress(quality, lgwin, BROTLI_MODE_GENERIC, i.count, i.baseAddress, &size, o.baseAddress)
        }
    }
    precondition(ok == BROTLI_TRUE, "BrotliEncoderCompress")
    return Array(out[0..<size])
}

/// `bytes` as one zstd frame: with its content size unless `streamed`, a content checksum if
/// asked, and `windowLog` (else the level's own).
func zstd(
    _ bytes: [UInt8],
    level: Int32 = 3,
    windowLog: Int32? = nil,
    checksum: Bool = false,
    streamed: Bool = false
) -> [UInt8] {
    let cctx = ZSTD_createCCtx()!
    defer { ZSTD_freeCCtx(cctx) }
    precondition(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level)) == 0)
    precondition(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, checksum ? 1 : 0)) == 0)
    if let windowLog {
        precondition(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, windowLog)) == 0)
    }
    var out = [UInt8](repeating: 0, count: ZSTD_compressBound(bytes.count) + 64)
    let n = bytes.withUnsafeBytes { i in
        out.withUnsafeMutableBytes { o in
            if !streamed {
                return ZSTD_compress2(cctx, o.baseAddress, o.count, i.baseAddress, i.count)
            }
            // Streaming without a pledged size: the frame header has no content size.
            var inBuffer = ZSTD_inBuffer(src: i.baseAddress, size: i.count, pos: 0)
            var outBuffer = ZSTD_outBuffer(dst: o.baseAddress, size: o.count, pos: 0)
            while true {
                let rc = ZSTD_compressStream2(cctx, &outBuffer, &inBuffer, ZSTD_e_end)
                precondition(ZSTD_isError(rc) == 0)
                if rc == 0 { return outBuffer.pos }
            }
        }
    }
    precondition(ZSTD_isError(n) == 0, "ZSTD_compress2")
    return Array(out[0..<n])
}

/// A zstd skippable frame (RFC 8878 §3.1.2) carrying `payload`.
func zstdSkippable(_ payload: [UInt8]) -> [UInt8] {
    let size = UInt32(payload.count)
    return [0x5A, 0x2A, 0x4D, 0x18] + (0..<4).map { UInt8(truncatingIfNeeded: size >> (8 * $0)) } + payload
}

/// An error's message without the decoder library's own words (the part in parentheses), which
/// may depend on how the input was split.
func stableMessage(_ error: HawserError?) -> String? {
    guard let m = error?.message else { return nil }
    let bytes = Array(m.utf8)
    let marker = Array(" (lib".utf8)
    for i in bytes.indices where bytes[i...].starts(with: marker) {
        return String(decoding: bytes[..<i], as: UTF8.self)
    }
    return m
}

extension Result where Failure == any Error {
    /// The failure as a HawserError, or nil.
    var error: HawserError? {
        if case .failure(let e) = self { return e as? HawserError }
        return nil
    }
}

// MARK: - Tests

@Suite("ContentDecoder: br and zstd")
struct BrotliZstdDecoderTests {
    static let plain = sampleText(20_000)

    @Test("Accept-Encoding offers every coding the build decodes")
    func acceptEncoding() {
        #expect(ContentDecoder.acceptEncoding == "gzip, deflate, br, zstd")
        #expect(ContentCoding.allCases == [.gzip, .deflate, .br, .zstd])
        #expect(ContentDecoder.canDecode(contentEncoding: "br"))
        #expect(ContentDecoder.canDecode(contentEncoding: "ZSTD"))
        #expect(ContentDecoder.canDecode(contentEncoding: "gzip, br, zstd"))
        #expect(!ContentDecoder.canDecode(contentEncoding: "compress"))
        let e = decodingError { _ = try ContentDecoder(contentEncoding: "gzip, compress") }
        #expect(
            e?.message
                == "unsupported content coding \"compress\" (this build of Hawser decodes gzip, x-gzip, deflate, br, zstd)"
        )
    }

    @Test("br decodes at every quality and window size")
    func brotliQualities() throws {
        for quality: Int32 in [0, 1, 5, 9, 11] {
            for lgwin: Int32 in [10, 16, 24] {
                let encoded = brotli(Self.plain, quality: quality, lgwin: lgwin)
                #expect(try decodeWhole("br", encoded) == Self.plain, "quality \(quality), lgwin \(lgwin)")
            }
        }
        #expect(try decodeWhole("BR", brotli(noise(50_000))) == noise(50_000))
        // The empty input's stream (one byte) decodes to nothing.
        #expect(try decodeWhole("br", brotli([])) == [])
    }

    @Test("zstd decodes at every level, with or without content size and checksum")
    func zstdLevels() throws {
        for level: Int32 in [-5, 1, 3, 19] {
            #expect(try decodeWhole("zstd", zstd(Self.plain, level: level)) == Self.plain, "level \(level)")
        }
        #expect(try decodeWhole("zstd", zstd(Self.plain, checksum: true)) == Self.plain)
        #expect(try decodeWhole("zstd", zstd(Self.plain, streamed: true)) == Self.plain)
        #expect(try decodeWhole("Zstd", zstd(noise(50_000))) == noise(50_000))
        #expect(try decodeWhole("zstd", zstd([])) == [])
        // An 8 MiB window, the most RFC 9659 allows, is decoded.
        let big = sampleText(9 << 20, seed: 4)
        #expect(try decodeWhole("zstd", zstd(big, level: 1, windowLog: 23)) == big)
    }

    @Test(
        "every split point of a small input gives the same output",
        arguments: ["br", "zstd", "zstd-frames", "gzip, br", "br, zstd", "zstd, deflate"]
    )
    func everySplit(_ kind: String) throws {
        let p = sampleText(600, seed: 3)
        let (name, encoded, expected): (String, [UInt8], [UInt8]) =
            switch kind {
            case "br": ("br", brotli(p), p)
            case "zstd": ("zstd", zstd(p, checksum: true), p)
            case "zstd-frames":
                (
                    "zstd", zstd(p) + [0, 0] + zstdSkippable([1, 2, 3]) + zstd(Array(p.prefix(50)), streamed: true),
                    p + p.prefix(50)
                )
            case "gzip, br": ("gzip, br", brotli(gzip(p)), p)
            case "br, zstd": ("br, zstd", zstd(brotli(p)), p)
            default: ("zstd, deflate", rawDeflate(zstd(p)), p)
            }
        for i in 0...encoded.count {
            for j in i...min(encoded.count, i + 3) {
                let pieces = [encoded[0..<i], encoded[i..<j], encoded[j...]]
                #expect(try decodeAll(name, pieces).bytes == expected, "split at \(i), \(j)")
            }
        }
        let bytewise = encoded.indices.map { encoded[$0...$0] }
        #expect(try decodeAll(name, bytewise).bytes == expected)
    }

    @Test("the sink gets bounded chunks, and large bodies come out whole", arguments: ["br", "zstd", "br, gzip"])
    func boundedChunks(_ name: String) throws {
        let big = sampleText(3 << 20, seed: 9)
        let encoded = name == "br" ? brotli(big) : name == "zstd" ? zstd(big) : gzip(brotli(big))
        let (bytes, maxChunk) = try decodeAll(name, [encoded[...]])
        #expect(bytes == big)
        #expect(maxChunk <= ContentDecoder.chunkSize)
    }

    @Test("concatenated zstd frames, skippable frames and zero padding are one body")
    func zstdFrames() throws {
        let a = sampleText(3000, seed: 1)
        let b = sampleText(5000, seed: 2)
        #expect(try decodeWhole("zstd", zstd(a) + zstd(b) + zstd([])) == a + b)
        #expect(
            try decodeWhole("zstd", zstdSkippable(Array("meta".utf8)) + zstd(a) + [0, 0, 0] + zstd(b) + [0]) == a + b
        )
    }

    @Test("data after the end of the stream is an error (unless it is zero padding)")
    func trailingGarbage() throws {
        let p = Self.plain
        let b = decodingError { _ = try decodeWhole("br", brotli(p) + Array("junk".utf8)) }
        #expect(b?.code == .cannotDecodeContent)
        #expect(b?.message == "br: corrupt data: data after the end of the brotli stream")
        let b0 = decodingError { _ = try decodeWhole("br", brotli(p) + [0, 0, 7]) }
        #expect(b0?.message == "br: corrupt data: data after the end of the brotli stream")
        #expect(try decodeWhole("br", brotli(p) + [0, 0]) == p)
        let z = decodingError { _ = try decodeWhole("zstd", zstd(p) + Array("junk".utf8)) }
        #expect(z?.code == .cannotDecodeContent)
        #expect(z?.message == "zstd: corrupt data (libzstd: Unknown frame descriptor)")
        #expect(try decodeWhole("zstd", zstd(p) + [0, 0]) == p)
    }

    @Test("every truncation of the stream fails at finish()", arguments: ["br", "zstd", "zstd-checksum"])
    func truncated(_ kind: String) throws {
        let p = sampleText(2000, seed: 5)
        let encoded = kind == "br" ? brotli(p) : zstd(p, checksum: kind == "zstd-checksum")
        let name = kind == "br" ? "br" : "zstd"
        for cut in 1..<encoded.count {
            let e = decodingError { _ = try decodeWhole(name, Array(encoded[0..<cut])) }
            #expect(e?.code == .cannotDecodeContent, "cut at \(cut)")
            #expect(
                e?.message == "\(name): truncated stream (the body ended before the end of the compressed data)",
                "cut at \(cut): \(String(describing: e))"
            )
        }
        // A second zstd frame cut short is truncated too.
        let two = zstd(p) + zstd(p)
        let e = decodingError { _ = try decodeWhole("zstd", Array(two.dropLast(4))) }
        #expect(e?.message == "zstd: truncated stream (the body ended inside frame 2)")
    }

    @Test("an empty body decodes to nothing")
    func emptyBody() throws {
        #expect(try decodeWhole("br", []) == [])
        #expect(try decodeWhole("zstd", []) == [])
        #expect(try decodeWhole("gzip, br, zstd", []) == [])
    }

    @Test("corrupt data is an error naming the coding")
    func corrupt() throws {
        let p = Self.plain
        let notBrotli = decodingError { _ = try decodeWhole("br", Array("hello, this is not brotli".utf8)) }
        #expect(notBrotli?.code == .cannotDecodeContent)
        #expect(
            notBrotli?.message.hasPrefix("br: corrupt data (libbrotlidec: ") == true,
            "\(String(describing: notBrotli))"
        )
        let notZstd = decodingError { _ = try decodeWhole("zstd", Array("hello, this is not zstd".utf8)) }
        #expect(notZstd?.message == "zstd: corrupt data (libzstd: Unknown frame descriptor)")
        // The content checksum catches a changed byte.
        var badSum = zstd(p, checksum: true)
        badSum[badSum.count - 1] ^= 0xFF
        let sum = decodingError { _ = try decodeWhole("zstd", badSum) }
        #expect(sum?.message == "zstd: corrupt data (libzstd: Restored data doesn't match checksum)")
        // Garbage in the middle: an error, or other bytes (brotli has no checksum), never a crash
        // or a hang; the same whether the stream arrives whole or byte by byte (but for the
        // library's words in parentheses, which depend on how much input it had at once).
        var errors = 0
        for (name, good) in [("br", brotli(p)), ("zstd", zstd(p))] {
            for i in stride(from: 3, to: min(400, good.count), by: 7) {
                var g = good
                g[i] ^= 0x5A
                let whole = decodingError { _ = try decodeWhole(name, g) }
                let bytewise = decodingError { _ = try decodeAll(name, g.indices.map { g[$0...$0] }) }
                #expect(stableMessage(whole) == stableMessage(bytewise), "\(name) flip at \(i)")
                if let whole {
                    #expect(whole.code == .cannotDecodeContent)
                    #expect(whole.message.hasPrefix("\(name): "))
                    errors += 1
                }
            }
        }
        #expect(errors > 0)
    }

    @Test("any one-byte change of a small frame gives the same outcome whole and byte by byte")
    func changedByteEverySplit() throws {
        // Handed a whole frame at once, libzstd could decode it in a single pass that checks
        // more (a content size that does not match) than its streaming path does.
        let frames: [(String, [UInt8])] = [
            ("zstd", zstd([])), ("zstd", zstd(sampleText(40, seed: 2))),
            ("zstd", zstd(sampleText(300), checksum: true)),
            ("br", brotli([])), ("br", brotli(sampleText(40, seed: 2))),
        ]
        for (name, good) in frames {
            for i in good.indices {
                for mask: UInt8 in [0x01, 0x10, 0x80, 0xFF] {
                    var g = good
                    g[i] ^= mask
                    let whole = Result { try decodeWhole(name, g) }
                    let bytewise = Result { try decodeAll(name, g.indices.map { g[$0...$0] }).bytes }
                    let w = (try? whole.get(), stableMessage(whole.error))
                    let b = (try? bytewise.get(), stableMessage(bytewise.error))
                    #expect(w.0 == b.0 && w.1 == b.1, "\(name): byte \(i) ^ \(mask): \(w) vs \(b)")
                }
            }
        }
    }

    @Test("a legacy zstd frame (v0.7 magic) is refused, also when it starts a byte into the body")
    func legacyFrame() throws {
        // Found by FuzzZstdDecoder: 28 then a v0.7 magic (27 b5 2f fd); handed over at once after
        // the first byte, libzstd decoded a legacy frame from the second byte.
        let tail: [UInt8] = [
            0xa4, 0x00, 0x00, 0x4c, 0x00, 0x00, 0x08, 0x00, 0x01, 0x00, 0xfc, 0x09, 0x39, 0x10, 0x02, 0x02, 0x00, 0x00,
            0x00, 0x14, 0x02, 0x10,
        ]
        for body in [
            [0x28, 0x27, 0xb5, 0x2f, 0xfd] + tail + [UInt8](repeating: 0, count: 100), [0x27, 0xb5, 0x2f, 0xfd] + tail,
        ] {
            for pieces in [[body[...]], [body[0..<1], body[1...]], body.indices.map { body[$0...$0] }] {
                let e = decodingError { _ = try decodeAll("zstd", pieces) }
                #expect(
                    e?.message == "zstd: corrupt data (libzstd: Unknown frame descriptor)",
                    "\(pieces.count) pieces"
                )
            }
        }
    }

    @Test("a zstd frame that needs a window over 8 MiB (RFC 9659) is refused before decoding")
    func zstdWindow() throws {
        let big = [UInt8](repeating: 7, count: 9 << 20)
        let encoded = zstd(big, level: 1, windowLog: 24)
        var decoder = try ContentDecoder(contentEncoding: "zstd")
        var delivered = 0
        let e = decodingError {
            try withBytes(encoded) { (raw) throws(HawserError) in try decoder.decode(raw) { delivered += $0.count } }
        }
        #expect(e?.code == .cannotDecodeContent)
        #expect(
            e?.message
                == "zstd: the frame needs a window larger than 8 MiB (RFC 9659 caps the zstd content coding's window at 8 MiB)"
        )
        #expect(delivered == 0)
    }

    @Test("a bomb past the expansion ratio is an error, not a gigabyte", arguments: ["br", "zstd", "br, br"])
    func bombRatio(_ name: String) throws {
        let zeros = [UInt8](repeating: 0, count: 64 << 20)
        let encoded =
            switch name {
            case "br": brotli(zeros, quality: 11, lgwin: 24)
            case "zstd": zstd(zeros, level: 19)
            default: brotli(brotli(zeros, quality: 11, lgwin: 24))
            }
        var decoder = try ContentDecoder(contentEncoding: name)
        var delivered = 0
        let e = decodingError {
            try withBytes(encoded) { (raw) throws(HawserError) in try decoder.decode(raw) { delivered += $0.count } }
        }
        #expect(e?.code == .cannotDecodeContent)
        #expect(e?.underlying as? DecodingLimitError == .maxExpansionRatio)
        #expect(e?.message.contains("1000:1") == true)
        // Stopped soon after the floor, not at the end of the 64 MiB.
        #expect(delivered <= DecodingLimits.default.ratioCheckFloor + 2 * ContentDecoder.chunkSize)
        #expect(decoder.decodedByteCount == delivered)
    }

    @Test("the absolute size limit holds for data that does not compress", arguments: ["br", "zstd"])
    func absoluteLimit(_ name: String) throws {
        let data = noise(100_000)
        let encoded = name == "br" ? brotli(data) : zstd(data)
        let e = decodingError { _ = try decodeWhole(name, encoded, limits: DecodingLimits(maxDecodedBytes: 99_999)) }
        #expect(e?.code == .cannotDecodeContent)
        #expect(e?.underlying as? DecodingLimitError == .maxDecodedBytes)
        #expect(e?.message.contains("99999 bytes") == true)
        #expect(try decodeWhole(name, encoded, limits: DecodingLimits(maxDecodedBytes: 100_000)) == data)
    }
}
#endif
