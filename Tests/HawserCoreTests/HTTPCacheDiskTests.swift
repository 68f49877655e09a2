import Foundation
import HawserCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("HTTP cache: disk store")
struct HTTPCacheDiskTests {
    // MARK: - Disk

    static func temporaryDirectory() -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-cache-\(UUID().uuidString)")
            .path
        return path
    }

    static func entryFiles(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".hwc") }.sorted()
    }

    @Test("the disk store survives a reopen, keeps user info, honours memory-only")
    func diskReopen() throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let cache = try HTTPCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: dir)
            var cached = try #require(
                HTTPCache.cacheableResponse(
                    head(200, [("Cache-Control", "max-age=100"), ("Vary", "Accept"), ("ETag", #""d""#)]),
                    body: body(1000),
                    for: get("http://example.org/d", [("Accept", "text/html")]),
                    requestTime: t0,
                    responseTime: at(1)
                )
            )
            cached.userInfo = ["origin": "test"]
            #expect(cache.store(cached, for: get("http://example.org/d", [("Accept", "text/html")])))
            var memoryOnly = cached
            memoryOnly.storagePolicy = .allowedInMemoryOnly
            #expect(
                !cache.store(memoryOnly, for: get("http://example.org/m", [("Accept", "text/html")])),
                "no memory, no disk: not kept"
            )
            #expect(Self.entryFiles(dir).count == 1)
            #expect(cache.currentDiskUsage > 1000)
        }
        let reopened = try HTTPCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 20, directory: dir)
        #expect(reopened.currentDiskUsage > 1000)
        let hit = reopened.lookup(get("http://example.org/d", [("Accept", "text/html")]), now: at(50))
        #expect(hit.isFresh)
        let response = try #require(hit.response)
        #expect(response.body == body(1000) && response.userInfo == ["origin": "test"])
        #expect(response.requestTime == t0 && response.responseTime == at(1))
        #expect(response.head.headers["ETag"] == #""d""#)
        #expect(reopened.lookup(get("http://example.org/d", [("Accept", "image/png")]), now: at(50)).isMiss)
        reopened.removeAll()
        #expect(Self.entryFiles(dir).isEmpty && reopened.currentDiskUsage == 0)
    }

    @Test("the disk store is bounded by bytes and evicts the least recently used")
    func diskBounds() throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let capacity = 60_000
        let cache = try HTTPCache(memoryCapacity: 0, diskCapacity: capacity, directory: dir)
        func request(_ i: Int) -> HTTPClientRequest { get("http://example.org/\(i)") }
        #expect(
            !cache.store(
                head(200, [("Cache-Control", "max-age=100")]),
                body: body(capacity / 10),
                for: request(-1),
                requestTime: t0,
                responseTime: t0
            )
        )
        for i in 0..<20 {
            #expect(
                cache.store(
                    head(200, [("Cache-Control", "max-age=100")]),
                    body: body(5_000),
                    for: request(i),
                    requestTime: t0,
                    responseTime: t0
                )
            )
            #expect(cache.currentDiskUsage <= capacity)
            _ = cache.lookup(request(0), now: t0)
        }
        #expect(cache.lookup(request(0), now: t0).isFresh)
        #expect(cache.lookup(request(1), now: t0).isMiss)
        #expect(cache.lookup(request(19), now: t0).isFresh)
        let files = Self.entryFiles(dir)
        #expect(files.count >= 2 && files.count <= 11)
        let total = files.compactMap {
            try? FileManager.default.attributesOfItem(atPath: dir + "/" + $0)[.size] as? Int
        }.reduce(0, +)
        #expect(total == cache.currentDiskUsage)
    }

    @Test("corrupt, truncated and foreign files are ignored and removed, never a crash")
    func diskCorruption() throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let urls = (0..<3).map { "http://example.org/\($0)" }
        do {
            let cache = try HTTPCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: dir)
            for url in urls {
                #expect(
                    cache.store(
                        head(200, [("Cache-Control", "max-age=100")]),
                        body: body(500),
                        for: get(url),
                        requestTime: t0,
                        responseTime: t0
                    )
                )
            }
        }
        let files = Self.entryFiles(dir)
        #expect(files.count == 3)
        // One truncated (caught when indexing), one with a flipped body byte (caught by the CRC on load).
        let truncated = dir + "/" + files[0]
        #expect(truncate(truncated, 100) == 0)
        let flipped = dir + "/" + files[1]
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: flipped)))
        bytes[bytes.count - 10] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: flipped))
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: dir + "/0000.hwc"))
        try Data("left over".utf8).write(to: URL(fileURLWithPath: dir + "/tmp-abc.partial"))
        try Data("not ours".utf8).write(to: URL(fileURLWithPath: dir + "/README"))

        let reopened = try HTTPCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 20, directory: dir)
        #expect(!FileManager.default.fileExists(atPath: truncated))
        #expect(!FileManager.default.fileExists(atPath: dir + "/0000.hwc"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/tmp-abc.partial"))
        #expect(
            FileManager.default.fileExists(atPath: dir + "/README"),
            "files that are not the cache's are left alone"
        )
        let found = urls.filter { !reopened.lookup(get($0), now: t0).isMiss }
        #expect(found.count == 1, "only the intact entry is served: \(found)")
        #expect(!FileManager.default.fileExists(atPath: flipped), "the entry failing its CRC is removed")
        #expect(Self.entryFiles(dir).count == 1)
    }

    @Test("an unusable directory is a typed error")
    func badDirectory() throws {
        let file = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: file) }
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        #expect { try HTTPCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: file + "/sub") } throws: {
            ($0 as? HawserError)?.code == .ioError
        }
    }

    @Test("stores and lookups from many threads stay consistent and bounded")
    func concurrency() async {
        let cache = HTTPCache(memoryCapacity: 200_000)
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    for i in 0..<200 {
                        let request = get("http://example.org/\((worker * 7 + i) % 50)")
                        cache.store(
                            head(200, [("Cache-Control", "max-age=100")]),
                            body: body(1_000),
                            for: request,
                            requestTime: t0,
                            responseTime: t0
                        )
                        _ = cache.lookup(request, now: t0)
                    }
                }
            }
        }
        #expect(cache.currentMemoryUsage <= 200_000)
        #expect(cache.lookup(get("http://example.org/\(199 % 50)"), now: t0).isFresh)
    }
}
