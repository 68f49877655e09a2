import HawserCore
import Synchronization

// NSURLSessionDownloadTask: the body goes to a temporary file as it arrives (memory stays bounded
// by the engine's read chunk), and an interrupted download can continue from resume data with a
// Range request validated by If-Range.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// What a download needs to continue where it stopped (NSURLSessionDownloadTaskResumeData).
///
/// Encoding (version 1): a UTF-8 JSON object with sorted keys —
/// `format` (always `"hawser.download-resume-data"`), `version` (1), `url`, `headers` (the
/// original request's fields as `[name, value]` pairs, without `Range` / `If-Range`),
/// `bytesWritten`, `temporaryFilePath`, and the validators `entityTag` / `lastModified` (at least
/// one is present). Readers refuse other formats and newer versions.
///
/// The temporary file must be one this library made: a path in the temporary directory whose
/// name starts with `hawser-download-`. Resume data naming any other file is refused, so crafted
/// resume data cannot make a download overwrite an arbitrary file.
public struct DownloadResumeData: Codable, Sendable, Hashable {
    /// The `format` value.
    public static let formatName = "hawser.download-resume-data"
    /// The newest version this library reads and the one it writes.
    public static let currentVersion = 1

    /// Always ``formatName``; readers refuse any other value.
    public var format: String = DownloadResumeData.formatName
    /// The encoding's version; readers refuse a version above ``currentVersion``.
    public var version: Int = DownloadResumeData.currentVersion
    /// The URL being downloaded.
    public var url: URL
    /// The original request's header fields, `[name, value]`.
    public var headers: [[String]]
    /// Bytes already in the temporary file.
    public var bytesWritten: Int64
    /// The temporary file holding those bytes.
    public var temporaryFilePath: String
    /// The response's `ETag` (used for If-Range when it is a strong validator).
    public var entityTag: String?
    /// The response's `Last-Modified` (If-Range's fallback).
    public var lastModified: String?

    /// Creates resume data; each parameter sets the property of the same name. Downloads make these
    /// when they stop; ``init(data:)`` validates data read back.
    public init(
        url: URL,
        headers: [[String]],
        bytesWritten: Int64,
        temporaryFilePath: String,
        entityTag: String?,
        lastModified: String?
    ) {
        self.url = url
        self.headers = headers
        self.bytesWritten = bytesWritten
        self.temporaryFilePath = temporaryFilePath
        self.entityTag = entityTag
        self.lastModified = lastModified
    }

    /// Decodes and validates resume data.
    public init(data: Data) throws(SessionManagerError) {
        let decoded: DownloadResumeData
        do {
            decoded = try JSONDecoder().decodeReceived(DownloadResumeData.self, from: data)
        } catch {
            throw .invalidResumeData("not Hawser resume data: \(error)")
        }
        guard decoded.format == Self.formatName else { throw .invalidResumeData("unknown format '\(decoded.format)'") }
        guard decoded.version >= 1, decoded.version <= Self.currentVersion else {
            throw .invalidResumeData(
                "version \(decoded.version) is not supported (this library reads up to \(Self.currentVersion))"
            )
        }
        guard decoded.bytesWritten >= 0 else { throw .invalidResumeData("bytesWritten is negative") }
        guard let scheme = decoded.url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw .invalidResumeData("the URL is not http(s)")
        }
        guard decoded.headers.allSatisfy({ $0.count == 2 }) else {
            throw .invalidResumeData("a header is not a [name, value] pair")
        }
        let file = URL(fileURLWithPath: decoded.temporaryFilePath).standardizedFileURL
        let tmp = FileManager.default.temporaryDirectory.standardizedFileURL
        guard file.deletingLastPathComponent().path == tmp.path,
            file.lastPathComponent.hasPrefix(DownloadTask.temporaryPrefix)
        else {
            throw .invalidResumeData(
                "the temporary file \(decoded.temporaryFilePath) is not one of Hawser's download files"
            )
        }
        self = decoded
    }

    /// The versioned encoding described above.
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)) ?? Data()
    }

    /// The validator for If-Range: a strong ETag, else Last-Modified (RFC 9110 §13.1.5).
    var ifRangeValidator: String? {
        if let e = self.entityTag, !e.hasPrefix("W/") { return e }
        return self.lastModified
    }
}

