// HTTP1SectionParser.swift: the head / trailer-section machinery shared by both parsers.
//
// Theory of operation
// -------------------
// A section (a head, or a chunked body's trailer section) is parsed only once it is
// complete; until then the parser consumes nothing and the caller presents the same bytes
// again with more appended (picohttpparser's model). Two paths share one set of rules:
//
// * the FAST path parses the section in one pass from its first byte (the usual case: the
//   whole head is in the buffer); it stops at the first byte it cannot take;
// * the SCAN path (`scan`) only looks for line ends (LF, 8 bytes at a time), applies the
//   limits line by line, validates the start line, and remembers where it stopped in a
//   `SectionScan`, so that a head that arrives in many pieces costs O(n) in total (like
//   h11's `_next_line_search` and pico's `last_len`).
//
// Errors must not depend on how the bytes were split, so they are ordered by rule:
//   1. limit errors (line length, section size, field count) as soon as they are certain;
//   2. start-line errors as soon as the start line is complete;
//   3. errors inside field lines only once the whole section is complete (then the first).
// The fast path therefore hands every stop (an incomplete line, or a bad byte in a field
// line) to the scan path from the stopping line's start, which decides among 1-3 exactly
// as it would have if the bytes had come one at a time.

/// Where an incomplete section's scan stopped, relative to the section's first byte.
@usableFromInline
struct SectionScan: Sendable, Hashable {
    /// Start of the first line not yet complete.
    var lineStart: Int
    /// No LF in `[lineStart, searchFrom)`.
    var searchFrom: Int
    /// Lines completed so far (the start line included).
    var lineCount: Int
}

/// Which start line a section begins with.
@usableFromInline
enum StartLineKind: Sendable {
    case status
    case request
    case none  // trailer section
}

/// What the body framing needs to know from the fields, gathered while parsing them.
@usableFromInline
struct FieldSummary {
    var headers = HTTPHeaders()
    /// Index just after the blank line that ends the section.
    var end = 0
    /// -1: no Content-Length field.
    var contentLength: Int = -1
    var hasTransferEncoding = false
    /// chunked is the final transfer coding.
    var chunkedIsFinal = false
    /// chunked appears somewhere in the list (it may appear only once).
    var chunkedSeen = false
    var connectionClose = false
    var connectionKeepAlive = false
}

/// Outcome of the fast path.
@usableFromInline
enum FastResult {
    /// The section is complete; the summary was filled in.
    case complete
    /// Stopped at the line starting at `lineStart` (incomplete, or a limit to confirm).
    case stopped(lineStart: Int, fieldLines: Int)
    /// A bad byte in the field line at `lineStart`; reported once the section is complete.
    case failed(HTTP1ParseError, lineStart: Int, fieldLines: Int)
}

@usableFromInline
struct SectionRules: Sendable {
    var maxSectionBytes: Int
    var maxLineLength: Int
    var maxFieldCount: Int
    var tooLarge: HTTP1ParseError.Kind
    var startLine: StartLineKind
    /// Interpret Content-Length / Transfer-Encoding / Connection (heads, not trailers).
    var framingFields: Bool

    /// Limits are clamped to 0...UInt32.max: offsets are stored as UInt32 in the span
    /// table, and the bound arithmetic must not overflow.
    @inline(__always)
    static func clamp(_ limit: Int) -> Int { Swift.min(Swift.max(limit, 0), Int(UInt32.max)) }

    static func head(_ limits: HTTP1Limits, _ startLine: StartLineKind) -> SectionRules {
        SectionRules(
            maxSectionBytes: clamp(limits.maxHeadBytes),
            maxLineLength: clamp(limits.maxLineLength),
            maxFieldCount: limits.maxHeaderCount,
            tooLarge: .headTooLarge,
            startLine: startLine,
            framingFields: true
        )
    }

    static func trailers(_ limits: HTTP1Limits) -> SectionRules {
        SectionRules(
            maxSectionBytes: clamp(limits.maxTrailerBytes),
            maxLineLength: clamp(limits.maxLineLength),
            maxFieldCount: limits.maxHeaderCount,
            tooLarge: .trailersTooLarge,
            startLine: .none,
            framingFields: false
        )
    }

