import HawserCore

#if canImport(Glibc)
import Glibc
#endif

/// Minimal unbuffered file output on a descriptor (stdout, stderr or a file). A file named
/// for -o is opened when the first byte is written, as curl opens it: a transfer that fails
/// before any data leaves no file and reports its own error, not a write error.
final class OutputFile: @unchecked Sendable {
    private(set) var fd: Int32
    private let owned: Bool
    /// The file to create at the first write (or at ``create()``); nil once opened.
    private var pendingPath: String?
    private(set) var failed = false
    /// Why the file could not be opened, when it could not.
    private(set) var openError: String?

    static let stdout = OutputFile(fd: 1, owned: false)
    static let stderr = OutputFile(fd: 2, owned: false)

    init(fd: Int32, owned: Bool) {
        self.fd = fd
        self.owned = owned
    }

    private init(pendingPath: String) {
        self.fd = -1
        self.owned = true
        self.pendingPath = pendingPath
    }

    /// Opens (creates, truncates) `path` now; "-" is stdout.
    static func open(_ path: String) throws -> OutputFile {
        if path == "-" { return .stdout }
        do throws(FileError) {
            return OutputFile(fd: try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC).rawValue, owned: true)
        } catch {
            throw FileIO.Error(description: "cannot open '\(path)' for writing: \(error.reason)")
        }
    }

    /// `path`, created (truncated) when the first byte is written; "-" is stdout.
    static func openOnFirstWrite(_ path: String) -> OutputFile {
        path == "-" ? .stdout : OutputFile(pendingPath: path)
    }

    /// Opens `path` to append to it (for -C -), creating it if needed; returns it and its size.
    static func openForAppend(_ path: String) throws -> (OutputFile, Int64) {
        let fd: Int32
        do throws(FileError) { fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_APPEND).rawValue } catch {
            throw FileIO.Error(description: "cannot open '\(path)' for writing: \(error.reason)")
        }
        let size = lseek(fd, 0, SEEK_END)
        return (OutputFile(fd: fd, owned: true), Int64(max(0, size)))
    }

    /// A file not opened yet is a file, not a terminal.
    var isTerminal: Bool { self.pendingPath == nil && isatty(self.fd) == 1 }

    /// Creates a file not opened yet (a transfer that ended well with an empty body leaves an
    /// empty file, as curl's does). False when it cannot be created.
    @discardableResult
    func create() -> Bool {
        guard let path = self.pendingPath else { return !self.failed }
        self.pendingPath = nil
        do throws(FileError) {
            self.fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC).rawValue
        } catch {
            self.openError = "cannot open '\(path)' for writing: \(error.reason)"
            self.failed = true
            return false
        }
        return true
    }

    /// Empties a file (before a retry writes the body again, as curl throws away what a failed
    /// attempt wrote). False for stdout and pipes.
    func truncate() -> Bool {
        guard self.owned else { return false }
        if self.pendingPath != nil { return true }
        guard self.fd >= 0, ftruncate(self.fd, 0) == 0, lseek(self.fd, 0, SEEK_SET) == 0 else { return false }
        return true
    }

    func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { self.write($0) }
    }

    func write(_ bytes: UnsafeRawBufferPointer) {
        if self.pendingPath != nil && !self.create() { return }
        guard !self.failed else { return }
        do throws(FileError) { try FileDescriptor(rawValue: self.fd, path: "output").write(all: bytes) } catch {
            self.failed = true
        }
    }

    func write(_ s: String) {
        var s = s
        s.withUTF8 { self.write(UnsafeRawBufferPointer($0)) }
    }

    func close() {
        if self.owned && self.fd >= 0 { _ = Glibc.close(self.fd) }
    }
}

enum FileIO {
    struct Error: Swift.Error, CustomStringConvertible { var description: String }

    static func readAll(path: String) throws -> [UInt8] {
        let fd: FileDescriptor
        do throws(FileError) { fd = try FileDescriptor.openForReading(path) } catch {
            throw Error(description: "cannot read '\(path)': \(error.reason)")
        }
        defer { fd.closeIgnoringErrors() }
        return try self.readAll(fd: fd.rawValue, name: path)
    }

    /// Reads `fd` to its end (stdin for `@-`).
    static func readAll(fd: Int32, name: String) throws -> [UInt8] {
        let file = FileDescriptor(rawValue: fd, path: name)
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let read: Result<Int, FileError> = buf.withUnsafeMutableBytes { raw in
                do throws(FileError) { return .success(try file.read(into: raw)) } catch { return .failure(error) }
            }
            switch read {
            case .failure(let e): throw Error(description: "cannot read '\(name)': \(e.reason)")
            case .success(0): return out
            case .success(let n): out.append(contentsOf: buf[0..<n])
            }
        }
    }
}

/// A file read front to back in chunks, for streamed uploads (-T): opened when the body is
/// produced, so a retried or redirected request reads it again. `@unchecked Sendable`: one
/// body producer reads it at a time.
final class InputFile: @unchecked Sendable {
    let fd: Int32
    private let owned: Bool
    let path: String

    /// Opens `path` ("-" is stdin); the size when it is a regular file.
    init(path: String) throws {
        self.path = path
        if path == "-" {
            self.fd = 0
            self.owned = false
            return
        }
        do throws(FileError) { self.fd = try FileDescriptor.openForReading(path).rawValue } catch {
            throw FileIO.Error(description: "Failed to open/read local data from file '\(path)': \(error.reason)")
        }
        self.owned = true
    }

    /// The size of a regular file; nil for stdin, pipes and other streams.
    var regularFileSize: Int64? {
        var st = stat()
        guard fstat(self.fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, self.owned else { return nil }
        return Int64(st.st_size)
    }

    /// Up to `max` next bytes; empty at the end.
    func read(max: Int) throws -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: max)
        let file = FileDescriptor(rawValue: self.fd, path: self.path)
        let read: Result<Int, FileError> = buf.withUnsafeMutableBytes { raw in
            do throws(FileError) { return .success(try file.read(into: raw)) } catch { return .failure(error) }
        }
        switch read {
        case .failure(let e): throw FileIO.Error(description: "reading '\(self.path)' failed: \(e.reason)")
        case .success(let n):
            buf.removeSubrange(n...)
            return buf
        }
    }

    deinit {
        if self.owned { _ = Glibc.close(self.fd) }
    }
}
