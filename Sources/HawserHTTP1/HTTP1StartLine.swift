// HTTP1StartLine.swift: status line (RFC 9112 §4) and request line (RFC 9112 §3).
// Both take a complete line: [lineStart, lf) with lf the index of its LF.

@usableFromInline
struct StatusLine {
    var version: HTTPVersion
    var status: Int
    var reasonStart: Int
    var reasonEnd: Int
}

@usableFromInline
struct RequestLine {
    var methodEnd: Int  // method is [lineStart, methodEnd)
    var targetStart: Int
    var targetEnd: Int
    var version: HTTPVersion
}

@usableFromInline
enum StartLine {
    /// "HTTP/" as a little-endian UInt32 ("HTTP") plus "/".
    static let http: UInt32 = 0x5054_5448

    /// The content end of a line: its LF, or the CR just before it.
    @inline(__always)
    static func contentEnd(_ p: UnsafePointer<UInt8>, lineStart: Int, lf: Int) -> Int {
        lf > lineStart && p[lf &- 1] == asciiCR ? lf &- 1 : lf
    }

    /// A CR inside [from, end): a bare CR (the terminator's CR is outside the range).
    static func bareCR(_ p: UnsafePointer<UInt8>, _ from: Int, _ end: Int) -> Int? {
        var i = from
        while i < end {
            if p[i] == asciiCR { return i }
            i += 1
        }
        return nil
    }

    /// "HTTP/1.DIGIT" at `at` (8 bytes must be available), else nil. A minor version above 1
    /// (`HTTP/1.2`) is kept as sent; the parsers process it as HTTP/1.1, the highest minor version
    /// they implement (RFC 9110 §2.5, RFC 9112 §2.3).
    @inline(__always)
    static func version(_ p: UnsafePointer<UInt8>, at: Int) -> HTTPVersion? {
        let word = UnsafeRawPointer(p + at).loadUnaligned(as: UInt64.self)
        // "HTTP/1.1" and "HTTP/1.0", little-endian.
        if word == 0x312e_312f_5054_5448 { return .http1_1 }
        if word == 0x302e_312f_5054_5448 { return .http1_0 }
        // "HTTP/1." and a digit in the last byte.
        let minor = UInt8(truncatingIfNeeded: word >> 56) &- 0x30
        if word & 0x00ff_ffff_ffff_ffff == 0x002e_312f_5054_5448, minor < 10 {
            return HTTPVersion(major: 1, minor: Int(minor))
        }
        return nil
    }

    /// `HTTP-version SP status-code [SP reason-phrase]`. The SP before an empty reason may be
    /// missing (as h11 and llhttp accept). status-code is 3 digits, 100-999.
    @inline(__always)
    static func parseStatus(_ p: UnsafePointer<UInt8>, lineStart s: Int, lf: Int) throws(HTTP1ParseError) -> StatusLine
    {
        let end = contentEnd(p, lineStart: s, lf: lf)
        do throws(HTTP1ParseError) {
            guard end &- s >= 12 else { throw HTTP1ParseError(.invalidStatusLine, offset: s) }
            guard let version = version(p, at: s) else {
                if UnsafeRawPointer(p + s).loadUnaligned(as: UInt32.self) == http && p[s &+ 4] == 0x2F {
                    throw HTTP1ParseError(.invalidVersion, offset: s)
                }
                throw HTTP1ParseError(.invalidStatusLine, offset: s)
            }
            guard p[s &+ 8] == asciiSP else { throw HTTP1ParseError(.invalidStatusLine, offset: s &+ 8) }
            let d0 = p[s &+ 9] &- 0x31  // 1-9
            let d1 = p[s &+ 10] &- 0x30
            let d2 = p[s &+ 11] &- 0x30
            guard d0 < 9 && d1 < 10 && d2 < 10 else { throw HTTP1ParseError(.invalidStatusLine, offset: s &+ 9) }
            let status = Int(d0 &+ 1) &* 100 &+ Int(d1) &* 10 &+ Int(d2)
            var reasonStart = s &+ 12
            if reasonStart < end {
                guard p[reasonStart] == asciiSP else { throw HTTP1ParseError(.invalidStatusLine, offset: reasonStart) }
                reasonStart &+= 1
                var i = reasonStart
                while i < end && CharClass.isFieldValue(p[i]) { i &+= 1 }
                guard i == end else { throw HTTP1ParseError(.invalidStatusLine, offset: i) }
            }
            return StatusLine(version: version, status: status, reasonStart: reasonStart, reasonEnd: end)
        } catch {
            if let cr = bareCR(p, s, end) { throw HTTP1ParseError(.bareCR, offset: cr) }
            throw error
        }
    }