    // MARK: - Line ends and limits

    /// The LF ending the line that starts at `lineStart`, searching from `from`.
    /// nil: not there yet and no limit crossed. Throws the limit error once certain.
    /// Rule: the LF must sit before `lineStart + maxLineLength + 1` and before
    /// `base + maxSectionBytes`; whichever bound comes first decides the error.
    @inline(__always)
    func lineEnd(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        lineStart: Int,
        from: Int
    ) throws(HTTP1ParseError) -> Int? {
        let bound = Swift.min(lineStart &+ self.maxLineLength &+ 1, base &+ self.maxSectionBytes)
        if let lf = SWAR.firstLF(p, from: from, end: Swift.min(avail, bound)) { return lf }
        if avail >= bound { throw self.limitError(lineStart: lineStart, base: base) }
        return nil
    }

    /// The limit error for the line at `lineStart` whose LF is missing before its bound.
    func limitError(lineStart: Int, base: Int) -> HTTP1ParseError {
        let lineBound = lineStart &+ self.maxLineLength &+ 1
        let sectionBound = base &+ self.maxSectionBytes
        if lineBound < sectionBound { return HTTP1ParseError(.lineTooLong, offset: lineBound) }
        return HTTP1ParseError(self.tooLarge, offset: sectionBound)
    }

    // MARK: - Scan path

    /// Scans line ends from `state`. Returns the index after the blank line when the
    /// section is complete, or nil (state updated) when more bytes are needed.
    func scan(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        state: inout SectionScan
    ) throws(HTTP1ParseError) -> Int? {
        var lineStart = base &+ state.lineStart
        var from = base &+ state.searchFrom
        var lines = state.lineCount
        while true {
            guard let lf = try self.lineEnd(p, avail: avail, base: base, lineStart: lineStart, from: from) else {
                state = SectionScan(lineStart: lineStart &- base, searchFrom: avail &- base, lineCount: lines)
                return nil
            }
            if lines == 0 && self.startLine != .none {
                try self.validateStartLine(p, lineStart: lineStart, lf: lf)
            } else if lf == lineStart || (lf == lineStart &+ 1 && p[lineStart] == asciiCR) {
                return lf &+ 1
            } else {
                let fieldLines = self.startLine == .none ? lines : lines &- 1
                if fieldLines >= self.maxFieldCount {
                    throw HTTP1ParseError(.tooManyHeaders, offset: lineStart)
                }
            }
            lines &+= 1
            lineStart = lf &+ 1
            from = lineStart
        }
    }

    func validateStartLine(_ p: UnsafePointer<UInt8>, lineStart: Int, lf: Int) throws(HTTP1ParseError) {
        switch self.startLine {
        case .status: _ = try StartLine.parseStatus(p, lineStart: lineStart, lf: lf)
        case .request: _ = try StartLine.parseRequest(p, lineStart: lineStart, lf: lf)
        case .none: break
        }
    }

    // MARK: - Both paths together

    /// Resumes a saved scan (if any). false: still incomplete (state saved); true: go on
    /// and parse the section from its start.
    @inline(__always)
    func resume(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        scan saved: inout SectionScan?
    ) throws(HTTP1ParseError) -> Bool {
        guard var state = saved else { return true }
        guard try self.scan(p, avail: avail, base: base, state: &state) != nil else {
            saved = state
            return false
        }
        saved = nil
        return true
    }

    /// The fields from `firstLine` to the blank line: the fast path, and when it stops, the
    /// scan path from the stopping line (see the theory of operation). true: complete,
    /// `summary` filled; false: more bytes needed, `saved` holds the scan state. Throws the
    /// error the rules give for these bytes.
    @inline(__always)
    func fields(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        firstLine: Int,
        linesBefore: Int,
        scan saved: inout SectionScan?,
        into summary: inout FieldSummary
    ) throws(HTTP1ParseError) -> Bool {
        switch self.parseFields(p, avail: avail, base: base, firstLine: firstLine, into: &summary) {
        case .complete:
            return true
        case .stopped(let lineStart, let fieldLines):
            return try self.fallBack(p, avail, base, lineStart, fieldLines &+ linesBefore, nil, &saved)
        case .failed(let error, let lineStart, let fieldLines):
            return try self.fallBack(p, avail, base, lineStart, fieldLines &+ linesBefore, error, &saved)
        }
    }