/// A task that streams the response body into a temporary file, then hands the file to its
/// destination (NSURLSessionDownloadTask).
public final class DownloadTask: SessionTask, @unchecked Sendable {
    static let temporaryPrefix = "hawser-download-"

    struct FileState {
        var fd: Int32 = -1
        var url: URL?
        /// Bytes in the file before this attempt's body (the resume offset).
        var base: Int64 = 0
        var written: Int64 = 0
        var expectedTotal: Int64 = -1
        var resumeFrom: DownloadResumeData?
        var rangeRequested = false
        var discardBody = false
        var restart = false
        var entityTag: String?
        var lastModified: String?
        var wantsResumeData = false
        var resumeDataHandler: (@Sendable (Data?) -> Void)?
        var resumeData: Data?
        var writeError: (any Error)?
        /// Body bytes received and not yet written, in order (the loop's copy buffers and the
        /// reads the engine gave away, ``OwnedBodyDelegate``), their sum, and whether a drain job
        /// is queued or running.
        var pending: [[UInt8]] = []
        var pendingCount = 0
        /// A copy buffer the drain job wrote, emptied, kept for the loop's `filling`: two copy
        /// buffers per download, reused, so copied batches allocate (and fault in) no fresh pages.
        var spare: [UInt8] = []
        var draining = false
        /// Bytes the drain job is writing now, and bytes the loop holds in `filling` (for the
        /// back-pressure sums, and so that a drain that finds nothing left asks for them).
        var inFlight = 0
        var fillingCount = 0
        /// Reading is paused until the writes catch up (``highWater`` / ``lowWater``).
        var paused = false
        /// A file job was queued this attempt: the attempt's end waits behind the jobs.
        var usedIO = false
    }
    let file = Locked(FileState())
    /// Loop-confined: body bytes copied out of the engine's buffer, outside the lock, after the
    /// chunks of `ready`; both are moved to `pending` (no copy) a batch at a time, so the lock is
    /// held for O(1) work only.
    private var filling: [UInt8] = []
    /// Loop-confined: reads the engine gave away, and copy buffers they closed, in order; their sum.
    private var ready: [[UInt8]] = []
    private var readyCount = 0
    /// Body bytes that reached the file as reads the engine gave away (no copy on the loop).
    let ownedBodyBytes = Atomic<Int>(0)
    /// Bytes the loop holds for the file.
    private var fillBytes: Int { self.readyCount + self.filling.count }
    /// Loop-confined: where the drain jobs report writes (the channel of the latest chunk).
    private var eventChannel: MonitorChannel?
    /// Loop-confined: hands `filling` over when it stayed under ``batchSize`` for ``flushDelay``
    /// (a slow or stalled server), so no byte waits long for the file.
    private var flushTimer: Scheduled?

    /// The file's open, writes and close run on the IO pool, one job at a time in order under
    /// this key, never on the event loop: a slow disk then holds back this download's reading
    /// (back-pressure), not every connection of the loop.
    let ioKey: String
    var ioPool: BlockingIOPool { .shared }
    /// Reading pauses when this much is waiting to be written, and resumes below `lowWater`.
    static let highWater = 512 * 1024
    static let lowWater = 128 * 1024
    /// The loop hands bytes to the drain job 256 KiB at a time (one wake-up of the IO thread per
    /// batch, not per read), or after `flushDelay` with less.
    static let batchSize = 256 * 1024
    static let flushDelay: UInt64 = 5_000_000

    init(identifier: Int, request: HTTPClientRequest?, core: ManagerCore, resumeFrom: DownloadResumeData?) {
        self.ioKey = "hawser-download-\(UUID().uuidString)"
        super.init(identifier: identifier, request: request, core: core)
        self.file.withLock { f in
            guard let r = resumeFrom else { return }
            f.url = URL(fileURLWithPath: r.temporaryFilePath)
            f.resumeFrom = r
            f.entityTag = r.entityTag
            f.lastModified = r.lastModified
        }
    }

    /// The file the body is being written to (NSURLSession's `location`); nil before the head.
    public var temporaryFileURL: URL? { self.file.withLock { $0.url } }

    /// Resume data left by a download that failed after receiving part of the body with a
    /// validator, or that was cancelled by ``cancel(byProducingResumeData:)``. Pass it to
    /// ``SessionManager/downloadTask(withResumeData:progress:destination:completionHandler:)``.
    public var resumeData: Data? { self.file.withLock { $0.resumeData } }

