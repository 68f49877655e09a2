// The async API's streaming bodies against the test server: response bodies as an
// AsyncSequence (order, back-pressure, cancellation, errors) and request bodies from one.
import CHawser
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The test server's pattern: byte i is i % 251 (offset `from`).
private let patternTemplate: [UInt8] = (0..<(1 << 20) + 251).map { UInt8($0 % 251) }

/// Whether `chunk` is the pattern from offset `offset`.
private func isPattern(_ chunk: [UInt8], at offset: Int) -> Bool {
    var i = 0
    while i < chunk.count {
        let n = min(1 << 20, chunk.count - i)
        let phase = (offset + i) % 251
        let same = chunk.withUnsafeBytes { c in
            patternTemplate.withUnsafeBytes { t in memcmp(c.baseAddress! + i, t.baseAddress! + phase, n) == 0 }
        }
        if !same { return false }
        i += n
    }
    return true
}

/// Chunks of bytes as an AsyncSequence, with an optional failure after them.
private struct Chunks: AsyncSequence, Sendable {
    struct Broken: Error {}
    let chunks: [[UInt8]]
    var failAfter: Int? = nil

    func makeAsyncIterator() -> Iterator { Iterator(chunks: self.chunks, failAfter: self.failAfter) }

    struct Iterator: AsyncIteratorProtocol {
        let chunks: [[UInt8]]
        let failAfter: Int?
        var index = 0
        mutating func next() async throws -> ArraySlice<UInt8>? {
            if let f = self.failAfter, self.index == f { throw Broken() }
            guard self.index < self.chunks.count else { return nil }
            defer { self.index += 1 }
            return self.chunks[self.index][...]
        }
    }
}

extension NetworkTests {
    @Suite("Streaming bodies in the async API", .serialized)
    struct StreamingResponseTests {
        /// The base URL with `localhost` for TLS (the test certificate's name).
        static func base(_ server: TestServer) -> String {
            server.isTLS ? "https://localhost:\(server.port)" : server.baseURL
        }

        /// Waits (bounded) until the session's pool has no running task: a cancelled task completes
        /// on the loop, after the consumer saw its cancellation.
        static func waitUntilIdle(_ session: Session) async -> PoolStatistics {
            var stats = session.poolStatistics()
            var spins = 0
            while stats.runningTasks > 0 && spins < 1000 {
                await Task.yield()
                try? await Task.sleep(nanoseconds: 1_000_000)
                stats = session.poolStatistics()
                spins += 1
            }
            return stats
        }

        @Test(
            "the body arrives in order as chunks, sized and chunked, plain and TLS; the connection is reused after",
            arguments: [false, true]
        )
        func streamsInOrder(tls: Bool) async throws {
            try await withServer(tls: tls) { server, session in
                let base = Self.base(server)
                for path in [
                    "/bytes/1000000", "/bytes/1000000?chunk=3000", "/stream/3000000", "/stream/3000000?chunked=1",
                ] {
                    let r = try await session.streamingResponse(for: HTTPClientRequest(url: url(base + path)))
                    #expect(r.status == 200)
                    var received = 0
                    var chunks = 0
                    var inOrder = true
                    for try await chunk in r.body {
                        #expect(!chunk.isEmpty)
                        inOrder = inOrder && isPattern(chunk, at: received)
                        received += chunk.count
                        chunks += 1
                    }
                    #expect(received == (path.hasPrefix("/bytes") ? 1_000_000 : 3_000_000), "\(path)")
                    #expect(inOrder, "\(path): bytes in order")
                    #expect(chunks > 1, "\(path): delivered as it arrived, not as one piece")
                    #expect(r.body.metrics?.responseEnd != nil)
                }
                #expect(server.acceptedConnections == 1, "every body was read to its end: one keep-alive connection")
            }
        }

        @Test("a slow consumer holds a 1 GiB body to bounded memory (the socket is paused, not buffered)")
        func slowConsumerBoundedMemory() async throws {
            try await withServer { server, session in
                let size = 1 << 30
                #expect(resetPeakRSS(), "the kernel lets us reset VmHWM (clear_refs 5)")
                let before = peakRSSKiB()
                let r = try await session.streamingResponse(
                    for: HTTPClientRequest(url: url(server.baseURL + "/stream/\(size)"))
                )
                var received = 0
                var inOrder = true
                var holds = 0
                var nextHold = 0
                for try await chunk in r.body {
                    inOrder = inOrder && isPattern(chunk, at: received)
                    received += chunk.count
                    // The consumer is slow: it awaits between chunks, and every 64 MiB it stops
                    // reading until the server has run at least a watermark ahead of it.
                    await Task.yield()
                    if received >= nextHold {
                        nextHold += 64 << 20
                        var spins = 0
                        while server.streamedBytes < min(size, received + ResponseBodyStream.highWatermark)
                            && spins < 5000
                        {
                            try await Task.sleep(nanoseconds: 1_000_000)
                            spins += 1
                        }
                        holds += 1
                    }
                }
                let growthMiB = (peakRSSKiB() - before) / 1024
                #expect(received == size)
                #expect(inOrder)
                #expect(holds == 17, "held at 0, 64, …, 1024 MiB")
                #expect(growthMiB < 24, "peak RSS grew by \(growthMiB) MiB while streaming 1 GiB to a slow consumer")
                print("streaming 1 GiB to a slow consumer: peak RSS growth \(growthMiB) MiB")
            }
        }