    /// The fast path stopped at the line starting at `lineStart`: scan from there.
    @inline(never)
    func fallBack(
        _ p: UnsafePointer<UInt8>,
        _ avail: Int,
        _ base: Int,
        _ lineStart: Int,
        _ lines: Int,
        _ pending: HTTP1ParseError?,
        _ saved: inout SectionScan?
    ) throws(HTTP1ParseError) -> Bool {
        var state = SectionScan(lineStart: lineStart &- base, searchFrom: lineStart &- base, lineCount: lines)
        guard try self.scan(p, avail: avail, base: base, state: &state) != nil else {
            saved = state
            return false
        }
        // The scan accepts every line up to the blank one, so the fast path stopped on a
        // bad byte, never on a limit or a missing line end.
        guard let pending else { preconditionFailure("fast path stopped on a line the scan accepts") }
        throw pending
    }

    /// The start line's LF. nil: incomplete (scan state saved from the first byte).
    @inline(__always)
    func startLineEnd(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        scan saved: inout SectionScan?
    ) throws(HTTP1ParseError) -> Int? {
        guard let lf = try self.lineEnd(p, avail: avail, base: 0, lineStart: 0, from: 0) else {
            saved = SectionScan(lineStart: 0, searchFrom: avail, lineCount: 0)
            return nil
        }
        return lf
    }

    // MARK: - Fast path