    /// Cancels the download and calls `handler` with resume data, or nil when it cannot be resumed
    /// (nothing received yet, or the server gave no ETag / Last-Modified). The partial file is kept
    /// for the resumed task; without resume data it is removed.
    public func cancel(byProducingResumeData handler: @escaping @Sendable (Data?) -> Void) {
        let alreadyDone = self.file.withLock { f -> Bool in
            if f.wantsResumeData { return true }
            f.wantsResumeData = true
            f.resumeDataHandler = handler
            return false
        }
        if alreadyDone {
            handler(nil)
            return
        }
        if self.state == .completed {
            let h = self.file.withLock { f -> (@Sendable (Data?) -> Void)? in
                defer { f.resumeDataHandler = nil }
                return f.resumeDataHandler
            }
            h?(nil)
            return
        }
        self.cancel()
    }

    // MARK: - Attempts

    override var changesRequestForAttempts: Bool { true }

    override func prepareForAttempt(_ request: HTTPClientRequest) -> HTTPClientRequest {
        var r = request
        r.headers.remove(name: "Range")
        r.headers.remove(name: "If-Range")
        self.file.withLock { f in
            f.rangeRequested = false
            f.discardBody = false
            f.restart = false
            guard let resume = f.resumeFrom, resume.bytesWritten > 0, let validator = resume.ifRangeValidator else {
                return
            }
            r.headers.add(name: "Range", value: "bytes=\(resume.bytesWritten)-")
            r.headers.add(name: "If-Range", value: validator)
            f.rangeRequested = true
        }
        return r
    }

    /// The final head arrived (on the loop, from the task's delegate): decides whether the
    /// resume worked, opens the file, reports progress and the resume.
    func didReceiveResponse(_ response: HawserResponse, engine engineTask: RequestTask, channel: MonitorChannel?) {
        let length = response.expectedContentLength
        enum Resumed {
            case no
            case at(Int64, Int64)
        }
        var resumed = Resumed.no
        let kept: Int64? = self.file.withLock { f -> Int64? in
            f.entityTag = response.headers["ETag"] ?? f.entityTag
            f.lastModified = response.headers["Last-Modified"] ?? f.lastModified
            var keep: Int64 = 0
            if f.rangeRequested, let resume = f.resumeFrom {
                switch response.statusCode {
                case 206:
                    if let range = Self.parseContentRange(response.headers["Content-Range"]),
                        range.start == resume.bytesWritten
                    {
                        keep = resume.bytesWritten
                        f.expectedTotal = range.total ?? (length >= 0 ? keep + length : -1)
                    } else {
                        // Not the range we asked for: ask again from zero.
                        f.restart = true
                        f.discardBody = true
                    }
                case 416:
                    f.restart = true
                    f.discardBody = true
                default:
                    // 200: the server ignored Range or the validator changed — the whole entity follows.
                    f.expectedTotal = length
                }
                if !f.restart { resumed = .at(keep, f.expectedTotal) }
            } else {
                f.expectedTotal = length
            }
            if f.discardBody { return nil }
            f.base = keep
            f.written = keep
            f.pending = []
            f.pendingCount = 0
            f.fillingCount = 0
            f.paused = false
            f.usedIO = true
            return keep
        }
        self.dropFilling()
        guard let keep = kept else { return }
        let resumedAt = resumed
        // Opening (creating, truncating to what is kept) is file IO: a job, which the writes
        // queue behind; the progress and the resume are reported once it is done.
        let loop = engineTask.eventLoop
        self.ioPool.submit(key: self.ioKey) { [self] in
            let target = self.file.withLock { ($0.fd, $0.url) }
            let opened = Self.openFile(fd: target.0, url: target.1, keeping: keep)
            let total = self.file.withLock { f -> (Int64, Int64)? in
                // The descriptor and the name are kept even on failure: the end closes and removes them.
                f.fd = opened.fd
                f.url = opened.url
                if let error = opened.error {
                    f.writeError = error
                    f.pending = []
                    f.pendingCount = 0
                    return nil
                }
                return (f.written, f.expectedTotal)
            }
            guard let total else {
                if let error = opened.error {
                    engineTask.fail(
                        with: HawserError(.ioError, "cannot open the download file: \(error)", underlying: error)
                    )
                }
                return
            }
            self.receivedBytes.store(total.0, ordering: .relaxed)
            self.existingDownloadProgress?.set(completed: total.0, total: total.1)
            if case .at(let offset, let expected) = resumedAt, let channel {
                loop.executeIfRunning {
                    channel.emit { $0.downloadTask(self, didResumeAtOffset: offset, expectedTotalBytes: expected) }
                }
            }
        }
    }

