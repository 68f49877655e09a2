import CHawser
import HawserCore
import Testing

// MARK: - Helpers: zlib as an independent compressor, deterministic data

/// `bytes` compressed by zlib with `windowBits` 15+16 (gzip), 15 (zlib-wrapped deflate)
/// or -15 (raw deflate); `dictionary` only for the zlib format.
func zcompress(_ bytes: [UInt8], windowBits: Int32, level: Int32 = 6, dictionary: [UInt8]? = nil) -> [UInt8] {
    var s = z_stream()
    precondition(CHawser_deflateInit2(&s, level, windowBits) == Z_OK)
    defer { deflateEnd(&s) }
    if var d = dictionary { precondition(deflateSetDictionary(&s, &d, uInt(d.count)) == Z_OK) }
    var out = [UInt8](repeating: 0, count: Int(deflateBound(&s, uLong(bytes.count))) + 64)
    var input = bytes
    let n = input.withUnsafeMutableBufferPointer { i in
        out.withUnsafeMutableBufferPointer { o in
            s.next_in = i.baseAddress
            s.avail_in = uInt(i.count)
            s.next_out = o.baseAddress
            s.avail_out = uInt(o.count)
            precondition(deflate(&s, Z_FINISH) == Z_STREAM_END)
            return o.count - Int(s.avail_out)
        }
    }
    return Array(out[0..<n])
}

func gzip(_ b: [UInt8]) -> [UInt8] { zcompress(b, windowBits: 15 + 16) }
func zlibDeflate(_ b: [UInt8]) -> [UInt8] { zcompress(b, windowBits: 15) }
func rawDeflate(_ b: [UInt8]) -> [UInt8] { zcompress(b, windowBits: -15) }

/// Deterministic text-like bytes (words from a small vocabulary), compressible like JSON.
func sampleText(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
    let words = ["alpha", "\"beta\":", "gamma", "{", "}", "[1,2,3]", "delta", " ", "\n", "epsilon", "null,", "true"]
    var x = seed
    var out: [UInt8] = []
    out.reserveCapacity(count)
    while out.count < count {
        x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        out.append(contentsOf: words[Int(x >> 33) % words.count].utf8)
    }
    return Array(out.prefix(count))
}

/// Deterministic bytes that do not compress.
func noise(_ count: Int, seed: UInt64 = 7) -> [UInt8] {
    var x = seed | 1
    return (0..<count).map { _ in
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
        return UInt8(truncatingIfNeeded: x >> 24)
    }
}

/// `body` over the bytes of `array`, keeping the typed error (Array.withUnsafeBytes rethrows untyped).
func withBytes<C: Collection<UInt8>>(
    _ bytes: C,
    _ body: (UnsafeRawBufferPointer) throws(HawserError) -> Void
) throws(HawserError) {
    let array = Array(bytes)
    let failure: HawserError? = array.withUnsafeBytes { raw in
        do throws(HawserError) { try body(raw) } catch { return error }
        return nil
    }
    if let failure { throw failure }
}

/// Decodes `pieces` one after the other and finishes; returns the output and the largest chunk.
func decodeAll(
    _ encoding: String,
    _ pieces: [ArraySlice<UInt8>],
    limits: DecodingLimits = .default
) throws(HawserError) -> (bytes: [UInt8], maxChunk: Int) {
    var decoder = try ContentDecoder(contentEncoding: encoding, limits: limits)
    var out: [UInt8] = []
    var maxChunk = 0
    for piece in pieces {
        try withBytes(piece) { (raw) throws(HawserError) in
            try decoder.decode(raw) { chunk in
                maxChunk = max(maxChunk, chunk.count)
                out.append(contentsOf: chunk)
            }
        }
    }
    try decoder.finish()
    return (out, maxChunk)
}

func decodeWhole(_ encoding: String, _ bytes: [UInt8], limits: DecodingLimits = .default) throws(HawserError) -> [UInt8]
{
    try decodeAll(encoding, [bytes[...]], limits: limits).bytes
}

