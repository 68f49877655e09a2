// How a session puts a request on the wire: the body gzip-compressed when asked, whether to
// send Expect: 100-continue, and the request head encoded straight into bytes with the fields
// the session adds (Host, cookies, Accept-Encoding, credentials it already holds).
import HawserAuth
import HawserBase
import HawserCache
import HawserCoding
import HawserCookies
import HawserHTTP1
import HawserPosix
import HawserProxy
import HawserTLS
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if Logging
import Logging
#endif

extension Session {
    /// `body` gzip-compressed (byte bodies; a stream is refused with a clear error).
    static func gzipped(_ body: RequestBody) throws(HawserError) -> RequestBody {
        switch body {
        case .bytes(let b):
            return .bytes(try GzipEncoder.compress(b))
        case .stream:
            throw HawserError(
                .invalidRequest,
                "compressesBody works on byte bodies; compress a streamed body in its producer (GzipEncoder)"
            )
        }
    }

    /// A request as it goes on the wire: where (the connection key), the encoded head, the body
    /// to send (gzip-coded when the request asks for `compressesBody`), and whether the body waits
    /// for 100 Continue — decided once, here, for the head and for the exchange.
    struct Prepared {
        var key: ConnectionKey
        var head: [UInt8]
        var body: RequestBody?
        var expectsContinue: Bool
        /// Cookies the jar's caps kept out of the head's `Cookie` field (nil: none).
        var cookiesLeftOut: CookiesLeftOut?
        /// The header fields the head carries, in its order: the caller's and what the session
        /// added (`Host`, default headers, `Cookie`, `Accept-Encoding`, framing). Collected while
        /// encoding, and only for a session with a cache or a responder (`Vary` and stubs match on
        /// what the server sees); nil otherwise, so a plain request builds no `HTTPHeaders`.
        var wireHeaders: HTTPHeaders? = nil

        var plan: RequestStateMachine.BodyPlan {
            switch self.body {
            case nil: return .none
            case .bytes?: return .bytes
            case .stream?: return .stream
            }
        }
    }

    /// Whether `request` waits for 100 Continue before its body (RFC 9110 §10.1.1).
    static func expectsContinue(_ request: HTTPClientRequest, configuration: SessionConfiguration) -> Bool {
        guard let body = request.body else { return false }
        if let explicit = request.expectsContinue { return explicit }
        if request.headers["Expect"]?.lowercased() == "100-continue" { return true }
        guard let threshold = configuration.expectContinueThreshold else { return false }
        guard let length = body.knownLength else { return true }
        return length >= threshold
    }

    /// What `request` becomes on the wire.
    /// `addedFields`: an observer's fields (`traceparent`), added unless the request sets them.
    /// `collectsWireHeaders`: whether the session has a cache or a responder (nil: read from
    /// `configuration`; the session passes the flag it read once, so that a request reads no
    /// existential).
    static func prepare(
        _ request: HTTPClientRequest,
        configuration: SessionConfiguration,
        collectsWireHeaders: Bool? = nil,
        addedFields: [(name: String, value: String)]? = nil
    ) throws(HawserError) -> Prepared {
        var info = try request.wireInfo()
        var body = request.body
        var extra: [(name: String, value: String)] = []
        if let addedFields {
            for field in addedFields where !request.headers.contains(name: field.name) { extra.append(field) }
        }
        if request.compressesBody, let b = body, !request.headers.contains(name: "Content-Encoding") {
            body = try Self.gzipped(b)
            extra.append(("Content-Encoding", "gzip"))
        }
        let target: ProxyTarget?
        do {
            target = try configuration.proxy.proxy(for: request.url)
        } catch {
            let origin = error.variable == nil ? "the proxy setting" : "the proxy from the environment"
            throw HawserError(
                .proxyError,
                "cannot use \(origin): \(error.message)",
                url: request.url,
                underlying: error
            )
        }
        if let proxy = target {
            info.key.proxy = proxy
            if proxy.mode == .forward {
                // RFC 9112 §3.2.2: absolute-form to a forward proxy, without user info or fragment.
                let portPart = request.url.port.map { ":\($0)" } ?? ""
                let host = info.key.host.utf8.contains(UInt8(ascii: ":")) ? "[\(info.key.host)]" : info.key.host
                info.target = "http://\(host)\(portPart)\(info.target)"
                if let credentials = proxy.server.credentials, !request.headers.contains(name: "Proxy-Authorization") {
                    extra.append(("Proxy-Authorization", credentials.basicAuthorization))
                }
            }
        }
        let expects = body != nil && Self.expectsContinue(request, configuration: configuration)
        var cookiesLeftOut: CookiesLeftOut? = nil
        let collects = collectsWireHeaders ?? (configuration.urlCache != nil || configuration.responder != nil)
        var wireHeaders: HTTPHeaders? = collects ? HTTPHeaders() : nil
        let head = try Self.encodeHead(
            request,
            body: body,
            expectsContinue: expects,
            extra: extra,
            target: info.target,
            hostHeader: info.hostHeader,
            configuration: configuration,
            cookiesLeftOut: &cookiesLeftOut,
            wireHeaders: &wireHeaders
        )
        return Prepared(
            key: info.key,
            head: head,
            body: body,
            expectsContinue: expects,
            cookiesLeftOut: cookiesLeftOut,
            wireHeaders: wireHeaders
        )
    }

