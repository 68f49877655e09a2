import Dispatch
import HawserCore
import Synchronization

// The one event channel of a manager: `EventMonitor`. Everything else that reports what tasks do
// is a thin adapter over it: the manager's observe-only blocks (`BlockMonitor`), the SessionEvent
// observers and their AsyncStream (`EventHub`), and, in HawserFoundation, AFNetworking's
// notifications on NotificationCenter (a process-wide monitor).
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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

/// Sees every step of every task of a manager (Alamofire's EventMonitor). It is the manager's one
/// event channel: the observe-only blocks (``SessionManager/taskDidComplete`` …), the
/// ``SessionEvent`` observers and ``SessionManager/events(bufferingPolicy:)``, and HawserFoundation's
/// NotificationCenter notifications are all monitors.
///
/// Methods are called synchronously where the step happened — the event loop for the engine's
/// steps, the completion queue (or the awaiting task) for ``task(_:didFinishWith:)`` and the
/// download's file move — so they must be quick and must not block. Every method has an empty
/// default.
public protocol EventMonitor: Sendable {
    /// A task was created (suspended).
    func taskDidCreate(_ task: SessionTask)
    /// A task was resumed (AFNetworkingTaskDidResumeNotification).
    func taskDidResume(_ task: SessionTask)
    /// A task was suspended (AFNetworkingTaskDidSuspendNotification).
    func taskDidSuspend(_ task: SessionTask)
    /// ``SessionTask/cancel()`` took effect.
    func taskDidCancel(_ task: SessionTask)
    /// A resumed task waits for the network (``SessionManager/waitsForConnectivity``).
    func taskIsWaitingForConnectivity(_ task: SessionTask)
    /// The interceptor's adapter rewrote the request of the next attempt.
    func task(_ task: SessionTask, didAdapt request: HTTPClientRequest, to adapted: HTTPClientRequest)
    /// The retrier decided to send the task again after `delay` seconds.
    func task(_ task: SessionTask, willRetryAfter delay: Double, error: HawserError?)
    /// The final response head arrived.
    func task(_ task: SessionTask, didReceive response: HawserResponse)
    /// Body bytes of a data task arrived (URLSession:dataTask:didReceiveData:). `bytes` is valid
    /// only during the call.
    func dataTask(_ task: DataTask, didReceive bytes: UnsafeRawBufferPointer)
    /// Request body bytes went out (URLSession:task:didSendBodyData:…): `bytesSent` now,
    /// `totalBytesSent` so far, `totalBytesExpectedToSend` or -1.
    func task(
        _ task: SessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    )
    /// A download wrote bytes to its file (URLSession:downloadTask:didWriteData:…).
    func downloadTask(
        _ task: DownloadTask,
        didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64
    )
    /// A download continues from resume data at `fileOffset` (0: the server sent the whole entity).
    func downloadTask(_ task: DownloadTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64)
    /// A data task became a download task (``ResponseDisposition/becomeDownload``).
    func dataTask(_ task: DataTask, didBecome downloadTask: DownloadTask)
    /// The task's metrics are final (URLSession:task:didFinishCollectingMetrics:).
    func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics)
    /// The task completed (URLSession:task:didCompleteWithError:), before its response is
    /// serialized and its completion handler runs.
    func task(_ task: SessionTask, didCompleteWith error: (any Error)?)
    /// A download's file was moved to its destination.
    func downloadTask(_ task: DownloadTask, didMoveFileTo destination: URL)
    /// Moving a download's file failed.
    func downloadTask(_ task: DownloadTask, didFailToMoveFileTo destination: URL, error: any Error)
    /// The task's completion handler ran (or its `async` caller is about to return):
    /// AFNetworkingTaskDidCompleteNotification, with its user info.
    func task(_ task: SessionTask, didFinishWith info: TaskCompletionInfo)
    /// The session was invalidated and its tasks have ended.
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
    public func task(_ task: SessionTask, didReceive response: HawserResponse) {}
    public func dataTask(_ task: DataTask, didReceive bytes: UnsafeRawBufferPointer) {}
    public func task(
        _ task: SessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {}
    public func downloadTask(
        _ task: DownloadTask,
        didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64
    ) {}
    public func downloadTask(_ task: DownloadTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) {}
    public func dataTask(_ task: DataTask, didBecome downloadTask: DownloadTask) {}
    public func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) {}
    public func task(_ task: SessionTask, didCompleteWith error: (any Error)?) {}
    public func downloadTask(_ task: DownloadTask, didMoveFileTo destination: URL) {}
    public func downloadTask(_ task: DownloadTask, didFailToMoveFileTo destination: URL, error: any Error) {}
    public func task(_ task: SessionTask, didFinishWith info: TaskCompletionInfo) {}
    public func sessionDidInvalidate(error: (any Error)?) {}
}

