// HTTP1ResponseParser.swift: the client side: bytes in, response events out (sans-IO).

/// What the response parser hands up.
public enum HTTP1ResponseEvent: Sendable {
    /// A head. Interim (1xx) heads come too (`isInterim`); the final head of the same
    /// response follows (except after 101, which ends the HTTP exchange).
    case head(HTTPResponseHead)
    /// Body bytes: a range of the `input` given to THIS call of `next(_:)`. Zero-copy.
    case body(Range<Int>)
    /// The trailer section of a chunked body, when it has fields.
    case trailers(HTTPHeaders)
    /// The response is complete. `keepAlive == false`: the connection must be closed (or,
    /// after 101 or a 2xx to CONNECT, now belongs to the other protocol / the tunnel).
    case end(keepAlive: Bool)
}

/// An incremental, zero-copy HTTP/1.1 response parser (RFC 9112). It never touches IO.
///
/// Use: before each response call `expectResponse(to:)`; then call `next(_:)` with the
/// unconsumed bytes, drop `consumed` bytes, and call again while an event comes back; when
/// `event` is nil, read more bytes and append them to the unconsumed rest. At EOF call
/// `finish()`. Any split of the input gives the same events (body ranges aside) and the
/// same error.
public struct HTTP1ResponseParser: Sendable {
    @usableFromInline
    enum State: Sendable {
        case head
        case body
        case endPending
        case closed
        case failed
    }

    @usableFromInline
    enum Expecting: Sendable {
        case normal
        case head
        case connect
    }

    @usableFromInline var limits: HTTP1Limits
    /// Unfold obs-fold (``HTTP1ObsoleteLineFolding/replaceWithSpace``) rather than reject it.
    @usableFromInline var foldsLines: Bool
    @usableFromInline var state: State = .head
    @usableFromInline var expecting: Expecting = .normal
    /// Set by `expectResponse(to:)` during a message, for the one after it.
    @usableFromInline var nextExpecting: Expecting?
    @usableFromInline var headScan: SectionScan?
    @usableFromInline var sawInterim = false
    @usableFromInline var keepAlive = true
    @usableFromInline var body = BodyDecoder()
    @usableFromInline var streamOffset = 0
    @usableFromInline var failure: HTTP1ParseError?

    /// Creates a parser for the responses of one connection, in order; call
    /// ``expectResponse(to:)`` before each.
    ///
    /// - Parameters:
    ///   - limits: the bounds a response may not exceed; ``HTTP1Limits/default`` by default.
    ///   - obsoleteLineFolding: what to do with a field value folded onto the next line, in
    ///     heads and trailers: ``HTTP1ObsoleteLineFolding/replaceWithSpace`` by default, as
    ///     RFC 9112 §5.2 asks of a user agent.
    public init(limits: HTTP1Limits = .default, obsoleteLineFolding: HTTP1ObsoleteLineFolding = .replaceWithSpace) {
        self.limits = limits
        self.foldsLines = obsoleteLineFolding == .replaceWithSpace
    }

    /// What this parser does with obsolete line folding.
    public var obsoleteLineFolding: HTTP1ObsoleteLineFolding { self.foldsLines ? .replaceWithSpace : .reject }

    /// Before each response: the method of the request it answers. HEAD → no body;
    /// CONNECT with 2xx → no body, tunnel. Resets per-message state.
    ///
    /// Called while a response is still in progress (its body or its `.end` not yet handed
    /// up), the expectation is kept for the next response and the current one is left alone.
    public mutating func expectResponse(to method: HTTPMethod) {
        let expecting: Expecting
        switch method.rawValue {
        case "HEAD": expecting = .head
        case "CONNECT": expecting = .connect
        default: expecting = .normal
        }
        switch self.state {
        case .head:
            self.expecting = expecting
            self.headScan = nil
            self.sawInterim = false
        case .body, .endPending:
            self.nextExpecting = expecting
        case .closed, .failed:
            break
        }
    }

