// HTTP1LineFolding.swift: obsolete line folding (obs-fold, RFC 9112 §5.2) in responses.
//
// A user agent that receives obs-fold in a response must replace each one with SP before
// interpreting the field value. The fast path (HTTP1SectionParser.swift) knows nothing of
// folds and is the same code with or without them: it stops at a field line that starts with
// SP or HTAB (or at a framing field whose value is empty or wrong, which the next line may
// continue) as at any bad byte, and the error is thrown once the section is complete. The
// response parser catches it (`unfold(after:)`): when a fold explains it (`foldExplains`), the
// section is parsed again line by line by `parseFoldedFields` (a cold path: no message anyone
// sends today folds). Nothing is added to the path of a message without a fold.
//
// The same rules as the fast path, so that errors stay independent of the split:
// * limits are per physical line (a continuation line is a field line for `maxLineLength`
//   and `maxHeaderCount`), exactly as the scan path counts them;
// * a continuation line with nothing to continue (the section's first field line) is
//   `obsoleteLineFolding` (RFC 9112 §2.2 lets a recipient reject it);
// * Content-Length / Transfer-Encoding / Connection are judged on the unfolded value.
//
// Unfolding keeps the header block one allocation: the raw lines are copied as the fast path
// copies them, then each folded value is compacted in place in that copy (`OWS CRLF RWS`
// runs become one SP) and its span shortened.

extension SectionRules {
    /// `fields` threw `error` for the section at `base`: the section's fields unfolded, into a
    /// fresh `summary`, when a fold explains the error; the error again otherwise.
    @inline(never)
    func unfold(
        after error: HTTP1ParseError,
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        into summary: inout FieldSummary
    ) throws(HTTP1ParseError) -> Bool {
        guard self.foldExplains(error, p, avail, base) else { throw error }
        return try self.unfoldSection(p, avail, base, &summary)
    }

    /// Whether the fast path's error may be a fold: its line (the error's offset is in it)
    /// continues a field (obs-fold, not the section's first field line), or a framing field
    /// failed on a value that the next line continues. Either error is thrown only once the
    /// section is complete; limit errors and the rest are never a fold's doing.
    func foldExplains(
        _ error: HTTP1ParseError,
        _ p: UnsafePointer<UInt8>,
        _ avail: Int,
        _ base: Int
    ) -> Bool {
        switch error.kind {
        case .obsoleteLineFolding:
            return error.offset != self.firstFieldLine(p, avail, base)
        case .invalidContentLength, .conflictingContentLength, .invalidTransferEncoding:
            guard self.framingFields else { return false }
            let end = Swift.min(avail, base &+ self.maxSectionBytes)
            guard let lf = SWAR.firstLF(p, from: error.offset, end: end), lf &+ 1 < end else { return false }
            return isOWS(p[lf &+ 1])
        default:
            return false
        }
    }

    /// The section's first field line: after the start line's LF, or the trailer section's first byte.
    func firstFieldLine(_ p: UnsafePointer<UInt8>, _ avail: Int, _ base: Int) -> Int {
        guard self.startLine != .none, let lf = SWAR.firstLF(p, from: base, end: avail) else { return base }
        return lf &+ 1
    }

    /// The complete section's fields, unfolded, into a fresh `summary` (the fast path's notes on
    /// the fields before the fold are dropped); throws the first error in them. Limits were
    /// checked on every line already.
    @inline(never)
    func unfoldSection(
        _ p: UnsafePointer<UInt8>,
        _ avail: Int,
        _ base: Int,
        _ summary: inout FieldSummary
    ) throws(HTTP1ParseError) -> Bool {
        summary = FieldSummary()
        let firstLine = self.firstFieldLine(p, avail, base)
        switch self.parseFoldedFields(p, avail: avail, base: base, firstLine: firstLine, into: &summary) {
        case .complete:
            return true
        case .failed(let error, _, _):
            throw error
        case .stopped:
            preconditionFailure("the folding parser stopped in a section the scan found complete")
        }
    }

