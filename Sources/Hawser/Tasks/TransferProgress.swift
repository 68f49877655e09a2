import Synchronization

// The NSProgress role for one direction of one task.
//
// Foundation's `Progress` exists on Linux, but its value is in KVO (AFNetworking's tests and users
// observe `fractionCompleted`), and swift-corelibs-foundation has no KVO; it is also not Sendable.
// `TransferProgress` keeps NSProgress's vocabulary (total/completed unit counts, fractionCompleted,
// cancel/pause/resume with handlers) and replaces KVO with change handlers.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Progress of an upload or a download: bytes done out of bytes expected. Thread-safe.
///
/// A task's progress objects are wired to it: ``cancel()`` cancels the task, ``pause()`` suspends
/// it and ``resume()`` resumes it (NSProgress's cancellation, pausing and resuming handlers).
public final class TransferProgress: Sendable, CustomStringConvertible {
    struct State {
        var total: Int64 = -1
        var completed: Int64 = 0
        var finished = false
        /// The task ended, successfully or not (``updates`` finishes then).
        var ended = false
        var cancelled = false
        var paused = false
        var isCancellable = true
        var isPausable = true
        var cancellationHandler: (@Sendable () -> Void)?
        var pausingHandler: (@Sendable () -> Void)?
        var resumingHandler: (@Sendable () -> Void)?
        var observers: [Int: @Sendable (TransferProgress) -> Void] = [:]
        var nextObserver = 0
    }
    private let state = Mutex(State())

    /// Creates a progress of `totalUnitCount` units (-1 when unknown).
    public init(totalUnitCount: Int64 = -1) {
        self.state.withLock { $0.total = totalUnitCount }
    }

    /// Units expected in all; -1 while unknown (no Content-Length, a chunked upload).
    public var totalUnitCount: Int64 {
        get { self.state.withLock { $0.total } }
        set { self.update { $0.total = newValue } }
    }

    /// Units done so far.
    public var completedUnitCount: Int64 {
        get { self.state.withLock { $0.completed } }
        set { self.update { $0.completed = newValue } }
    }

    /// Done out of expected, in 0…1. 0 while the total is unknown; 1 once the transfer finished,
    /// also when the total was never known or was zero.
    public var fractionCompleted: Double {
        self.state.withLock { s in
            if s.finished { return 1 }
            guard s.total > 0 else { return 0 }
            return min(1, max(0, Double(s.completed) / Double(s.total)))
        }
    }

    /// True once the transfer ended successfully.
    public var isFinished: Bool { self.state.withLock { $0.finished } }
    /// True once ``cancel()`` was called.
    public var isCancelled: Bool { self.state.withLock { $0.cancelled } }
    /// True between ``pause()`` and ``resume()``.
    public var isPaused: Bool { self.state.withLock { $0.paused } }
    /// Whether ``cancel()`` does anything. Default true.
    public var isCancellable: Bool {
        get { self.state.withLock { $0.isCancellable } }
        set { self.state.withLock { $0.isCancellable = newValue } }
    }
    /// Whether ``pause()`` and ``resume()`` do anything. Default true.
    public var isPausable: Bool {
        get { self.state.withLock { $0.isPausable } }
        set { self.state.withLock { $0.isPausable = newValue } }
    }

    /// Called (once) when the progress is cancelled. The session manager sets it to cancel the task.
    public var cancellationHandler: (@Sendable () -> Void)? {
        get { self.state.withLock { $0.cancellationHandler } }
        set { self.state.withLock { $0.cancellationHandler = newValue } }
    }
    /// Called on ``pause()``. The session manager sets it to suspend the task.
    public var pausingHandler: (@Sendable () -> Void)? {
        get { self.state.withLock { $0.pausingHandler } }
        set { self.state.withLock { $0.pausingHandler = newValue } }
    }
    /// Called on ``resume()`` after a pause. The session manager sets it to resume the task.
    public var resumingHandler: (@Sendable () -> Void)? {
        get { self.state.withLock { $0.resumingHandler } }
        set { self.state.withLock { $0.resumingHandler = newValue } }
    }

    /// Cancels the transfer (runs the cancellation handler once) if it is cancellable.
    public func cancel() {
        let handler: (@Sendable () -> Void)? = self.state.withLock { s in
            guard s.isCancellable, !s.cancelled else { return nil }
            s.cancelled = true
            return s.cancellationHandler
        }
        handler?()
    }

    /// Pauses the transfer (runs the pausing handler) if it is pausable and not paused.
    public func pause() {
        let handler: (@Sendable () -> Void)? = self.state.withLock { s in
            guard s.isPausable, !s.paused, !s.cancelled else { return nil }
            s.paused = true
            return s.pausingHandler
        }
        handler?()
    }

    /// Resumes a paused transfer (runs the resuming handler).
    public func resume() {
        let handler: (@Sendable () -> Void)? = self.state.withLock { s in
            guard s.paused else { return nil }
            s.paused = false
            return s.resumingHandler
        }
        handler?()
    }