    /// Writes the head straight into bytes: the request line, `Host` first (RFC 9112 §3.2), the
    /// caller's fields, then what the session adds when the caller did not set it. No
    /// `HTTPHeaders` is built on the way (unless `wireHeaders` is non-nil: then every field
    /// written is also added to it); every field is checked as ``HTTP1Encoder`` checks them.
    private static func encodeHead(
        _ request: HTTPClientRequest,
        body: RequestBody?,
        expectsContinue: Bool,
        extra: [(name: String, value: String)],
        target: String,
        hostHeader: String,
        configuration: SessionConfiguration,
        cookiesLeftOut: inout CookiesLeftOut?,
        wireHeaders: inout HTTPHeaders?
    ) throws(HawserError) -> [UInt8] {
        let headers = request.headers
        var out: [UInt8] = []
        out.reserveCapacity(256)
        let collects = wireHeaders != nil
        do throws(HTTP1EncodeError) {
            /// One field into the head (and into `wireHeaders` when it collects).
            func write(_ name: String, _ value: String) throws(HTTP1EncodeError) {
                try HTTP1Encoder.writeField(name: name, value: value, into: &out)
                if collects { wireHeaders?.add(name: name, value: value) }
            }
            try HTTP1Encoder.writeRequestLine(method: request.method, target: target, into: &out)
            if !headers.contains(name: "Host") {
                try write("Host", hostHeader)
            }
            // The body's framing is the session's to write; the caller's framing fields are dropped.
            let framesBody = body != nil
            try HTTP1Encoder.writeFields(headers, omittingFraming: framesBody, into: &out)
            if collects {
                for field in headers {
                    let name = field.name.lowercased()
                    if framesBody, name == "content-length" || name == "transfer-encoding" { continue }
                    wireHeaders?.add(name: field.name, value: field.value)
                }
            }
            for field in extra {
                try write(field.name, field.value)
            }
            for field in configuration.httpAdditionalHeaders where !headers.contains(name: field.name) {
                try write(field.name, field.value)
            }
            if request.shouldHandleCookies ?? configuration.httpShouldSetCookies,
                let jar = configuration.httpCookieStorage,
                !headers.contains(name: "Cookie"), let cookies = jar.cookieHeader(for: request.url)
            {
                // Byte for byte as the jar holds them: cookie octets need not be UTF-8.
                if cookies.cookieCount > 0 {
                    try HTTP1Encoder.writeField(name: "Cookie", valueBytes: cookies.value, into: &out)
                    if collects {
                        wireHeaders?.add(name: "Cookie", value: String(decoding: cookies.value, as: UTF8.self))
                    }
                }
                if cookies.omittedCount > 0 {
                    cookiesLeftOut = CookiesLeftOut(
                        sent: cookies.cookieCount,
                        omitted: cookies.omittedCount,
                        maxBytes: cookies.maxBytes,
                        maxCount: cookies.maxCount
                    )
                }
            }
            if configuration.automaticallyDecodesContent, !headers.contains(name: "Accept-Encoding") {
                // A byte range of a coded representation cannot be decoded on its own (and its
                // offsets count coded bytes): a Range request asks for the identity coding.
                let accept = headers.contains(name: "Range") ? "identity" : ContentDecoder.acceptEncoding
                try write("Accept-Encoding", accept)
            }
            if let body {
                if expectsContinue, !headers.contains(name: "Expect") {
                    try write("Expect", "100-continue")
                }
                if let length = body.knownLength {
                    try write("Content-Length", String(length))
                } else {
                    try write("Transfer-Encoding", "chunked")
                }
            } else if request.method == .post || request.method == .put || request.method == .patch {
                // RFC 9110 §8.6: a user agent SHOULD send Content-Length 0 when a method defines a body.
                if !headers.contains(name: "Content-Length") {
                    try write("Content-Length", "0")
                }
            }
            HTTP1Encoder.writeEndOfHead(into: &out)
        } catch {
            throw HawserError(
                .invalidRequest,
                "cannot encode the request: \(error)",
                url: request.url,
                underlying: error
            )
        }
        return out
    }
}
