// AFStreamingMultipartFormData, tested by parsing the produced body back and by counting what
// the producer hands out.
import Foundation
import Hawser
import HawserFoundation
import HawserTestServer
import Testing

/// A part of a parsed multipart body.
struct ParsedPart: Equatable {
    var headers: [String]
    var body: [UInt8]
}

/// A strict multipart/form-data parser for AF's framing: `--B\r\n` first, `\r\n--B\r\n` between
/// parts, `\r\n--B--\r\n` at the end, headers up to a blank line. Nil if the body deviates.
func parseMultipart(_ body: [UInt8], boundary: String) -> [ParsedPart]? {
    let first = Array("--\(boundary)\r\n".utf8)
    let delimiter = Array("\r\n--\(boundary)".utf8)
    guard body.starts(with: first) else { return nil }
    var parts: [ParsedPart] = []
    var i = first.count
    while true {
        guard let headerEnd = find(Array("\r\n\r\n".utf8), in: body, from: i) else {
            // A part without headers starts directly with the blank line.
            return nil
        }
        let headerText = String(decoding: body[i..<headerEnd], as: UTF8.self)
        let headers = headerText.isEmpty ? [] : headerText.components(separatedBy: "\r\n")
        let bodyStart = headerEnd + 4
        guard let end = find(delimiter, in: body, from: bodyStart) else { return nil }
        parts.append(ParsedPart(headers: headers, body: Array(body[bodyStart..<end])))
        let after = end + delimiter.count
        if body[after...].elementsEqual(Array("--\r\n".utf8)) { return parts }
        guard body[after...].starts(with: Array("\r\n".utf8)) else { return nil }
        i = after + 2
    }
}

private func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
    guard needle.count <= haystack.count, start <= haystack.count - needle.count else { return nil }
    var i = start
    while i <= haystack.count - needle.count {
        if haystack[i] == needle[0], haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
        i += 1
    }
    return nil
}

/// Collects every chunk the producer hands out.
final class ChunkRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var _chunks: [[UInt8]] = []
    func add(_ c: [UInt8]) {
        self.lock.lock()
        self._chunks.append(c)
        self.lock.unlock()
    }
    var chunks: [[UInt8]] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self._chunks
    }
    var bytes: [UInt8] { self.chunks.flatMap { $0 } }
}

func produce(_ form: MultipartFormData) async throws -> ChunkRecorder {
    let r = ChunkRecorder()
    try await form.writeBody { r.add($0) }
    return r
}

/// A scratch directory, removed by `cleanup()`.
struct TempDir {
    let url: URL
    init() throws {
        self.url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hawser-multipart-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: self.url, withIntermediateDirectories: true)
    }
    func file(_ name: String, _ bytes: [UInt8]) throws -> URL {
        let u = self.url.appendingPathComponent(name)
        try Data(bytes).write(to: u)
        return u
    }
    func cleanup() { try? FileManager.default.removeItem(at: self.url) }
}

/// Reads from an array, `step` bytes at a time at most.
struct ArrayReader: MultipartByteReader {
    var bytes: [UInt8]
    var step = 7
    mutating func read(maxLength: Int) throws -> [UInt8] {
        let n = min(maxLength, self.step, self.bytes.count)
        defer { self.bytes.removeFirst(n) }
        return Array(self.bytes.prefix(n))
    }
}

@Suite struct MultipartFormDataTests {
    @Test("AF's boundary format: Boundary+ and 16 upper-case hex digits, different each time")
    func boundary() {
        let a = MultipartFormData.makeBoundary()
        let b = MultipartFormData.makeBoundary()
        #expect(a.count == 25 && a.hasPrefix("Boundary+"))
        #expect(a.dropFirst(9).allSatisfy { "0123456789ABCDEF".contains($0) })
        #expect(a != b)
    }

    @Test("every kind of part round-trips through a strict parser, and Content-Length is the byte count")
    func roundTrip() async throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let fileBytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let file = try dir.file("photo.JPG", fileBytes)
        let streamed = Array("streamed bytes \r\n--not-a-boundary".utf8)
        var form = MultipartFormData(boundary: "Boundary+0123456789ABCDEF")
        form.appendPart(withFormData: Array("value".utf8), name: "field")
        try form.appendPart(withFileURL: file, name: "upload")
        try form.appendPart(withFileURL: file, name: "again", fileName: "other.bin", mimeType: "application/x-custom")
        form.appendPart(
            withFileData: Data([0, 1, 2]),
            name: "data",
            fileName: "d.bin",
            mimeType: "application/octet-stream"
        )
        form.appendPart(
            withByteSource: { ArrayReader(bytes: streamed) },
            name: "stream",
            fileName: "s.txt",
            length: Int64(streamed.count),
            mimeType: "text/plain"
        )
        try form.appendPart(withHeaders: [("X-Part", "1")], body: [])
        form.appendPart(withFormData: [], name: "empty")