    /// Body bytes (on the loop, from the task's delegate): queued for the file. The first bytes
    /// queue a drain job; past ``highWater`` waiting bytes the engine stops reading until the
    /// job has written them down to ``lowWater``.
    func write(_ bytes: UnsafeRawBufferPointer, engine engineTask: RequestTask, channel: MonitorChannel?) {
        if !self.ready.isEmpty {
            // Between reads given away (a chunked body's framing read): copied at its size.
            self.readyCount += bytes.count
            self.ready.append([UInt8](bytes))
            self.queued(engine: engineTask, channel: channel)
            return
        }
        if self.filling.isEmpty && self.filling.capacity < Self.batchSize {
            self.filling.reserveCapacity(Self.batchSize)
        }
        self.filling.append(contentsOf: bytes)
        self.queued(engine: engineTask, channel: channel)
    }

    /// Body bytes the engine gave away (on the loop): queued for the file as they are, no copy.
    func write(chunk: [UInt8], engine engineTask: RequestTask, channel: MonitorChannel?) {
        if !self.filling.isEmpty {
            // Copied bytes come first: their buffer is closed and queued before the chunk.
            self.readyCount += self.filling.count
            self.ready.append(self.filling)
            self.filling = []
        }
        self.readyCount += chunk.count
        self.ownedBodyBytes.add(chunk.count, ordering: .relaxed)
        self.ready.append(chunk)
        self.queued(engine: engineTask, channel: channel)
    }

    private func dropFilling() {
        self.filling.removeAll(keepingCapacity: true)
        self.ready = []
        self.readyCount = 0
    }

    /// Hands the bytes the loop holds over once they make a batch, or arms the flush timer.
    private func queued(engine engineTask: RequestTask, channel: MonitorChannel?) {
        self.eventChannel = channel
        if self.fillBytes < Self.batchSize {
            if self.flushTimer == nil {
                self.flushTimer = engineTask.eventLoop.scheduleInLoop(in: Self.flushDelay) { [self] in
                    self.flushTimer = nil
                    self.handOff(engine: engineTask, channel: channel, whole: true)
                }
            }
            return
        }
        self.handOff(engine: engineTask, channel: channel)
    }

    /// On the loop: moves what the loop holds (`ready`, then `filling`) to `pending` once it makes
    /// a batch, starts the drain job if none runs, and pauses reading past the high-water mark.
    /// `whole`: whatever the loop holds (a flush); `force`: the same (the body ended).
    private func handOff(
        engine engineTask: RequestTask,
        channel: MonitorChannel?,
        whole: Bool = false,
        force: Bool = false
    ) {
        if self.fillBytes < Self.batchSize && !whole && !force { return }
        if let timer = self.flushTimer {
            timer.cancel()
            self.flushTimer = nil
        }
        var pause = false
        var drop = false
        let startDrain = self.file.withLock { f -> Bool in
            if f.discardBody || f.writeError != nil {
                drop = true
                return false
            }
            f.pendingCount += self.fillBytes
            if f.pending.isEmpty {
                swap(&f.pending, &self.ready)
            } else {
                f.pending.append(contentsOf: self.ready)
                self.ready.removeAll(keepingCapacity: true)
            }
            self.readyCount = 0
            if !self.filling.isEmpty {
                // The copy buffer goes as it is; the loop fills the spare one next.
                f.pending.append(self.filling)
                self.filling = []
                swap(&self.filling, &f.spare)
            }
            f.fillingCount = 0
            if f.pendingCount + f.inFlight >= Self.highWater {
                // Also when paused already: a `resume()` of the task may have resumed the reading.
                f.paused = true
                pause = true
            }
            if f.draining || f.pending.isEmpty { return false }
            f.draining = true
            return true
        }
        if drop { self.dropFilling() }
        if pause { engineTask.pauseReading() }
        guard startDrain else { return }
        let loop = engineTask.eventLoop
        self.ioPool.submit(key: self.ioKey) { [self] in
            self.drain(engine: engineTask, loop: loop, channel: channel)
        }
    }

