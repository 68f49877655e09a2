// AFURLSessionManagerTaskDelegate: what the manager keeps per task — the accumulated body, the
// progress objects, the destination of a download, the completion handler — and the one path that
// ends a task: serializer on the processing queue, completion on the completion queue inside the
// completion group, then the didComplete event.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import HawserCore

/// The queue AFNetworking calls `url_session_manager_processing_queue`: response serializers run
/// here, off the event loop and off the completion queue.
let processingQueue = DispatchQueue(label: "hawser.session-manager.processing", attributes: .concurrent)

/// The group completions run in when the manager has no ``SessionManager/completionGroup``.
let defaultCompletionGroup = DispatchGroup()

/// The completion handler every task kind reduces to: response, serialized object (a file URL for
/// downloads), error.
typealias TaskCompletion = @Sendable (HTTPResponse?, (any Sendable)?, (any Error)?) -> Void

/// One per task, kept by the manager under the task's identifier until the task completes.
final class TaskDelegate: @unchecked Sendable {
    let uploadProgress = TransferProgress()
    let downloadProgress = TransferProgress()
    private let body = Locked<[UInt8]?>(nil)
    private let completion: TaskCompletion?
    /// Set for the manager's async forms instead of `completion`: receives the ended task on the
    /// thread that ended it (usually the event loop), serializer not yet run.
    private let deliver: (@Sendable (TaskOutcome) -> Void)?
    /// A download's destination (the `destination` block of `downloadTask(with:…)`).
    let destination: (@Sendable (URL, HTTPResponse?) -> URL)?
    private let serializer: any ResponseSerialization
    private let completionQueue: DispatchQueue
    private let completionGroup: DispatchGroup
    private weak var manager: SessionManager?

    init(manager: SessionManager, completion: TaskCompletion?, destination: (@Sendable (URL, HTTPResponse?) -> URL)? = nil,
         deliver: (@Sendable (TaskOutcome) -> Void)? = nil) {
        self.manager = manager
        self.completion = completion
        self.deliver = deliver
        self.destination = destination
        let settings = manager.settings.withLock { $0 }
        self.serializer = settings.responseSerializer
        self.completionQueue = settings.completionQueue ?? manager.defaultCompletionQueue
        self.completionGroup = settings.completionGroup ?? defaultCompletionGroup
    }

    /// Wires the progress objects to the task (NSProgress's cancel / pause / resume handlers).
    func wire(to task: SessionTask) {
        for p in [self.uploadProgress, self.downloadProgress] {
            p.cancellationHandler = { [weak task] in task?.cancel() }
            p.pausingHandler = { [weak task] in task?.suspend() }
            p.resumingHandler = { [weak task] in task?.resume() }
        }
        let expected = task.countOfBytesExpectedToSend
        self.uploadProgress.set(completed: 0, total: expected)
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        self.body.withLock { b in
            if b == nil { b = [] }
            b!.append(contentsOf: bytes)
        }
    }

    func resetForRetry() {
        self.body.withLock { $0 = nil }
        self.uploadProgress.reset(total: self.uploadProgress.totalUnitCount)
        self.downloadProgress.reset(total: -1)
    }

    /// Ends the task: moves a download's file, runs the serializer, calls the completion handler
    /// once, posts didComplete. `error` is the task's error (nil on success).
    func taskDidComplete(_ task: SessionTask, error: (any Error)?, metrics: TaskMetrics?) {
        let data = self.body.withLock { b -> [UInt8]? in
            let out = b
            b = nil
            return out
        }
        let response = task.response
        var error = error
        var fileURL: URL? = nil
        if let download = task as? DownloadTask, error == nil {
            switch self.moveDownloadedFile(download, response: response) {
            case .moved(let url): fileURL = url
            case .notMoved: break
            case .failed(let e): error = e
            }
        }
        if error == nil {
            self.uploadProgress.markFinished()
            self.downloadProgress.markFinished()
        }
        let outcome = TaskOutcome(task: task, response: response, data: data, isDownload: task is DownloadTask,
                                  movedFile: fileURL, serializer: self.serializer, error: error, metrics: metrics)
        if let deliver = self.deliver {
            // An async caller: it runs the serializer itself once it resumes, so the task pays one
            // thread hand-off (loop → awaiting task) instead of three.
            deliver(outcome)
            return
        }
        let completion = self.completion
        let group = self.completionGroup
        let queue = self.completionQueue
        if let error {
            queue.async(group: group) {
                completion?(response, nil, error)
                task.hub.post(.taskDidComplete(task, outcome.info(object: nil, error: error)))
            }
            return
        }
        group.enter()
        processingQueue.async {
            let (object, failure) = outcome.serialize()
            queue.async(group: group) {
                completion?(response, object, failure)
                task.hub.post(.taskDidComplete(task, outcome.info(object: object, error: failure)))
            }
            group.leave()
        }
    }

