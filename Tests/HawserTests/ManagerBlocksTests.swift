// The manager's block properties and their one table: every block of `ManagerHooks` has its row,
// every public block property writes exactly its row, and the observe-only ones bring the block
// adapter into the event channel (and are called) while set.
import Foundation
import HawserTestServer
import Testing

@testable import Hawser

/// One public block property, set and cleared through the public API.
private struct PublicBlock {
    let name: String
    let set: (SessionManager) -> Void
    let clear: (SessionManager) -> Void
}

/// Every public block property of `SessionManager`, each set to a block that does nothing.
private var publicBlocks: [PublicBlock] {
    [
        .init(
            name: "sessionDidBecomeInvalid",
            set: { $0.sessionDidBecomeInvalid = { _ in } },
            clear: { $0.sessionDidBecomeInvalid = nil }
        ),
        .init(
            name: "sessionDidReceiveAuthenticationChallenge",
            set: { $0.sessionDidReceiveAuthenticationChallenge = { _ in .performDefaultHandling } },
            clear: { $0.sessionDidReceiveAuthenticationChallenge = nil }
        ),
        .init(
            name: "taskNeedNewBodyStream",
            set: { $0.taskNeedNewBodyStream = { _ in nil } },
            clear: { $0.taskNeedNewBodyStream = nil }
        ),
        .init(
            name: "taskWillPerformHTTPRedirection",
            set: { $0.taskWillPerformHTTPRedirection = { _, _, r in r } },
            clear: { $0.taskWillPerformHTTPRedirection = nil }
        ),
        .init(
            name: "taskDidReceiveAuthenticationChallenge",
            set: { $0.taskDidReceiveAuthenticationChallenge = { _, _ in .performDefaultHandling } },
            clear: { $0.taskDidReceiveAuthenticationChallenge = nil }
        ),
        .init(
            name: "taskDidSendBodyData",
            set: { $0.taskDidSendBodyData = { _, _, _, _ in } },
            clear: { $0.taskDidSendBodyData = nil }
        ),
        .init(name: "taskDidComplete", set: { $0.taskDidComplete = { _, _ in } }, clear: { $0.taskDidComplete = nil }),
        .init(
            name: "taskDidFinishCollectingMetrics",
            set: { $0.taskDidFinishCollectingMetrics = { _, _ in } },
            clear: { $0.taskDidFinishCollectingMetrics = nil }
        ),
        .init(
            name: "dataTaskDidReceiveResponse",
            set: { $0.dataTaskDidReceiveResponse = { _, _ in .allow } },
            clear: { $0.dataTaskDidReceiveResponse = nil }
        ),
        .init(
            name: "dataTaskDidBecomeDownloadTask",
            set: { $0.dataTaskDidBecomeDownloadTask = { _, _ in } },
            clear: { $0.dataTaskDidBecomeDownloadTask = nil }
        ),
        .init(
            name: "dataTaskDidReceiveData",
            set: { $0.dataTaskDidReceiveData = { _, _ in } },
            clear: { $0.dataTaskDidReceiveData = nil }
        ),
        .init(
            name: "dataTaskWillCacheResponse",
            set: { $0.dataTaskWillCacheResponse = { _, _ in true } },
            clear: { $0.dataTaskWillCacheResponse = nil }
        ),
        .init(
            name: "downloadTaskDidFinishDownloading",
            set: { $0.downloadTaskDidFinishDownloading = { _, _ in nil } },
            clear: { $0.downloadTaskDidFinishDownloading = nil }
        ),
        .init(
            name: "downloadTaskDidWriteData",
            set: { $0.downloadTaskDidWriteData = { _, _, _, _ in } },
            clear: { $0.downloadTaskDidWriteData = nil }
        ),
        .init(
            name: "downloadTaskDidResume",
            set: { $0.downloadTaskDidResume = { _, _, _ in } },
            clear: { $0.downloadTaskDidResume = nil }
        ),
    ]
}

/// Whether the manager's block adapter is in its event channel.
private func adapterListens(_ manager: SessionManager) -> Bool {
    manager.channel.all.contains { $0 is BlockMonitor }
}

