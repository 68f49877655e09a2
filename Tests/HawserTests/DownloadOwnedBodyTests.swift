// Download tasks take their body by ownership (DownloadTask.write(chunk:)): the reads the engine
// gives away go to the file as they are. The file must be byte-identical whatever the framing
// and however the reads split the body.
import Foundation
import HawserTestServer
import Testing

@testable import Hawser

extension ManagerNetworkTests {
    @Suite struct DownloadOwnedBodyTests {
        /// Downloads `path` with `manager`; the file's bytes and the task.
        static func download(
            _ manager: SessionManager,
            _ server: TestServer,
            _ path: String
        ) async throws -> (
            [UInt8], DownloadTask
        ) {
            let target = tempURL("owned-download")
            defer { try? FileManager.default.removeItem(at: target) }
            let done = Expectation()
            let failure = Box<(any Error)?>(nil)
            let task = manager.downloadTask(with: request(server, path), progress: nil, destination: { _, _ in target })
            {
                _,
                _,
                error in
                failure.value = error
                done.fulfill()
            }
            task.resume()
            #expect(await done.wait(timeout: 120))
            #expect(failure.value == nil, "\(path): \(String(describing: failure.value))")
            return ([UInt8](try Data(contentsOf: target)), task)
        }

        @Test(
            "a download's file is byte-identical, its body handed over by ownership: sized, streamed, chunked, close-delimited",
            arguments: ["/bytes/4194304", "/stream/8388608", "/stream/8388608?chunked=1", "/close-delimited/4194304"]
        )
        func byteIdenticalByOwnership(path: String) async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let size = Int(path.split(separator: "/")[1].split(separator: "?")[0])!
            let (bytes, task) = try await Self.download(makeManager(), server, path)
            #expect(bytes.count == size)
            #expect(bytes == pattern(size), "\(path): the file holds the body, in order")
            let owned = task.ownedBodyBytes.load(ordering: .relaxed)
            let least = path.hasSuffix("chunked=1") ? size / 2 : size - 256 * 1024
            #expect(owned > least, "\(path): \(owned) of \(size) bytes written as the engine's own reads")
        }

        @Test(
            "split at every boundary (reads of 1 to 13 bytes), a download's file is byte-identical",
            arguments: [1, 3, 7, 13]
        )
        func byteIdenticalAtEverySplit(readSize: Int) async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            var configuration = SessionConfiguration.default
            configuration.readChunkSize = readSize
            let manager = SessionManager(configuration: configuration)
            manager.responseSerializer = DataSerializer()
            for path in ["/bytes/20000", "/bytes/20000?chunk=999", "/close-delimited/20000"] {
                let (bytes, task) = try await Self.download(manager, server, path)
                #expect(bytes == pattern(20000), "\(path) read \(readSize) bytes at a time")
                #expect(task.ownedBodyBytes.load(ordering: .relaxed) > 0, "\(path): the owned path was taken")
            }
        }
    }
}
