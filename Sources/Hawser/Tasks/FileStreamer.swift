import HawserCore

// A file as a streamed request body: the preflight that opens it when the task is made, and the
// reader that streams it in bounded chunks when the body is sent.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension SessionManager {
    /// `request` with the file at `fileURL` as a streamed body, or the error that fails the task
    /// when it is resumed (a file that cannot be opened, or is not a regular file).
    static func fileUpload(_ request: HTTPClientRequest, _ fileURL: URL) -> (HTTPClientRequest, (any Error)?) {
        var r = request
        var preflight: (any Error)? = nil
        let path = fileURL.path
        var size: Int? = nil
        do throws(FileError) {
            let fd = try FileDescriptor.openForReading(path)
            defer { fd.closeIgnoringErrors() }
            size = try fd.regularFileSize()
            if size == nil { preflight = SessionManagerError.cannotReadUploadFile(path: path, errno: EINVAL) }
        } catch {
            preflight = SessionManagerError.cannotReadUploadFile(path: path, errno: error.errnoCode)
        }
        if let size {
            let length = Int64(size)
            r.body = .stream(length: length) { writer in
                try await FileStreamer.stream(path: path, length: length, to: writer)
            }
        }
        return (r, preflight)
    }
}

/// Reads a file in bounded chunks into a streamed request body.
enum FileStreamer {
    static let chunkSize = 64 * 1024

    static func stream(path: String, length: Int64, to writer: RequestBodyWriter) async throws {
        let fd: FileDescriptor
        do throws(FileError) { fd = try FileDescriptor.openForReading(path) } catch {
            throw SessionManagerError.cannotReadUploadFile(path: path, errno: error.errnoCode)
        }
        defer { fd.closeIgnoringErrors() }
        var remaining = length
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        while remaining > 0 {
            let want = Int(min(Int64(chunkSize), remaining))
            let read: Result<Int, FileError> = buffer.withUnsafeMutableBytes { raw in
                do throws(FileError) {
                    return .success(try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want])))
                } catch {
                    return .failure(error)
                }
            }
            let n: Int
            switch read {
            case .success(let count): n = count
            case .failure(let e): throw SessionManagerError.cannotReadUploadFile(path: path, errno: e.errnoCode)
            }
            if n == 0 {
                throw SessionManagerError.cannotReadUploadFile(path: path, errno: EIO)  // the file shrank
            }
            try await writer.write(n == chunkSize ? buffer : Array(buffer[0..<n]))
            remaining -= Int64(n)
        }
    }
}