        let produced = try await produce(form).bytes
        #expect(Int64(produced.count) == form.contentLength)
        let parts = try #require(parseMultipart(produced, boundary: form.boundary))
        #expect(
            parts == [
                ParsedPart(headers: [#"Content-Disposition: form-data; name="field""#], body: Array("value".utf8)),
                ParsedPart(
                    headers: [
                        #"Content-Disposition: form-data; name="upload"; filename="photo.JPG""#,
                        "Content-Type: image/jpeg",
                    ],
                    body: fileBytes
                ),
                ParsedPart(
                    headers: [
                        #"Content-Disposition: form-data; name="again"; filename="other.bin""#,
                        "Content-Type: application/x-custom",
                    ],
                    body: fileBytes
                ),
                ParsedPart(
                    headers: [
                        #"Content-Disposition: form-data; name="data"; filename="d.bin""#,
                        "Content-Type: application/octet-stream",
                    ],
                    body: [0, 1, 2]
                ),
                ParsedPart(
                    headers: [
                        #"Content-Disposition: form-data; name="stream"; filename="s.txt""#, "Content-Type: text/plain",
                    ],
                    body: streamed
                ),
                ParsedPart(headers: ["X-Part: 1"], body: []),
                ParsedPart(headers: [#"Content-Disposition: form-data; name="empty""#], body: []),
            ]
        )
        // Sent twice (a retry, a redirect): the same bytes, the byte source re-opened.
        #expect(try await produce(form).bytes == produced)
    }

    @Test("the exact framing of a one-part body")
    func exactFraming() async throws {
        var form = MultipartFormData(boundary: "B")
        form.appendPart(withFormData: Array("v".utf8), name: "n")
        let text = String(decoding: try await produce(form).bytes, as: UTF8.self)
        #expect(text == "--B\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\nv\r\n--B--\r\n")
    }

    @Test(
        "MIME types from the extension, octet-stream when unknown",
        arguments: [
            ("a.png", "image/png"), ("a.JSON", "application/json"), ("adn_0.cer", "application/x-x509-ca-cert"),
            ("a.txt", "text/plain"), ("a.tar.gz", "application/gzip"), ("noext", "application/octet-stream"),
            ("a.zzz", "application/octet-stream"),
        ]
    )
    func mimeTypes(name: String, expected: String) {
        #expect(MultipartFormData.mimeType(forPathExtension: URL(fileURLWithPath: name).pathExtension) == expected)
    }

    @Test("names with quotes, CR and LF are escaped so they cannot break out of the header")
    func nameEscaping() async throws {
        var form = MultipartFormData(boundary: "B")
        form.appendPart(withFileData: [1], name: "a\"b\r\nX-Injected: 1", fileName: "f\".txt", mimeType: "text/plain")
        let parts = try #require(parseMultipart(try await produce(form).bytes, boundary: "B"))
        #expect(
            parts[0].headers == [
                #"Content-Disposition: form-data; name="a%22b%0D%0AX-Injected: 1"; filename="f%22.txt""#,
                "Content-Type: text/plain",
            ]
        )
    }

    @Test("custom part headers with CR/LF or a bad name are refused")
    func badCustomHeaders() {
        var form = MultipartFormData()
        #expect(throws: SerializationError.self) { try form.appendPart(withHeaders: [("X", "a\r\nb")], body: []) }
        #expect(throws: SerializationError.self) { try form.appendPart(withHeaders: [("Bad Name", "v")], body: []) }
        #expect(form.isEmpty)
    }

    @Test("a missing file, a directory and a non-file URL are refused at append time")
    func unreachableAtAppend() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        var form = MultipartFormData()
        #expect { try form.appendPart(withFileURL: dir.url.appendingPathComponent("missing.txt"), name: "f") } throws: {
            ($0 as? SerializationError)?.code == .fileNotReachable && ($0 as? SerializationError)?.errorCode == -1000
        }
        #expect { try form.appendPart(withFileURL: dir.url, name: "f") } throws: {
            ($0 as? SerializationError)?.code == .fileNotReachable
        }
        #expect { try form.appendPart(withFileURL: URL(string: "http://example.com/a.txt")!, name: "f") } throws: {
            ($0 as? SerializationError)?.code == .invalidFileURL
        }
        #expect(form.isEmpty)
    }

    @Test("a file that vanished or shrank after it was appended fails the body with .bodyReadFailed")
    func vanishedAndShrunk() async throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let gone = try dir.file("gone.txt", Array(repeating: 1, count: 10))
        var form = MultipartFormData()
        try form.appendPart(withFileURL: gone, name: "f")
        try FileManager.default.removeItem(at: gone)
        await #expect { try await form.writeBody { _ in } } throws: {
            ($0 as? SerializationError)?.code == .bodyReadFailed
        }

        let shrunk = try dir.file("shrunk.txt", Array(repeating: 1, count: 100))
        var form2 = MultipartFormData()
        try form2.appendPart(withFileURL: shrunk, name: "f")
        try Data([1, 2]).write(to: shrunk)
        await #expect { try await form2.writeBody { _ in } } throws: {
            ($0 as? SerializationError)?.code == .bodyReadFailed && "\($0)".contains("shrank")
        }
    }

    @Test("a byte source that gives fewer or more bytes than declared, or throws, fails the body")
    func badByteSources() async throws {
        struct Boom: Error {}
        struct Failing: MultipartByteReader { mutating func read(maxLength: Int) throws -> [UInt8] { throw Boom() } }
        for (source, length) in [
            (ArrayReader(bytes: [1, 2, 3]), Int64(5)), (ArrayReader(bytes: [1, 2, 3]), Int64(2)),
        ] {
            var form = MultipartFormData()
            form.appendPart(withByteSource: { source }, name: "s", fileName: "s", length: length, mimeType: "a/b")
            await #expect { try await form.writeBody { _ in } } throws: {
                ($0 as? SerializationError)?.code == .bodyReadFailed
            }
        }
        var form = MultipartFormData()
        form.appendPart(withByteSource: { Failing() }, name: "s", fileName: "s", length: 1, mimeType: "a/b")
        await #expect { try await form.writeBody { _ in } } throws: {
            ($0 as? SerializationError)?.code == .bodyReadFailed && ($0 as? SerializationError)?.cause is Boom
        }
    }

    @Test("an InputStream part is read through")
    func inputStream() async throws {
        let bytes = Array((0..<5000).map { UInt8($0 % 256) })
        var form = MultipartFormData(boundary: "B")
        form.appendPart(
            withInputStream: { InputStream(data: Data(bytes)) },
            name: "s",
            fileName: "s.bin",
            length: Int64(bytes.count),
            mimeType: "application/octet-stream"
        )
        let parts = try #require(parseMultipart(try await produce(form).bytes, boundary: "B"))
        #expect(parts.first?.body == bytes)
    }

    @Test("chunks are exactly chunkSize except the last; throttling shrinks them to the packet size")
    func chunking() async throws {
        var form = MultipartFormData(boundary: "B")
        form.appendPart(withFileData: Array(repeating: 7, count: 200_000), name: "f", fileName: "f", mimeType: "a/b")
        let total = Int(form.contentLength)
        let normal = try await produce(form).chunks
        #expect(normal.dropLast().allSatisfy { $0.count == 64 * 1024 })
        #expect(normal.count == (total + 64 * 1024 - 1) / (64 * 1024))

        form.throttleBandwidth(withPacketSize: 1000, delay: 0)
        let throttled = try await produce(form)
        #expect(throttled.chunks.dropLast().allSatisfy { $0.count == 1000 })
        #expect(throttled.chunks.count == (total + 999) / 1000)
        #expect(throttled.bytes == normal.flatMap { $0 })
        #expect(form.chunkSize == 1000)
        form.throttleBandwidth(
            withPacketSize: MultipartFormData.suggestedPacketSize,
            delay: MultipartFormData.suggestedDelay
        )
        #expect(form.chunkSize == 16 * 1024 && form.delay == 0.2)
    }

    @Test("a 2 GiB sparse file: Content-Length from stat, produced in bounded chunks, peak memory bounded")
    func bigSparseFile() async throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.url.appendingPathComponent("big.bin").path
        let size: Int64 = 2 * 1024 * 1024 * 1024
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(fd >= 0)
        #expect(ftruncate(fd, off_t(size)) == 0)
        close(fd)

        var form = MultipartFormData(boundary: "B")
        try form.appendPart(withFileURL: URL(fileURLWithPath: path), name: "big")
        let overhead = Int64(form.contentLength) - size
        #expect(
            overhead
                == Int64(
                    #"--B\#r\#nContent-Disposition: form-data; name="big"; filename="big.bin"\#r\#nContent-Type: application/octet-stream\#r\#n\#r\#n\#r\#n--B--\#r\#n"#
                        .utf8.count
                )
        )

        let before = peakRSS()
        final class Counter: @unchecked Sendable {
            var total: Int64 = 0
            var largest = 0
            var chunks = 0
        }
        let counter = Counter()
        try await form.writeBody { chunk in
            counter.total += Int64(chunk.count)
            counter.largest = max(counter.largest, chunk.count)
            counter.chunks += 1
        }
        #expect(counter.total == form.contentLength)
        #expect(counter.largest == 64 * 1024)
        #expect(counter.chunks == Int((form.contentLength + 65535) / 65536))
        if let before, let after = peakRSS() {
            #expect(after - before < 256 * 1024 * 1024, "peak RSS grew by \(after - before) bytes")
        }
    }

    @Test("writing the body to a file gives the same bytes; a bad destination is .cannotWriteFile")
    func writeToFile() async throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        var form = MultipartFormData(boundary: "B")
        form.appendPart(withFormData: Array("v".utf8), name: "n")
        let dest = dir.url.appendingPathComponent("body.multipart")
        try await form.writeBody(toFile: dest)
        #expect(Array(try Data(contentsOf: dest)) == (try await produce(form).bytes))
        await #expect { try await form.writeBody(toFile: dir.url.appendingPathComponent("no/such/dir/x")) } throws: {
            ($0 as? SerializationError)?.code == .cannotWriteFile
        }
    }
}

