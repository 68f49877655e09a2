import HawserCore

// AFStreamingMultipartFormData: a multipart/form-data body built from parts (bytes, files, byte
// sources) whose length is known up front and whose bytes are produced lazily, in bounded
// chunks, each time the body is sent.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Reads the bytes of a streamed multipart part (the NSInputStream role), front to back.
public protocol MultipartByteReader {
    /// Up to `maxLength` next bytes; empty at the end. Throws when the bytes cannot be read.
    mutating func read(maxLength: Int) throws -> [UInt8]
}

/// A multipart/form-data body (AFStreamingMultipartFormData, the `id<AFMultipartFormData>`
/// handed to the constructing closure).
///
/// Appending stores what each part *is* (bytes, a file path with the size `stat` gave, a byte
/// source); ``contentLength`` is computed from those sizes without reading any file, and
/// ``makeRequestBody()`` produces the bytes lazily, at most ``chunkSize`` at a time, every time
/// the body is sent (so a retried or redirected request reads the files again). A 2 GiB file
/// costs one chunk of memory, not 2 GiB.
///
/// Unlike AF, a byte-source part is re-opened for every send (AF's NSInputStream can be read
/// only once), a part's name and file name are escaped as browsers do (`"` → `%22`, CR → `%0D`,
/// LF → `%0A`) so they cannot break out of their header, and custom part headers with CR, LF or
/// NUL are refused.
public struct MultipartFormData: Sendable {
    enum Body: Sendable {
        case bytes([UInt8])
        case file(path: String, length: Int64)
        case source(open: @Sendable () throws -> any MultipartByteReader, length: Int64)

        var length: Int64 {
            switch self {
            case .bytes(let b): return Int64(b.count)
            case .file(_, let l), .source(_, let l): return l
            }
        }
    }

    struct Part: Sendable {
        var headers: [(name: String, value: String)]
        var body: Body
    }

    /// The boundary between parts (AF's format: `Boundary+` and 16 random hex digits).
    public let boundary: String
    private(set) var parts: [Part] = []
    /// The largest chunk the body is produced in. 64 KiB unless throttled to a smaller packet.
    public private(set) var chunkSize: Int = 64 * 1024
    /// The pause after each chunk, in seconds (0 unless throttled).
    public private(set) var delay: Double = 0

    /// AF's `kAFUploadStream3GSuggestedPacketSize` (16 KiB).
    public static let suggestedPacketSize = 16 * 1024
    /// AF's `kAFUploadStream3GSuggestedDelay` (0.2 s).
    public static let suggestedDelay = 0.2

    /// An empty form with a random boundary (or `boundary`, for reproducible bodies).
    public init(boundary: String = MultipartFormData.makeBoundary()) {
        self.boundary = boundary
    }

    /// AF's boundary: `Boundary+` followed by two random 32-bit numbers in upper-case hex.
    public static func makeBoundary() -> String {
        func hex8(_ v: UInt32) -> String {
            let s = String(v, radix: 16, uppercase: true)
            return String(repeating: "0", count: 8 - s.count) + s
        }
        return "Boundary+" + hex8(.random(in: .min ... .max)) + hex8(.random(in: .min ... .max))
    }

    /// Whether no part was appended (then the request is sent without a multipart body, as AF does).
    public var isEmpty: Bool { self.parts.isEmpty }

    /// `multipart/form-data; boundary=…`.
    public var contentType: String { "multipart/form-data; boundary=\(self.boundary)" }

    // MARK: Appending parts

    /// A file part named by its URL: file name from the last path component, MIME type from the
    /// extension (``mimeType(forPathExtension:)``).
    /// - Throws: ``SerializationError`` `.invalidFileURL` for a non-file URL, `.fileNotReachable`
    ///   for a file that does not exist, is not a regular file or cannot be read.
    public mutating func appendPart(withFileURL fileURL: URL, name: String) throws {
        try self.appendPart(
            withFileURL: fileURL,
            name: name,
            fileName: fileURL.lastPathComponent,
            mimeType: Self.mimeType(forPathExtension: fileURL.pathExtension)
        )
    }