        @Test("a consumer that stops reading holds the server back: bytes sent stay within the buffers")
        func stoppedConsumerHoldsServer() async throws {
            try await withServer { server, session in
                let size = 256 << 20
                let r = try await session.streamingResponse(
                    for: HTTPClientRequest(url: url(server.baseURL + "/stream/\(size)"))
                )
                var iterator = r.body.makeAsyncIterator()
                var received = 0
                while received < (1 << 20), let chunk = try await iterator.next() { received += chunk.count }
                // Not reading now. The server keeps writing only until the stream's buffer (a
                // watermark) and the sockets' buffers are full; wait until it has stopped moving.
                var last = -1
                var stable = 0
                var spins = 0
                while stable < 50 && spins < 5000 {
                    let now = server.streamedBytes
                    stable = now == last ? stable + 1 : 0
                    last = now
                    try await Task.sleep(nanoseconds: 2_000_000)
                    spins += 1
                }
                #expect(stable >= 50, "the server stopped sending")
                #expect(
                    last < received + (64 << 20),
                    "held back: \(last >> 20) MiB sent while \(received >> 20) MiB were read"
                )
                // Reading again resumes the transfer to its end.
                while let chunk = try await iterator.next() { received += chunk.count }
                #expect(received == size)
            }
        }

        @Test(
            "dropping the body mid-stream cancels the request and closes its connection; the next request gets a fresh one"
        )
        func droppedBodyClosesConnection() async throws {
            try await withServer { server, session in
                do {
                    let r = try await session.streamingResponse(
                        for: HTTPClientRequest(url: url(server.baseURL + "/stream/\(64 << 20)"))
                    )
                    var received = 0
                    for try await chunk in r.body {
                        received += chunk.count
                        if received >= 1 << 20 { break }
                    }
                    #expect(received >= 1 << 20)
                }
                // The response (sequence and iterator) is gone: the request is cancelled.
                let stats = await Self.waitUntilIdle(session)
                #expect(stats.runningTasks == 0)
                #expect(stats.openConnections == 0, "a half-read response's connection is closed, not pooled: \(stats)")
                let next = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(next.status == 200)
                #expect(next.metrics.isReusedConnection == false)
                #expect(server.acceptedConnections == 2)
            }
        }

        @Test("cancelling the Swift task that iterates throws .cancelled from the iteration and closes the connection")
        func cancelledIteration() async throws {
            try await withServer { server, session in
                let gotSome = AsyncStreamBox()
                let consumer = Task { () -> (Int, HawserError?) in
                    var received = 0
                    do throws(HawserError) {
                        let r = try await session.streamingResponse(
                            for: HTTPClientRequest(url: url(server.baseURL + "/stream/\(256 << 20)"))
                        )
                        for try await chunk in r.body {
                            received += chunk.count
                            if received >= 1 << 20 { gotSome.signal() }
                        }
                        return (received, nil)
                    } catch {
                        return (received, error)
                    }
                }
                await gotSome.wait()
                consumer.cancel()
                let (received, error) = await consumer.value
                #expect(error?.code == .cancelled, "got \(String(describing: error))")
                #expect(received < 256 << 20)
                let stats = await Self.waitUntilIdle(session)
                #expect(stats.openConnections == 0, "the cancelled response's connection is closed: \(stats)")
                let next = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(next.metrics.isReusedConnection == false)
                #expect(server.acceptedConnections == 2)
            }
        }

        @Test("a transfer that breaks mid-body delivers what arrived, then throws its error from the iteration")
        func errorMidStream() async throws {
            try await withServer { server, session in
                let r = try await session.streamingResponse(
                    for: HTTPClientRequest(url: url(server.baseURL + "/fault/close-mid-body"))
                )
                #expect(r.status == 200)
                var received = 0
                var thrown: HawserError?
                do throws(HawserError) {
                    for try await chunk in r.body { received += chunk.count }
                } catch {
                    thrown = error
                }
                #expect(thrown?.code == .connectionLost, "got \(String(describing: thrown))")
                #expect(received > 0 && received < 1000, "the bytes before the close were delivered: \(received)")
                #expect(r.body.metrics != nil)
                // After the error the iterator is finished: nil, not a second error.
                let stats = await Self.waitUntilIdle(session)
                #expect(stats.openConnections == 0)
            }
        }

