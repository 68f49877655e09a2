import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

private func cacheable(_ body: [UInt8], _ fields: [(String, String)] = []) -> HTTPResponseHead {
    HTTPResponseHead(
        status: 200,
        headers: HTTPHeaders(([("Cache-Control", "max-age=600")] + fields).map { (name: $0.0, value: $0.1) })
    )
}

private func entryFiles(_ dir: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".hwc") }.sorted()
}

private func temporaryDirectory() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("hawser-cache-io-\(UUID().uuidString)").path
}

extension HTTPCache {
    /// The async store, awaited.
    fileprivate func store(
        _ cached: CachedResponse,
        for request: HTTPClientRequest,
        on loop: EventLoop
    ) async -> Result<Bool, HawserError> {
        await withCheckedContinuation { c in self.store(cached, for: request, on: loop) { c.resume(returning: $0) } }
    }

    /// The async lookup, awaited.
    fileprivate func lookup(_ request: HTTPClientRequest, on loop: EventLoop) async -> CacheLookup {
        await withCheckedContinuation { c in self.lookup(request, on: loop, now: { t0 }) { c.resume(returning: $0) } }
    }
}

private func cached(
    _ body: [UInt8],
    for request: HTTPClientRequest,
    _ fields: [(String, String)] = []
) -> CachedResponse {
    HTTPCache.cacheableResponse(cacheable(body, fields), body: body, for: request, requestTime: t0, responseTime: t0)!
}

private func servedBody(_ lookup: CacheLookup) -> [UInt8]? {
    if case .fresh(let r) = lookup { return r.body }
    return nil
}

