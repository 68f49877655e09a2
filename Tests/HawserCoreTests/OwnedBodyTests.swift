// Body bytes handed over by ownership (OwnedBody.swift): the streaming body keeps the arrays the
// connection read into, so a consumer's chunks must stay intact whatever the engine reads next,
// the parser's framing must hold at every split, and the stream's bound must hold in bytes.
import CHawser
import Foundation
import HawserTestServer
import Synchronization
import Testing

@testable import HawserCore

#if canImport(Glibc)
import Glibc
#endif

/// Byte i of the test server's bodies is i % 251 (offset `from`).
private func patternBytes(_ n: Int, from: Int = 0) -> [UInt8] { (0..<n).map { UInt8((from + $0) % 251) } }

extension NetworkTests {
    @Suite("Streaming bodies handed over by ownership", .serialized)
    struct OwnedBodyTests {
        /// What the stream's delegate buffered by ownership so far, and in all.
        static func delegate(_ r: HTTPClientStreamingResponse) -> StreamingResponseDelegate { r.body.lifetime.delegate }

        @Test(
            "a consumer that keeps every chunk sees each one intact after later reads (no chunk is a view of a reused buffer)",
            arguments: ["/bytes/4194304", "/stream/4194304", "/stream/4194304?chunked=1", "/close-delimited/4194304"]
        )
        func heldChunksStayIntact(path: String) async throws {
            try await withServer { server, session in
                let r = try await session.streamingResponse(for: HTTPClientRequest(url: url(server.baseURL + path)))
                var held: [[UInt8]] = []
                for try await chunk in r.body { held.append(chunk) }
                // Only now, after every later read, compare each chunk with what it must hold.
                var offset = 0
                var intact = true
                for chunk in held {
                    intact = intact && chunk == patternBytes(chunk.count, from: offset)
                    offset += chunk.count
                }
                #expect(offset == 4_194_304)
                #expect(intact, "\(path): every held chunk still holds its own bytes")
                let owned = Self.delegate(r).state.withLock { $0.ownedBytes }
                // Everything but what came in the head's read is the engine's own reads; in a chunked
                // body, the read after each chunk's data (its framing, then data) is copied too.
                let least = path.hasSuffix("chunked=1") ? 4_194_304 / 2 : 4_194_304 - 256 * 1024
                #expect(owned > least, "\(path): \(owned) bytes handed over by ownership")
            }
        }

        @Test("decoded bodies and TLS reads go through the engine's buffer (copied), and stay correct")
        func decodedAndTLSAreCopied() async throws {
            try await withServer { server, session in
                let r = try await session.streamingResponse(for: HTTPClientRequest(url: url(server.baseURL + "/gzip")))
                let text = String(decoding: try await r.body.collect(upTo: 1 << 20), as: UTF8.self)
                #expect(text.contains("\"gzipped\":true"))
                #expect(Self.delegate(r).state.withLock { $0.ownedBytes } == 0)
            }
            try await withServer(tls: true) { server, session in
                let base = "https://localhost:\(server.port)"
                let r = try await session.streamingResponse(for: HTTPClientRequest(url: url(base + "/bytes/1000000")))
                var received: [UInt8] = []
                for try await chunk in r.body { received += chunk }
                #expect(received == patternBytes(1_000_000))
                #expect(Self.delegate(r).state.withLock { $0.ownedBytes } == 0)
            }
        }

        @Test(
            "bodies split at every boundary reassemble: reads of 1 to 17 bytes through a head, sized, chunked and close-delimited bodies",
            arguments: [1, 2, 3, 5, 7, 11, 13, 16, 17]
        )
        func everySplitReassembles(readSize: Int) async throws {
            try await withServer({ $0.readChunkSize = readSize }) { server, session in
                for path in ["/bytes/3000", "/bytes/3000?chunk=7", "/bytes/3000?chunk=1000", "/close-delimited/3000"] {
                    let r = try await session.streamingResponse(for: HTTPClientRequest(url: url(server.baseURL + path)))
                    var received: [UInt8] = []
                    for try await chunk in r.body { received += chunk }
                    #expect(received == patternBytes(3000), "\(path) read \(readSize) bytes at a time")
                    #expect(Self.delegate(r).state.withLock { $0.ownedBytes } > 0, "\(path): the owned path was taken")
                }
            }
        }

        @Test("a stopped consumer holds the stream to its bound, counted in bytes and in memory held")
        func stoppedConsumerBound() async throws {
            try await withServer { server, session in
                let size = 64 << 20
                let r = try await session.streamingResponse(
                    for: HTTPClientRequest(url: url(server.baseURL + "/stream/\(size)"))
                )
                let delegate = Self.delegate(r)
                var iterator = r.body.makeAsyncIterator()
                var received = 0
                while received < (1 << 20), let chunk = try await iterator.next() { received += chunk.count }
                // Not reading now: the loop keeps reading until the stream's buffer is full, then pauses.
                var spins = 0
                while !delegate.state.withLock({ $0.paused }) && spins < 5000 {
                    try await Task.sleep(nanoseconds: 1_000_000)
                    spins += 1
                }
                let (paused, buffered, capacity) = delegate.state.withLock { s in
                    (s.paused, s.bufferedBytes, s.chunks.reduce(0) { $0 + $1.capacity })
                }
                #expect(paused, "reading paused for the stopped consumer")
                let bound = ResponseBodyStream.highWatermark + SessionConfiguration().readChunkSize
                #expect(buffered <= bound, "\(buffered) bytes buffered, bound \(bound)")
                #expect(
                    capacity <= 2 * bound + ResponseBodyStream.wakeBatchBytes,
                    "the buffered chunks hold \(capacity) bytes of memory for \(buffered)"
                )
                while let chunk = try await iterator.next() { received += chunk.count }
                #expect(received == size)
            }
        }

        @Test("a trickled body (reads of a byte or a few) is kept at its size, not in read-sized arrays")
        func trickleIsCompact() async throws {
            try await withServer { server, session in
                let r = try await session.streamingResponse(
                    for: HTTPClientRequest(url: url(server.baseURL + "/fault/trickle?bytes=200&every=1"))
                )
                var held: [[UInt8]] = []
                for try await chunk in r.body { held.append(chunk) }
                let bytes = held.reduce(0) { $0 + $1.count }
                let capacity = held.reduce(0) { $0 + $1.capacity }
                #expect(bytes == 200)
                #expect(Self.delegate(r).state.withLock { $0.ownedBytes } > 0)
                #expect(capacity <= 2 * bytes + 64 * held.count, "\(capacity) bytes of arrays for \(bytes) body bytes")
            }
        }
    }
}