    /// `method SP request-target SP HTTP-version`, single spaces (RFC 9112 §3).
    static func parseRequest(
        _ p: UnsafePointer<UInt8>,
        lineStart s: Int,
        lf: Int
    ) throws(HTTP1ParseError) -> RequestLine {
        let end = contentEnd(p, lineStart: s, lf: lf)
        do throws(HTTP1ParseError) {
            var i = s
            while i < end && CharClass.isToken(p[i]) { i &+= 1 }
            guard i < end && p[i] == asciiSP else {
                throw HTTP1ParseError(i == s || i == end ? .invalidRequestLine : .invalidMethod, offset: i)
            }
            guard i > s else { throw HTTP1ParseError(.invalidRequestLine, offset: s) }
            let methodEnd = i
            i &+= 1
            let targetStart = i
            while i < end && CharClass.isTarget(p[i]) { i &+= 1 }
            guard i < end && p[i] == asciiSP else {
                throw HTTP1ParseError(i == end ? .invalidRequestLine : .invalidTarget, offset: i)
            }
            guard i > targetStart else { throw HTTP1ParseError(.invalidRequestLine, offset: i) }
            let targetEnd = i
            i &+= 1
            guard end &- i == 8 else {
                throw HTTP1ParseError(end &- i < 8 ? .invalidRequestLine : .invalidVersion, offset: i)
            }
            guard let version = version(p, at: i) else { throw HTTP1ParseError(.invalidVersion, offset: i) }
            try checkTargetForm(p, methodStart: s, methodEnd: methodEnd, targetStart: targetStart, targetEnd: targetEnd)
            return RequestLine(methodEnd: methodEnd, targetStart: targetStart, targetEnd: targetEnd, version: version)
        } catch {
            if let cr = bareCR(p, s, end) { throw HTTP1ParseError(.bareCR, offset: cr) }
            throw error
        }
    }

    /// RFC 9112 §3.2: origin-form ("/…"), absolute-form ("scheme:…"), authority-form (only
    /// with CONNECT), asterisk-form ("*", only with OPTIONS).
    static func checkTargetForm(
        _ p: UnsafePointer<UInt8>,
        methodStart: Int,
        methodEnd: Int,
        targetStart: Int,
        targetEnd: Int
    ) throws(HTTP1ParseError) {
        let method = UnsafeRawBufferPointer(start: p + methodStart, count: methodEnd &- methodStart)
        let first = p[targetStart]
        if method.elementsEqual("CONNECT".utf8) {
            guard first != 0x2F && first != 0x2A else { throw HTTP1ParseError(.invalidTarget, offset: targetStart) }
            return
        }
        if first == 0x2F { return }  // "/"
        if first == 0x2A {  // "*"
            guard targetEnd &- targetStart == 1 && method.elementsEqual("OPTIONS".utf8) else {
                throw HTTP1ParseError(.invalidTarget, offset: targetStart)
            }
            return
        }
        // absolute-form: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
        var i = targetStart
        guard (first | 0x20) &- 0x61 < 26 else { throw HTTP1ParseError(.invalidTarget, offset: targetStart) }
        i &+= 1
        while i < targetEnd {
            let b = p[i]
            if b == asciiColon && i &+ 1 < targetEnd { return }
            guard (b | 0x20) &- 0x61 < 26 || b &- 0x30 < 10 || b == 0x2B || b == 0x2D || b == 0x2E else { break }
            i &+= 1
        }
        throw HTTP1ParseError(.invalidTarget, offset: targetStart)
    }

    /// The method for `[start, end)`: the named constants for the common ones.
    static func method(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> HTTPMethod {
        let bytes = UnsafeRawBufferPointer(start: p + start, count: end &- start)
        switch bytes.count {
        case 3:
            if bytes.elementsEqual("GET".utf8) { return .get }
            if bytes.elementsEqual("PUT".utf8) { return .put }
        case 4:
            if bytes.elementsEqual("POST".utf8) { return .post }
            if bytes.elementsEqual("HEAD".utf8) { return .head }
        case 6:
            if bytes.elementsEqual("DELETE".utf8) { return .delete }
        default:
            break
        }
        return HTTPMethod(rawValue: String(decoding: bytes, as: UTF8.self))
    }
}