/// The disk store's file IO runs on the cache's IO pool, never on the caller's loop; these tests
/// hold it to its ordering guarantees, on real files in temporary directories.
@Suite("The HTTP cache's disk IO off the event loop", .serialized)
struct CacheDiskIOTests {
    @Test("a lookup asked right after a store of the same URL (without waiting for it) sees that store")
    func orderedPerURL() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        try await expectNoFDLeak {
            let cache = try HTTPCache(memoryCapacity: 0, diskCapacity: 64 << 20, directory: dir)
            let request = get("http://example.org/ordered")
            for round in 0..<20 {
                let body = [UInt8](repeating: UInt8(round), count: 100_000 + round)
                // Both asked from the loop thread back to back: the store is still queued or
                // running when the lookup is asked.
                let seen: [UInt8]? = await withCheckedContinuation { c in
                    loop.execute {
                        cache.store(cached(body, for: request), for: request, on: loop) { _ in }
                        cache.lookup(request, on: loop, now: { t0 }) { c.resume(returning: servedBody($0)) }
                    }
                }
                #expect(
                    seen == body,
                    "round \(round): the lookup saw \(seen.map { "\($0.count) bytes of \($0.first ?? 0)" } ?? "nothing")"
                )
            }
            #expect(entryFiles(dir).count == 1)
        }
    }

    @Test(
        "an entry being written is invisible (no entry file, not found by a reopened cache) until its store completes"
    )
    func storeInProgressIsNotServed() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let pool = BlockingIOPool(maxThreads: 1, name: "cache-test-io")
        let cache = try HTTPCache(memoryCapacity: 0, diskCapacity: 64 << 20, directory: dir, ioPool: pool)
        let request = get("http://example.org/slow")
        let body = [UInt8](repeating: 7, count: 1 << 20)
        // Hold the pool: a barrier that waits for the gate.
        let gate = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        pool.submit(key: nil) {
            held.signal()
            gate.wait()
        }
        held.wait()
        final class Box: Sendable { let value = Mutex<Result<Bool, HawserError>?>(nil) }
        let box = Box()
        cache.store(cached(body, for: request), for: request, on: loop) { r in box.value.withLock { $0 = r } }
        #expect(entryFiles(dir).isEmpty, "nothing is visible while the store waits or runs")
        let other = try HTTPCache(memoryCapacity: 0, diskCapacity: 64 << 20, directory: dir)
        #expect(other.cachedResponse(for: request) == nil)
        #expect(box.value.withLock { $0 } == nil, "the store has not completed")
        gate.signal()
        let lookup = await cache.lookup(request, on: loop)
        #expect(servedBody(lookup) == body)
        #expect(try #require(box.value.withLock { $0 }).get() == true, "completed before the lookup after it")
        #expect(entryFiles(dir).count == 1)
        let reopened = try HTTPCache(memoryCapacity: 0, diskCapacity: 64 << 20, directory: dir)
        #expect(reopened.cachedResponse(for: request)?.body == body)
    }

    @Test("concurrent readers and writers on several URLs only ever see whole bodies, and the index matches the files")
    func concurrentReadersAndWriters() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        try await expectNoFDLeak {
            let cache = try HTTPCache(
                memoryCapacity: 0,
                diskCapacity: 64 << 20,
                directory: dir,
                ioPool: BlockingIOPool(maxThreads: 3, name: "cache-test-io")
            )
            let bad = await withTaskGroup(of: [String].self) { group in
                for worker in 0..<6 {
                    group.addTask {
                        var bad: [String] = []
                        for i in 0..<30 {
                            let key = (worker + i) % 4
                            let request = get("http://example.org/c\(key)")
                            let value = UInt8(truncatingIfNeeded: worker * 31 + i)
                            let body = [UInt8](repeating: value, count: 50_000 + key * 1000)
                            if i % 3 == 0 {
                                _ = cache.store(cached(body, for: request), for: request)  // the blocking form
                            } else {
                                _ = await cache.store(cached(body, for: request), for: request, on: loop)
                            }
                            let seen =
                                i % 2 == 0
                                ? servedBody(await cache.lookup(request, on: loop))
                                : cache.cachedResponse(for: request)?.body
                            if let seen, seen.count != 50_000 + key * 1000 || Set(seen).count != 1 {
                                bad.append("c\(key): \(seen.count) bytes, \(Set(seen).count) values")
                            }
                        }
                        return bad
                    }
                }
                var all: [String] = []
                for await found in group { all += found }
                return all
            }
            #expect(bad.isEmpty)
            let files = entryFiles(dir)
            #expect(files.count == 4)
            let total = files.compactMap {
                try? FileManager.default.attributesOfItem(atPath: dir + "/" + $0)[.size] as? Int
            }.reduce(0, +)
            #expect(total == cache.currentDiskUsage)
        }
    }

    /// Records the largest body chunk the delegate was handed.
    final class ChunkRecorder: RecordingDelegate, @unchecked Sendable {
        let largestChunk = Atomic<Int>(0)
        override func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
            if bytes.count > self.largestChunk.load(ordering: .relaxed) {
                self.largestChunk.store(bytes.count, ordering: .relaxed)
            }
            super.task(task, didReceiveBody: bytes)
        }
    }

    @Test("a large body (32 MiB) is stored on disk and served back from it, to the delegate at most 1 MiB a turn")
    func largeBodyThroughTheSession() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let size = 32 << 20
        let cache = try HTTPCache(memoryCapacity: 1 << 20, diskCapacity: 512 << 20, directory: dir)
        try await withServer({
            $0.urlCache = cache
            $0.maximumBufferedBodySize = size
        }) { server, session in
            let target = "/bytes/\(size)?max-age=600"
            let first = ChunkRecorder()
            session.execute(HTTPClientRequest(url: url(server.baseURL + target)), delegate: first)
            let r1 = await first.wait()
            #expect(r1.body.count == size && r1.metrics?.cacheUse == nil)
            let second = ChunkRecorder()
            session.execute(HTTPClientRequest(url: url(server.baseURL + target)), delegate: second)
            let r2 = await second.wait()
            #expect(r2.completions == 1)
            #expect(r2.metrics?.cacheUse == .fresh, "served from the disk entry")
            #expect(r2.body == pattern(size), "the whole body, byte for byte")
            #expect(second.largestChunk.load(ordering: .relaxed) <= 1 << 20)
            #expect(server.requestCount(target: target) == 1)
            #expect(entryFiles(dir).count == 1)
        }
    }

    @Test(
        "a body a 304 revalidated (3 MiB) reaches the delegate at most 1 MiB a turn; a cancel between chunks ends it once"
    )
    func revalidatedBodyInChunks() async throws {
        let size = 3 << 20
        try await withServer({
            $0.urlCache = HTTPCache(memoryCapacity: 64 << 20)
            $0.maximumBufferedBodySize = size
        }) { server, session in
            let u = url(server.baseURL + "/cacheable?max-age=0&size=\(size)")
            let first = ChunkRecorder()
            session.execute(HTTPClientRequest(url: u), delegate: first)
            let r1 = await first.wait()
            #expect(r1.body == pattern(size) && r1.metrics?.cacheUse == nil)

            let second = ChunkRecorder()
            session.execute(HTTPClientRequest(url: u), delegate: second)
            let r2 = await second.wait()
            #expect(r2.completions == 1)
            #expect(r2.head?.status == 200 && r2.metrics?.cacheUse == .validated)
            #expect(r2.body == pattern(size), "the stored body, byte for byte")
            #expect(second.largestChunk.load(ordering: .relaxed) <= 1 << 20)

            // Cancelled from the first chunk's callback: the next turn completes with the cancel.
            let third = ChunkRecorder()
            third.onBody = { task, _ in task.cancel() }
            session.execute(HTTPClientRequest(url: u), delegate: third)
            let r3 = await third.wait()
            #expect(r3.completions == 1)
            #expect(third.error?.code == .cancelled)
            #expect(r3.body.count == 1 << 20, "one chunk was delivered before the cancel")
            #expect(server.cacheableCounts == (1, 2))
        }
    }

    @Test(
        "unusable directories are typed ioErrors naming the file operation; the request still succeeds; nothing leaks"
    )
    func failures() async throws {
        let file = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: file) }
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        #expect { try HTTPCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: file + "/sub") } throws: { error in
            guard let e = error as? HawserError, e.code == .ioError, let f = e.underlying as? FileError else {
                return false
            }
            return f.operation == "mkdir" && f.path == file + "/sub" && f.errnoCode == ENOTDIR
        }

        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let cache = try HTTPCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: dir)
        try FileManager.default.removeItem(atPath: dir)  // the directory goes away under the cache
        try await expectNoFDLeak {
            let request = get("http://example.org/gone")
            let result = await cache.store(cached([1, 2, 3], for: request), for: request, on: loop)
            guard case .failure(let e) = result else {
                Issue.record("a store into a missing directory succeeded: \(result)")
                return
            }
            #expect(e.code == .ioError)
            let f = try #require(e.underlying as? FileError)
            #expect(f.operation == "open" && f.path.hasPrefix(dir + "/") && f.errnoCode == ENOENT)
            #expect(!cache.store(cached([1, 2, 3], for: request), for: request), "the blocking form says not kept")
            #expect(servedBody(await cache.lookup(request, on: loop)) == nil)
        }
        // Through a session: the response is delivered; only the store failed.
        try await withServer({ $0.urlCache = cache }) { server, session in
            let u = url(server.baseURL + "/cacheable")
            let first = try await session.response(for: HTTPClientRequest(url: u))
            let second = try await session.response(for: HTTPClientRequest(url: u))
            #expect(first.status == 200 && second.status == 200)
            #expect(server.cacheableCounts.produced == 2, "nothing was stored, so both went to the server")
        }
    }

    @Test("FileDescriptor's errors name the operation, the path and errno")
    func fileDescriptorErrors() throws {
        let dir = temporaryDirectory()
        try FileSystem.createDirectory(dir + "/a/b")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(throws: FileError(operation: "open", path: dir + "/missing", errnoCode: ENOENT)) {
            try FileDescriptor.openForReading(dir + "/missing")
        }
        let fd = try FileDescriptor.open(dir + "/a/f", O_WRONLY | O_CREAT | O_TRUNC)
        try fd.write(all: [1, 2, 3, 4])
        try fd.sync()
        try fd.close()
        let reader = try FileDescriptor.openForReading(dir + "/a/f")
        defer { reader.closeIgnoringErrors() }
        #expect(try reader.readExactly(count: 2, at: 2) == [3, 4])
        #expect(throws: FileError(operation: "read (file shrank)", path: dir + "/a/f", errnoCode: EIO)) {
            try reader.readExactly(count: 3, at: 2)
        }
        #expect(
            throws: FileError(operation: "rename", path: dir + "/nope", destination: dir + "/a/g", errnoCode: ENOENT)
        ) {
            try FileSystem.rename(dir + "/nope", to: dir + "/a/g")
        }
        try FileSystem.unlink(dir + "/nope")  // already gone: not an error
        #expect(
            try FileSystem.contentsOfDirectory(dir + "/a") == ["b", "f"]
                || FileSystem.contentsOfDirectory(dir + "/a") == ["f", "b"]
        )
        #expect(
            "\(FileError(operation: "open", path: "/x", errnoCode: ENOENT))"
                == "open '/x' failed: No such file or directory (errno 2)"
        )
    }
}

