import HawserCore

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
    }
    let file = Locked(FileState())

    init(identifier: Int, request: HTTPClientRequest?, core: ManagerCore, resumeFrom: DownloadResumeData?) {
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
    func didReceiveResponse(_ response: HTTPResponse, engine engineTask: RequestTask, channel: MonitorChannel?) {
        let length = response.expectedContentLength
        enum Resumed {
            case no
            case at(Int64, Int64)
        }
        var resumed = Resumed.no
        let failure: (any Error)? = self.file.withLock { f -> (any Error)? in
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
            do {
                try Self.openFile(&f, keeping: keep)
            } catch {
                return error
            }
            f.base = keep
            f.written = keep
            return nil
        }
        if let failure {
            self.file.withLock { $0.writeError = failure }
            engineTask.fail(
                with: HawserError(.ioError, "cannot open the download file: \(failure)", underlying: failure)
            )
            return
        }
        let total = self.file.withLock { ($0.written, $0.expectedTotal) }
        self.receivedBytes.store(total.0, ordering: .relaxed)
        self.existingDownloadProgress?.set(completed: total.0, total: total.1)
        if case .at(let offset, let expected) = resumed {
            channel?.emit { $0.downloadTask(self, didResumeAtOffset: offset, expectedTotalBytes: expected) }
        }
    }

    /// Body bytes (on the loop, from the task's delegate): appended to the file.
    func write(_ bytes: UnsafeRawBufferPointer, engine engineTask: RequestTask, channel: MonitorChannel?) {
        let outcome = self.file.withLock { f -> Result<(Int64, Int64), any Error>? in
            if f.discardBody || f.fd < 0 { return nil }
            let file = FileDescriptor(rawValue: f.fd, path: f.url?.path ?? "?")
            do throws(FileError) { try file.write(all: bytes) } catch {
                return .failure(SessionManagerError.downloadWriteFailed(path: file.path, errno: error.errnoCode))
            }
            f.written += Int64(bytes.count)
            return .success((f.written, f.expectedTotal))
        }
        switch outcome {
        case nil:
            return
        case .failure(let e):
            self.file.withLock { $0.writeError = e }
            engineTask.fail(with: HawserError(.ioError, "\(e)", underlying: e))
        case .success(let (written, total)):
            self.receivedBytes.store(written, ordering: .relaxed)
            self.existingDownloadProgress?.set(completed: written, total: total)
            let n = Int64(bytes.count)
            channel?.emit {
                $0.downloadTask(self, didWriteData: n, totalBytesWritten: written, totalBytesExpectedToWrite: total)
            }
        }
    }

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

    /// Opens (or creates) the temporary file and keeps its first `keep` bytes.
    private static func openFile(_ f: inout FileState, keeping keep: Int64) throws {
        if f.fd < 0 {
            let url =
                f.url
                ?? FileManager.default.temporaryDirectory
                .appendingPathComponent("\(temporaryPrefix)\(UUID().uuidString).tmp")
            do throws(FileError) {
                f.fd = try FileDescriptor.open(url.path, O_WRONLY | O_CREAT, mode: 0o600).rawValue
            } catch {
                throw SessionManagerError.downloadWriteFailed(path: url.path, errno: error.errnoCode)
            }
            f.url = url
        }
        let file = FileDescriptor(rawValue: f.fd, path: f.url?.path ?? "?")
        do throws(FileError) {
            try file.truncate(to: Int(keep))
            try file.seek(to: Int(keep))
        } catch {
            throw SessionManagerError.downloadWriteFailed(path: file.path, errno: error.errnoCode)
        }
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
