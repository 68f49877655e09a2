// Files, the one place they meet the kernel: every EINTR retry loop and every errno read for
// file IO lives here, and every failure is a FileError naming the operation and the path.
//
// These calls block. On an event loop they belong on a BlockingIOPool thread (the HTTP cache's
// store), or on a thread of the caller's choosing (uploads, downloads, cookie persistence,
// the command-line tool); docs/ARCHITECTURE.md lists which is which.

import CHawser

#if canImport(Glibc)
import Glibc
#endif

/// A failed file operation: which one, on which path, and the `errno` it left.
public struct FileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The operation that failed (`"open"`, `"read"`, `"write"`, `"pread"`, `"pwrite"`, `"fsync"`,
    /// `"close"`, `"rename"`, `"unlink"`, `"fstat"`, `"mkdir"`), or a short phrase for a
    /// condition that is not a system call's failure (`"read (file shrank)"`).
    public var operation: String
    /// The path the operation was on (for `rename`, the source; ``destination`` is the target).
    public var path: String
    /// For `rename`: the path renamed to.
    public var destination: String?
    /// The `errno` value.
    public var errnoCode: Int32

    /// Creates the error of `operation` on `path` with `errnoCode`.
    public init(operation: String, path: String, destination: String? = nil, errnoCode: Int32) {
        self.operation = operation
        self.path = path
        self.destination = destination
        self.errnoCode = errnoCode
    }

    /// `strerror`'s text for ``errnoCode``.
    public var reason: String { String(cString: strerror(self.errnoCode)) }

    public var description: String {
        let target = self.destination.map { " '\(self.path)' to '\($0)'" } ?? " '\(self.path)'"
        return "\(self.operation)\(target) failed: \(self.reason) (errno \(self.errnoCode))"
    }
}

/// An open file descriptor of a regular file (or any fd used for plain blocking reads and
/// writes). A small value: it does not close itself; call ``close()`` exactly once.
/// `EINTR` is retried by every call but `close` (Linux releases the descriptor either way).
public struct FileDescriptor: Sendable {
    /// The descriptor number.
    public let rawValue: Int32
    /// The path it was opened with (for errors).
    public let path: String

    /// Wraps an already open descriptor; `path` names it in errors.
    public init(rawValue: Int32, path: String) {
        self.rawValue = rawValue
        self.path = path
    }