/// The HawserError `body` throws, or nil (any other error fails the test).
func decodingError(_ body: () throws -> Void) -> HawserError? {
    do { try body() } catch let error as HawserError { return error } catch {
        Issue.record("not a HawserError: \(error)")
    }
    return nil
}

// MARK: - Tests

@Suite("ContentDecoder")
struct ContentDecoderTests {
    static let plain = sampleText(20_000)

    @Test(
        "each coding name decodes",
        arguments: [
            ("gzip", "gzip"), ("x-gzip", "gzip"), ("GZip", "gzip"), ("deflate", "zlib"), ("Deflate", "raw"),
        ]
    )
    func codings(_ name: String, _ format: String) throws {
        let encoded =
            format == "gzip" ? gzip(Self.plain) : format == "zlib" ? zlibDeflate(Self.plain) : rawDeflate(Self.plain)
        #expect(try decodeWhole(name, encoded) == Self.plain)
    }

    @Test("deflate: zlib-wrapped (RFC 1950) and raw (RFC 1951) both decode, at every level")
    func deflateFlavours() throws {
        for level: Int32 in [0, 1, 6, 9] {
            let wrapped = zcompress(Self.plain, windowBits: 15, level: level)
            let raw = zcompress(Self.plain, windowBits: -15, level: level)
            #expect(try decodeWhole("deflate", wrapped) == Self.plain, "zlib level \(level)")
            #expect(try decodeWhole("deflate", raw) == Self.plain, "raw level \(level)")
        }
        // Small windows (CINFO < 7) are valid zlib headers too.
        let smallWindow = zcompress(Self.plain, windowBits: 9)
        #expect(try decodeWhole("deflate", smallWindow) == Self.plain)
    }

    @Test("stacked codings are undone last-applied first; identity and empty elements are ignored")
    func stacked() throws {
        let p = Self.plain
        #expect(try decodeWhole("gzip, deflate", zlibDeflate(gzip(p))) == p)
        #expect(try decodeWhole("deflate, gzip", gzip(rawDeflate(p))) == p)
        #expect(try decodeWhole("gzip,gzip", gzip(gzip(p))) == p)
        #expect(try decodeWhole(" identity , gzip ,, identity", gzip(p)) == p)
        #expect(try decodeWhole("gzip, deflate, gzip", gzip(zlibDeflate(gzip(p)))) == p)
        // The wrong order is corrupt data, not silently wrong output.
        let e = decodingError { _ = try decodeWhole("deflate, gzip", zlibDeflate(gzip(p))) }
        #expect(e?.code == .cannotDecodeContent)
        #expect(e?.message.hasPrefix("gzip: corrupt data") == true, "\(String(describing: e))")
    }

    @Test("identity (or no coding) passes the bytes through")
    func identity() throws {
        #expect(try decodeWhole("identity", Self.plain) == Self.plain)
        #expect(try decodeWhole("", Self.plain) == Self.plain)
        let d = try ContentDecoder(contentEncoding: "identity")
        #expect(d.codings.isEmpty)
    }

    @Test(
        "every split point of a small input gives the same output",
        arguments: ["gzip", "deflate-zlib", "deflate-raw", "stacked"]
    )
    func everySplit(_ kind: String) throws {
        let p = sampleText(600, seed: 3)
        let (name, encoded): (String, [UInt8]) =
            switch kind {
            case "gzip": ("gzip", gzip(p) + gzip(Array(p.prefix(50))))  // two members
            case "deflate-zlib": ("deflate", zlibDeflate(p))
            case "deflate-raw": ("deflate", rawDeflate(p))
            default: ("gzip, deflate", rawDeflate(gzip(p)))
            }
        let expected = kind == "gzip" ? p + p.prefix(50) : p
        for i in 0...encoded.count {
            for j in i...min(encoded.count, i + 3) {
                let pieces = [encoded[0..<i], encoded[i..<j], encoded[j...]]
                #expect(try decodeAll(name, pieces).bytes == expected, "split at \(i), \(j)")
            }
        }
        let bytewise = encoded.indices.map { encoded[$0...$0] }
        #expect(try decodeAll(name, bytewise).bytes == expected)
    }

