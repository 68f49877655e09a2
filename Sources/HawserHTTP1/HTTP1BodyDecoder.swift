// HTTP1BodyDecoder.swift: message body framing (RFC 9112 §6, §7.1), shared by both parsers.
//
// Three framings: a known length, chunked, and (responses only) until the connection
// closes. Body bytes are never copied: each step hands back a range of the caller's input.
//
// The chunked decoder is a byte-level state machine (like picohttpparser's
// phr_chunked_decoder): chunk-size lines are consumed as they arrive, so no byte is looked
// at twice; only the trailer section, like a head, is parsed once complete.
//
//   size ──hex──▶ size ──SP/HT──▶ sizeBWS ──";"──▶ ext ──CR──▶ sizeLF ──LF──▶ data ─▶ dataCR ─▶ dataLF ─▶ size
//                  │                                              (size 0) └──LF──▶ trailers ─▶ (end)
//                  └──";"──▶ ext,   └──CR──▶ sizeLF

@usableFromInline
struct BodyDecoder: Sendable {
    @usableFromInline
    enum Framing: Sendable {
        case length
        case chunked
        case untilClose
    }

    @usableFromInline
    enum ChunkPhase: Sendable {
        /// In the hex digits of a chunk size (`digits` so far).
        case size
        /// Whitespace after the size digits (BWS before ";" or CRLF).
        case sizeBWS
        /// Inside chunk extensions, after ";".
        case ext
        /// Saw the CR that ends the chunk-size line.
        case sizeLF
        /// In chunk data (`remaining` bytes to go).
        case data
        /// After chunk data: expecting CR.
        case dataCR
        /// After chunk data and CR: expecting LF.
        case dataLF
        /// In the trailer section (parsed as a whole, like a head).
        case trailers
    }

    enum Step {
        case needMore
        case body(Range<Int>, last: Bool)
        case trailers(HTTPHeaders)
        case end
    }

    var framing: Framing = .length
    /// Length framing: bytes left in the body. Chunked: bytes left in the current chunk.
    var remaining = 0
    var phase: ChunkPhase = .size
    var chunkSize = 0
    var digits = 0
    var lineExtra = 0
    var trailerScan: SectionScan?
    /// Unfold obs-fold in the trailer section (responses, by default) rather than reject it.
    var foldsTrailerLines = false

    init() {}

    init(framing: Framing, length: Int = 0) {
        self.framing = framing
        self.remaining = length
    }

    /// Body data bytes that come next with no framing among them (see
    /// `HTTP1ResponseParser.bodyDataAhead`).
    var dataAhead: Int {
        switch self.framing {
        case .length: return self.remaining
        case .untilClose: return Int.max
        case .chunked: return self.phase == .data ? self.remaining : 0
        }
    }

    /// One step over `p[0..<avail]`: consumes framing bytes until it has an event to give.
    mutating func next(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        limits: HTTP1Limits
    ) throws(HTTP1ParseError) -> (consumed: Int, step: Step) {
        switch self.framing {
        case .length:
            let n = Swift.min(self.remaining, avail)
            if n == 0 { return (0, .needMore) }
            self.remaining &-= n
            return (n, .body(0..<n, last: self.remaining == 0))
        case .untilClose:
            if avail == 0 { return (0, .needMore) }
            return (avail, .body(0..<avail, last: false))
        case .chunked:
            return try self.nextChunked(p, avail: avail, limits: limits)
        }
    }

    @inline(__always)
    static func hexValue(_ byte: UInt8) -> Int {
        let digit = byte &- 0x30
        if digit < 10 { return Int(digit) }
        let letter = (byte | 0x20) &- 0x61
        if letter < 6 { return Int(letter) &+ 10 }
        return -1
    }