// MARK: - The channel

/// Monitors added to every manager of the process (HawserFoundation's NotificationCenter adapter).
/// Each channel keeps a reference to the one instance, so a step reads an instance's atomic, not a
/// lazily initialized global.
final class ProcessMonitors: Sendable {
    static let shared = ProcessMonitors()
    let list = Mutex<[any EventMonitor]>([])
    /// `list.count`, read without the lock on every step.
    let count = Atomic<Int>(0)
}

extension SessionManager {
    /// Adds a monitor that sees every step of every task of every manager in the process, after
    /// each manager's own monitors. HawserFoundation posts AFNetworking's notifications on
    /// `NotificationCenter` through one of these.
    public static func addProcessEventMonitor(_ monitor: any EventMonitor) {
        let process = ProcessMonitors.shared
        process.list.withLock { list in
            list.append(monitor)
            process.count.store(list.count, ordering: .releasing)
        }
    }
}

/// A manager's monitors: the block adapter while an observe-only block is set, the event hub
/// while someone observes, the monitors given at init or added, then the process's. The hot path
/// asks ``isActive`` (one atomic load) and builds nothing when no one listens.
final class MonitorChannel: Sendable {
    private struct Lists {
        var blocks: BlockMonitor?
        var hub: EventHub?
        var own: [any EventMonitor]
        var snapshot: [any EventMonitor] = []

        mutating func rebuild() {
            var all: [any EventMonitor] = []
            if let blocks { all.append(blocks) }
            if let hub { all.append(hub) }
            all.append(contentsOf: self.own)
            self.snapshot = all
        }
    }
    private let lists: Mutex<Lists>
    private let ownCount = Atomic<Int>(0)
    private let process = ProcessMonitors.shared

    init(_ monitors: [any EventMonitor]) {
        var lists = Lists(own: monitors)
        lists.rebuild()
        self.lists = Mutex(lists)
        self.ownCount.store(lists.snapshot.count, ordering: .releasing)
    }

    /// Whether any monitor (the manager's or the process's) would hear a step.
    @inline(__always)
    var isActive: Bool {
        self.ownCount.load(ordering: .acquiring) != 0 || self.process.count.load(ordering: .acquiring) != 0
    }

    /// Every monitor, in order. Call only when ``isActive``.
    var all: [any EventMonitor] {
        let own = self.lists.withLock { $0.snapshot }
        if self.process.count.load(ordering: .acquiring) == 0 { return own }
        return own + self.process.list.withLock { $0 }
    }

    /// Emits one event: calls `body` with each monitor, if there is any.
    @inline(__always)
    func emit(_ body: (any EventMonitor) -> Void) {
        guard self.isActive else { return }
        for m in self.all { body(m) }
    }

    func add(_ monitor: any EventMonitor) {
        self.update { $0.own.append(monitor) }
    }

    func setBlocks(_ adapter: BlockMonitor?) {
        self.update { $0.blocks = adapter }
    }

    func setHub(_ hub: EventHub?) {
        self.update { $0.hub = hub }
    }

    private func update(_ body: (inout Lists) -> Void) {
        self.lists.withLock { l in
            body(&l)
            l.rebuild()
            self.ownCount.store(l.snapshot.count, ordering: .releasing)
        }
    }
}

// MARK: - Adapter: the manager's observe-only blocks