    @Test("the sink gets bounded chunks, and large bodies come out whole")
    func boundedChunks() throws {
        let big = sampleText(3 << 20, seed: 9)
        let (bytes, maxChunk) = try decodeAll("gzip", [gzip(big)[...]])
        #expect(bytes == big)
        #expect(maxChunk <= ContentDecoder.chunkSize)
        let (stackedBytes, stackedMax) = try decodeAll("deflate, gzip", [gzip(rawDeflate(big))[...]])
        #expect(stackedBytes == big)
        #expect(stackedMax <= ContentDecoder.chunkSize)
    }

    @Test("concatenated gzip members are one body; zero padding after a member is skipped")
    func concatenatedGzip() throws {
        let a = sampleText(3000, seed: 1)
        let b = sampleText(5000, seed: 2)
        let c: [UInt8] = []
        #expect(try decodeWhole("gzip", gzip(a) + gzip(b) + gzip(c)) == a + b)
        #expect(try decodeWhole("gzip", gzip(a) + [0, 0, 0] + gzip(b) + [0]) == a + b)
    }

    @Test("data after the end of the stream is an error (unless it is zero padding)")
    func trailingGarbage() throws {
        let p = Self.plain
        let g = decodingError { _ = try decodeWhole("gzip", gzip(p) + Array("junk".utf8)) }
        #expect(g?.code == .cannotDecodeContent)
        #expect(g?.message.contains("gzip: corrupt data") == true, "\(String(describing: g))")
        let d = decodingError { _ = try decodeWhole("deflate", zlibDeflate(p) + [0x41]) }
        #expect(d?.message == "deflate: corrupt data: data after the end of the deflate stream")
        #expect(try decodeWhole("deflate", rawDeflate(p) + [0, 0]) == p)
    }