extension NetworkTests {
    @Suite("The cache matches Vary on the wire request", .serialized)
    struct CacheWireVaryTests {
        @Test("Vary: Cookie is matched on the Cookie the jar adds on the wire, not on the caller's fields")
        func varyCookie() async throws {
            try await withServer({ $0.urlCache = HTTPCache(memoryCapacity: 1 << 20) }) { server, session in
                let u = url(server.baseURL + "/cacheable?vary=Cookie")
                let first = try await session.response(for: HTTPClientRequest(url: u))
                _ = try await session.response(
                    for: HTTPClientRequest(url: url(server.baseURL + "/cookies/set?flavour=oat"))
                )
                let second = try await session.response(for: HTTPClientRequest(url: u))
                #expect(second.metrics.cacheUse == nil, "the wire request now carries Cookie: a different variant")
                #expect(String(decoding: first.body, as: UTF8.self) == "response #1")
                #expect(String(decoding: second.body, as: UTF8.self) == "response #2")
                let third = try await session.response(for: HTTPClientRequest(url: u))
                #expect(
                    third.metrics.cacheUse == .fresh && String(decoding: third.body, as: UTF8.self) == "response #2"
                )
                #expect(server.cacheableCounts.produced == 2)
            }
        }

        @Test("Vary: Accept-Encoding and User-Agent: sessions whose wire requests differ do not share a variant")
        func varyAddedHeaders() async throws {
            let cache = HTTPCache(memoryCapacity: 1 << 20)
            try await withServer({ $0.urlCache = cache }) { server, session in
                var plain = SessionConfiguration()
                plain.urlCache = cache
                plain.automaticallyDecodesContent = false  // no Accept-Encoding on the wire
                var agent = SessionConfiguration()
                agent.urlCache = cache
                agent.httpAdditionalHeaders = ["User-Agent": "other-agent/1"]
                let plainSession = Session(configuration: plain, eventLoop: session.eventLoop)
                let agentSession = Session(configuration: agent, eventLoop: session.eventLoop)
                defer {
                    plainSession.shutdown()
                    agentSession.shutdown()
                }
                for (vary, other) in [("Accept-Encoding", plainSession), ("User-Agent", agentSession)] {
                    let u = url(server.baseURL + "/cacheable?vary=\(vary)")
                    let before = server.cacheableCounts.produced
                    let a1 = try await session.response(for: HTTPClientRequest(url: u))
                    let b1 = try await other.response(for: HTTPClientRequest(url: u))
                    let a2 = try await session.response(for: HTTPClientRequest(url: u))
                    let b2 = try await other.response(for: HTTPClientRequest(url: u))
                    #expect(
                        a1.metrics.cacheUse == nil && b1.metrics.cacheUse == nil,
                        "\(vary): each wire request is its own variant"
                    )
                    #expect(
                        a2.metrics.cacheUse == .fresh && b2.metrics.cacheUse == .fresh,
                        "\(vary): each variant is served to its match"
                    )
                    #expect(a2.body == a1.body && b2.body == b1.body && a1.body != b1.body)
                    #expect(server.cacheableCounts.produced == before + 2)
                }
            }
        }
    }

    @Suite("206 Partial Content and content codings", .serialized)
    struct PartialContentCodingTests {
        @Test("a 206 with a Content-Encoding is refused with cannotDecodeContent: never decoded, never delivered")
        func coded206() async throws {
            var state: UInt32 = 1
            let noise = (0..<4000).map { _ -> UInt8 in
                state = state &* 1_103_515_245 &+ 12345
                return UInt8(truncatingIfNeeded: state >> 16)
            }
            let coded = gzip(noise)  // incompressible: longer than the slice taken from it
            let slice = Array(coded[10..<60])
            try await FaultTests.withSession { session in
                let head =
                    "HTTP/1.1 206 Partial Content\r\nContent-Encoding: gzip\r\nContent-Range: bytes 10-59/\(coded.count)\r\nContent-Length: \(slice.count)\r\n\r\n"
                let server = try ScriptedServer([[.readRequest(), .send(Array(head.utf8) + slice), .waitForClose]])
                defer { server.stop() }
                var request = HTTPClientRequest(url: url("http://127.0.0.1:\(server.port)/file"))
                request.headers.add(name: "Range", value: "bytes=10-")
                request.headers.add(name: "Accept-Encoding", value: "gzip")  // the caller insisted
                let rec = await FaultTests.run(session, request)
                #expect(rec.completions == 1)
                let e = try #require(FaultTests.error(rec))
                #expect(e.code == .cannotDecodeContent)
                #expect("\(e)".contains("206"))
                #expect(rec.body.isEmpty, "no byte of the slice reached the delegate")
            }
        }

        @Test("a Range request the session adds Accept-Encoding to asks for identity; others for every coding")
        func rangeAsksForIdentity() async throws {
            try await withServer { server, session in
                var ranged = HTTPClientRequest(url: url(server.baseURL + "/echo"))
                ranged.headers.add(name: "Range", value: "bytes=5-")
                let r = try await session.response(for: ranged)
                #expect(r.headers["X-Echo-H-Accept-Encoding"] == "identity")
                let plain = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/echo")))
                #expect(plain.headers["X-Echo-H-Accept-Encoding"] == ContentDecoder.acceptEncoding)
            }
        }
    }
}
