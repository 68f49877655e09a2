// The manager's async API: data, uploads and downloads, with their progress: the callback API's
// tasks, run by an awaiting Swift task that is their completion and whose cancellation cancels them.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension SessionManager {
    /// Runs a data task for `request` and returns the serialized object and the response.
    /// Cancelling the calling Swift task cancels the task.
    ///
    /// The awaiting task is the completion here: the response serializer runs in it once the
    /// task ends (off the event loop), and ``completionQueue`` and ``completionGroup`` are not
    /// used, since there is no handler to call. The didFinish event is sent before this returns.
    /// The async forms of ``HTTPSessionManager`` (`get`, `post`, …) come through here.
    ///
    /// `responseSerializer`, when given, validates and decodes this response instead of the
    /// manager's ``responseSerializer``, which stays as it is: concurrent calls with different
    /// serializers share nothing.
    public func data(
        for request: HTTPClientRequest,
        responseSerializer: (any ResponseSerialization)? = nil
    ) async throws -> (value: (any Sendable)?, response: HawserResponse) {
        let task = self.makeDataTask(request, completion: .awaiting, responseSerializer: responseSerializer)
        return try await Self.outcome(of: task).value()
    }

    /// Resumes a task made with the `.awaiting` completion and waits for its outcome. Cancelling
    /// the calling Swift task cancels the task.
    static func outcome(of task: SessionTask) async -> TaskOutcome {
        guard let delegate = task.delegate else {
            preconditionFailure("an awaited task is resumed once, right after it was made")
        }
        return await withTaskCancellationHandler {
            // Unsafe is sound: the lifecycle completes a task exactly once, and the delegate's
            // slot hands the outcome over once, whichever of the two arrives first.
            await withUnsafeContinuation { (continuation: UnsafeContinuation<TaskOutcome, Never>) in
                delegate.install(continuation)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// Downloads `request` to the URL `destination` returns; returns that URL and the response.
    ///
    /// The body is written to a temporary file as it arrives (memory stays bounded); at the end
    /// `destination`, given the temporary file and the response, says where to move it.
    /// `progress` is called after each write with the download's ``TransferProgress`` (bytes
    /// written out of `Content-Length`, -1 without one), on the event loop: keep it quick, or
    /// read ``TransferProgress/updates`` instead. Cancelling the calling Swift task cancels the
    /// download, removes the temporary file and throws `HawserError` `.cancelled`.
    ///
    /// - Throws: the errors of ``HawserFailure``'s table: `HawserError` for the exchange,
    ///   ``SessionManagerError`` `.cannotMoveDownloadedFile` or `.downloadWriteFailed` for the
    ///   file, ``SerializationError`` when the manager's serializer refuses the response.
    public func download(
        for request: HTTPClientRequest,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        to destination: @escaping @Sendable (URL, HawserResponse?) -> URL
    ) async throws -> (url: URL, response: HawserResponse) {
        let task = DownloadTask(
            identifier: self.core.nextIdentifier(),
            request: request,
            core: self.core,
            resumeFrom: nil
        )
        _ = self.register(task, completion: .awaiting, destination: destination, upload: nil, download: progress)
        let (value, response) = try await Self.outcome(of: task).value()
        guard let url = value as? URL else { throw SessionManagerError.noRequest }
        return (url, response)
    }

    /// Uploads `bodyData` as the body of `request` and returns the serialized response object
    /// and the response.
    ///
    /// `progress` is called as the body is written to the socket, with the upload's
    /// ``TransferProgress`` (bytes sent out of the body's length), on the event loop.
    /// `responseSerializer`, when given, validates and decodes this response instead of the
    /// manager's ``responseSerializer`` (which stays as it is). Cancelling the calling Swift task
    /// cancels the upload.
    public func upload(
        for request: HTTPClientRequest,
        from bodyData: Data,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        responseSerializer: (any ResponseSerialization)? = nil
    ) async throws -> (value: (any Sendable)?, response: HawserResponse) {
        var r = request
        r.body = .bytes(Array(bodyData))
        return try await self.awaitUpload(r, preflightError: nil, progress: progress, responseSerializer)
    }

    /// Uploads the file at `fileURL` as the body of `request`, streamed in 64 KiB chunks (memory
    /// stays bounded whatever the file's size), and returns the serialized response object and
    /// the response.
    ///
    /// `progress` and `responseSerializer` are as in ``upload(for:from:progress:responseSerializer:)``.
    /// A file that cannot be opened or is not a regular file throws
    /// ``SessionManagerError/cannotReadUploadFile(path:errno:)`` before any IO. Cancelling the
    /// calling Swift task cancels the upload.
    public func upload(
        for request: HTTPClientRequest,
        fromFile fileURL: URL,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        responseSerializer: (any ResponseSerialization)? = nil
    ) async throws -> (value: (any Sendable)?, response: HawserResponse) {
        let (r, preflight) = Self.fileUpload(request, fileURL)
        return try await self.awaitUpload(r, preflightError: preflight, progress: progress, responseSerializer)
    }

    private func awaitUpload(
        _ request: HTTPClientRequest,
        preflightError: (any Error)?,
        progress: (@Sendable (TransferProgress) -> Void)?,
        _ responseSerializer: (any ResponseSerialization)?
    ) async throws -> (value: (any Sendable)?, response: HawserResponse) {
        let task = UploadTask(identifier: self.core.nextIdentifier(), request: request, core: self.core)
        task.preflightError = preflightError
        _ = self.register(
            task,
            completion: .awaiting,
            upload: progress,
            download: nil,
            responseSerializer: responseSerializer
        )
        return try await Self.outcome(of: task).value()
    }
}
