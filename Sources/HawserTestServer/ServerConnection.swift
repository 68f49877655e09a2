import HawserCore
import HawserPosix

#if canImport(Glibc)
import Glibc
#endif

/// One accepted connection: parses requests, routes them, writes responses. Loop-confined.
final class ServerConnection: EventLoopIOHandler {
    let fd: Int32
    unowned let listener: Listener
    private var loop: EventLoop { self.listener.loop }
    private var parser = HTTP1RequestParser()
    private var inbox: [UInt8] = []
    private var outbox: [UInt8] = []
    private var outOffset = 0
    private var closeAfterWrite = false
    private var writeInterest = false
    private var readInterest = true
    private var closed = false
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    /// A response is being produced over time (delay, trickle): stop parsing until it is done.
    private var busy = false
    private var timers: [Scheduled] = []
    /// Close without TLS close_notify (the truncation fault).
    private var truncateTLS = false
    /// `/sink`: the body is checked and counted, not kept.
    private var sink: (count: Int, patternOK: Bool)?
    /// `/stream/N`: bytes of the pattern still to generate, the next offset, chunked framing.
    private var streamRemaining = 0
    private var streamOffset = 0
    private var streamChunked = false
    private var streamActive = false

    /// For https: the TLS session, and whether its handshake is still running.
    private let tls: TLSStream?
    private var handshaking: Bool

    init(fd: Int32, listener: Listener, tls: TLSStream?) {
        self.fd = fd
        self.listener = listener
        self.tls = tls
        self.handshaking = tls != nil
    }

    /// Runs the server side of the TLS handshake; true once application data can flow.
    private func continueHandshake() -> Bool {
        guard self.handshaking, let tls = self.tls else { return true }
        switch tls.handshake() {
        case .done:
            self.handshaking = false
            self.loop.setInterest(fd: self.fd, readable: self.readInterest, writable: self.writeInterest)
            return true
        case .wantRead:
            self.loop.setInterest(fd: self.fd, readable: true, writable: false)
        case .wantWrite:
            self.loop.setInterest(fd: self.fd, readable: false, writable: true)
        case .failed:
            self.listener.handshakeFailures += 1
            self.close()
        }
        return false
    }

    /// One read from the socket or the TLS session: bytes, 0 at EOF, -1 for "try later", -2 for an error.
    private func readSome(_ chunk: inout [UInt8]) -> Int {
        guard let tls = self.tls else {
            let r = chunk.withUnsafeMutableBytes { raw in Result { () throws(IOError) in try Posix.read(self.fd, raw) }
            }
            switch r {
            case .success(.processed(let n)): return n
            case .success(.wouldBlock): return -1
            case .failure: return -2
            }
        }
        switch chunk.withUnsafeMutableBytes({ tls.read(into: $0) }) {
        case .bytes(let n): return n
        case .wantRead, .wantWrite: return -1
        case .closed: return 0
        case .failed: return -2
        }
    }

    func ioReadable() {
        guard !self.closed else { return }
        guard self.continueHandshake() else { return }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = self.readSome(&chunk)
        if n == -1 { return }
        if n == 0 || n == -2 {
            // The client is gone (HTTP clients do not half-close): drop any response in progress.
            self.close()
            return
        }
        self.inbox.append(contentsOf: chunk[0..<n])
        self.process()
        // OpenSSL may hold decrypted bytes epoll cannot see.
        if let tls = self.tls, tls.hasBufferedPlaintext, !self.closed { self.ioReadable() }
    }