    private enum MoveResult { case moved(URL), notMoved, failed(any Error) }

    /// AFNetworking's `didFinishDownloadingToURL`: the manager's block decides first, then the
    /// task's destination; the file is moved there, and the move's outcome is posted. A file nobody
    /// wants is removed, as NSURLSession removes it.
    private func moveDownloadedFile(_ task: DownloadTask, response: HTTPResponse?) -> MoveResult {
        guard let location = task.temporaryFileURL else { return .notMoved }
        let managerBlock = self.manager?.hooks.withLock { $0.downloadTaskDidFinishDownloading }
        let target = managerBlock?(task, location) ?? self.destination?(location, response)
        guard let target else {
            try? FileManager.default.removeItem(at: location)
            return .notMoved
        }
        do {
            try FileManager.default.moveItem(at: location, to: target)
            task.hub.post(.downloadTaskDidMoveFile(task, destination: target))
            return .moved(target)
        } catch {
            try? FileManager.default.removeItem(at: location)
            let e = SessionManagerError.cannotMoveDownloadedFile(to: target, underlying: error)
            task.hub.post(.downloadTaskDidFailToMoveFile(task, destination: target, error: e))
            return .failed(e)
        }
    }
}

/// A task that has ended, before its response serializer has run: what the completion path needs to
/// produce the serialized object, the didComplete event and the handler's arguments.
struct TaskOutcome: @unchecked Sendable {
    let task: SessionTask
    let response: HTTPResponse?
    let data: [UInt8]?
    let isDownload: Bool
    let movedFile: URL?
    let serializer: any ResponseSerialization
    /// The task's own error (nil on success); the serializer's error comes from ``serialize()``.
    let error: (any Error)?
    let metrics: TaskMetrics?

    /// Runs the serializer unless the task failed, and returns the object and the final error. A
    /// download's object is its moved file.
    func serialize() -> (object: (any Sendable)?, error: (any Error)?) {
        if let error { return (nil, error) }
        var object: (any Sendable)? = nil
        var failure: (any Error)? = nil
        do {
            object = try self.serializer.responseObject(for: self.response, data: self.isDownload ? nil : (self.data ?? []))
        } catch {
            failure = error
        }
        if let movedFile { object = movedFile }
        return (object, failure)
    }

    /// The didComplete event's payload. Built only when someone observes (`EventHub.post` takes
    /// its event as an autoclosure): it copies the body into `Data`.
    func info(object: (any Sendable)?, error: (any Error)?) -> TaskCompletionInfo {
        TaskCompletionInfo(responseSerializer: self.serializer,
                           responseData: self.isDownload ? nil : Data(self.data ?? []),
                           assetPath: self.movedFile, serializedResponse: object, error: error, metrics: self.metrics)
    }

    /// The async forms' end: serializes in the calling task, posts didComplete, and returns the
    /// object and the response or throws the task's or the serializer's error.
    func value() throws -> (value: (any Sendable)?, response: HTTPResponse) {
        let (object, failure) = self.serialize()
        self.task.hub.post(.taskDidComplete(self.task, self.info(object: object, error: failure)))
        if let failure { throw failure }
        guard let response else { throw SessionManagerError.noRequest }
        return (object, response)
    }
}
