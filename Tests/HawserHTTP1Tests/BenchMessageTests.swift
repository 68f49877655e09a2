// BenchMessageTests.swift: the three benchmark messages (Fixtures/R1-R3, copies of
// shared/bench-messages) parse to the right events, every way.

import HawserHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Reads a fixture next to this file with POSIX calls.
func fixture(_ name: String, filePath: String = #filePath) -> [UInt8] {
    let directory = filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
    let path = directory + "/Fixtures/" + name
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        out.append(contentsOf: chunk[0..<n])
    }
    return out
}

@Suite("Benchmark messages R1-R3")
struct BenchMessageTests {
    @Test("R1: 8 fields and a 13-byte body")
    func r1() {
        let wire = fixture("R1.http")
        #expect(wire.count == 354)
        let events = verify(wire, ResponseHarness())
        #expect(events.count == 3)
        guard case .head(let line, let fields)? = events.first else {
            Issue.record("no head: \(events)")
            return
        }
        #expect(line == "HTTP/1.1 200 OK")
        #expect(fields.count == 8)
        #expect(fields[0] == "Date: Sat, 22 Nov 2026 08:49:37 GMT")
        #expect(fields[7] == "Connection: keep-alive")
        #expect(events[1] == .body("Hello, World!"))
        #expect(events[2] == .end(keepAlive: true))
    }

    @Test("R2: 64 KiB in 16 chunks of 4 KiB")
    func r2() {
        let wire = fixture("R2.http")
        #expect(wire.count == 65_839)
        let events = verify(wire, ResponseHarness())
        #expect(events.count == 3)
        guard case .body(let body)? = events.dropFirst().first else {
            Issue.record("no body: \(events)")
            return
        }
        #expect(body.count == 65_536)
        #expect(events.last == .end(keepAlive: true))
    }

    @Test("R2's chunks arrive as 16 zero-copy body events when parsed from one buffer")
    func r2ChunkEvents() throws {
        let wire = fixture("R2.http")
        var parser = HTTP1ResponseParser()
        var offset = 0
        var bodies: [Int] = []
        try wire.withUnsafeBytes { raw in
            while true {
                let (consumed, event) = try parser.next(UnsafeRawBufferPointer(rebasing: raw[offset...]))
                offset += consumed
                guard let event else { break }
                if case .body(let range) = event { bodies.append(range.count) }
                if case .end = event { break }
            }
        }
        #expect(bodies == Array(repeating: 4096, count: 16))
        #expect(offset == wire.count)
    }

    @Test("R3: 25 fields, 5 Set-Cookie, Content-Length 0")
    func r3() {
        let wire = fixture("R3.http")
        #expect(wire.count == 1_487)
        let events = verify(wire, ResponseHarness())
        #expect(events.count == 2)
        guard case .head(_, let fields)? = events.first else {
            Issue.record("no head: \(events)")
            return
        }
        #expect(fields.count == 25)
        #expect(fields.filter { $0.hasPrefix("Set-Cookie: ") }.count == 5)
        #expect(events.last == .end(keepAlive: true))
    }
}
