// The request body's side of an HTTP/1.1 connection: the head and the body queued for the socket
// (a small body appended to the head, a large one as its own buffer, a stream chunk by chunk, with
// chunked framing when its length is unknown), the body held back for 100 Continue, and the end of
// the request reported to the machine and the task when its last byte was written. The bytes go
// through the connection's write queue (HTTP1WriteQueue.swift). Loop-confined.
import HawserBase
import HawserHTTP1

extension HTTP1Connection {
    /// Writes the request head and, unless `holdBody`, its body (`body`, as prepared).
    func writeRequest(head: [UInt8], body: RequestBody?, holdBody: Bool) {
        guard let task = self.task, !self.isClosed else { return }
        if holdBody {
            // Expect: 100-continue: the head now, the body on 100, on the timeout, or never.
            self.enqueue(PendingWrite(bytes: head))
            self.heldBody = body
        } else {
            self.queueBody(body, after: head, for: task)
        }
        self.flush()
    }

    /// Sends the body held for 100 Continue.
    func sendHeldBody() {
        guard let task = self.task, !self.isClosed, let body = self.heldBody else { return }
        self.heldBody = nil
        self.queueBody(body, after: [], for: task)
        self.flush()
    }

    /// A final status came before the held body was sent: it never will be (the connection then
    /// closes after the response, RFC 9110 §10.1.1: the state machine sees the request unsent).
    func dropHeldBody() {
        self.heldBody = nil
    }

    /// Queues `body` (after `head`, which may be empty).
    private func queueBody(_ body: RequestBody?, after head: [UInt8], for task: RequestTask) {
        var head = head
        let sent = self.sentCompletion(for: task)
        switch body {
        case nil:
            self.enqueue(PendingWrite(bytes: head, completion: sent))
        case .bytes(let bytes)? where bytes.count <= 16 * 1024 && !head.isEmpty:
            head.append(contentsOf: bytes)
            self.enqueue(PendingWrite(bytes: head, bodyBytes: bytes.count, completion: sent))
        case .bytes(let bytes)?:
            if !head.isEmpty { self.enqueue(PendingWrite(bytes: head)) }
            self.enqueue(PendingWrite(bytes: bytes, bodyBytes: bytes.count, completion: sent))
        case .stream(let length, let producer)?:
            self.streamLength = length
            self.streamChunked = length == nil
            self.streamWritten = 0
            // An empty body of known length is complete with the head.
            self.enqueue(PendingWrite(bytes: head, completion: length == 0 ? sent : nil))
            task.startBodyStream(producer)
        }
    }

    /// The next chunk of a streamed body, from the task's producer.
    func writeBodyChunk(_ bytes: [UInt8], for task: RequestTask, completion: @escaping (HawserError?) -> Void) {
        guard self.task === task, !self.isClosed else {
            completion(HawserError(.cancelled, "the task is no longer running"))
            return
        }
        self.streamWritten += Int64(bytes.count)
        if let length = self.streamLength, self.streamWritten > length {
            let e = HawserError(
                .invalidRequest,
                "the body stream wrote \(self.streamWritten) bytes, more than its declared length \(length)"
            )
            completion(e)
            task.bodyStreamFailed(e)
            return
        }
        if self.streamChunked {
            var header: [UInt8] = []
            HTTP1Encoder.writeChunkHeader(size: bytes.count, into: &header)
            self.enqueue(PendingWrite(bytes: header))
            self.enqueue(PendingWrite(bytes: bytes, bodyBytes: bytes.count))
            var end: [UInt8] = []
            HTTP1Encoder.writeChunkEnd(into: &end)
            self.enqueue(PendingWrite(bytes: end, completion: completion))
        } else {
            self.enqueue(PendingWrite(bytes: bytes, bodyBytes: bytes.count, completion: completion))
            if self.streamWritten == self.streamLength {
                // The declared length is reached: the request is complete when these bytes are
                // written, whenever the producer returns (a server may answer at once).
                self.enqueue(PendingWrite(bytes: [], completion: self.sentCompletion(for: task)))
            }
        }
        self.flush()
    }

    private func sentCompletion(for task: RequestTask) -> (HawserError?) -> Void {
        { [unowned(unsafe) self] error in
            guard error == nil, self.task === task else { return }
            self.requestWritten(task)
        }
    }

    /// The producer returned: the body is complete.
    func finishBodyStream(for task: RequestTask) {
        guard self.task === task, !self.isClosed else { return }
        if let length = self.streamLength {
            // A body of known length was complete at its last byte (see writeBodyChunk).
            if self.streamWritten == length { return }
            task.bodyStreamFailed(
                HawserError(
                    .invalidRequest,
                    "the body stream ended after \(self.streamWritten) of its declared \(length) bytes"
                )
            )
            return
        }
        var last: [UInt8] = []
        HTTP1Encoder.writeLastChunk(trailers: nil, into: &last)
        self.enqueue(PendingWrite(bytes: last, completion: self.sentCompletion(for: task)))
        self.flush()
    }
}
