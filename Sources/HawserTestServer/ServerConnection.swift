import HawserCore
import HawserPosix

#if canImport(Glibc)
import Glibc
#endif

/// One accepted connection: parses requests, routes them, writes responses. Loop-confined.
/// The routes are in ServerConnection+Routes.swift.
final class ServerConnection: EventLoopIOHandler {
    let fd: Int32
    unowned let listener: Listener
    var loop: EventLoop { self.listener.loop }
    var parser = HTTP1RequestParser()
    var inbox: [UInt8] = []
    var outbox: [UInt8] = []
    var outOffset = 0
    var closeAfterWrite = false
    var writeInterest = false
    var readInterest = true
    var closed = false
    var head: HTTPRequestHead?
    var body: [UInt8] = []
    /// A response is being produced over time (delay, trickle): stop parsing until it is done.
    var busy = false
    var timers: [Scheduled] = []
    /// Close without TLS close_notify (the truncation fault).
    var truncateTLS = false
    /// `/sink`: the body is checked and counted, not kept.
    var sink: (count: Int, patternOK: Bool)?
    /// `/stream/N`: bytes of the pattern still to generate, the next offset, chunked framing.
    var streamRemaining = 0
    var streamOffset = 0
    var streamChunked = false
    var streamActive = false

    /// For https: the TLS session, and whether its handshake is still running.
    let tls: TLSStream?
    var handshaking: Bool

    init(fd: Int32, listener: Listener, tls: TLSStream?) {
        self.fd = fd
        self.listener = listener
        self.tls = tls
        self.handshaking = tls != nil
    }

    /// Runs the server side of the TLS handshake; true once application data can flow.
    func continueHandshake() -> Bool {
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
    func readSome(_ chunk: inout [UInt8]) -> Int {
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

    func process() {
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
    func sendChunked(
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
    func sendSome() -> Int {
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

    func flush() {
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

    func setWrite(_ on: Bool) {
        guard on != self.writeInterest, !self.closed else { return }
        self.writeInterest = on
        self.loop.setInterest(fd: self.fd, readable: self.readInterest, writable: on)
    }

    func setRead(_ on: Bool) {
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
    func fillStreamPiece() {
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
    func sendRange(_ h: HTTPRequestHead, size: Int, ignoreRange: Bool, head isHead: Bool) {
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
