// Body bytes handed over by ownership: for a delegate that keeps what it receives (the
// AsyncSequence body, a download's file writes), the connection reads the socket straight into
// a fresh array and gives that array away, instead of reading into the session's shared buffer
// and having the delegate copy every chunk out of it. Only reads the parser says are pure body
// data (`HTTP1ResponseParser.bodyDataAhead`) go this way; heads, chunk-size lines, decoded
// bodies and bodies recorded for the cache take the shared buffer as before. Loop-confined.

/// A `ResponseDelegate` that takes body chunks as arrays it then owns. The engine calls
/// ``task(_:didReceiveBodyChunk:)`` instead of `task(_:didReceiveBody:)` for bytes it read into
/// an array of their own; every other chunk still comes through `didReceiveBody`. Both run on
/// the loop, in order.
package protocol OwnedBodyDelegate: ResponseDelegate {
    /// Whether the delegate takes chunks by ownership now (asked before each read; a delegate
    /// that would only copy a chunk again answers false and gets the engine's buffer instead).
    var takesBodyChunks: Bool { get }
    /// Body bytes (never empty) the delegate keeps: nothing else holds a reference to them.
    func task(_ task: RequestTask, didReceiveBodyChunk chunk: [UInt8])
}

/// A read handed over whole keeps its array when it fills at least this share of its
/// capacity (1/`ownedReadWasteFactor`); a shorter one is copied into an array of its size and the
/// big one freed, so what a consumer holds is never more than twice the bytes it was given
/// (the streaming body's bound counts bytes, not capacity).
let ownedReadWasteFactor = 2

extension RequestTask {
    /// True when the next body bytes can go to the delegate by ownership: the body is delivered
    /// as it is framed (no content decoding, no cache recording) to an ``OwnedBodyDelegate``.
    var takesOwnedBody: Bool {
        self.decoder == nil && self.cache.recording == nil && self.machine.deliversBody
            && !self.isFinished && (self.delegate as? any OwnedBodyDelegate)?.takesBodyChunks == true
    }

    /// Body bytes the connection read into an array of their own (see ``takesOwnedBody``).
    func receivedOwnedBody(_ chunk: [UInt8]) {
        guard self.machine.deliversBody else { return }
        if self.decoder == nil, self.cache.recording == nil, let owner = self.delegate as? any OwnedBodyDelegate {
            owner.task(self, didReceiveBodyChunk: chunk)
        } else {
            chunk.withUnsafeBytes { self.deliverBody($0) }
        }
    }
}