    /// No message in progress (nothing of a head seen since the last end).
    public var isIdle: Bool {
        switch self.state {
        case .head: return self.headScan == nil && !self.sawInterim
        case .closed: return true
        case .body, .endPending, .failed: return false
        }
    }

    /// Parses from the start of `input`. Returns the bytes consumed and at most one event;
    /// a nil event means more input is needed. After an error every call throws it again.
    public mutating func next(
        _ input: UnsafeRawBufferPointer
    ) throws(HTTP1ParseError) -> (consumed: Int, event: HTTP1ResponseEvent?) {
        if let failure = self.failure { throw failure }
        do throws(HTTP1ParseError) {
            let result: (consumed: Int, event: HTTP1ResponseEvent?) = try self.step(input)
            self.streamOffset &+= result.consumed
            return result
        } catch {
            let rebased = HTTP1ParseError(error.kind, offset: error.offset &+ self.streamOffset)
            self.failure = rebased
            self.state = .failed
            throw rebased
        }
    }

    /// True while reading a body that only the end of the connection delimits (no
    /// Content-Length, not chunked). Over TLS, an EOF without close_notify then means truncation.
    public var isReadingCloseDelimitedBody: Bool {
        self.state == .body && self.body.framing == .untilClose
    }

    /// How many bytes, from the next input byte on, are body data with no framing among them:
    /// the rest of a Content-Length body, the rest of the current chunk's data, `Int.max` for a
    /// close-delimited body; 0 when a head, a chunk-size line, trailers or an end come next. A
    /// reader may put that many bytes where it likes: `next` on them returns them all as one
    /// `.body` covering the whole input.
    public var bodyDataAhead: Int {
        self.state == .body ? self.body.dataAhead : 0
    }

    /// The peer closed the connection. A close-delimited body ends (`.end(keepAlive: false)`);
    /// between messages: nil; inside a head or a framed body: throws truncatedHead/Body.
    public mutating func finish() throws(HTTP1ParseError) -> HTTP1ResponseEvent? {
        if let failure = self.failure { throw failure }
        switch self.state {
        case .head:
            if self.headScan != nil || self.sawInterim {
                let seen = self.headScan?.searchFrom ?? 0
                let error = HTTP1ParseError(.truncatedHead, offset: self.streamOffset &+ seen)
                self.failure = error
                self.state = .failed
                throw error
            }
            self.state = .closed
            return nil
        case .body:
            if self.body.framing == .untilClose {
                self.state = .closed
                return .end(keepAlive: false)
            }
            let error = HTTP1ParseError(.truncatedBody, offset: self.streamOffset)
            self.failure = error
            self.state = .failed
            throw error
        case .endPending:
            self.state = .closed
            return .end(keepAlive: false)
        case .closed, .failed:
            return nil
        }
    }