    /// On the IO pool: writes what is waiting until nothing is, reporting each write on the loop.
    private func drain(engine engineTask: RequestTask, loop: EventLoop, channel: MonitorChannel?) {
        while true {
            var leftInFilling = false
            let batch = self.file.withLock { f -> (segments: [[UInt8]], fd: Int32, path: String)? in
                guard !f.pending.isEmpty, f.fd >= 0, f.writeError == nil, !f.discardBody else {
                    f.pending.removeAll()
                    f.pendingCount = 0
                    f.draining = false
                    leftInFilling = f.fillingCount > 0 && f.fd >= 0 && f.writeError == nil && !f.discardBody
                    return nil
                }
                var segments: [[UInt8]] = []
                swap(&segments, &f.pending)
                f.inFlight = f.pendingCount
                f.pendingCount = 0
                return (segments, f.fd, f.url?.path ?? "?")
            }
            guard var batch else {
                // The loop kept bytes while the last batch was being taken: it hands them over.
                if leftInFilling {
                    loop.executeIfRunning { self.handOff(engine: engineTask, channel: channel, whole: true) }
                }
                return
            }
            let file = FileDescriptor(rawValue: batch.fd, path: batch.path)
            var failure: (any Error)? = nil
            var wrote: Int64 = 0
            do throws(FileError) {
                for segment in batch.segments {
                    try file.write(all: segment)
                    wrote += Int64(segment.count)
                }
            } catch {
                failure = SessionManagerError.downloadWriteFailed(path: file.path, errno: error.errnoCode)
            }
            let n = wrote
            // A copy buffer (it has room for a batch; a read the engine gave away has not) is kept
            // for the loop to fill again; the other segments are freed here.
            var reusable: [UInt8] = []
            if let i = batch.segments.lastIndex(where: { $0.capacity >= Self.batchSize }) {
                swap(&reusable, &batch.segments[i])
                reusable.removeAll(keepingCapacity: true)
            }
            batch.segments = []
            var resume = false
            let totals = self.file.withLock { f -> (Int64, Int64) in
                if f.spare.capacity < reusable.capacity { swap(&f.spare, &reusable) }
                f.inFlight = 0
                if let failure {
                    f.writeError = failure
                    f.pending.removeAll()
                    f.pendingCount = 0
                } else {
                    f.written += n
                }
                if f.paused, f.pendingCount + f.fillingCount < Self.lowWater || failure != nil {
                    f.paused = false
                    resume = failure == nil
                }
                return (f.written, f.expectedTotal)
            }
            if let failure {
                engineTask.fail(with: HawserError(.ioError, "\(failure)", underlying: failure))
                self.file.withLock { $0.draining = false }
                return
            }
            if resume {
                // On the loop, unless the caller suspended the task meanwhile: its resume()
                // resumes the reading then.
                loop.executeIfRunning {
                    if !self.isSuspendedByCaller { engineTask.resumeReading() }
                }
            }
            self.receivedBytes.store(totals.0, ordering: .relaxed)
            self.existingDownloadProgress?.set(completed: totals.0, total: totals.1)
            if let channel, channel.isActive {
                loop.executeIfRunning {
                    channel.emit {
                        $0.downloadTask(
                            self,
                            didWriteData: n,
                            totalBytesWritten: totals.0,
                            totalBytesExpectedToWrite: totals.1
                        )
                    }
                }
            }
        }
    }

    /// Runs `body` on `loop` once every file job queued so far has run (at once when there was
    /// none this attempt): the attempt's end, so that it sees every byte written and no job
    /// outlives the file. When the loop has finished, `body` runs on the IO pool's thread.
    func afterFileJobs(on loop: EventLoop, engine engineTask: RequestTask, _ body: @escaping @Sendable () -> Void) {
        // What the loop still holds goes to the file first (dropped when the file failed).
        if let timer = self.flushTimer {
            timer.cancel()
            self.flushTimer = nil
        }
        if self.fillBytes > 0 { self.handOff(engine: engineTask, channel: self.eventChannel, force: true) }
        let used = self.file.withLock { f -> Bool in
            defer { f.usedIO = false }
            return f.usedIO || f.draining
        }
        guard used else {
            body()
            return
        }
        self.ioPool.submit(key: self.ioKey) {
            if !loop.executeIfRunning(body) { body() }
        }
    }

    override var readingHeldBack: Bool { self.file.withLock { $0.paused } }

    override func needsRestart() -> Bool { self.file.withLock { $0.restart } }

