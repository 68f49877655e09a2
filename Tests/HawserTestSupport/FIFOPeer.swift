import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The other end of a FIFO a test hands to the code under test as a file: reading or writing
/// it blocks that code until the test releases this end. It works on a thread of its own, so
/// that it never blocks the test; a watchdog releases it after 20 s, so that code blocked on an
/// event loop cannot hang the test, which then reports ``releasedByWatchdog``.
public final class FIFOPeer: @unchecked Sendable {
    private let condition = NSCondition()
    private var released = false
    private var watchdogFired = false

    private init() {}

    /// Opens the write end now (the returned peer exists once a reader has opened the FIFO) and
    /// writes `bytes` into it when released.
    public static func writer(_ path: String, writing bytes: [UInt8]) async -> FIFOPeer {
        let peer = FIFOPeer()
        await withCheckedContinuation { (opened: CheckedContinuation<Void, Never>) in
            Thread {
                let fd = open(path, O_WRONLY)
                opened.resume()
                peer.waitForRelease()
                guard fd >= 0 else { return }
                bytes.withUnsafeBytes { raw in
                    var offset = 0
                    while offset < raw.count {
                        let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                        if n <= 0 { break }
                        offset += n
                    }
                }
                close(fd)
            }.start()
        }
        return peer
    }

    /// Opens the read end when released (letting a writer's open return), and closes it.
    public static func reader(_ path: String) -> FIFOPeer {
        let peer = FIFOPeer()
        Thread {
            peer.waitForRelease()
            let fd = open(path, O_RDONLY)
            if fd >= 0 { close(fd) }
        }.start()
        return peer
    }

    private func waitForRelease() {
        self.condition.lock()
        let deadline = Date(timeIntervalSinceNow: 20)
        while !self.released {
            if !self.condition.wait(until: deadline) {
                self.watchdogFired = true
                break
            }
        }
        self.condition.unlock()
    }

    /// Lets this end go on.
    public func release() {
        self.condition.lock()
        self.released = true
        self.condition.broadcast()
        self.condition.unlock()
    }

    /// Whether the watchdog released this end before the test did.
    public var releasedByWatchdog: Bool {
        self.condition.lock()
        defer { self.condition.unlock() }
        return self.watchdogFired
    }
}