    mutating func nextChunked(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        limits: HTTP1Limits
    ) throws(HTTP1ParseError) -> (consumed: Int, step: Step) {
        var i = 0
        while i < avail {
            let byte = p[i]
            switch self.phase {
            case .size:
                let value = Self.hexValue(byte)
                if value >= 0 {
                    // Any number of digits (RFC 9112 §7.1: 1*HEXDIG, leading zeros included)
                    // whose value fits in an Int. Nothing is buffered: a digit costs what a
                    // body byte costs, so the value is bounded, not the digit count.
                    if self.chunkSize > (Int.max >> 4) {
                        throw HTTP1ParseError(.chunkSizeOverflow, offset: i)
                    }
                    self.chunkSize = self.chunkSize << 4 | value
                    self.digits &+= 1
                } else if self.digits == 0 {
                    throw HTTP1ParseError(.invalidChunkSize, offset: i)
                } else if byte == asciiCR {
                    self.phase = .sizeLF
                } else if byte == 0x3B {  // ";"
                    self.phase = .ext
                    try self.countExtra(i, limits)
                } else if isOWS(byte) {
                    self.phase = .sizeBWS
                    try self.countExtra(i, limits)
                } else if byte == asciiLF {
                    throw HTTP1ParseError(.bareLF, offset: i)
                } else {
                    throw HTTP1ParseError(.invalidChunkSize, offset: i)
                }
                i &+= 1
            case .sizeBWS:
                if byte == asciiCR {
                    self.phase = .sizeLF
                } else if byte == 0x3B {
                    self.phase = .ext
                    try self.countExtra(i, limits)
                } else if isOWS(byte) {
                    try self.countExtra(i, limits)
                } else if byte == asciiLF {
                    throw HTTP1ParseError(.bareLF, offset: i)
                } else {
                    throw HTTP1ParseError(.invalidChunkSize, offset: i)
                }
                i &+= 1
            case .ext:
                // chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ): skipped, bounded,
                // and free of control bytes (HTAB allowed).
                if byte == asciiCR {
                    self.phase = .sizeLF
                } else if byte == asciiLF {
                    throw HTTP1ParseError(.bareLF, offset: i)
                } else if byte != asciiHT && (byte < 0x20 || byte == 0x7F) {
                    throw HTTP1ParseError(.invalidChunkExtension, offset: i)
                } else {
                    try self.countExtra(i, limits)
                }
                i &+= 1
            case .sizeLF:
                guard byte == asciiLF else { throw HTTP1ParseError(.bareCR, offset: i &- 1) }
                i &+= 1
                if self.chunkSize == 0 {
                    self.phase = .trailers
                    return try self.trailers(p, avail: avail, start: i, limits: limits)
                }
                self.phase = .data
                self.remaining = self.chunkSize
            case .data:
                let n = Swift.min(self.remaining, avail &- i)
                self.remaining &-= n
                if self.remaining == 0 { self.phase = .dataCR }
                return (i &+ n, .body(i..<(i &+ n), last: false))
            case .dataCR:
                guard byte == asciiCR else { throw HTTP1ParseError(.invalidChunkData, offset: i) }
                self.phase = .dataLF
                i &+= 1
            case .dataLF:
                guard byte == asciiLF else { throw HTTP1ParseError(.invalidChunkData, offset: i) }
                self.phase = .size
                self.chunkSize = 0
                self.digits = 0
                self.lineExtra = 0
                i &+= 1
            case .trailers:
                return try self.trailers(p, avail: avail, start: i, limits: limits)
            }
        }
        return (i, .needMore)
    }

    @inline(__always)
    mutating func countExtra(_ i: Int, _ limits: HTTP1Limits) throws(HTTP1ParseError) {
        self.lineExtra &+= 1
        if self.lineExtra > limits.maxChunkExtensionBytes {
            throw HTTP1ParseError(.chunkExtensionTooLong, offset: i)
        }
    }

    /// The trailer section, starting at `start`: consumed only once complete.
    mutating func trailers(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        start: Int,
        limits: HTTP1Limits
    ) throws(HTTP1ParseError) -> (consumed: Int, step: Step) {
        let rules = SectionRules.trailers(limits)
        var summary = FieldSummary()
        guard try rules.resume(p, avail: avail, base: start, scan: &self.trailerScan) else { return (start, .needMore) }
        do throws(HTTP1ParseError) {
            guard
                try rules.fields(
                    p,
                    avail: avail,
                    base: start,
                    firstLine: start,
                    linesBefore: 0,
                    scan: &self.trailerScan,
                    into: &summary
                )
            else { return (start, .needMore) }
        } catch {
            // A complete trailer section with obs-fold, unfolded (HTTP1LineFolding.swift).
            guard self.foldsTrailerLines else { throw error }
            _ = try rules.unfold(after: error, p, avail: avail, base: start, into: &summary)
        }
        if summary.headers.count == 0 { return (summary.end, .end) }
        return (summary.end, .trailers(summary.headers))
    }
}