/// VmHWM (peak resident set) of this process in bytes, from /proc.
func peakRSS() -> Int64? {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kb = line.split(separator: " ").compactMap { Int64($0) }.first
        return kb.map { $0 * 1024 }
    }
    return nil
}

@Suite struct MultipartRequestTests {
    let serializer = HTTPRequestSerializer(environment: [:])

    @Test("parameters become form parts ahead of the closure's parts; headers and a streamed body are set")
    func request() async throws {
        let r = try serializer.multipartFormRequest(
            withMethod: .post,
            urlString: "http://example.com/up",
            parameters: ["b": ["x": 1], "a": ParameterNull.null, "d": Data([0xFF])],
            boundary: "B"
        ) { form in
            form.appendPart(withFormData: Array("last".utf8), name: "z")
        }
        #expect(r.headers["Content-Type"] == "multipart/form-data; boundary=B")
        guard case .stream(let length?, _)? = r.body else {
            Issue.record("expected a stream body with a length")
            return
        }
        #expect(r.headers["Content-Length"] == String(length))
        #expect(r.headers["User-Agent"] != nil)
    }

    @Test("an empty form leaves the request as the serializer made it")
    func emptyForm() throws {
        let r = try serializer.multipartFormRequest(withMethod: .post, urlString: "http://example.com", parameters: nil)
        #expect(r.headers["Content-Type"] == "application/x-www-form-urlencoded")
    }

