// The gathered-write queue of one HTTP/1.1 connection: the buffers waiting for the socket (a
// request head, body buffers, chunk framing), each with the completion to call when its last byte
// was handed to the socket. It writes up to 8 buffers with one writev (one SSL_write of at most
// 64 KiB over TLS), advances over what the kernel took, and counts the request-body bytes among
// them for upload progress. It holds no socket: the connection (HTTP1Connection) passes its fd and
// TLS stream to each write and decides when to write (interest, send limit, close).
import HawserBase
import HawserPosix
import HawserTLS

#if canImport(Glibc)
import Glibc
#endif

struct HTTP1WriteQueue {
    struct PendingWrite {
        var bytes: [UInt8]
        var offset = 0
        /// How many of `bytes` are request-body bytes; they are always the tail of `bytes`
        /// (a head with a small body appended, or body only). For upload progress.
        var bodyBytes = 0
        /// Called when the last byte was handed to the socket (nil), or when the connection
        /// closed first (the error).
        var completion: ((HawserError?) -> Void)?

        /// Body bytes among `bytes[from..<to]`.
        func bodyBytes(from: Int, to: Int) -> Int {
            max(0, to - max(from, self.bytes.count - self.bodyBytes))
        }
    }

    /// What one write handed to the socket, as ``advance(_:)`` reports it.
    struct Advanced {
        /// Request-body bytes among the bytes written.
        var bodyBytes = 0
        /// The completions of the buffers written to their end, in order. Usually one (a
        /// request's last buffer): it needs no array.
        var first: ((HawserError?) -> Void)? = nil
        var more: [(HawserError?) -> Void] = []

        /// Calls the completions (success), in order.
        func complete() {
            self.first?(nil)
            for c in self.more { c(nil) }
        }
    }

    private var writes: [PendingWrite] = []

    var isEmpty: Bool { self.writes.isEmpty }

    /// Whether the first buffer has bytes left to write (an empty one only completes).
    var firstHasBytes: Bool { !self.writes.isEmpty && self.writes[0].bytes.count > self.writes[0].offset }

    mutating func enqueue(_ w: PendingWrite) {
        self.writes.append(w)
    }

    /// Empties the queue and returns what was pending (their completions are owed an error).
    mutating func removeAll() -> [PendingWrite] {
        let pending = self.writes
        self.writes.removeAll()
        return pending
    }

    /// One send/writev of up to 8 pending buffers (over TLS: one SSL_write of the first buffer,
    /// at most 64 KiB, which OpenSSL cuts into records). Under a send limit (`limit` below
    /// `Int.max`): at most `limit` bytes of the first buffer. `wantsRead`: TLS needs the socket
    /// readable before this write can go on.
    func writeSome(fd: Int32, tls: TLSStream?, max limit: Int, wantsRead: inout Bool) throws(IOError) -> IOResult<Int> {
        if let tls {
            let w = self.writes[0]
            if w.bytes.count == w.offset { return .processed(0) }
            let end = w.offset + min(64 * 1024, limit)
            let status = w.bytes.withUnsafeBytes { raw in
                tls.write(UnsafeRawBufferPointer(rebasing: raw[w.offset..<min(raw.count, end)]))
            }
            switch status {
            case .bytes(let n): return .processed(n)
            case .wantWrite: return .wouldBlock
            case .wantRead:
                wantsRead = true
                return .wouldBlock
            case .closed:
                throw IOError(errnoCode: EPIPE, function: "SSL_write")
            case .failed(let message, _):
                throw IOError(errnoCode: EPROTO, function: "SSL_write: \(message)")
            }
        }
        if self.writes.count == 1 || self.writes[0].bytes.count - self.writes[0].offset >= 64 * 1024
            || limit != .max
        {
            let w = self.writes[0]
            if w.bytes.count == w.offset { return .processed(0) }
            let end = limit == .max ? w.bytes.count : min(w.bytes.count, w.offset + limit)
            let r = w.bytes.withUnsafeBytes { raw in
                Result { () throws(IOError) in
                    try Posix.send(fd, UnsafeRawBufferPointer(rebasing: raw[w.offset..<end]))
                }
            }
            return try r.get()
        }
        let n = min(self.writes.count, 8)
        var iov = [iovec](repeating: iovec(), count: n)
        return try self.gather(fd, 0, n, &iov)
    }

    private func gather(_ fd: Int32, _ i: Int, _ n: Int, _ iov: inout [iovec]) throws(IOError) -> IOResult<Int> {
        if i == n {
            let r = iov.withUnsafeBufferPointer { p in
                Result { () throws(IOError) in try Posix.writev(fd, p.baseAddress!, Int32(n)) }
            }
            return try r.get()
        }
        let w = self.writes[i]
        let r = w.bytes.withUnsafeBytes { raw in
            Result { () throws(IOError) in
                iov[i] = iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress.map { $0 + w.offset }),
                    iov_len: raw.count - w.offset
                )
                return try self.gather(fd, i + 1, n, &iov)
            }
        }
        return try r.get()
    }

    /// The socket took `written` bytes: drops the buffers written to their end and returns their
    /// completions (to be called by the connection after its own bookkeeping). Progress counts
    /// body bytes as they reach the socket, also inside a partly written buffer, so a large
    /// upload reports progress from its first write.
    mutating func advance(_ written: Int) -> Advanced {
        var n = written
        var done = Advanced()
        while !self.writes.isEmpty {
            let w = self.writes[0]
            let remaining = w.bytes.count - w.offset
            if n >= remaining {
                n -= remaining
                done.bodyBytes += w.bodyBytes(from: w.offset, to: w.bytes.count)
                self.writes.removeFirst()
                if let c = w.completion {
                    if done.first == nil { done.first = c } else { done.more.append(c) }
                }
            } else {
                done.bodyBytes += w.bodyBytes(from: w.offset, to: w.offset + n)
                self.writes[0].offset += n
                break
            }
        }
        return done
    }
}
