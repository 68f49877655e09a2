// HTTP1RequestParser.swift: the server side: bytes in, request events out (sans-IO).

/// What the request parser hands up.
public enum HTTP1RequestEvent: Sendable {
    /// The request line and header fields, once the blank line after them has arrived.
    case head(HTTPRequestHead)
    /// Body bytes: a range of the `input` given to THIS call of `next(_:)`. Zero-copy.
    case body(Range<Int>)
    /// The trailer section of a chunked body, when it has fields.
    case trailers(HTTPHeaders)
    /// The request is complete; `keepAlive == false`: close after responding.
    case end(keepAlive: Bool)
}

/// An incremental, zero-copy HTTP/1.1 request parser (RFC 9112), same shape as
/// `HTTP1ResponseParser`. Requests are never close-delimited: with neither Content-Length
/// nor Transfer-Encoding there is no body.
public struct HTTP1RequestParser: Sendable {
    @usableFromInline
    enum State: Sendable {
        case head
        case body
        case endPending
        case closed
        case failed
    }

    @usableFromInline var limits: HTTP1Limits
    @usableFromInline var state: State = .head
    @usableFromInline var headScan: SectionScan?
    @usableFromInline var keepAlive = true
    @usableFromInline var body = BodyDecoder()
    @usableFromInline var streamOffset = 0
    @usableFromInline var failure: HTTP1ParseError?

    /// Creates a parser that reads requests one after another from one connection.
    ///
    /// - Parameter limits: the bounds a request may not exceed; ``HTTP1Limits/default`` by default.
    public init(limits: HTTP1Limits = .default) {
        self.limits = limits
    }

    /// No message in progress.
    public var isIdle: Bool {
        switch self.state {
        case .head: return self.headScan == nil
        case .closed: return true
        case .body, .endPending, .failed: return false
        }
    }

    /// Parses from the start of `input`; see `HTTP1ResponseParser.next(_:)`.
    public mutating func next(
        _ input: UnsafeRawBufferPointer
    ) throws(HTTP1ParseError) -> (consumed: Int, event: HTTP1RequestEvent?) {
        if let failure = self.failure { throw failure }
        do throws(HTTP1ParseError) {
            let result: (consumed: Int, event: HTTP1RequestEvent?) = try self.step(input)
            self.streamOffset &+= result.consumed
            return result
        } catch {
            let rebased = HTTP1ParseError(error.kind, offset: error.offset &+ self.streamOffset)
            self.failure = rebased
            self.state = .failed
            throw rebased
        }
    }

    /// The peer closed the connection: nil between requests; throws inside one.
    public mutating func finish() throws(HTTP1ParseError) -> HTTP1RequestEvent? {
        if let failure = self.failure { throw failure }
        switch self.state {
        case .head:
            if let scan = self.headScan {
                let error = HTTP1ParseError(.truncatedHead, offset: self.streamOffset &+ scan.searchFrom)
                self.failure = error
                self.state = .failed
                throw error
            }
            self.state = .closed
            return nil
        case .body:
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

    mutating func step(_ input: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (Int, HTTP1RequestEvent?) {
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

    mutating func endMessage() -> Bool {
        let keepAlive = self.keepAlive
        if keepAlive {
            self.state = .head
            self.headScan = nil
            self.body = BodyDecoder()
        } else {
            self.state = .closed
        }
        return keepAlive
    }

    mutating func parseHead(_ input: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (Int, HTTP1RequestEvent?) {
        let avail = input.count
        guard avail > 0, let raw = input.baseAddress else { return (0, nil) }
        let p = raw.assumingMemoryBound(to: UInt8.self)
        let rules = SectionRules.head(self.limits, .request)
        if self.headScan != nil {
            guard try rules.resume(p, avail: avail, base: 0, scan: &self.headScan) else { return (0, nil) }
        }
        var scan: SectionScan?
        guard let lf = try rules.startLineEnd(p, avail: avail, scan: &scan) else {
            self.headScan = scan
            return (0, nil)
        }
        let line = try StartLine.parseRequest(p, lineStart: 0, lf: lf)
        var summary = FieldSummary()
        guard
            try rules.fields(p, avail: avail, base: 0, firstLine: lf &+ 1, linesBefore: 1, scan: &scan, into: &summary)
        else {
            self.headScan = scan
            return (0, nil)
        }
        return try self.accept(p, line, summary)
    }

    /// Framing for a complete request head (RFC 9112 §6.3 rules 3-6).
    mutating func accept(
        _ p: UnsafePointer<UInt8>,
        _ line: RequestLine,
        _ summary: FieldSummary
    ) throws(HTTP1ParseError) -> (Int, HTTP1RequestEvent?) {
        let end = summary.end
        let head = HTTPRequestHead(
            method: StartLine.method(p, 0, line.methodEnd),
            target: String(
                decoding: UnsafeBufferPointer(start: p + line.targetStart, count: line.targetEnd &- line.targetStart),
                as: UTF8.self
            ),
            version: line.version,
            headers: summary.headers
        )
        self.keepAlive =
            !summary.connectionClose && (line.version.minor >= 1 || summary.connectionKeepAlive)
        if summary.hasTransferEncoding {
            if line.version == .http1_0 { throw HTTP1ParseError(.transferEncodingInHTTP1_0, offset: end) }
            if summary.contentLength >= 0 { throw HTTP1ParseError(.contentLengthWithTransferEncoding, offset: end) }
            guard summary.chunkedIsFinal else { throw HTTP1ParseError(.unsupportedTransferEncoding, offset: end) }
            self.body = BodyDecoder(framing: .chunked)
            self.state = .body
        } else if summary.contentLength > 0 {
            self.body = BodyDecoder(framing: .length, length: summary.contentLength)
            self.state = .body
        } else {
            self.state = .endPending
        }
        return (end, .head(head))
    }
}