@Suite struct ManagerBlocksTests {
    @Test func everyStoredBlockHasExactlyOneRowInTheTable() {
        let blocks = Mirror(reflecting: ManagerHooks()).children
        let rows = ManagerHooks.table
        // Each row names a different block.
        #expect(Set(rows.map { $0.slot as AnyKeyPath }).count == rows.count, "no block has two rows")
        // As many rows as stored properties: a block added without its row fails here.
        let labels = blocks.map { $0.label ?? "?" }
        #expect(
            rows.count == labels.count,
            "ManagerHooks has \(labels.count) blocks (\(labels)), its table \(rows.count) rows: give each block a row"
        )
        // Every stored property is a block slot that starts empty.
        for child in blocks {
            #expect(String(describing: type(of: child.value)).hasPrefix("Optional<"), "\(child.label ?? "?")")
        }
    }

    @Test func observesIsComputedFromTheTable() {
        var hooks = ManagerHooks()
        #expect(!hooks.observes)
        hooks.taskDidComplete = { _, _ in }
        #expect(hooks.observes)
        hooks.taskDidComplete = nil
        hooks.dataTaskWillCacheResponse = { _, _ in true }
        #expect(!hooks.observes, "an asked block does not bring the adapter into the channel")
    }

    @Test func eachPublicBlockWritesItsOwnRowAndTheObservedOnesJoinTheChannel() {
        #expect(publicBlocks.count == ManagerHooks.table.count, "every public block property is listed here")
        var written = Set<AnyKeyPath>()
        for block in publicBlocks {
            let manager = SessionManager()
            #expect(!adapterListens(manager))
            block.set(manager)
            let hooks = manager.hooks.value_
            let set = ManagerHooks.table.filter { $0.isSet(hooks) }
            #expect(set.count == 1, "\(block.name) writes one row")
            guard let row = set.first else { continue }
            #expect(written.insert(row.slot).inserted, "\(block.name) writes a row no other property writes")
            #expect(
                adapterListens(manager) == (row.role == .observed),
                "\(block.name): the adapter listens exactly while an observe-only block is set"
            )
            #expect(manager.core.hasResponseBlock == (block.name == "dataTaskDidReceiveResponse"), "\(block.name)")
            block.clear(manager)
            #expect(!ManagerHooks.table.contains { $0.isSet(manager.hooks.value_) }, "\(block.name) clears")
            #expect(!adapterListens(manager), "\(block.name): cleared, the adapter leaves the channel")
            #expect(!manager.core.hasResponseBlock)
        }
    }

    @Test func theAdapterStaysWhileAnyObservedBlockIsSet() {
        let manager = SessionManager()
        manager.taskDidComplete = { _, _ in }
        manager.dataTaskDidReceiveData = { _, _ in }
        manager.taskDidComplete = nil
        #expect(adapterListens(manager), "dataTaskDidReceiveData is still set")
        manager.sessionDidReceiveAuthenticationChallenge = { _ in .performDefaultHandling }
        #expect(adapterListens(manager), "setting an asked block leaves the adapter in place")
        manager.dataTaskDidReceiveData = nil
        #expect(!adapterListens(manager))
    }

    @Test func observedBlocksAreCalledForAnUpload() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let manager = makeManager()
        let calls = Box<[String]>([])
        manager.taskDidSendBodyData = { _, _, total, _ in
            if total == 5 { calls.mutate { $0.append("sent") } }
        }
        manager.dataTaskDidReceiveData = { _, _ in calls.mutate { if !$0.contains("data") { $0.append("data") } } }
        manager.taskDidFinishCollectingMetrics = { _, _ in calls.mutate { $0.append("metrics") } }
        manager.taskDidComplete = { _, error in calls.mutate { $0.append("complete \(error == nil)") } }
        var post = request(server, "/echo", method: .post)
        post.headers.add(name: "Content-Type", value: "application/octet-stream")
        let done = Expectation()
        manager.uploadTask(with: post, from: Data("hello".utf8)) { _, _, _ in done.fulfill() }.resume()
        #expect(await done.wait())
        #expect(calls.value == ["sent", "data", "metrics", "complete true"])
    }
}
