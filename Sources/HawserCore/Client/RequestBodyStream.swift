// A task's streamed request body: the producer runs as a Swift task and its writes hop to the
// loop and wait for the socket (BodyStreamSink). Loop-confined but for the sink's async entry
// points.
import HawserBase
import HawserPosix

extension RequestTask {
    // MARK: - Streamed request bodies

    /// The connection is ready for a streamed body: the producer runs as a Swift task; its writes
    /// hop to the loop and wait for the socket.
    func startBodyStream(_ producer: @escaping @Sendable (RequestBodyWriter) async throws -> Void) {
        let sink = BodyStreamSink(task: self)
        self.bodySink = sink
        Task {
            let failure: HawserError?
            do {
                try await producer(RequestBodyWriter(sink: sink))
                failure = nil
            } catch let e as HawserError {
                failure = e
            } catch {
                failure = HawserError(.invalidRequest, "the request body stream failed: \(error)")
            }
            await sink.producerReturned(failure)
        }
    }

    /// The body stream broke a rule (longer or shorter than declared) or threw.
    func bodyStreamFailed(_ error: HawserError) {
        self.fail(error)
    }

    func sinkWrite(_ sink: BodyStreamSink, _ bytes: [UInt8], _ completion: @escaping (HawserError?) -> Void) {
        guard self.bodySink === sink, let c = self.connection else {
            completion(sink.endedError ?? HawserError(.cancelled, "the task is no longer running"))
            return
        }
        c.writeBodyChunk(bytes, for: self, completion: completion)
    }

    func sinkFinished(_ sink: BodyStreamSink, _ failure: HawserError?) {
        guard self.bodySink === sink else { return }
        if let failure {
            self.fail(failure)
            return
        }
        self.connection?.finishBodyStream(for: self)
    }
}

/// The engine's end of a ``RequestBodyWriter``: hops each write to the loop and completes it when
/// the bytes reached the socket. One per streamed exchange; a write after the exchange ended
/// (a failure, a redirect) throws why.
final class BodyStreamSink: RequestBodySink, @unchecked Sendable {
    /// Strong: the producer may outlive the task's exchange, and must find out safely. The cycle
    /// through `task.bodySink` is broken when the exchange ends.
    private let task: RequestTask
    // Loop-confined.
    var endedError: HawserError?

    init(task: RequestTask) { self.task = task }

    func write(_ bytes: [UInt8]) async throws {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, any Error>) in
            self.task.eventLoop.execute {
                if let e = self.endedError {
                    cont.resume(throwing: e)
                    return
                }
                self.task.sinkWrite(self, bytes) { error in
                    if let error { cont.resume(throwing: error) } else { cont.resume() }
                }
            }
        }
    }

    /// The producer returned (nil) or threw.
    func producerReturned(_ failure: HawserError?) async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            self.task.eventLoop.execute {
                if self.endedError == nil { self.task.sinkFinished(self, failure) }
                cont.resume()
            }
        }
    }

    /// The exchange ended; later writes throw `error` (or the task's own error if it failed).
    func exchangeEnded(_ error: HawserError) {
        if self.endedError == nil { self.endedError = error }
    }
}