    override func willRestart() {
        self.file.withLock { f in
            f.resumeFrom = nil
            f.restart = false
        }
        self.receivedBytes.store(0, ordering: .relaxed)
    }

    override func resetForRetry() {
        super.resetForRetry()
        // A retry continues from what the file holds when the server gave a validator.
        self.file.withLock { f in
            if f.fd >= 0 {
                Glibc.close(f.fd)
                f.fd = -1
            }
            if f.written > 0, let url = f.url, let req = self.originalRequest,
                f.entityTag != nil || f.lastModified != nil
            {
                f.resumeFrom = DownloadResumeData(
                    url: req.url,
                    headers: Self.headerPairs(req),
                    bytesWritten: f.written,
                    temporaryFilePath: url.path,
                    entityTag: f.entityTag,
                    lastModified: f.lastModified
                )
            } else {
                f.resumeFrom = nil
            }
        }
    }

    override func willComplete(error: (any Error)?) -> (any Error)? {
        let writeError = self.file.withLock { $0.writeError }
        let error: (any Error)? = writeError ?? error
        let (data, handler) = self.file.withLock { f -> (Data?, (@Sendable (Data?) -> Void)?) in
            if f.fd >= 0 {
                Glibc.close(f.fd)
                f.fd = -1
            }
            let handler = f.resumeDataHandler
            f.resumeDataHandler = nil
            guard error != nil else { return (nil, handler) }
            var data: Data? = nil
            let wanted = f.wantsResumeData || !(error.map(Self.isCancellation) ?? false)
            if wanted, writeError == nil, f.written > 0, !f.discardBody, let url = f.url,
                f.entityTag.map({ !$0.hasPrefix("W/") }) == true || f.lastModified != nil,
                let req = self.originalRequest
            {
                let resume = DownloadResumeData(
                    url: req.url,
                    headers: Self.headerPairs(req),
                    bytesWritten: f.written,
                    temporaryFilePath: url.path,
                    entityTag: f.entityTag,
                    lastModified: f.lastModified
                )
                data = resume.encoded()
                f.resumeData = data
            } else if let url = f.url {
                try? FileManager.default.removeItem(at: url)
                f.url = nil
            }
            return (data, handler)
        }
        handler?(data)
        return error
    }

    // MARK: - Helpers

    static func isCancellation(_ e: any Error) -> Bool {
        (e as? HawserError)?.code == .cancelled
    }

    static func headerPairs(_ r: HTTPClientRequest) -> [[String]] {
        r.headers.filter { $0.name.lowercased() != "range" && $0.name.lowercased() != "if-range" }.map {
            [$0.name, $0.value]
        }
    }

    /// Opens (or creates) the temporary file — `fd` when it is open already, else `url` or a new
    /// name — and keeps its first `keep` bytes. File IO: on the IO pool. The descriptor (-1 when
    /// the open failed) and the name come back with the error, if any, for the end to clean up.
    private static func openFile(
        fd: Int32,
        url: URL?,
        keeping keep: Int64
    ) -> (fd: Int32, url: URL, error: (any Error)?) {
        let url =
            url
            ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("\(temporaryPrefix)\(UUID().uuidString).tmp")
        var fd = fd
        if fd < 0 {
            do throws(FileError) {
                fd = try FileDescriptor.open(url.path, O_WRONLY | O_CREAT, mode: 0o600).rawValue
            } catch {
                return (-1, url, SessionManagerError.downloadWriteFailed(path: url.path, errno: error.errnoCode))
            }
        }
        let file = FileDescriptor(rawValue: fd, path: url.path)
        do throws(FileError) {
            try file.truncate(to: Int(keep))
            try file.seek(to: Int(keep))
        } catch {
            return (fd, url, SessionManagerError.downloadWriteFailed(path: file.path, errno: error.errnoCode))
        }
        return (fd, url, nil)
    }

    /// `bytes a-b/total` or `bytes a-b/*` (RFC 9110 §14.4).
    static func parseContentRange(_ value: String?) -> (start: Int64, end: Int64, total: Int64?)? {
        guard let value, value.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = value.dropFirst(6).trimmingOWS()
        let parts = spec.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let range = parts[0].split(separator: "-", maxSplits: 1)
        guard range.count == 2, let a = Int64(range[0]), let b = Int64(range[1]), a <= b else { return nil }
        let total = parts[1] == "*" ? nil : Int64(parts[1])
        if parts[1] != "*" && total == nil { return nil }
        return (a, b, total)
    }
}