    /// Calls `handler` after every change of the counts (the KVO role), on the thread that made
    /// the change — often the event loop, so the handler must be quick. Returns a token for
    /// ``removeObserver(_:)``.
    @discardableResult
    public func addObserver(_ handler: @escaping @Sendable (TransferProgress) -> Void) -> Int {
        self.state.withLock { s in
            s.nextObserver += 1
            s.observers[s.nextObserver] = handler
            return s.nextObserver
        }
    }

    /// Stops calling the observer registered under `token`.
    public func removeObserver(_ token: Int) {
        _ = self.state.withLock { $0.observers.removeValue(forKey: token) }
    }

    /// One reading of a progress: what ``updates`` delivers.
    public struct Update: Sendable, Hashable, CustomStringConvertible {
        /// Units done (``TransferProgress/completedUnitCount``).
        public var completedUnitCount: Int64
        /// Units expected, -1 while unknown (``TransferProgress/totalUnitCount``).
        public var totalUnitCount: Int64
        /// Done out of expected, in 0…1 (``TransferProgress/fractionCompleted``).
        public var fractionCompleted: Double
        /// True in the last update of a transfer that ended successfully.
        public var isFinished: Bool
        /// True in the last update: the task ended, successfully or not.
        public var isLast: Bool

        /// Creates an update; each parameter sets the property of the same name.
        public init(
            completedUnitCount: Int64,
            totalUnitCount: Int64,
            fractionCompleted: Double,
            isFinished: Bool,
            isLast: Bool
        ) {
            self.completedUnitCount = completedUnitCount
            self.totalUnitCount = totalUnitCount
            self.fractionCompleted = fractionCompleted
            self.isFinished = isFinished
            self.isLast = isLast
        }

        public var description: String {
            "\(self.completedUnitCount)/\(self.totalUnitCount)\(self.isFinished ? ", finished" : self.isLast ? ", ended" : "")"
        }
    }

    /// The progress as it is now.
    public var current: Update {
        self.state.withLock { s in
            let fraction: Double =
                s.finished ? 1 : s.total > 0 ? min(1, max(0, Double(s.completed) / Double(s.total))) : 0
            return Update(
                completedUnitCount: s.completed,
                totalUnitCount: s.total,
                fractionCompleted: fraction,
                isFinished: s.finished,
                isLast: s.ended
            )
        }
    }

    /// The changes of this progress as an `AsyncSequence`: the current state first, then each
    /// change, ending after the update whose ``Update/isLast`` is true (the task succeeded,
    /// failed or was cancelled). A slow reader gets the newest update, never a backlog: updates
    /// it had no time for are skipped, the last one never is. Each iteration observes the
    /// progress on its own; ending the iteration early stops the observation.
    ///
    /// ```swift
    /// let task = manager.downloadTask(with: request, destination: { _, _ in target }, completionHandler: nil)
    /// let progress = manager.downloadProgress(for: task)!
    /// task.resume()
    /// for await update in progress.updates {
    ///     print("\(Int(update.fractionCompleted * 100)) %")
    /// }
    /// ```
    public var updates: AsyncStream<Update> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let token = self.addObserver { progress in
                let update = progress.current
                continuation.yield(update)
                if update.isLast { continuation.finish() }
            }
            continuation.onTermination = { _ in self.removeObserver(token) }
            let now = self.current
            continuation.yield(now)
            if now.isLast { continuation.finish() }
        }
    }

    public var description: String {
        let s = self.state.withLock { $0 }
        return "TransferProgress(\(s.completed)/\(s.total)\(s.finished ? ", finished" : ""))"
    }

    // MARK: - Updates from the task

    func set(completed: Int64, total: Int64) {
        self.update {
            $0.completed = completed
            $0.total = total
        }
    }

    /// The transfer ended successfully: when the total was unknown it becomes what was done, so
    /// the fraction reaches 1.0 also without Content-Length.
    func markFinished() {
        self.update { s in
            if s.total < 0 || s.total < s.completed { s.total = s.completed }
            s.completed = max(s.completed, s.total)
            s.finished = true
            s.ended = true
        }
    }

    /// The task ended without success (failed or cancelled): the counts stay as they were, and
    /// ``updates`` finishes.
    func markEnded() {
        self.update { $0.ended = true }
    }

    /// Back to the start (a retry, a download restarted from zero).
    func reset(total: Int64) {
        self.update { s in
            s.completed = 0
            s.total = total
            s.finished = false
            s.ended = false
        }
    }

    private func update(_ body: (inout State) -> Void) {
        let observers = self.state.withLock { s -> [@Sendable (TransferProgress) -> Void] in
            body(&s)
            return s.observers.isEmpty ? [] : Array(s.observers.values)
        }
        for o in observers { o(self) }
    }
}
