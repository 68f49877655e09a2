import HawserCore

// AFURLSessionManager's task creation: data, upload and download tasks (suspended), each given
// its TaskDelegate and kept in the registry until it completes; a data task that becomes a download.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension SessionManager {

    /// The tasks that have not completed yet.
    public var tasks: [SessionTask] {
        self.core.registry.withLock { Array($0.tasks.values) }.sorted { $0.taskIdentifier < $1.taskIdentifier }
    }
    /// The data tasks (upload tasks excluded) that have not completed yet.
    public var dataTasks: [DataTask] { self.tasks.compactMap { $0 is UploadTask ? nil : $0 as? DataTask } }
    /// The upload tasks that have not completed yet.
    public var uploadTasks: [UploadTask] { self.tasks.compactMap { $0 as? UploadTask } }
    /// The download tasks that have not completed yet.
    public var downloadTasks: [DownloadTask] { self.tasks.compactMap { $0 as? DownloadTask } }

    /// The upload progress of a task that has not completed; nil otherwise.
    public func uploadProgress(for task: SessionTask) -> TransferProgress? {
        self.isRegistered(task) ? task.uploadProgress : nil
    }

    /// The download progress of a task that has not completed; nil otherwise.
    public func downloadProgress(for task: SessionTask) -> TransferProgress? {
        self.isRegistered(task) ? task.downloadProgress : nil
    }

    private func isRegistered(_ task: SessionTask) -> Bool {
        self.core.registry.withLock { $0.tasks[task.taskIdentifier] === task }
    }

    /// Creates a data task (suspended: call `resume()`). `completionHandler` runs once on the
    /// completion queue with the response, the serialized object and the error. (The handler has no
    /// default, so a trailing closure is always the completion handler, never a progress block.)
    public func dataTask(
        with request: HTTPClientRequest,
        uploadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
        downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
        completionHandler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> DataTask {
        self.makeDataTask(
            request,
            completion: Self.completion(completionHandler),
            upload: uploadProgress,
            download: downloadProgress
        )
    }

    static func completion(
        _ handler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> TaskDelegate.Completion {
        guard let handler else { return .none }
        return .handler { _, response, object, error in handler(response, object, error) }
    }

    func makeDataTask(
        _ request: HTTPClientRequest,
        completion: TaskDelegate.Completion,
        upload: (@Sendable (TransferProgress) -> Void)? = nil,
        download: (@Sendable (TransferProgress) -> Void)? = nil,
        responseSerializer: (any ResponseSerialization)? = nil
    ) -> DataTask {
        let task = DataTask(identifier: self.core.nextIdentifier(), request: request, core: self.core)
        return self.register(
            task,
            completion: completion,
            upload: upload,
            download: download,
            responseSerializer: responseSerializer
        )
    }

    /// Creates an upload task sending `bodyData` (suspended).
    public func uploadTask(
        with request: HTTPClientRequest,
        from bodyData: Data,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        completionHandler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> UploadTask {
        var r = request
        r.body = .bytes(Array(bodyData))
        return self.makeUpload(
            r,
            preflightError: nil,
            progress: progress,
            completion: Self.completion(completionHandler)
        )
    }

    /// Creates an upload task streaming the file at `fileURL` in 64 KiB chunks (suspended). Memory
    /// stays bounded whatever the file's size. An unreadable file fails the task when it is resumed.
    public func uploadTask(
        with request: HTTPClientRequest,
        fromFile fileURL: URL,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        completionHandler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> UploadTask {
        let (r, preflight) = Self.fileUpload(request, fileURL)
        return self.makeUpload(
            r,
            preflightError: preflight,
            progress: progress,
            completion: Self.completion(completionHandler)
        )
    }

    /// Creates an upload task whose request carries its own body — typically a
    /// `RequestBody.stream` (suspended). A streamed body cannot be replayed, so such a task is
    /// never retried.
    public func uploadTask(
        withStreamedRequest request: HTTPClientRequest,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        completionHandler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> UploadTask {
        self.makeUpload(
            request,
            preflightError: nil,
            progress: progress,
            completion: Self.completion(completionHandler)
        )
    }

    func makeUpload(
        _ request: HTTPClientRequest,
        preflightError: (any Error)?,
        progress: (@Sendable (TransferProgress) -> Void)?,
        completion: TaskDelegate.Completion
    ) -> UploadTask {
        let task = UploadTask(identifier: self.core.nextIdentifier(), request: request, core: self.core)
        task.preflightError = preflightError
        return self.register(task, completion: completion, upload: progress, download: nil)
    }

    /// Creates a download task (suspended). The body is written to a temporary file as it arrives;
    /// at the end `destination` (given the temporary URL and the response) says where to move it,
    /// and `completionHandler` gets that URL — or the error, also when the move failed.
    public func downloadTask(
        with request: HTTPClientRequest,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        destination: (@Sendable (URL, HawserResponse?) -> URL)? = nil,
        completionHandler: (@Sendable (HawserResponse?, URL?, (any Error)?) -> Void)?
    ) -> DownloadTask {
        let task = DownloadTask(
            identifier: self.core.nextIdentifier(),
            request: request,
            core: self.core,
            resumeFrom: nil
        )
        return self.register(
            task,
            completion: Self.downloadCompletion(completionHandler),
            destination: destination,
            upload: nil,
            download: progress
        )
    }

    /// Creates a download task that continues from `resumeData` (see ``DownloadResumeData``)
    /// with `Range` + `If-Range`: a 206 appends to the partial file, a 200 (Range ignored, or the
    /// entity changed) starts again from zero, a 416 asks again without Range. Invalid resume data
    /// fails the task when it is resumed.
    public func downloadTask(
        withResumeData resumeData: Data,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        destination: (@Sendable (URL, HawserResponse?) -> URL)? = nil,
        completionHandler: (@Sendable (HawserResponse?, URL?, (any Error)?) -> Void)?
    ) -> DownloadTask {
        var preflight: (any Error)? = nil
        var resume: DownloadResumeData? = nil
        var request: HTTPClientRequest? = nil
        do {
            var r = try DownloadResumeData(data: resumeData)
            var headers = HTTPHeaders()
            for pair in r.headers { headers.add(name: pair[0], value: pair[1]) }
            request = HTTPClientRequest(method: .get, url: r.url, headers: headers)
            // The partial file must still hold the bytes the resume data counts; otherwise start over.
            var st = stat()
            if stat(r.temporaryFilePath, &st) != 0 || Int64(st.st_size) < r.bytesWritten {
                r.bytesWritten = 0
            }
            resume = r
        } catch {
            preflight = error
        }
        let task = DownloadTask(
            identifier: self.core.nextIdentifier(),
            request: request,
            core: self.core,
            resumeFrom: resume
        )
        task.preflightError = preflight
        return self.register(
            task,
            completion: Self.downloadCompletion(completionHandler),
            destination: destination,
            upload: nil,
            download: progress
        )
    }

    static func downloadCompletion(
        _ handler: (@Sendable (HawserResponse?, URL?, (any Error)?) -> Void)?
    ) -> TaskDelegate.Completion {
        guard let handler else { return .none }
        return .handler { _, response, object, error in handler(response, object as? URL, error) }
    }

    /// Gives `task` its delegate and keeps it until it completes.
    func register<T: SessionTask>(
        _ task: T,
        completion: TaskDelegate.Completion,
        destination: (@Sendable (URL, HawserResponse?) -> URL)? = nil,
        upload: (@Sendable (TransferProgress) -> Void)?,
        download: (@Sendable (TransferProgress) -> Void)?,
        responseSerializer: (any ResponseSerialization)? = nil
    ) -> T {
        let delegate = TaskDelegate(
            owner: task,
            core: self.core,
            completion: completion,
            destination: destination,
            responseSerializer: responseSerializer
        )
        task.locked.withLock { $0.delegate = delegate }
        if let upload { task.uploadProgress.addObserver(upload) }
        if let download { task.downloadProgress.addObserver(download) }
        self.core.registry.withLock { $0.tasks[task.taskIdentifier] = task }
        self.core.channel.emit { $0.taskDidCreate(task) }
        return task
    }

    /// The data task's delegate and the engine attempt move to a new download task (AFNetworking's
    /// `didBecomeDownloadTask`). Called on the loop from the data task's delegate.
    func convertToDownload(
        _ dataTask: DataTask,
        delegate: TaskDelegate,
        engine: RequestTask,
        attempt: Int,
        response: HawserResponse
    ) -> DownloadTask {
        let download = DownloadTask(
            identifier: self.core.nextIdentifier(),
            request: dataTask.originalRequest,
            core: self.core,
            resumeFrom: nil
        )
        let current = dataTask.currentRequest
        download.locked.withLock { s in
            s.lifecycle = .continuing(attempt: attempt, engine: engine)
            s.currentRequest = current
            s.response = response
            s.expectedToReceive = response.expectedContentLength
            s.delegate = delegate
        }
        dataTask.locked.withLock { s in
            s.lifecycle.handOver()
            s.delegate = nil
        }
        self.core.registry.withLock { r in
            r.tasks[dataTask.taskIdentifier] = nil
            r.tasks[download.taskIdentifier] = download
            if r.waitingForInvalidation?.remove(dataTask.taskIdentifier) != nil {
                r.waitingForInvalidation?.insert(download.taskIdentifier)
            }
        }
        return download
    }
}