    /// Opens `path` with `flags` (`O_CLOEXEC` is always added) and, when creating, `mode`.
    @inline(never)
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(FileError) -> FileDescriptor {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return FileDescriptor(rawValue: fd, path: path) }
            let e = CHawser_errno()
            if e == EINTR { continue }
            throw FileError(operation: "open", path: path, errnoCode: e)
        }
    }

    /// Opens `path` for reading.
    public static func openForReading(_ path: String) throws(FileError) -> FileDescriptor {
        try Self.open(path, O_RDONLY)
    }

    /// Closes the descriptor. Never retried; an error (EIO from a delayed write) is thrown.
    @inline(never)
    public func close() throws(FileError) {
        if Glibc.close(self.rawValue) != 0 {
            let e = CHawser_errno()
            if e != EINTR { throw FileError(operation: "close", path: self.path, errnoCode: e) }
        }
    }

    /// Closes the descriptor, ignoring any error (cleanup after another failure, read-only files).
    public func closeIgnoringErrors() {
        _ = Glibc.close(self.rawValue)
    }

    /// Reads up to `buffer.count` bytes; 0 at the end of the file.
    @inline(never)
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(FileError) -> Int {
        while true {
            let n = Glibc.read(self.rawValue, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            let e = CHawser_errno()
            if e == EINTR { continue }
            throw FileError(operation: "read", path: self.path, errnoCode: e)
        }
    }

    /// Reads up to `buffer.count` bytes at `offset`; 0 at the end of the file.
    @inline(never)
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FileError) -> Int {
        while true {
            let n = Glibc.pread(self.rawValue, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            let e = CHawser_errno()
            if e == EINTR { continue }
            throw FileError(operation: "pread", path: self.path, errnoCode: e)
        }
    }

    /// Fills `buffer` from `offset`, or throws (`EIO`, operation `"read (file shrank)"`) when
    /// the file ends first.
    public func readExactly(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FileError) {
        var done = 0
        while done < buffer.count {
            let n = try self.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + done)
            if n == 0 { throw FileError(operation: "read (file shrank)", path: self.path, errnoCode: EIO) }
            done += n
        }
    }

    /// `count` bytes from `offset`, or throws when the file ends first.
    public func readExactly(count: Int, at offset: Int) throws(FileError) -> [UInt8] {
        guard count > 0 else { return [] }
        var failure: FileError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            do throws(FileError) {
                try self.readExactly(into: UnsafeMutableRawBufferPointer(buffer), at: offset)
                initialized = count
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Writes all of `bytes` (retrying short writes).
    @inline(never)
    public func write(all bytes: UnsafeRawBufferPointer) throws(FileError) {
        var done = 0
        while done < bytes.count {
            let n = Glibc.write(self.rawValue, bytes.baseAddress! + done, bytes.count - done)
            if n >= 0 {
                done += n
                continue
            }
            let e = CHawser_errno()
            if e == EINTR { continue }
            throw FileError(operation: "write", path: self.path, errnoCode: e)
        }
    }

    /// Writes all of `bytes`.
    public func write(all bytes: [UInt8]) throws(FileError) {
        var failure: FileError?
        bytes.withUnsafeBytes { raw in
            do throws(FileError) { try self.write(all: raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Writes all of `bytes` at `offset` (the file position does not move).
    @inline(never)
    public func write(all bytes: UnsafeRawBufferPointer, at offset: Int) throws(FileError) {
        var done = 0
        while done < bytes.count {
            let n = Glibc.pwrite(self.rawValue, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            if n >= 0 {
                done += n
                continue
            }
            let e = CHawser_errno()
            if e == EINTR { continue }
            throw FileError(operation: "pwrite", path: self.path, errnoCode: e)
        }
    }

    /// Flushes the file's data and metadata to the device.
    @inline(never)
    public func sync() throws(FileError) {
        while Glibc.fsync(self.rawValue) != 0 {
            let e = CHawser_errno()
            if e == EINTR { continue }
            throw FileError(operation: "fsync", path: self.path, errnoCode: e)
        }
    }

    /// The file's status (`fstat`).
    @inline(never)
    public func status() throws(FileError) -> stat {
        var st = stat()
        if fstat(self.rawValue, &st) != 0 {
            throw FileError(operation: "fstat", path: self.path, errnoCode: CHawser_errno())
        }
        return st
    }

    /// Whether it is a regular file, and its size.
    public func regularFileSize() throws(FileError) -> Int? {
        let st = try self.status()
        return (st.st_mode & S_IFMT) == S_IFREG ? Int(st.st_size) : nil
    }

    /// Sets the file position to `offset` from the start.
    @inline(never)
    public func seek(to offset: Int) throws(FileError) {
        if lseek(self.rawValue, off_t(offset), SEEK_SET) < 0 {
            throw FileError(operation: "lseek", path: self.path, errnoCode: CHawser_errno())
        }
    }

    /// Truncates (or extends) the file to `length` bytes.
    @inline(never)
    public func truncate(to length: Int) throws(FileError) {
        while ftruncate(self.rawValue, off_t(length)) != 0 {
            let e = CHawser_errno()
            if e == EINTR { continue }
            throw FileError(operation: "ftruncate", path: self.path, errnoCode: e)
        }
    }
}

/// Path operations that need no open descriptor.
public enum FileSystem {
    /// Renames `from` to `to`, atomically replacing `to`.
    @inline(never)
    public static func rename(_ from: String, to: String) throws(FileError) {
        if Glibc.rename(from, to) != 0 {
            throw FileError(operation: "rename", path: from, destination: to, errnoCode: CHawser_errno())
        }
    }

    /// Removes `path`; a path that is already gone is not an error.
    @inline(never)
    public static func unlink(_ path: String) throws(FileError) {
        if Glibc.unlink(path) != 0 {
            let e = CHawser_errno()
            if e != ENOENT { throw FileError(operation: "unlink", path: path, errnoCode: e) }
        }
    }

    /// Removes `path`, ignoring every error (cleanup).
    public static func unlinkIgnoringErrors(_ path: String) {
        _ = Glibc.unlink(path)
    }

    /// Sets `path`'s access and modification times to now.
    @inline(never)
    public static func touch(_ path: String) throws(FileError) {
        if utimensat(AT_FDCWD, path, nil, 0) != 0 {
            throw FileError(operation: "utimensat", path: path, errnoCode: CHawser_errno())
        }
    }

    /// Creates the directory `path` with `mode`, and its missing parents; an existing
    /// directory is not an error.
    @inline(never)
    public static func createDirectory(_ path: String, mode: mode_t = 0o700) throws(FileError) {
        if path.isEmpty || path == "/" { return }
        if Glibc.mkdir(path, mode) == 0 { return }
        var e = CHawser_errno()
        if e == ENOENT, let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")), slash != path.utf8.startIndex {
            try Self.createDirectory(String(path[..<slash]), mode: mode)
            if Glibc.mkdir(path, mode) == 0 { return }
            e = CHawser_errno()
        }
        guard e == EEXIST else { throw FileError(operation: "mkdir", path: path, errnoCode: e) }
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 { throw FileError(operation: "mkdir", path: path, errnoCode: ENOTDIR) }
        _ = Glibc.close(fd)
    }

    /// The names in directory `path` (without `.` and `..`).
    @inline(never)
    public static func contentsOfDirectory(_ path: String) throws(FileError) -> [String] {
        guard let dir = opendir(path) else {
            throw FileError(operation: "opendir", path: path, errnoCode: CHawser_errno())
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