    @Test("GET and HEAD are refused; errors from the closure propagate")
    func refusals() {
        for m: HTTPMethod in [.get, .head] {
            #expect(throws: SerializationError.self) {
                _ = try serializer.multipartFormRequest(withMethod: m, urlString: "http://example.com", parameters: nil)
            }
        }
        #expect {
            _ = try serializer.multipartFormRequest(withMethod: .post, urlString: "http://example.com", parameters: nil)
            { form in
                try form.appendPart(withFileURL: URL(fileURLWithPath: "/nonexistent/hawser/file"), name: "f")
            }
        } throws: { ($0 as? SerializationError)?.code == .fileNotReachable }
    }

    @Test("writing to a file returns the request without a body, with the headers for the file's bytes")
    func writingToFile() async throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let dest = dir.url.appendingPathComponent("upload.body")
        let r = try await serializer.multipartFormRequest(
            withMethod: .put,
            urlString: "http://example.com",
            parameters: ["k": "v"],
            writingStreamContentsToFile: dest,
            boundary: "B"
        )
        #expect(r.body == nil)
        let written = Array(try Data(contentsOf: dest))
        #expect(r.headers["Content-Length"] == String(written.count))
        #expect(
            parseMultipart(written, boundary: "B") == [
                ParsedPart(headers: [#"Content-Disposition: form-data; name="k""#], body: Array("v".utf8))
            ]
        )
    }
}

extension ManagerNetworkTests {
    @Suite struct MultipartEchoTests {
        @Test("a multipart body with a file part POSTed to the test server's /echo comes back byte for byte")
        func echo() async throws {
            let dir = try TempDir()
            defer { dir.cleanup() }
            let file = try dir.file("data.bin", (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let server = try TestServer()
            defer { server.shutdown() }
            let session = Session()
            defer { session.shutdown() }
            var form = MultipartFormData()
            let r = try HTTPRequestSerializer().multipartFormRequest(
                withMethod: .post,
                urlString: server.baseURL + "/echo",
                parameters: ["name": "hawser"]
            ) { f in
                try f.appendPart(withFileURL: file, name: "file")
                form = f
            }
            let response = try await session.response(for: r)
            #expect(response.status == 200)
            let expected = try await produce(form).bytes
            #expect(response.body == expected)
            #expect(response.headers["X-Echo-Body-Length"] == String(expected.count))
            #expect(response.headers["X-Echo-H-Content-Type"] == form.contentType)
            let parts = try #require(parseMultipart(response.body, boundary: form.boundary))
            #expect(parts.count == 2)
            #expect(parts[1].body == Array(try Data(contentsOf: file)))
        }
    }
}