    private func process() {
        while !self.closed && !self.busy {
            let result: (consumed: Int, event: HTTP1RequestEvent?)
            do {
                result = try self.inbox.withUnsafeBytes { try self.parser.next($0) }
            } catch {
                self.send(status: 400, body: Array("bad request: \(error)\n".utf8), extra: [("Connection", "close")])
                self.closeAfterWrite = true
                self.flush()
                return
            }
            var bodySlice: [UInt8] = []
            if case .body(let r) = result.event { bodySlice = Array(self.inbox[r]) }
            self.inbox.removeFirst(result.consumed)
            guard let event = result.event else { return }
            switch event {
            case .head(let h):
                self.head = h
                self.body = []
                let path = Self.split(h.target).0
                self.sink = path == "/sink" || (path == "/api/blobs" && h.method == .put) ? (0, true) : nil
                if h.headers.contains(name: "Expect", token: "100-continue") {
                    self.outbox.append(contentsOf: Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
                    self.flush()
                }
            case .body:
                if var sink = self.sink {
                    var i = 0
                    while sink.patternOK && i < bodySlice.count {
                        let n = min(256 * 1024, bodySlice.count - i)
                        let phase = (sink.count + i) % 251
                        let same = bodySlice.withUnsafeBytes { b in
                            Self.streamTemplate.withUnsafeBytes { t in
                                memcmp(b.baseAddress! + i, t.baseAddress! + phase, n) == 0
                            }
                        }
                        if !same { sink.patternOK = false }
                        i += n
                    }
                    sink.count += bodySlice.count
                    self.sink = sink
                } else {
                    self.body.append(contentsOf: bodySlice)
                }
            case .trailers:
                break
            case .end(let keepAlive):
                guard let h = self.head else { return }
                if !keepAlive { self.closeAfterWrite = true }
                self.route(h, body: self.body)
                self.head = nil
            }
        }
    }

    // MARK: - Routing

    private func route(_ h: HTTPRequestHead, body: [UInt8]) {
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
            let me = UnsafeTransfer(self)
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
            let me = UnsafeTransfer(self)
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
        let me = UnsafeTransfer(self)
        self.timers.append(self.loop.schedule(in: nanos) { me.value.trickle(message, from: i + 1, every: nanos) })
    }

    // MARK: - Writing

    func send(status: Int, body: [UInt8], extra: [(String, String)] = [], head isHead: Bool = false) {
        var headers = HTTPHeaders()
        for (n, v) in extra { headers.add(name: n, value: v) }
        let bodyless = status == 204 || status == 304 || status < 200
        if !bodyless { headers.add(name: "Content-Length", value: String(body.count)) }
        var out: [UInt8] = []
        do {
            try HTTP1Encoder.writeResponseHead(
                HTTPResponseHead(status: status, reasonPhrase: Self.reason(status), headers: headers),
                into: &out
            )
        } catch {
            out = Array("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".utf8)
        }
        self.outbox.append(contentsOf: out)
        if !isHead && !bodyless { self.outbox.append(contentsOf: body) }
        self.flush()
    }

    /// `recordPerChunk` (over TLS): the head, every chunk and the terminator each go in a TLS
    /// record of their own, corked into one TCP send, so a client reading ahead receives many
    /// records in one read(2), and the last ones sit in its TLS library, unseen by epoll.
    private func sendChunked(
        status: Int,
        body: [UInt8],
        chunkSize: Int,
        head isHead: Bool,
        recordPerChunk: Bool = false
    ) {
        var pieces: [[UInt8]] = []
        var out: [UInt8] = []
        let headers: HTTPHeaders = ["Transfer-Encoding": "chunked", "Content-Type": "application/octet-stream"]
        try? HTTP1Encoder.writeResponseHead(
            HTTPResponseHead(status: status, reasonPhrase: Self.reason(status), headers: headers),
            into: &out
        )
        if !isHead {
            var i = 0
            while i < body.count {
                if recordPerChunk {
                    pieces.append(out)
                    out = []
                }
                let n = min(chunkSize, body.count - i)
                HTTP1Encoder.writeChunkHeader(size: n, into: &out)
                out.append(contentsOf: body[i..<(i + n)])
                HTTP1Encoder.writeChunkEnd(into: &out)
                i += n
            }
            if recordPerChunk {
                pieces.append(out)
                out = []
            }
            HTTP1Encoder.writeLastChunk(trailers: nil, into: &out)
        }
        pieces.append(out)
        if recordPerChunk, let tls = self.tls, self.outOffset == self.outbox.count, !self.handshaking {
            var on: Int32 = 1
            setsockopt(self.fd, Int32(IPPROTO_TCP), TCP_CORK, &on, 4)
            var rest: [UInt8] = []
            for piece in pieces {
                if !rest.isEmpty {
                    rest.append(contentsOf: piece)
                    continue
                }
                // One SSL_write, one record; what the socket does not take goes the usual way.
                switch piece.withUnsafeBytes({ tls.write($0) }) {
                case .bytes(let k): rest.append(contentsOf: piece[k...])
                default: rest.append(contentsOf: piece)
                }
            }
            var off: Int32 = 0
            setsockopt(self.fd, Int32(IPPROTO_TCP), TCP_CORK, &off, 4)
            self.outbox.append(contentsOf: rest)
        } else {
            for piece in pieces { self.outbox.append(contentsOf: piece) }
        }
        self.flush()
    }

    /// One send (or TLS write) of the outbox from `outOffset`: bytes written, -1 to wait for
    /// the socket, -2 on an error.
    private func sendSome() -> Int {
        if let tls = self.tls {
            switch self.outbox.withUnsafeBytes({ tls.write(UnsafeRawBufferPointer(rebasing: $0[self.outOffset...])) }) {
            case .bytes(let k): return k
            case .wantRead, .wantWrite: return -1
            case .closed, .failed: return -2
            }
        }
        let r = self.outbox.withUnsafeBytes { raw in
            Result { () throws(IOError) in
                try Posix.send(self.fd, UnsafeRawBufferPointer(rebasing: raw[self.outOffset...]))
            }
        }
        switch r {
        case .success(.processed(let n)): return n
        case .success(.wouldBlock): return -1
        case .failure: return -2
        }
    }

    private func flush() {
        guard !self.closed else { return }
        if self.handshaking { return }
        var streamEnded = false
        while true {
            while self.outOffset < self.outbox.count {
                let n = self.sendSome()
                if n == -1 {
                    self.setWrite(true)
                    return
                }
                if n < 0 {
                    self.close()
                    return
                }
                self.outOffset += n
            }
            self.outbox.removeAll(keepingCapacity: true)
            self.outOffset = 0
            if self.streamActive {
                if self.streamRemaining == 0 { streamEnded = true }
                self.fillStreamPiece()
                continue
            }
            break
        }
        self.setWrite(false)
        if self.closeAfterWrite && !self.busy { self.close() }
        if streamEnded { self.process() }
    }

    func ioWritable() {
        if self.handshaking {
            if self.continueHandshake() { self.flush() }
            return
        }
        self.flush()
    }

    private func setWrite(_ on: Bool) {
        guard on != self.writeInterest, !self.closed else { return }
        self.writeInterest = on
        self.loop.setInterest(fd: self.fd, readable: self.readInterest, writable: on)
    }

    private func setRead(_ on: Bool) {
        guard on != self.readInterest, !self.closed else { return }
        self.readInterest = on
        self.loop.setInterest(fd: self.fd, readable: on, writable: self.writeInterest)
    }

    func close() {
        guard !self.closed else { return }
        self.closed = true
        for t in self.timers { t.cancel() }
        self.timers.removeAll()
        self.loop.deregister(fd: self.fd)
        if !self.truncateTLS { self.tls?.shutdown() }
        Posix.close(self.fd)
        self.listener.remove(self)
    }

    /// Appends the next 256 KiB of a `/stream` body (only once the previous piece left), so the
    /// server's memory stays bounded and a client that stops reading holds it back; after the last
    /// piece, the chunked terminator, and the connection is free for the next request.
    private func fillStreamPiece() {
        if self.streamRemaining == 0 {
            if self.streamChunked { HTTP1Encoder.writeLastChunk(trailers: nil, into: &self.outbox) }
            self.streamActive = false
            self.busy = false
            return
        }
        let n = min(256 * 1024, self.streamRemaining)
        if self.streamChunked { HTTP1Encoder.writeChunkHeader(size: n, into: &self.outbox) }
        let phase = self.streamOffset % 251
        self.outbox.append(contentsOf: Self.streamTemplate[phase..<(phase + n)])
        if self.streamChunked { HTTP1Encoder.writeChunkEnd(into: &self.outbox) }
        self.streamOffset += n
        self.streamRemaining -= n
        self.listener.streamed += n
    }

    /// `/range/N`: the pattern with a strong ETag and Last-Modified, honouring `Range: bytes=a-[b]`
    /// unless `If-Range` names another validator (then 200, the whole entity); 416 for a start
    /// past the end.
    private func sendRange(_ h: HTTPRequestHead, size: Int, ignoreRange: Bool, head isHead: Bool) {
        let etag = "\"v1-\(size)\""
        let lastModified = "Wed, 21 Oct 2015 07:28:00 GMT"
        let validators: [(String, String)] = [
            ("ETag", etag), ("Last-Modified", lastModified), ("Accept-Ranges", "bytes"),
        ]
        let body = Self.pattern(size)
        var range: (Int, Int)? = nil
        if !ignoreRange, let spec = h.headers["Range"], spec.hasPrefix("bytes=") {
            let ifRange = h.headers["If-Range"]
            if ifRange == nil || ifRange == etag || ifRange == lastModified {
                let ab = spec.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
                if ab.count == 2, let a = Int(ab[0]) {
                    let b = Int(ab[1]) ?? (size - 1)
                    if a >= size {
                        self.send(
                            status: 416,
                            body: [],
                            extra: validators + [("Content-Range", "bytes */\(size)")],
                            head: isHead
                        )
                        return
                    }
                    range = (a, min(b, size - 1))
                }
            }
        }
        if let (a, b) = range {
            self.send(
                status: 206,
                body: Array(body[a...b]),
                extra: validators + [("Content-Range", "bytes \(a)-\(b)/\(size)")],
                head: isHead
            )
        } else {
            self.send(status: 200, body: body, extra: validators, head: isHead)
        }
    }

    /// The pattern from offset 0, long enough to copy any 256 KiB piece starting at any phase.
    static let streamTemplate = pattern(256 * 1024 + 251)

    // MARK: - Helpers

    static func pattern(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: max(0, n))
        for i in 0..<out.count { out[i] = UInt8(i % 251) }
        return out
    }

    static func percentDecoded(_ s: String) -> String {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            if b == UInt8(ascii: "%"), bytes.count >= 2,
                let v = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16)
            {
                out.append(v)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(b == UInt8(ascii: "+") ? UInt8(ascii: " ") : b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func split(_ target: String) -> (String, [String: String]) {
        guard let q = target.firstIndex(of: "?") else { return (target, [:]) }
        var query: [String: String] = [:]
        for pair in target[target.index(after: q)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            query[kv[0]] = kv.count > 1 ? kv[1] : ""
        }
        return (String(target[..<q]), query)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 404: return "Not Found"
        case 206: return "Partial Content"
        case 416: return "Range Not Satisfiable"
        case 500: return "Internal Server Error"
        default: return "Status \(status)"
        }
    }
}
