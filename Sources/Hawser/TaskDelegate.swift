// AFURLSessionManagerTaskDelegate: what the manager keeps per task — the accumulated body, the
// progress objects, the destination of a download, the completion handler — and the one path that
// ends a task: serializer on the processing queue, completion on the completion queue inside the
// completion group, then the didComplete event.
import Foundation
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
    /// A download's destination (the `destination` block of `downloadTask(with:…)`).
    let destination: (@Sendable (URL, HTTPResponse?) -> URL)?
    private let serializer: any ResponseSerialization
    private let completionQueue: DispatchQueue
    private let completionGroup: DispatchGroup
    private weak var manager: SessionManager?

    init(manager: SessionManager, completion: TaskCompletion?, destination: (@Sendable (URL, HTTPResponse?) -> URL)? = nil) {
        self.manager = manager
        self.completion = completion
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
        let isDownload = task is DownloadTask
        let info = TaskCompletionInfo(responseSerializer: self.serializer,
                                      responseData: isDownload ? nil : Data(data ?? []),
                                      assetPath: fileURL, serializedResponse: nil, error: error, metrics: metrics)
        let hub = task.hub
        let completion = self.completion
        let group = self.completionGroup
        let queue = self.completionQueue
        if let error {
            queue.async(group: group) {
                completion?(response, nil, error)
                hub.post(.taskDidComplete(task, info))
            }
            return
        }
        let serializer = self.serializer
        let movedFile = fileURL
        let baseInfo = info
        group.enter()
        processingQueue.async {
            var info = baseInfo
            var object: (any Sendable)? = nil
            var failure: (any Error)? = nil
            do {
                object = try serializer.responseObject(for: response, data: isDownload ? nil : (data ?? []))
            } catch {
                failure = error
            }
            if let movedFile { object = movedFile }
            info.serializedResponse = object
            info.error = failure
            let result = object
            let finalError = failure
            let finalInfo = info
            queue.async(group: group) {
                completion?(response, result, finalError)
                hub.post(.taskDidComplete(task, finalInfo))
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