    /// Parses field lines from `firstLine` to the blank line, unfolding obs-fold.
    @inline(never)
    func parseFoldedFields(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        firstLine: Int,
        into summary: inout FieldSummary
    ) -> FastResult {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 256) { scratch in
            var spans = SpanBuffer(scratch.baseAddress!, capacity: 64)
            defer { spans.release() }
            return self.parseFoldedFields(
                p,
                avail: avail,
                base: base,
                firstLine: firstLine,
                spans: &spans,
                into: &summary
            )
        }
    }

    func parseFoldedFields(
        _ p: UnsafePointer<UInt8>,
        avail: Int,
        base: Int,
        firstLine: Int,
        spans: inout SpanBuffer,
        into summary: inout FieldSummary
    ) -> FastResult {
        let end = Swift.min(avail, base &+ self.maxSectionBytes)
        // `s`: the first line of the current field; `lines`: physical field lines before it.
        var s = firstLine
        var lines = 0
        var count = 0
        var foldedAny = false
        while true {
            guard s < end else { return .stopped(lineStart: s, fieldLines: lines) }
            let first = p[s]
            if first == asciiCR {
                guard s &+ 1 < end else { return .stopped(lineStart: s, fieldLines: lines) }
                guard p[s &+ 1] == asciiLF else {
                    return .failed(HTTP1ParseError(.bareCR, offset: s), lineStart: s, fieldLines: lines)
                }
                summary.end = s &+ 2
                break
            }
            if first == asciiLF {
                summary.end = s &+ 1
                break
            }
            if isOWS(first) {
                // Only the section's first field line gets here: every other continuation
                // line is taken by the field before it.
                return .failed(HTTP1ParseError(.obsoleteLineFolding, offset: s), lineStart: s, fieldLines: lines)
            }
            var i = s
            while i < end && CharClass.isToken(p[i]) { i &+= 1 }
            guard i < end else { return .stopped(lineStart: s, fieldLines: lines) }
            guard p[i] == asciiColon && i > s else {
                return .failed(Self.nameError(p, i, end), lineStart: s, fieldLines: lines)
            }
            let nameEnd = i
            i &+= 1
            // The value, one physical line (piece) at a time. Each piece is trimmed of OWS;
            // the value runs from the first non-empty piece's start to the last one's end.
            var valueStart = -1
            var valueEnd = -1
            var emptyAt = i
            var lineStart = s
            var pieceLines = 0
            var next: Int
            while true {
                if lines &+ pieceLines >= self.maxFieldCount { return .stopped(lineStart: s, fieldLines: lines) }
                while i < end && isOWS(p[i]) { i &+= 1 }
                let contentStart = i
                if pieceLines == 0 { emptyAt = contentStart }
                while i < end && CharClass.isFieldValue(p[i]) { i &+= 1 }
                guard i < end else { return .stopped(lineStart: s, fieldLines: lines) }
                let lf: Int
                if p[i] == asciiCR {
                    guard i &+ 1 < end else { return .stopped(lineStart: s, fieldLines: lines) }
                    guard p[i &+ 1] == asciiLF else {
                        return .failed(HTTP1ParseError(.bareCR, offset: i), lineStart: s, fieldLines: lines)
                    }
                    lf = i &+ 1
                } else if p[i] == asciiLF {
                    lf = i
                } else {
                    return .failed(HTTP1ParseError(.invalidFieldValue, offset: i), lineStart: s, fieldLines: lines)
                }
                if lf > lineStart &+ self.maxLineLength { return .stopped(lineStart: s, fieldLines: lines) }
                var contentEnd = i
                while contentEnd > contentStart && isOWS(p[contentEnd &- 1]) { contentEnd &-= 1 }
                if contentEnd > contentStart {
                    if valueStart < 0 { valueStart = contentStart }
                    valueEnd = contentEnd
                }
                pieceLines &+= 1
                next = lf &+ 1
                // Whether the field goes on is known only from the next line's first byte.
                guard next < end else { return .stopped(lineStart: s, fieldLines: lines) }
                guard isOWS(p[next]) else { break }
                foldedAny = true
                lineStart = next
                i = next
            }
            if valueStart < 0 {
                valueStart = emptyAt
                valueEnd = emptyAt
            }
            spans.append(
                UInt32(truncatingIfNeeded: s &- firstLine),
                UInt32(truncatingIfNeeded: nameEnd &- s),
                UInt32(truncatingIfNeeded: valueStart &- firstLine),
                UInt32(truncatingIfNeeded: valueEnd &- valueStart)
            )
            if self.framingFields {
                let error = Self.noteFoldedFramingField(
                    p,
                    nameStart: s,
                    nameEnd: nameEnd,
                    valueStart: valueStart,
                    valueEnd: valueEnd,
                    into: &summary
                )
                if let error { return .failed(error, lineStart: s, fieldLines: lines) }
            }
            count &+= 1
            lines &+= pieceLines
            s = next
        }
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
                if foldedAny {
                    let bytes = (dst + spanBytes).assumingMemoryBound(to: UInt8.self)
                    for field in 0..<count {
                        let span = dst + field &* HTTPHeaders.spanSize
                        let start = Int(span.load(fromByteOffset: 8, as: UInt32.self))
                        let length = Int(span.load(fromByteOffset: 12, as: UInt32.self))
                        let unfolded = unfoldValue(bytes + start, count: length)
                        span.storeBytes(of: UInt32(truncatingIfNeeded: unfolded), toByteOffset: 12, as: UInt32.self)
                    }
                }
            }
            summary.headers = HTTPHeaders(storage: storage)
        }
        return .complete
    }

    /// `noteFramingField` on the unfolded value. A content error in a folded value points at
    /// the value's first byte.
    static func noteFoldedFramingField(
        _ p: UnsafePointer<UInt8>,
        nameStart: Int,
        nameEnd: Int,
        valueStart: Int,
        valueEnd: Int,
        into summary: inout FieldSummary
    ) -> HTTP1ParseError? {
        var folded = false
        for i in valueStart..<valueEnd where p[i] == asciiLF || p[i] == asciiCR {
            folded = true
            break
        }
        if !folded {
            return noteFramingField(
                p,
                nameStart: nameStart,
                nameEnd: nameEnd,
                valueStart: valueStart,
                valueEnd: valueEnd,
                into: &summary
            )
        }
        let nameLength = nameEnd &- nameStart
        // Name and value side by side, padded so that the 8-byte loads stay inside.
        var copy = [UInt8](repeating: 0, count: nameLength &+ (valueEnd &- valueStart) &+ 8)
        let error = copy.withUnsafeMutableBufferPointer { buffer -> HTTP1ParseError? in
            let q = buffer.baseAddress!
            q.update(from: p + nameStart, count: nameLength)
            (q + nameLength).update(from: p + valueStart, count: valueEnd &- valueStart)
            let length = unfoldValue(q + nameLength, count: valueEnd &- valueStart)
            return noteFramingField(
                UnsafePointer(q),
                nameStart: 0,
                nameEnd: nameLength,
                valueStart: nameLength,
                valueEnd: nameLength &+ length,
                into: &summary
            )
        }
        return error.map { HTTP1ParseError($0.kind, offset: valueStart) }
    }
}

/// Replaces each run of OWS and line ends that holds a line end with one SP, in place;
/// returns the new length. The value is trimmed, so no run starts or ends it.
func unfoldValue(_ value: UnsafeMutablePointer<UInt8>, count: Int) -> Int {
    var read = 0
    var write = 0
    while read < count {
        let byte = value[read]
        if byte != asciiCR && byte != asciiLF {
            value[write] = byte
            write &+= 1
            read &+= 1
            continue
        }
        while write > 0 && isOWS(value[write &- 1]) { write &-= 1 }
        while read < count && (isOWS(value[read]) || value[read] == asciiCR || value[read] == asciiLF) { read &+= 1 }
        value[write] = asciiSP
        write &+= 1
    }
    return write
}