    /// A file part; its size is taken with `stat` now, its bytes read when the body is sent.
    /// - Throws: as ``appendPart(withFileURL:name:)``.
    public mutating func appendPart(withFileURL fileURL: URL, name: String, fileName: String, mimeType: String) throws {
        guard fileURL.isFileURL else {
            throw SerializationError(
                .invalidFileURL,
                "expected a file URL, got \(fileURL.absoluteString)",
                url: fileURL
            )
        }
        let path = fileURL.path(percentEncoded: false)
        let size: Int?
        do throws(FileError) {
            let fd = try FileDescriptor.openForReading(path)
            defer { fd.closeIgnoringErrors() }
            size = try fd.regularFileSize()
        } catch {
            let what =
                error.errnoCode == ENOENT || error.errnoCode == ENOTDIR
                ? "file URL not reachable: \(path)" : "\(path) cannot be read"
            throw SerializationError(
                .fileNotReachable,
                "\(what): \(error.reason)",
                url: fileURL,
                cause: posixCause(error)
            )
        }
        guard let size else {
            throw SerializationError(.fileNotReachable, "\(path) is not a regular file", url: fileURL)
        }
        self.parts.append(
            Part(
                headers: Self.fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                body: .file(path: path, length: Int64(size))
            )
        )
    }

    /// A part whose bytes come from a reader that `open` creates each time the body is sent
    /// (AF's `appendPartWithInputStream:name:fileName:length:mimeType:`). The reader must give
    /// exactly `length` bytes; fewer or more fails the send with `.bodyReadFailed`.
    public mutating func appendPart(
        withByteSource open: @escaping @Sendable () throws -> any MultipartByteReader,
        name: String,
        fileName: String,
        length: Int64,
        mimeType: String
    ) {
        self.parts.append(
            Part(
                headers: Self.fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                body: .source(open: open, length: max(0, length))
            )
        )
    }

    /// A file part from bytes in memory.
    public mutating func appendPart(withFileData data: [UInt8], name: String, fileName: String, mimeType: String) {
        self.parts.append(
            Part(headers: Self.fileHeaders(name: name, fileName: fileName, mimeType: mimeType), body: .bytes(data))
        )
    }

    /// A file part from `Data`.
    public mutating func appendPart(withFileData data: Data, name: String, fileName: String, mimeType: String) {
        self.appendPart(withFileData: Array(data), name: name, fileName: fileName, mimeType: mimeType)
    }

    /// A plain form field: `Content-Disposition: form-data; name="…"` and the bytes.
    public mutating func appendPart(withFormData data: [UInt8], name: String) {
        self.parts.append(
            Part(
                headers: [("Content-Disposition", "form-data; name=\"\(Self.escapeQuoted(name))\"")],
                body: .bytes(data)
            )
        )
    }

    /// A plain form field from `Data`.
    public mutating func appendPart(withFormData data: Data, name: String) {
        self.appendPart(withFormData: Array(data), name: name)
    }