    @inline(__always)
    mutating func step(_ input: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (Int, HTTP1ResponseEvent?) {
        switch self.state {
        case .head:
            return try self.parseHead(input)
        case .body:
            guard let base = input.baseAddress else { return (0, nil) }
            let (consumed, step) = try self.body.next(
                base.assumingMemoryBound(to: UInt8.self),
                avail: input.count,
                limits: self.limits
            )
            switch step {
            case .needMore:
                return (consumed, nil)
            case .body(let range, let last):
                if last { self.state = .endPending }
                return (consumed, .body(range))
            case .trailers(let trailers):
                self.state = .endPending
                return (consumed, .trailers(trailers))
            case .end:
                return (consumed, .end(keepAlive: self.endMessage()))
            }
        case .endPending:
            return (0, .end(keepAlive: self.endMessage()))
        case .closed, .failed:
            return (0, nil)
        }
    }

    /// Ends the current message; returns its keep-alive verdict.
    @inline(__always)
    mutating func endMessage() -> Bool {
        let keepAlive = self.keepAlive
        if keepAlive {
            self.state = .head
            self.expecting = self.nextExpecting ?? .normal
            self.nextExpecting = nil
            self.sawInterim = false
            self.headScan = nil
            self.body = BodyDecoder()
        } else {
            self.state = .closed
        }
        return keepAlive
    }

    @inline(__always)
    mutating func parseHead(_ input: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (Int, HTTP1ResponseEvent?) {
        let avail = input.count
        guard avail > 0, let raw = input.baseAddress else { return (0, nil) }
        let p = raw.assumingMemoryBound(to: UInt8.self)
        let rules = SectionRules.head(self.limits, .status)
        if self.headScan != nil {
            guard try rules.resume(p, avail: avail, base: 0, scan: &self.headScan) else { return (0, nil) }
        }
        var scan: SectionScan?
        guard let lf = try rules.startLineEnd(p, avail: avail, scan: &scan) else {
            self.headScan = scan
            return (0, nil)
        }
        let line = try StartLine.parseStatus(p, lineStart: 0, lf: lf)
        var summary = FieldSummary()
        let complete: Bool
        do throws(HTTP1ParseError) {
            complete = try rules.fields(
                p,
                avail: avail,
                base: 0,
                firstLine: lf &+ 1,
                linesBefore: 1,
                scan: &scan,
                into: &summary
            )
        } catch {
            // A complete head the fast path stopped in: obs-fold, unfolded (HTTP1LineFolding.swift).
            guard self.foldsLines else { throw error }
            complete = try rules.unfold(after: error, p, avail: avail, base: 0, into: &summary)
        }
        guard complete else {
            self.headScan = scan
            return (0, nil)
        }
        return try self.accept(p, line, summary)
    }

    /// Framing for a complete head (RFC 9112 §6.3, in its order).
    @inline(__always)
    mutating func accept(
        _ p: UnsafePointer<UInt8>,
        _ line: StatusLine,
        _ summary: FieldSummary
    ) throws(HTTP1ParseError) -> (Int, HTTP1ResponseEvent?) {
        let reason: String
        let reasonLength = line.reasonEnd &- line.reasonStart
        if reasonLength == 2 && p[line.reasonStart] == 0x4F && p[line.reasonStart &+ 1] == 0x4B {
            reason = "OK"
        } else if reasonLength == 0 {
            reason = ""
        } else {
            reason = HTTPResponseHead.storedReasonPhrase(
                UnsafeBufferPointer(start: p + line.reasonStart, count: reasonLength)
            )
        }
        let head = HTTPResponseHead(
            version: line.version,
            status: line.status,
            checkedReasonPhrase: reason,
            headers: summary.headers
        )
        let end = summary.end
        if summary.hasTransferEncoding {
            if line.version == .http1_0 { throw HTTP1ParseError(.transferEncodingInHTTP1_0, offset: end) }
            if summary.contentLength >= 0 { throw HTTP1ParseError(.contentLengthWithTransferEncoding, offset: end) }
        }
        self.keepAlive =
            !summary.connectionClose && (line.version.minor >= 1 || summary.connectionKeepAlive)
        let status = line.status
        if status < 200 {
            if status == 101 {
                // Switching Protocols: the bytes after this head belong to the new protocol.
                self.keepAlive = false
                self.state = .endPending
            } else {
                self.sawInterim = true
            }
            return (end, .head(head))
        }
        if self.expecting == .head || status == 204 || status == 304 {
            self.state = .endPending
        } else if self.expecting == .connect && status < 300 {
            // A tunnel: the bytes after this head are the tunnel's.
            self.keepAlive = false
            self.state = .endPending
        } else if summary.hasTransferEncoding {
            if summary.chunkedIsFinal {
                self.body = BodyDecoder(framing: .chunked)
                self.body.foldsTrailerLines = self.foldsLines
            } else {
                // RFC 9112 §6.3 rule 4: chunked not final in a response → read until close.
                self.body = BodyDecoder(framing: .untilClose)
                self.keepAlive = false
            }
            self.state = .body
        } else if summary.contentLength >= 0 {
            if summary.contentLength == 0 {
                self.state = .endPending
            } else {
                self.body = BodyDecoder(framing: .length, length: summary.contentLength)
                self.state = .body
            }
        } else {
            self.body = BodyDecoder(framing: .untilClose)
            self.keepAlive = false
            self.state = .body
        }
        return (end, .head(head))
    }
}