/// AFURLSessionManager's observe-only blocks as a monitor: the rows of `ManagerHooks.table` whose
/// role is `.observed` (a block added with that role is called from a method here). In the
/// channel only while one of them is set; it reads the block at each step, so a block set or
/// cleared takes effect at once.
final class BlockMonitor: EventMonitor, @unchecked Sendable {
    private let hooks: Locked<ManagerHooks>

    init(hooks: Locked<ManagerHooks>) { self.hooks = hooks }

    func task(
        _ task: SessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        self.hooks.withLock { $0.taskDidSendBodyData }?(task, bytesSent, totalBytesSent, totalBytesExpectedToSend)
    }
    func dataTask(_ task: DataTask, didReceive bytes: UnsafeRawBufferPointer) {
        // A copy only when the block is set: the bytes are valid during the call only.
        if let block = self.hooks.withLock({ $0.dataTaskDidReceiveData }) { block(task, Data(bytes)) }
    }
    func downloadTask(
        _ task: DownloadTask,
        didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64
    ) {
        self.hooks.withLock { $0.downloadTaskDidWriteData }?(
            task,
            bytesWritten,
            totalBytesWritten,
            totalBytesExpectedToWrite
        )
    }
    func downloadTask(_ task: DownloadTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) {
        self.hooks.withLock { $0.downloadTaskDidResume }?(task, fileOffset, expectedTotalBytes)
    }
    func dataTask(_ task: DataTask, didBecome downloadTask: DownloadTask) {
        self.hooks.withLock { $0.dataTaskDidBecomeDownloadTask }?(task, downloadTask)
    }
    func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
        self.hooks.withLock { $0.taskDidFinishCollectingMetrics }?(task, metrics)
    }
    func task(_ task: SessionTask, didCompleteWith error: (any Error)?) {
        self.hooks.withLock { $0.taskDidComplete }?(task, error)
    }
    func sessionDidInvalidate(error: (any Error)?) {
        self.hooks.withLock { $0.sessionDidBecomeInvalid }?(error)
    }
}

// MARK: - Adapter: SessionEvent observers and the AsyncStream

/// Turns the monitor steps AFNetworking posts notifications for into ``SessionEvent``s and
/// delivers them to the observers, in order, on one serial queue (AFNetworking posts on the main
/// queue; a Linux program may never run one). In the channel only while someone observes.
final class EventHub: EventMonitor, Sendable {
    private struct State {
        var next = 0
        var observers: [Int: @Sendable (SessionEvent) -> Void] = [:]
    }
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "hawser.session-manager.events")

    /// Adds an observer; returns its token and whether it is the first.
    func add(_ handler: @escaping @Sendable (SessionEvent) -> Void) -> (SessionObserverToken, first: Bool) {
        self.state.withLock { s in
            s.next += 1
            s.observers[s.next] = handler
            return (SessionObserverToken(id: s.next), s.observers.count == 1)
        }
    }

    /// Removes an observer; returns whether none is left.
    func remove(_ token: SessionObserverToken) -> Bool {
        self.state.withLock { s in
            s.observers.removeValue(forKey: token.id)
            return s.observers.isEmpty
        }
    }

    private func post(_ event: SessionEvent) {
        let handlers = self.state.withLock { s in s.observers.sorted { $0.key < $1.key }.map(\.value) }
        guard !handlers.isEmpty else { return }
        self.queue.async {
            for h in handlers { h(event) }
        }
    }

    func taskDidResume(_ task: SessionTask) { self.post(.taskDidResume(task)) }
    func taskDidSuspend(_ task: SessionTask) { self.post(.taskDidSuspend(task)) }
    func task(_ task: SessionTask, didFinishWith info: TaskCompletionInfo) { self.post(.taskDidComplete(task, info)) }
    func downloadTask(_ task: DownloadTask, didMoveFileTo destination: URL) {
        self.post(.downloadTaskDidMoveFile(task, destination: destination))
    }
    func downloadTask(_ task: DownloadTask, didFailToMoveFileTo destination: URL, error: any Error) {
        self.post(.downloadTaskDidFailToMoveFile(task, destination: destination, error: error))
    }
    func sessionDidInvalidate(error: (any Error)?) { self.post(.sessionDidInvalidate(error: error)) }
}