    /// A part with exactly these headers, in this order.
    /// - Throws: ``SerializationError`` `.invalidParameters` when a name is not an HTTP token
    ///   or a value holds CR, LF or NUL (it would corrupt the body's structure).
    public mutating func appendPart(withHeaders headers: [(name: String, value: String)], body: [UInt8]) throws {
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenByte) else {
                throw SerializationError(
                    .invalidParameters,
                    "multipart header name '\(name)' is not a valid field name"
                )
            }
            guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else {
                throw SerializationError(
                    .invalidParameters,
                    "multipart header '\(name)' has CR, LF or NUL in its value"
                )
            }
        }
        self.parts.append(Part(headers: headers, body: .bytes(body)))
    }

    /// AF's `throttleBandwidthWithPacketSize:delay:`: produce the body in chunks of at most
    /// `packetSize` bytes and pause `delay` seconds after each. A packet size below 1 is 1.
    public mutating func throttleBandwidth(withPacketSize packetSize: Int, delay: Double) {
        self.chunkSize = max(1, packetSize)
        self.delay = max(0, delay)
    }

    // MARK: The body

    /// The exact number of bytes the body has (boundaries, part headers, part bodies), from
    /// the sizes known at append time; no file is read.
    public var contentLength: Int64 {
        var total: Int64 = 0
        for (i, part) in self.parts.enumerated() {
            total += Int64(self.prefix(ofPart: i).count) + part.body.length
        }
        if !self.parts.isEmpty { total += Int64(self.finalBoundary.count) }
        return total
    }

    /// The body as a stream of ``contentLength`` bytes, produced on demand.
    public func makeRequestBody() -> RequestBody {
        let form = self
        return .stream(length: self.contentLength) { writer in
            try await form.writeBody { try await writer.write($0) }
        }
    }

    /// Produces the body in order, handing `sink` chunks of at most ``chunkSize`` bytes (all but
    /// the last exactly that size), pausing ``delay`` after each. Files are opened, read and
    /// closed as they are reached.
    /// - Throws: ``SerializationError`` `.bodyReadFailed` when a file vanished, shrank or
    ///   cannot be read, or a byte source fails or gives the wrong number of bytes; or what
    ///   `sink` throws.
    public func writeBody(_ sink: @escaping ([UInt8]) async throws -> Void) async throws {
        var out = ChunkBuffer(chunkSize: self.chunkSize, delay: self.delay, sink: sink)
        for (i, part) in self.parts.enumerated() {
            try await out.append(self.prefix(ofPart: i))
            switch part.body {
            case .bytes(let b):
                try await out.append(b)
            case .file(let path, let length):
                try await Self.copyFile(path: path, length: length, into: &out)
            case .source(let open, let length):
                try await Self.copySource(open: open, length: length, into: &out)
            }
        }
        if !self.parts.isEmpty { try await out.append(self.finalBoundary) }
        try await out.flush()
    }

    /// Writes the whole body to `fileURL` (created or truncated), for an upload from a file.
    /// A partly written file is removed on failure.
    /// - Throws: ``SerializationError`` `.cannotWriteFile`, or what producing the body throws.
    public func writeBody(toFile fileURL: URL) async throws {
        guard fileURL.isFileURL else {
            throw SerializationError(
                .invalidFileURL,
                "expected a file URL, got \(fileURL.absoluteString)",
                url: fileURL
            )
        }
        let path = fileURL.path(percentEncoded: false)
        let fd: FileDescriptor
        do throws(FileError) { fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644) } catch {
            throw SerializationError(
                .cannotWriteFile,
                "cannot create \(path): \(error.reason)",
                url: fileURL,
                cause: posixCause(error)
            )
        }
        var closed = false
        defer { if !closed { fd.closeIgnoringErrors() } }
        do {
            try await self.writeBody { chunk in
                do throws(FileError) { try fd.write(all: chunk) } catch {
                    throw SerializationError(
                        .cannotWriteFile,
                        "writing \(path) failed: \(error.reason)",
                        url: fileURL,
                        cause: posixCause(error)
                    )
                }
            }
            closed = true
            do throws(FileError) { try fd.close() } catch {
                throw SerializationError(
                    .cannotWriteFile,
                    "closing \(path) failed: \(error.reason)",
                    url: fileURL,
                    cause: posixCause(error)
                )
            }
        } catch {
            if !closed {
                fd.closeIgnoringErrors()
                closed = true
            }
            FileSystem.unlinkIgnoringErrors(path)
            throw error
        }
    }

    // MARK: Framing

    /// The boundary line and headers before part `i`: AF's initial boundary (`--B\r\n`) for
    /// the first part, the encapsulation boundary (`\r\n--B\r\n`) for the others.
    func prefix(ofPart i: Int) -> [UInt8] {
        var s = i == 0 ? "--\(self.boundary)\r\n" : "\r\n--\(self.boundary)\r\n"
        for (name, value) in self.parts[i].headers { s += "\(name): \(value)\r\n" }
        s += "\r\n"
        return Array(s.utf8)
    }

    /// `\r\n--B--\r\n`.
    var finalBoundary: [UInt8] { Array("\r\n--\(self.boundary)--\r\n".utf8) }

    static func fileHeaders(name: String, fileName: String, mimeType: String) -> [(name: String, value: String)] {
        [
            (
                "Content-Disposition",
                "form-data; name=\"\(escapeQuoted(name))\"; filename=\"\(escapeQuoted(fileName))\""
            ),
            ("Content-Type", mimeType.filter { $0 != "\r" && $0 != "\n" && $0 != "\0" }),
        ]
    }

    /// The HTML multipart/form-data escaping of names: `"` → `%22`, CR → `%0D`, LF → `%0A`.
    static func escapeQuoted(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "%22"
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            case "\0": out += "%00"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }

    // MARK: Reading part bodies

    private static func copyFile(path: String, length: Int64, into out: inout ChunkBuffer) async throws {
        let fd: FileDescriptor
        do throws(FileError) { fd = try FileDescriptor.openForReading(path) } catch {
            throw SerializationError(
                .bodyReadFailed,
                "cannot open \(path) for the multipart body: \(error.reason)",
                url: URL(fileURLWithPath: path),
                cause: posixCause(error)
            )
        }
        defer { fd.closeIgnoringErrors() }
        var remaining = length
        while remaining > 0 {
            let want = Int(min(Int64(out.room), remaining))
            var failure: FileError?
            let n = out.appendRead(upTo: want) { buffer in
                do throws(FileError) { return try fd.read(into: buffer) } catch {
                    failure = error
                    return -1
                }
            }
            if let failure {
                throw SerializationError(
                    .bodyReadFailed,
                    "reading \(path) failed: \(failure.reason)",
                    url: URL(fileURLWithPath: path),
                    cause: posixCause(failure)
                )
            }
            if n == 0 {
                throw SerializationError(
                    .bodyReadFailed,
                    "\(path) ended \(remaining) bytes early: it shrank after it was appended (\(length) bytes then)",
                    url: URL(fileURLWithPath: path)
                )
            }
            remaining -= Int64(n)
            try await out.emitIfFull()
        }
    }

    private static func copySource(
        open: @Sendable () throws -> any MultipartByteReader,
        length: Int64,
        into out: inout ChunkBuffer
    ) async throws {
        var reader: any MultipartByteReader
        do {
            reader = try open()
        } catch {
            throw SerializationError(
                .bodyReadFailed,
                "the multipart byte source could not be opened",
                cause: sendableError(error)
            )
        }
        var remaining = length
        while true {
            let want = Int(min(Int64(out.room), max(remaining, 1)))
            let bytes: [UInt8]
            do {
                bytes = try reader.read(maxLength: want)
            } catch {
                throw SerializationError(
                    .bodyReadFailed,
                    "the multipart byte source failed",
                    cause: sendableError(error)
                )
            }
            if bytes.isEmpty { break }
            guard Int64(bytes.count) <= remaining, bytes.count <= want else {
                throw SerializationError(
                    .bodyReadFailed,
                    "the multipart byte source gave more than its declared length of \(length) bytes"
                )
            }
            try await out.append(bytes)
            remaining -= Int64(bytes.count)
        }
        guard remaining == 0 else {
            throw SerializationError(
                .bodyReadFailed,
                "the multipart byte source ended \(remaining) bytes before its declared length of \(length) bytes"
            )
        }
    }
}