    @Test("every truncation of the stream fails at finish()", arguments: ["gzip", "deflate-zlib", "deflate-raw"])
    func truncated(_ kind: String) throws {
        let p = sampleText(2000, seed: 5)
        let encoded = kind == "gzip" ? gzip(p) : kind == "deflate-zlib" ? zlibDeflate(p) : rawDeflate(p)
        let name = kind == "gzip" ? "gzip" : "deflate"
        for cut in 1..<encoded.count {
            let e = decodingError { _ = try decodeWhole(name, Array(encoded[0..<cut])) }
            #expect(e?.code == .cannotDecodeContent, "cut at \(cut)")
            #expect(
                e?.message.hasPrefix("\(name): truncated stream") == true,
                "cut at \(cut): \(String(describing: e))"
            )
        }
        // A second member cut short is truncated too.
        let two = gzip(p) + gzip(p)
        let e = decodingError { _ = try decodeWhole("gzip", Array(two.dropLast(4))) }
        #expect(e?.message == "gzip: truncated stream (the body ended inside member 2)")
    }

    @Test("an empty body decodes to nothing")
    func emptyBody() throws {
        #expect(try decodeWhole("gzip", []) == [])
        #expect(try decodeWhole("gzip, deflate", []) == [])
    }

    @Test("corrupt data is an error naming the coding")
    func corrupt() throws {
        let p = Self.plain
        // Not gzip at all.
        let notGzip = decodingError { _ = try decodeWhole("gzip", Array("hello, this is not gzip".utf8)) }
        #expect(notGzip?.code == .cannotDecodeContent)
        #expect(notGzip?.message == "gzip: corrupt data: incorrect header check")
        // CRC mismatch in the trailer.
        var badCRC = gzip(p)
        badCRC[badCRC.count - 6] ^= 0xFF
        let crc = decodingError { _ = try decodeWhole("gzip", badCRC) }
        #expect(crc?.message == "gzip: corrupt data: incorrect data check")
        // Adler-32 mismatch in a zlib stream.
        var badAdler = zlibDeflate(p)
        badAdler[badAdler.count - 1] ^= 0x01
        let adler = decodingError { _ = try decodeWhole("deflate", badAdler) }
        #expect(adler?.message == "deflate: corrupt data: incorrect data check")
        // Garbage in the middle of the compressed data: an error, never a crash or a hang.
        var flips = 0
        for i in stride(from: 12, to: 200, by: 7) {
            var g = gzip(p)
            g[i] ^= 0x5A
            if let e = decodingError({ _ = try decodeWhole("gzip", g) }) {
                #expect(e.code == .cannotDecodeContent)
                #expect(e.message.hasPrefix("gzip: "))
                flips += 1
            }
        }
        #expect(flips > 0)
    }

    @Test("deflate with a preset dictionary is refused")
    func presetDictionary() throws {
        let withDict = zcompress(Self.plain, windowBits: 15, dictionary: Array("alpha beta".utf8))
        let e = decodingError { _ = try decodeWhole("deflate", withDict) }
        #expect(
            e?.message == "deflate: corrupt data: the stream needs a preset dictionary, which HTTP does not provide"
        )
    }

    @Test("a bomb past the expansion ratio is an error, not a gigabyte")
    func bombRatio() throws {
        let zeros = [UInt8](repeating: 0, count: 64 << 20)
        let bomb = zcompress(zeros, windowBits: 15 + 16, level: 9)
        var decoder = try ContentDecoder(contentEncoding: "gzip")
        var delivered = 0
        let e = decodingError {
            try withBytes(bomb) { (raw) throws(HawserError) in try decoder.decode(raw) { delivered += $0.count } }
        }
        #expect(e?.code == .cannotDecodeContent)
        #expect(e?.underlying as? DecodingLimitError == .maxExpansionRatio)
        #expect(e?.message.contains("1000:1") == true)
        // Stopped soon after the floor, not at the end of the 64 MiB.
        #expect(delivered <= DecodingLimits.default.ratioCheckFloor + 2 * ContentDecoder.chunkSize)
        #expect(decoder.decodedByteCount == delivered)
        // A stacked bomb too (gzip of gzip of zeros).
        let stacked = gzip(bomb)
        let s = decodingError { _ = try decodeWhole("gzip, gzip", stacked) }
        #expect(s?.underlying as? DecodingLimitError == .maxExpansionRatio)
    }

    @Test("small highly compressible bodies are not flagged (the ratio floor)")
    func ratioFloor() throws {
        let spaces = [UInt8](repeating: 0x20, count: 1 << 20)
        #expect(try decodeWhole("gzip", gzip(spaces)) == spaces)
        let tight = DecodingLimits(maxExpansionRatio: 10, ratioCheckFloor: 4096)
        let e = decodingError { _ = try decodeWhole("gzip", gzip(spaces), limits: tight) }
        #expect(e?.underlying as? DecodingLimitError == .maxExpansionRatio)
    }

    @Test("the absolute size limit holds for data that does not compress")
    func absoluteLimit() throws {
        let data = noise(100_000)
        let limit = DecodingLimits(maxDecodedBytes: 99_999)
        let e = decodingError { _ = try decodeWhole("gzip", gzip(data), limits: limit) }
        #expect(e?.code == .cannotDecodeContent)
        #expect(e?.underlying as? DecodingLimitError == .maxDecodedBytes)
        #expect(e?.message.contains("99999 bytes") == true)
        // Exactly at the limit is fine.
        #expect(try decodeWhole("gzip", gzip(data), limits: DecodingLimits(maxDecodedBytes: 100_000)) == data)
    }

    @Test(
        "unknown or unsupported codings are refused at init",
        arguments: ["compress", "gzip, compress", "x-compress", "pack200-gzip", "gzip;q=1", "brotli", "zstandard"]
    )
    func unknownCoding(_ value: String) throws {
        let e = decodingError { _ = try ContentDecoder(contentEncoding: value) }
        #expect(e?.code == .cannotDecodeContent)
        #expect(e?.message.hasPrefix("unsupported content coding") == true)
        #expect(!ContentDecoder.canDecode(contentEncoding: value))
    }

    @Test("too many stacked codings are refused")
    func tooDeep() throws {
        let value = Array(repeating: "gzip", count: ContentDecoder.maxStackedCodings + 1).joined(separator: ", ")
        let e = decodingError { _ = try ContentDecoder(contentEncoding: value) }
        #expect(e?.message.contains("stacked content codings") == true)
        #expect(!ContentDecoder.canDecode(contentEncoding: value))
    }

    @Test(
        "canDecode",
        arguments: [
            ("gzip", true), ("x-gzip", true), ("deflate", true), ("identity", true), ("", true),
            ("gzip, deflate", true), ("compress", false), ("gzip, exi", false),
        ]
    )
    func canDecode(_ value: String, _ expected: Bool) {
        #expect(ContentDecoder.canDecode(contentEncoding: value) == expected)
    }

    @Test("an error from the sink propagates and leaves the decoder failed")
    func sinkError() throws {
        var decoder = try ContentDecoder(contentEncoding: "gzip")
        let encoded = gzip(Self.plain)
        let stop = HawserError(.cancelled, "enough")
        let e = decodingError {
            try withBytes(encoded) { (raw) throws(HawserError) in
                try decoder.decode(raw) { _ throws(HawserError) in throw stop }
            }
        }
        #expect(e?.code == .cancelled)
        #expect(decodingError { try decoder.finish() }?.code == .cancelled)
    }

    @Test("decode after finish is an error")
    func afterFinish() throws {
        var decoder = try ContentDecoder(contentEncoding: "gzip")
        try decoder.finish()
        let e = decodingError {
            try withBytes([UInt8](repeating: 1, count: 3)) { (raw) throws(HawserError) in
                try decoder.decode(raw) { _ in }
            }
        }
        #expect(e?.message == "content decoder used after finish()")
    }

    @Test("GzipEncoder round trip, streamed in pieces, read back by zlib and by ContentDecoder")
    func gzipEncoderRoundTrip() throws {
        for (data, level) in [(sampleText(200_000), 6), (noise(70_000), 1), ([], 9), (sampleText(10), 0)]
            as [([UInt8], Int)]
        {
            var encoder = try GzipEncoder(level: level)
            var out: [UInt8] = []
            var maxChunk = 0
            var i = 0
            while i < data.count {
                let n = min(777, data.count - i)
                try withBytes(data[i..<(i + n)]) { (raw) throws(HawserError) in
                    try encoder.encode(raw) {
                        maxChunk = max(maxChunk, $0.count)
                        out.append(contentsOf: $0)
                    }
                }
                i += n
            }
            try encoder.finish {
                maxChunk = max(maxChunk, $0.count)
                out.append(contentsOf: $0)
            }
            #expect(maxChunk <= GzipEncoder.chunkSize)
            #expect(Array(out.prefix(2)) == [0x1F, 0x8B])
            #expect(try decodeWhole("gzip", out) == data)
            #expect(zlibInflate(out, windowBits: 15 + 16) == data, "level \(level)")
            #expect(try GzipEncoder.compress(data, level: level) == out)
        }
        #expect(decodingError { _ = try GzipEncoder(level: 10) }?.code == .invalidRequest)
        var done = try GzipEncoder()
        try done.finish { _ in }
        #expect(decodingError { try done.finish { _ in } }?.message == "gzip encoder used after finish()")
    }
}

/// zlib's own one-shot inflate, as an independent check of the encoder.
func zlibInflate(_ bytes: [UInt8], windowBits: Int32) -> [UInt8]? {
    var s = z_stream()
    guard CHawser_inflateInit2(&s, windowBits) == Z_OK else { return nil }
    defer { inflateEnd(&s) }
    var input = bytes
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16384)
    var rc: Int32 = Z_OK
    input.withUnsafeMutableBufferPointer { i in
        s.next_in = i.baseAddress
        s.avail_in = uInt(i.count)
        repeat {
            let produced = chunk.withUnsafeMutableBufferPointer { o -> Int in
                s.next_out = o.baseAddress
                s.avail_out = uInt(o.count)
                rc = inflate(&s, Z_NO_FLUSH)
                return o.count - Int(s.avail_out)
            }
            out.append(contentsOf: chunk[0..<produced])
        } while rc == Z_OK
    }
    return rc == Z_STREAM_END ? out : nil
}