        @Test("a failure before the head is thrown by streamingResponse; a second iterator is refused")
        func failuresAndMisuse() async throws {
            try await withServer { server, session in
                // A port nobody listens on (the server's, after it closed, would do too).
                await #expect(throws: HawserError.self) {
                    _ = try await session.streamingResponse(for: HTTPClientRequest(url: url("http://127.0.0.1:1/")))
                }
                await #expect(throws: HawserError.self) {
                    _ = try await session.streamingResponse(for: HTTPClientRequest(url: url("ftp://127.0.0.1/")))
                }
                let r = try await session.streamingResponse(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                var first = r.body.makeAsyncIterator()
                var second = r.body.makeAsyncIterator()
                do throws(HawserError) {
                    _ = try await second.next()
                    Issue.record("a second iterator must be refused")
                } catch {
                    #expect(error.code == .invalidRequest)
                }
                var body: [UInt8] = []
                while let chunk = try await first.next() { body += chunk }
                #expect(String(decoding: body, as: UTF8.self) == "Hello, World!")
                #expect(try await first.next() == nil, "finished stays finished")
            }
        }

        @Test("collect(upTo:) gathers a body, and cancels past its limit with limitExceeded")
        func collect() async throws {
            try await withServer { server, session in
                let ok = try await session.streamingResponse(
                    for: HTTPClientRequest(url: url(server.baseURL + "/bytes/300000?chunk=1000"))
                )
                let all = try await ok.body.collect(upTo: 300_000)
                #expect(all.count == 300_000 && isPattern(all, at: 0))
                let big = try await session.streamingResponse(
                    for: HTTPClientRequest(url: url(server.baseURL + "/stream/\(32 << 20)"))
                )
                do throws(HawserError) {
                    _ = try await big.body.collect(upTo: 1 << 20)
                    Issue.record("collect past its limit must throw")
                } catch {
                    #expect(error.code == .limitExceeded)
                }
                // The first response's connection carried the second, whose cancel closed it.
                let stats = await Self.waitUntilIdle(session)
                #expect(stats.openConnections == 0, "the cancelled response's connection is closed: \(stats)")
            }
        }

        @Test("gzip bodies stream decoded; trailers are there after the end")
        func decodedAndTrailers() async throws {
            try await withServer { server, session in
                let r = try await session.streamingResponse(for: HTTPClientRequest(url: url(server.baseURL + "/gzip")))
                let text = String(decoding: try await r.body.collect(upTo: 1 << 20), as: UTF8.self)
                #expect(text.contains("\"gzipped\":true"))
            }
        }

        @Test(
            "request bodies from an AsyncSequence: known length (Content-Length) and unknown (chunked)",
            arguments: [false, true]
        )
        func requestBodyFromSequence(knownLength: Bool) async throws {
            try await withServer { server, session in
                let whole = (0..<3_000_000).map { UInt8($0 % 251) }
                let chunks = stride(from: 0, to: whole.count, by: 70_000).map {
                    Array(whole[$0..<min($0 + 70_000, whole.count)])
                }
                var request = HTTPClientRequest(method: .put, url: url(server.baseURL + "/sink"))
                request.body = .stream(Chunks(chunks: chunks), length: knownLength ? Int64(whole.count) : nil)
                request.expectsContinue = false
                let r = try await session.response(for: request)
                #expect(r.headers["X-Sink-Length"] == String(whole.count))
                #expect(r.headers["X-Sink-Pattern"] == "ok")

                var echo = HTTPClientRequest(method: .post, url: url(server.baseURL + "/echo"))
                echo.body = .stream(Chunks(chunks: [[1, 2], [3]]), length: knownLength ? 3 : nil)
                let e = try await session.response(for: echo)
                #expect(e.body == [1, 2, 3])
                #expect(
                    e.headers[knownLength ? "X-Echo-H-Content-Length" : "X-Echo-H-Transfer-Encoding"]
                        == (knownLength ? "3" : "chunked")
                )
            }
        }

        @Test(
            "a request body sequence that throws, or is shorter than its length, fails the request with a typed error"
        )
        func requestBodyFailures() async throws {
            try await withServer { server, session in
                var failing = HTTPClientRequest(method: .put, url: url(server.baseURL + "/sink"))
                failing.body = .stream(Chunks(chunks: [[1, 2, 3], [4]], failAfter: 1), length: nil)
                do throws(HawserError) {
                    _ = try await session.response(for: failing)
                    Issue.record("the sequence's failure must fail the request")
                } catch {
                    #expect(error.code == .invalidRequest)
                    #expect(error.underlying is Chunks.Broken)
                }
                var short = HTTPClientRequest(method: .put, url: url(server.baseURL + "/sink"))
                short.body = .stream(Chunks(chunks: [[1, 2, 3]]), length: 10)
                await #expect(throws: HawserError.self) { _ = try await session.response(for: short) }
            }
        }
    }
}