/// Collects bytes into chunks of exactly `chunkSize` and hands each full chunk to the sink.
/// One chunk-sized buffer is filled with plain memory copies (or by `read(2)` directly) and
/// handed over whole when full, so producing the body costs one chunk of memory and no
/// per-byte work.
private struct ChunkBuffer {
    let chunkSize: Int
    let delay: Double
    let sink: ([UInt8]) async throws -> Void
    private var storage: [UInt8]
    private var filled = 0

    init(chunkSize: Int, delay: Double, sink: @escaping ([UInt8]) async throws -> Void) {
        self.chunkSize = chunkSize
        self.delay = delay
        self.sink = sink
        self.storage = Self.freshStorage(chunkSize)
    }

    /// A chunk-sized array whose bytes are written before they are read (only the filled
    /// prefix is ever handed out), so it is not zeroed first.
    private static func freshStorage(_ size: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: size) { _, count in count = size }
    }

    /// Bytes that still fit in the current chunk.
    var room: Int { self.chunkSize - self.filled }

    mutating func append(_ bytes: [UInt8]) async throws {
        try await self.append(bytes[...])
    }

    mutating func append(_ bytes: ArraySlice<UInt8>) async throws {
        var offset = 0
        while offset < bytes.count {
            let n = min(self.room, bytes.count - offset)
            let start = self.filled
            bytes.withUnsafeBytes { src in
                self.storage.withUnsafeMutableBytes { dst in
                    (dst.baseAddress! + start).copyMemory(from: src.baseAddress! + offset, byteCount: n)
                }
            }
            self.filled += n
            offset += n
            if self.filled == self.chunkSize { try await self.emit() }
        }
    }

    /// Lets `fill` write up to `count` (at most ``room``) bytes straight into the chunk and
    /// keeps the number it reports; a negative result (an error) keeps nothing.
    mutating func appendRead(upTo count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int) -> Int {
        let start = self.filled
        let n = self.storage.withUnsafeMutableBytes {
            fill(UnsafeMutableRawBufferPointer(rebasing: $0[start..<(start + count)]))
        }
        if n > 0 { self.filled += n }
        return n
    }

    mutating func emitIfFull() async throws {
        if self.filled == self.chunkSize { try await self.emit() }
    }

    mutating func flush() async throws {
        if self.filled > 0 { try await self.emit() }
    }

    private mutating func emit() async throws {
        let chunk: [UInt8]
        if self.filled == self.chunkSize {
            chunk = self.storage
            self.storage = Self.freshStorage(self.chunkSize)
        } else {
            chunk = Array(self.storage[..<self.filled])
        }
        self.filled = 0
        try await self.sink(chunk)
        if self.delay > 0 { try await Task.sleep(nanoseconds: UInt64(self.delay * 1_000_000_000)) }
    }
}

/// A file operation's failure as the POSIXError a `SerializationError` carries as its cause.
private func posixCause(_ error: FileError) -> POSIXError? {
    POSIXErrorCode(rawValue: error.errnoCode).map { POSIXError($0) }
}
