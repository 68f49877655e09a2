// The test server's routes: what each path answers (echo, status, delay, redirects, auth,
// cookies, caching, ranges, streams, the JSON API, faults). Loop-confined, as the connection.
import HawserCore
import HawserPosix

#if canImport(Glibc)
import Glibc
#endif

extension ServerConnection {
    func route(_ h: HTTPRequestHead, body: [UInt8]) {
        let (path, query) = Self.split(h.target)
        self.listener.requestCounts[h.target, default: 0] += 1
        let parts = path.split(separator: "/").map(String.init)
        let isHead = h.method == .head
        switch (parts.first ?? "", parts.count) {
        case ("hello", 1):
            self.send(
                status: 200,
                body: Array("Hello, World!".utf8),
                extra: [("Content-Type", "text/plain")],
                head: isHead
            )
        case ("json", 1):
            self.send(
                status: 200,
                body: Array(#"{"name":"hawser","ok":true,"values":[1,2,3],"nested":{"a":null}}"#.utf8),
                extra: [("Content-Type", "application/json")],
                head: isHead
            )
        case ("bytes", 2):
            let n = Int(parts[1]) ?? 0
            let bytes = Self.pattern(n)
            if let k = query["chunk"].flatMap(Int.init), k > 0 {
                self.sendChunked(
                    status: 200,
                    body: bytes,
                    chunkSize: k,
                    head: isHead,
                    recordPerChunk: query["records"] == "1"
                )
            } else {
                var extra = [("Content-Type", "application/octet-stream")]
                if let maxAge = query["max-age"] { extra.append(("Cache-Control", "max-age=\(maxAge)")) }
                self.send(status: 200, body: bytes, extra: extra, head: isHead)
            }
        case ("echo", 1):
            var extra: [(String, String)] = [
                ("X-Echo-Method", h.method.rawValue), ("X-Echo-Target", h.target),
                ("X-Echo-Body-Length", String(body.count)),
            ]
            for f in h.headers { extra.append(("X-Echo-H-\(f.name)", f.value)) }
            self.send(status: 200, body: body, extra: extra, head: isHead)
        case ("status", 2):
            let code = Int(parts[1]) ?? 500
            self.send(status: code, body: [], head: isHead || code == 204 || code == 304 || code < 200)
        case ("delay", 2):
            let ms = UInt64(parts[1]) ?? 0
            self.busy = true
            let me = LoopBound(self, loop: self.loop)
            self.timers.append(
                self.loop.schedule(in: ms * 1_000_000) {
                    me.value.busy = false
                    me.value.send(status: 200, body: Array("delayed \(ms) ms".utf8), head: isHead)
                    me.value.process()
                }
            )
        case ("redirect", 2):
            let n = Int(parts[1]) ?? 0
            let location = n <= 1 ? "/hello" : "/redirect/\(n - 1)"
            self.send(status: 302, body: [], extra: [("Location", location)], head: isHead)
        case ("redirect-to", 1):
            // 302 (or ?status=N) to ?url=… (percent-encoded), for redirect rules and cross-origin tests.
            let status = query["status"].flatMap(Int.init) ?? 302
            let location = Self.percentDecoded(query["url"] ?? "/hello")
            var extra = [("Location", location)]
            if let cookie = query["cookie"] { extra.append(("Set-Cookie", Self.percentDecoded(cookie) + "; Path=/")) }
            if query["close"] == "1" {
                extra.append(("Connection", "close"))
                self.closeAfterWrite = true
            }
            self.send(status: status, body: Array("redirecting".utf8), extra: extra, head: isHead)
        case ("basic-auth", 3):
            // 200 with Authorization: Basic base64(USER:PASS), else 401 with a Basic challenge.
            let expected = try? BasicAuthentication.authorizationValue(user: parts[1], password: parts[2])
            if expected != nil, h.headers["Authorization"] == expected {
                self.send(status: 200, body: Array("authenticated \(parts[1])".utf8), head: isHead)
            } else {
                self.send(
                    status: 401,
                    body: Array("who are you?".utf8),
                    extra: [("WWW-Authenticate", "Basic realm=\"hawser\"")],
                    head: isHead
                )
            }
        case ("cacheable", 1):
            // Cache-Control: max-age=N (default 60), ETag "v1"; If-None-Match "v1" → 304.
            // The body names how many times the server produced it, or is the N-byte pattern
            // with size=N.
            let maxAge = query["max-age"] ?? "60"
            var extra = [("Cache-Control", "max-age=\(maxAge)"), ("ETag", "\"v1\""), ("Content-Type", "text/plain")]
            if let v = query["vary"] { extra.append(("Vary", v)) }
            if h.headers["If-None-Match"] == "\"v1\"" {
                self.listener.notModified += 1
                self.send(status: 304, body: [], extra: extra, head: true)
            } else {
                self.listener.produced += 1
                self.send(
                    status: 200,
                    body: query["size"].flatMap(Int.init).map(Self.pattern)
                        ?? Array("response #\(self.listener.produced)".utf8),
                    extra: extra,
                    head: isHead
                )
            }
        case ("redirect-loop", 1):
            self.send(status: 302, body: [], extra: [("Location", "/redirect-loop")], head: isHead)
        case ("gzip", 1):
            let json = Array(#"{"gzipped":true,"text":"Hello, World! Hello, World! Hello, World!"}"#.utf8)
            self.send(
                status: 200,
                body: ((try? GzipEncoder.compress(json)) ?? []),
                extra: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
                head: isHead
            )
        case ("close-delimited", 2):
            let n = Int(parts[1]) ?? 0
            self.outbox.append(contentsOf: Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8))
            self.outbox.append(contentsOf: Self.pattern(n))
            self.closeAfterWrite = true
            self.flush()
        case ("interim", 1):
            self.outbox.append(
                contentsOf: Array(
                    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                        .utf8
                )
            )
            self.send(status: 200, body: Array("final".utf8), head: isHead)
        case ("close", 1):
            self.send(status: 200, body: Array("bye".utf8), extra: [("Connection", "close")], head: isHead)
            self.closeAfterWrite = true
            self.flush()
        case ("cookies", 1):
            self.send(
                status: 200,
                body: Array((h.headers["Cookie"] ?? "").utf8),
                extra: [("Content-Type", "text/plain")],
                head: isHead
            )
        case ("cookies", 2) where parts[1] == "set":
            var extra: [(String, String)] = [("Content-Type", "text/plain")]
            for (name, value) in query.sorted(by: { $0.key < $1.key }) {
                extra.append(("Set-Cookie", "\(name)=\(value); Path=/"))
            }
            self.send(status: 200, body: Array("set \(query.count)".utf8), extra: extra, head: isHead)
        case ("fault", 2):
            self.fault(parts[1], query: query)
        case ("bearer", 2):
            let ok = h.headers["Authorization"] == "Bearer \(parts[1])"
            self.send(
                status: ok ? 200 : 401,
                body: Array((ok ? "welcome" : "unauthorized").utf8),
                extra: [("X-Seen-Authorization", h.headers["Authorization"] ?? "")],
                head: isHead
            )
        case ("sink", 1):
            let sink = self.sink ?? (0, true)
            self.send(
                status: 200,
                body: Array("received \(sink.count)".utf8),
                extra: [("X-Sink-Length", String(sink.count)), ("X-Sink-Pattern", sink.patternOK ? "ok" : "mismatch")],
                head: isHead
            )
        case ("stream", 2):
            self.startStream(size: max(0, Int(parts[1]) ?? 0), chunked: query["chunked"] == "1", head: isHead)
        case ("api", _):
            self.routeAPI(h, parts: Array(parts.dropFirst()), query: query, body: body)
        case ("range", 2):
            self.sendRange(h, size: max(0, Int(parts[1]) ?? 0), ignoreRange: query["ignore-range"] == "1", head: isHead)
        case ("obs-text", 1):
            // RFC 9110 §5.5 allows obs-text (0x80–0xFF) in field values and the reason phrase:
            // Latin-1 bytes that are not UTF-8, which a client must pass on as they are.
            self.outbox.append(
                contentsOf: Array("HTTP/1.1 200 OK\r\nX-Obs-Text: caf".utf8) + [0xE9, 0x20, 0xFF, 0xA0]
                    + Array("end\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n".utf8)
            )
            if !isHead { self.outbox.append(contentsOf: Array("ok".utf8)) }
            self.flush()
        case ("flaky", 1):
            // The first `fail` requests for this exact target answer `status` (default 503),
            // with `Retry-After: 0`; later ones 200. The count is `requestCount(target:)`.
            let fail = query["fail"].flatMap(Int.init) ?? 1
            let seen = self.listener.requestCounts[h.target] ?? 0
            if seen <= fail {
                let status = query["status"].flatMap(Int.init) ?? 503
                self.send(
                    status: status,
                    body: Array("failure \(seen)".utf8),
                    extra: [("Retry-After", "0")],
                    head: isHead
                )
            } else {
                self.send(
                    status: 200,
                    body: Array("ok after \(seen - 1)".utf8),
                    extra: [("Content-Type", "text/plain")],
                    head: isHead
                )
            }
        default:
            self.send(status: 404, body: Array("no route for \(path)\n".utf8), head: isHead)
        }
    }

    /// Starts a `/stream`-style body: `size` pattern bytes, produced 256 KiB at a time as the
    /// client reads (``fillStreamPiece()``).
    private func startStream(size n: Int, chunked: Bool, head isHead: Bool) {
        self.streamChunked = chunked
        var out: [UInt8] = []
        let framing: (String, String) = chunked ? ("Transfer-Encoding", "chunked") : ("Content-Length", String(n))
        let headers: HTTPHeaders = [framing.0: framing.1, "Content-Type": "application/octet-stream"]
        try? HTTP1Encoder.writeResponseHead(
            HTTPResponseHead(status: 200, reasonPhrase: "OK", headers: headers),
            into: &out
        )
        self.outbox.append(contentsOf: out)
        if isHead {
            self.flush()
            return
        }
        self.streamRemaining = n
        self.streamOffset = 0
        self.streamActive = true
        self.busy = true
        self.flush()
    }

    /// The example API of `Tests/HawserOpenAPIExample/openapi.yaml`, under `/api`.
    private func routeAPI(_ h: HTTPRequestHead, parts: [String], query: [String: String], body: [UInt8]) {
        let json: (String, String) = ("Content-Type", "application/json")
        switch (h.method, parts.first ?? "", parts.count) {
        case (.get, "greeting", 1):
            let name = query["name"].map(Self.percentDecoded) ?? "World"
            var extra = [json]
            if let id = h.headers["X-Request-Id"] { extra.append(("X-Request-Id", id)) }
            let body = Array("{\"message\":\"Hello, \(Self.jsonEscaped(name))!\"}".utf8)
            guard let ms = query["delayMs"].flatMap({ UInt64($0) }), ms > 0 else {
                self.send(status: 200, body: body, extra: extra)
                return
            }
            self.busy = true
            let me = LoopBound(self, loop: self.loop)
            let fields = extra
            self.timers.append(
                self.loop.schedule(in: ms * 1_000_000) {
                    me.value.busy = false
                    me.value.send(status: 200, body: body, extra: fields)
                    me.value.process()
                }
            )
        case (.post, "items", 1):
            // The item is echoed verbatim inside the answer: the server parses no JSON, so a body
            // that is not JSON comes back as invalid JSON, which the client then rejects.
            guard h.headers["Content-Type"]?.lowercased().hasPrefix("application/json") == true else {
                self.send(
                    status: 415,
                    body: Array(#"{"message":"the body must be application/json"}"#.utf8),
                    extra: [json]
                )
                return
            }
            self.listener.createdItems += 1
            let created = Array("{\"id\":\(self.listener.createdItems),\"item\":".utf8) + body + [UInt8(ascii: "}")]
            self.send(status: 201, body: created, extra: [json])
        case (.put, "blobs", 1):
            let sink = self.sink ?? (0, true)
            self.send(
                status: 200,
                body: Array("{\"length\":\(sink.count),\"pattern\":\(sink.patternOK)}".utf8),
                extra: [json]
            )
        case (.get, "blobs", 2):
            self.startStream(size: max(0, Int(parts[1]) ?? 0), chunked: query["chunked"] == "true", head: false)
        default:
            self.send(status: 404, body: Array(#"{"message":"no such operation"}"#.utf8), extra: [json])
        }
    }

    /// `s` as the inside of a JSON string.
    static func jsonEscaped(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                out +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private func fault(_ kind: String, query: [String: String]) {
        switch kind {
        case "close-mid-head":
            self.outbox.append(contentsOf: Array("HTTP/1.1 200 OK\r\nContent-Le".utf8))
            self.closeAfterWrite = true
            self.flush()
        case "close-mid-body":
            self.outbox.append(contentsOf: Array("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".utf8))
            self.outbox.append(contentsOf: Self.pattern(100))
            self.closeAfterWrite = true
            self.flush()
        case "reset":
            Posix.setLingerZero(self.fd)
            self.close()
        case "trickle":
            self.busy = true
            if let n = query["bytes"].flatMap(Int.init), n > 0 {
                // A body of n pattern bytes, one every `every` ms (after the head, sent at once).
                let every = query["every"].flatMap(UInt64.init) ?? 1
                self.outbox.append(contentsOf: Array("HTTP/1.1 200 OK\r\nContent-Length: \(n)\r\n\r\n".utf8))
                self.flush()
                self.trickle(Self.pattern(n), from: 0, every: every * 1_000_000)
            } else {
                let message = Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789".utf8)
                self.trickle(message, from: 0)
            }
        case "no-answer":
            self.busy = true  // read on, answer never
        case "empty":
            // Closes without a byte of response (curl's "empty reply from server").
            self.close()
        case "bad-chunk":
            self.outbox.append(
                contentsOf: Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n".utf8)
            )
            self.closeAfterWrite = true
            self.flush()
        case "garbage":
            self.outbox.append(contentsOf: Array("SMTP ready\r\n\r\n".utf8))
            self.closeAfterWrite = true
            self.flush()
        case "truncate":
            // A close-delimited body cut off by a close without TLS close_notify (over plain
            // http this is just a close-delimited body).
            self.outbox.append(contentsOf: Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8))
            self.outbox.append(contentsOf: Self.pattern(100))
            self.truncateTLS = true
            self.closeAfterWrite = true
            self.flush()
        default:
            self.send(status: 404, body: Array("no such fault \(kind)\n".utf8))
        }
    }

    private func trickle(_ message: [UInt8], from i: Int, every nanos: UInt64 = 1_000_000) {
        guard !self.closed else { return }
        if i == message.count {
            self.busy = false
            self.process()
            return
        }
        self.outbox.append(message[i])
        self.flush()
        let me = LoopBound(self, loop: self.loop)
        self.timers.append(self.loop.schedule(in: nanos) { me.value.trickle(message, from: i + 1, every: nanos) })
    }
}
