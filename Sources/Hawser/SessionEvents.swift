// AFNetworking's notifications (AFNetworkingTaskDidResumeNotification and friends) as typed
// events of one manager, observable through handlers or an AsyncSequence, plus event monitors
// that see every step of every task.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import HawserCore

/// What AFNetworkingTaskDidCompleteNotification's user info carries.
public struct TaskCompletionInfo: Sendable {
    /// The response serializer that ran (AFNetworkingTaskDidCompleteResponseSerializerKey).
    public var responseSerializer: any ResponseSerialization
    /// The raw body of a data task (AFNetworkingTaskDidCompleteResponseDataKey); nil for downloads.
    public var responseData: Data?
    /// Where a download task's file was moved (AFNetworkingTaskDidCompleteAssetPathKey).
    public var assetPath: URL?
    /// What the serializer produced (AFNetworkingTaskDidCompleteSerializedResponseKey).
    public var serializedResponse: (any Sendable)?
    /// The task's or the serializer's error (AFNetworkingTaskDidCompleteErrorKey).
    public var error: (any Error)?
    /// The timings (AFNetworkingTaskDidCompleteSessionTaskMetrics); nil if the task never reached the engine.
    public var metrics: TaskMetrics?
}

/// A lifecycle event of a manager or one of its tasks (AFNetworking's notifications).
public enum SessionEvent: Sendable {
    /// A task was resumed (AFNetworkingTaskDidResumeNotification).
    case taskDidResume(SessionTask)
    /// A task was suspended (AFNetworkingTaskDidSuspendNotification).
    case taskDidSuspend(SessionTask)
    /// A task completed and its completion handler ran (AFNetworkingTaskDidCompleteNotification).
    case taskDidComplete(SessionTask, TaskCompletionInfo)
    /// A download's file was moved to its destination (AFURLSessionDownloadTaskDidMoveFileSuccessfullyNotification).
    case downloadTaskDidMoveFile(DownloadTask, destination: URL)
    /// Moving a download's file failed (AFURLSessionDownloadTaskDidFailToMoveFileNotification).
    case downloadTaskDidFailToMoveFile(DownloadTask, destination: URL, error: any Error)
    /// The manager's session was invalidated and every task has ended (AFURLSessionDidInvalidateNotification).
    case sessionDidInvalidate(error: (any Error)?)

    /// The task the event is about, if any.
    public var task: SessionTask? {
        switch self {
        case .taskDidResume(let t), .taskDidSuspend(let t), .taskDidComplete(let t, _): return t
        case .downloadTaskDidMoveFile(let t, _), .downloadTaskDidFailToMoveFile(let t, _, _): return t
        case .sessionDidInvalidate: return nil
        }
    }
}

/// A registration made with ``SessionManager/addObserver(_:)``; pass it to
/// ``SessionManager/removeObserver(_:)``.
public struct SessionObserverToken: Sendable, Hashable {
    let id: Int
}

/// Delivers a manager's events to its observers, in order, on one serial queue (AFNetworking
/// posts on the main queue; a Linux program may never run one).
final class EventHub: Sendable {
    private struct State {
        var next = 0
        var observers: [Int: @Sendable (SessionEvent) -> Void] = [:]
    }
    private let state = Locked(State())
    let queue = DispatchQueue(label: "hawser.session-manager.events")

    func add(_ handler: @escaping @Sendable (SessionEvent) -> Void) -> SessionObserverToken {
        self.state.withLock { s in
            s.next += 1
            s.observers[s.next] = handler
            return SessionObserverToken(id: s.next)
        }
    }

    func remove(_ token: SessionObserverToken) {
        _ = self.state.withLock { $0.observers.removeValue(forKey: token.id) }
    }

    /// Delivers `event` to the observers. The event is only built when there are observers: a
    /// task's didComplete payload holds a copy of its body.
    func post(_ event: @autoclosure () -> SessionEvent) {
        let handlers = self.state.withLock { s in s.observers.sorted { $0.key < $1.key }.map(\.value) }
        guard !handlers.isEmpty else { return }
        let event = event()
        self.queue.async {
            for h in handlers { h(event) }
        }
    }
}

/// Sees every step of every task of a manager (Alamofire's EventMonitor). Methods are called
/// synchronously on the thread where the step happened — often the event loop — so they must be
/// quick and must not block. Every method has an empty default.
public protocol EventMonitor: Sendable {
    /// A task was created (suspended, not yet resumed).
    func taskDidCreate(_ task: SessionTask)
    /// A task was resumed: it starts, or continues reading after ``taskDidSuspend(_:)``.
    func taskDidResume(_ task: SessionTask)
    /// A task was suspended: it stops reading from the socket until resumed.
    func taskDidSuspend(_ task: SessionTask)
    /// A task was cancelled; it completes with `.cancelled` next.
    func taskDidCancel(_ task: SessionTask)
    /// A resumed task waits for the network (``SessionManager/waitsForConnectivity``).
    func taskIsWaitingForConnectivity(_ task: SessionTask)
    /// The interceptor's adapter rewrote the request of the next attempt.
    func task(_ task: SessionTask, didAdapt request: HTTPClientRequest, to adapted: HTTPClientRequest)
    /// The retrier decided to send the task again after `delay` seconds.
    func task(_ task: SessionTask, willRetryAfter delay: Double, error: HawserError?)
    /// The final response head of an attempt arrived (interim 1xx heads are not reported).
    func task(_ task: SessionTask, didReceive response: HTTPResponse)
    /// `count` body bytes arrived (decoded when the session decodes content).
    func task(_ task: SessionTask, didReceiveBytes count: Int)
    /// Request body bytes reached the socket: `totalSent` so far of `expected` (-1 when unknown).
    func task(_ task: SessionTask, didSendBodyBytes totalSent: Int64, expected: Int64)
    /// A download wrote `count` bytes to its file: `totalWritten` so far of `expected` (-1 when unknown).
    func downloadTask(_ task: DownloadTask, didWriteBytes count: Int64, totalWritten: Int64, expected: Int64)
    /// The metrics of the task's last attempt are final.
    func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics)
    /// The task completed (before its completion handler runs on the completion queue).
    func task(_ task: SessionTask, didCompleteWith error: (any Error)?)
    /// The manager's session was invalidated (``SessionManager/invalidateSession(cancelingPendingTasks:resetSession:)``) and its tasks have completed.
    func sessionDidInvalidate(error: (any Error)?)
}

extension EventMonitor {
    public func taskDidCreate(_ task: SessionTask) {}
    public func taskDidResume(_ task: SessionTask) {}
    public func taskDidSuspend(_ task: SessionTask) {}
    public func taskDidCancel(_ task: SessionTask) {}
    public func taskIsWaitingForConnectivity(_ task: SessionTask) {}
    public func task(_ task: SessionTask, didAdapt request: HTTPClientRequest, to adapted: HTTPClientRequest) {}
    public func task(_ task: SessionTask, willRetryAfter delay: Double, error: HawserError?) {}
    public func task(_ task: SessionTask, didReceive response: HTTPResponse) {}
    public func task(_ task: SessionTask, didReceiveBytes count: Int) {}
    public func task(_ task: SessionTask, didSendBodyBytes totalSent: Int64, expected: Int64) {}
    public func downloadTask(_ task: DownloadTask, didWriteBytes count: Int64, totalWritten: Int64, expected: Int64) {}
    public func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) {}
    public func task(_ task: SessionTask, didCompleteWith error: (any Error)?) {}
    public func sessionDidInvalidate(error: (any Error)?) {}
}