    /// Parses field lines from `firstLine` to the blank line in one pass.
    /// `base` is the section's first byte (limits are relative to it).
    @inline(__always)
    func parseFields(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        firstLine: Int,
        into summary: inout FieldSummary
    ) -> FastResult {
        // Span scratch: 64 fields on the stack (1 KiB: below the stdlib's stack threshold);
        // more spill to the heap.
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 256) { scratch in
            var spans = SpanBuffer(scratch.baseAddress!, capacity: 64)
            defer { spans.release() }
            return self.parseFields(p, avail: avail, base: base, firstLine: firstLine, spans: &spans, into: &summary)
        }
    }

    @inline(__always)
    func parseFields(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        firstLine: Int,
        spans: inout SpanBuffer,
        into summary: inout FieldSummary
    ) -> FastResult {
        let end = Swift.min(avail, base &+ self.maxSectionBytes)
        var s = firstLine
        var count = 0
        while true {
            guard s < end else { return .stopped(lineStart: s, fieldLines: count) }
            let first = p[s]
            if first <= asciiSP {
                // The blank line ends the section.
                if first == asciiCR {
                    guard s &+ 1 < end else { return .stopped(lineStart: s, fieldLines: count) }
                    guard p[s &+ 1] == asciiLF else {
                        return .failed(HTTP1ParseError(.bareCR, offset: s), lineStart: s, fieldLines: count)
                    }
                    summary.end = s &+ 2
                    break
                }
                if first == asciiLF {
                    summary.end = s &+ 1
                    break
                }
                if isOWS(first) {
                    return .failed(HTTP1ParseError(.obsoleteLineFolding, offset: s), lineStart: s, fieldLines: count)
                }
                // Another control byte: the name check below reports it.
            }
            // field-name = token, then ":" with no whitespace before it.
            // Letters 8 at a time (most names are letters and "-"), the rest byte by byte.
            var i = s
            while true {
                if i &+ 8 <= end {
                    let flagged = SWAR.nonLetterMask(UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
                    if flagged == 0 {
                        i &+= 8
                        continue
                    }
                    i &+= flagged.trailingZeroBitCount &>> 3
                }
                guard i < end, CharClass.isToken(p[i]) else { break }
                i &+= 1
            }
            guard i < end else { return .stopped(lineStart: s, fieldLines: count) }
            guard p[i] == asciiColon && i > s else {
                return .failed(Self.nameError(p, i, end), lineStart: s, fieldLines: count)
            }
            let nameEnd = i
            i &+= 1
            if i < end && p[i] == asciiSP { i &+= 1 }
            while i < end && isOWS(p[i]) { i &+= 1 }
            let valueStart = i
            // field-value: VCHAR / obs-text / SP / HTAB. 8 bytes at a time while no byte is
            // below 0x20 or is 0x7F (the lowest flagged byte is never past the first such
            // byte), then byte by byte from the flagged one (HTAB, CR, LF, errors).
            while i &+ 16 <= end {
                let low = SWAR.controlOrDELMask(UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
                let high = SWAR.controlOrDELMask(
                    UnsafeRawPointer(p + i).loadUnaligned(fromByteOffset: 8, as: UInt64.self)
                )
                if low | high != 0 {
                    i &+= low != 0 ? low.trailingZeroBitCount &>> 3 : 8 &+ high.trailingZeroBitCount &>> 3
                    break
                }
                i &+= 16
            }
            if i &+ 8 <= end {
                let flagged = SWAR.controlOrDELMask(UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
                i &+= flagged.trailingZeroBitCount &>> 3  // 64 >> 3 == 8 when nothing is flagged
            }
            while i < end && CharClass.isFieldValue(p[i]) { i &+= 1 }
            guard i < end else { return .stopped(lineStart: s, fieldLines: count) }
            let lf: Int
            let stop = p[i]
            if stop == asciiCR {
                guard i &+ 1 < end else { return .stopped(lineStart: s, fieldLines: count) }
                guard p[i &+ 1] == asciiLF else {
                    return .failed(HTTP1ParseError(.bareCR, offset: i), lineStart: s, fieldLines: count)
                }
                lf = i &+ 1
            } else if stop == asciiLF {
                lf = i
            } else {
                return .failed(HTTP1ParseError(.invalidFieldValue, offset: i), lineStart: s, fieldLines: count)
            }
            var valueEnd = i
            while valueEnd > valueStart && isOWS(p[valueEnd &- 1]) { valueEnd &-= 1 }
            // Limits before content checks (see the theory of operation).
            if lf > s &+ self.maxLineLength || count >= self.maxFieldCount {
                return .stopped(lineStart: s, fieldLines: count)
            }
            spans.append(
                UInt32(truncatingIfNeeded: s &- firstLine),
                UInt32(truncatingIfNeeded: nameEnd &- s),
                UInt32(truncatingIfNeeded: valueStart &- firstLine),
                UInt32(truncatingIfNeeded: valueEnd &- valueStart)
            )
            if self.framingFields {
                if let error = Self.noteFramingField(
                    p,
                    nameStart: s,
                    nameEnd: nameEnd,
                    valueStart: valueStart,
                    valueEnd: valueEnd,
                    into: &summary
                ) {
                    return .failed(error, lineStart: s, fieldLines: count)
                }
            }
            count &+= 1
            s = lf &+ 1
        }
        // One allocation for the whole field block: span table, then the raw lines.
        if count > 0 {
            let spanBytes = count &* HTTPHeaders.spanSize
            let rawCount = summary.end &- firstLine
            let storage = HeaderStorage.make(
                spanCapacity: count,
                byteCapacity: rawCount,
                fieldCount: count,
                byteCount: rawCount
            )
            storage.withUnsafeMutablePointerToElements { elements in
                let dst = UnsafeMutableRawPointer(elements)
                dst.copyMemory(from: spans.base, byteCount: spanBytes)
                (dst + spanBytes).copyMemory(from: p + firstLine, byteCount: rawCount)
            }
            summary.headers = HTTPHeaders(storage: storage)
        }
        return .complete
    }

    /// Why a field name stopped at `i` (not a colon).
    static func nameError(_ p: UnsafePointer<UInt8>, _ i: Int, _ end: Int) -> HTTP1ParseError {
        let byte = p[i]
        if isOWS(byte) { return HTTP1ParseError(.whitespaceBeforeColon, offset: i) }
        if byte == asciiCR && i &+ 1 < end && p[i &+ 1] != asciiLF { return HTTP1ParseError(.bareCR, offset: i) }
        return HTTP1ParseError(.invalidFieldName, offset: i)
    }

    // MARK: - Framing fields

    // Lower-cased 8-byte words of the names, little-endian.
    static let contentDash: UInt64 = 0x2d74_6e65_746e_6f63  // "content-"
    static let tDashLength: UInt64 = 0x6874_676e_656c_2d74  // "t-length"
    static let transfer: UInt64 = 0x7265_6673_6e61_7274  // "transfer"
    static let dashEncodin: UInt64 = 0x6e69_646f_636e_652d  // "-encodin"
    static let connecti: UInt64 = 0x6974_6365_6e6e_6f63  // "connecti"
    static let nnection: UInt64 = 0x6e6f_6974_6365_6e6e  // "nnection"
    static let keepAli: UInt64 = 0x696c_612d_7065_656b  // "keep-ali"
    static let lowerBits: UInt64 = 0x2020_2020_2020_2020

    @inline(__always)
    static func word(_ p: UnsafePointer<UInt8>, _ at: Int) -> UInt64 {
        UnsafeRawPointer(p + at).loadUnaligned(as: UInt64.self) | lowerBits
    }

    /// Records Content-Length, Transfer-Encoding and Connection; returns a content error.
    /// Names are tokens, so or-ing 0x20 into each byte lower-cases letters and maps no
    /// other token byte onto a letter or "-": the compare is exact.
    @inline(__always)
    static func noteFramingField(
        _ p: UnsafePointer<UInt8>,
        nameStart: Int,
        nameEnd: Int,
        valueStart: Int,
        valueEnd: Int,
        into summary: inout FieldSummary
    ) -> HTTP1ParseError? {
        switch nameEnd &- nameStart {
        case 14:
            guard word(p, nameStart) == contentDash && word(p, nameStart &+ 6) == tDashLength else { return nil }
            let value = UnsafeRawBufferPointer(start: p + valueStart, count: valueEnd &- valueStart)
            switch ContentLength.parse(value) {
            case .value(let n):
                if summary.contentLength >= 0 && summary.contentLength != n {
                    return HTTP1ParseError(.conflictingContentLength, offset: valueStart)
                }
                summary.contentLength = n
            case .invalid:
                return HTTP1ParseError(.invalidContentLength, offset: valueStart)
            case .conflicting:
                return HTTP1ParseError(.conflictingContentLength, offset: valueStart)
            }
        case 17:
            guard
                word(p, nameStart) == transfer && word(p, nameStart &+ 8) == dashEncodin
                    && p[nameStart &+ 16] | 0x20 == 0x67  // "g"
            else { return nil }
            return noteTransferEncoding(p, valueStart: valueStart, valueEnd: valueEnd, into: &summary)
        case 10:
            guard word(p, nameStart) == connecti && word(p, nameStart &+ 2) == nnection else { return nil }
            let length = valueEnd &- valueStart
            // The usual values in one compare each: "keep-alive", "close".
            if length == 10 && word(p, valueStart) == keepAli && (p[valueStart &+ 8] | 0x20) == 0x76
                && (p[valueStart &+ 9] | 0x20) == 0x65
            {
                summary.connectionKeepAlive = true
                return nil
            }
            if length == 5
                && (UnsafeRawPointer(p + valueStart).loadUnaligned(as: UInt32.self) | 0x2020_2020) == 0x736f_6c63
                && (p[valueStart &+ 4] | 0x20) == 0x65
            {
                summary.connectionClose = true
                return nil
            }
            let value = UnsafeRawBufferPointer(start: p + valueStart, count: length)
            forEachListElement(value) { start, end in
                let token = UnsafeRawBufferPointer(rebasing: value[start..<end])
                if matches(token, "close") {
                    summary.connectionClose = true
                } else if matches(token, "keep-alive") {
                    summary.connectionKeepAlive = true
                }
                return true
            }
        default:
            break
        }
        return nil
    }

    /// Transfer-Encoding: a list of codings; chunked may appear once, without parameters,
    /// and frames the body only as the final coding (RFC 9112 §6.1, §6.3, §7). Several
    /// fields form one list.
    static func noteTransferEncoding(
        _ p: UnsafePointer<UInt8>,
        valueStart: Int,
        valueEnd: Int,
        into summary: inout FieldSummary
    ) -> HTTP1ParseError? {
        let value = UnsafeRawBufferPointer(start: p + valueStart, count: valueEnd &- valueStart)
        var codings = 0
        var error: HTTP1ParseError?
        forEachListElement(value) { start, end in
            codings += 1
            let isChunked = matches(UnsafeRawBufferPointer(rebasing: value[start..<end]), "chunked")
            var next = end
            while next < value.count && isOWS(value[next]) { next += 1 }
            let hasParameters = next < value.count && value[next] == 0x3B  // ";"
            // chunked defines no parameters: "chunked;x" is not something to guess about.
            if isChunked && (summary.chunkedSeen || hasParameters) {
                error = HTTP1ParseError(.invalidTransferEncoding, offset: valueStart &+ start)
                return false
            }
            summary.chunkedSeen = summary.chunkedSeen || isChunked
            summary.chunkedIsFinal = isChunked
            summary.hasTransferEncoding = true
            return true
        }
        if error == nil && codings == 0 {
            error = HTTP1ParseError(.invalidTransferEncoding, offset: valueStart)
        }
        return error
    }

    @inline(__always)
    static func matches(_ token: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        token.count == lowercase.utf8CodeUnitCount
            && asciiCaseInsensitiveEquals(token.baseAddress!, lowercase.utf8Start, token.count)
    }
}

/// Span scratch for the fast path: a stack buffer that spills to the heap.
@usableFromInline
struct SpanBuffer {
    var base: UnsafeMutablePointer<UInt32>
    var capacity: Int  // in fields (4 words each)
    var count = 0
    var heap = false

    init(_ base: UnsafeMutablePointer<UInt32>, capacity: Int) {
        self.base = base
        self.capacity = capacity
    }

    @inline(__always)
    mutating func append(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32) {
        if self.count == self.capacity { self.grow() }
        let slot = self.base + self.count &* 4
        slot[0] = a
        slot[1] = b
        slot[2] = c
        slot[3] = d
        self.count &+= 1
    }

    @inline(never)
    mutating func grow() {
        let bigger = UnsafeMutablePointer<UInt32>.allocate(capacity: self.capacity * 8)
        bigger.update(from: self.base, count: self.count * 4)
        if self.heap { self.base.deallocate() }
        self.base = bigger
        self.capacity *= 2
        self.heap = true
    }

    func release() {
        if self.heap { self.base.deallocate() }
    }
}

/// Content-Length values (RFC 9110 §8.6).
enum ContentLength {
    case value(Int)
    case invalid
    case conflicting

    /// `1*DIGIT *( OWS "," OWS 1*DIGIT )`; the list form is accepted only when every
    /// element is the same number.
    static func parse(_ value: UnsafeRawBufferPointer) -> ContentLength {
        // The usual value: up to 18 digits, nothing else (cannot overflow).
        if value.count > 0 && value.count <= 18 {
            var number = 0
            var i = 0
            while i < value.count {
                let digit = value[i] &- 0x30
                if digit >= 10 { break }
                number = number &* 10 &+ Int(digit)
                i &+= 1
            }
            if i == value.count { return .value(number) }
        }
        var result = -1
        var i = 0
        let n = value.count
        while true {
            while i < n && isOWS(value[i]) { i += 1 }
            var number = 0
            let digitsStart = i
            while i < n {
                let digit = value[i] &- 0x30
                if digit >= 10 { break }
                let (m, o1) = number.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(Int(digit))
                if o1 || o2 { return .invalid }
                number = a
                i += 1
            }
            if i == digitsStart { return .invalid }
            if result >= 0 && result != number { return .conflicting }
            result = number
            while i < n && isOWS(value[i]) { i += 1 }
            if i == n { return .value(result) }
            if value[i] != 0x2C { return .invalid }
            i += 1
        }
    }
}
