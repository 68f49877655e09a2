// Typed calls, per-request serializers, async transfers with progress, and HawserFailure, over
// the real test server.
import Foundation
import Hawser
import HawserTestServer
import Testing

private struct Document: Decodable, Sendable, Equatable {
    let name: String
    let ok: Bool
    let values: [Int]
}

private struct Greeting: Decodable, Sendable, Equatable {
    let message: String
}

private struct Created: Decodable, Sendable {
    struct Item: Decodable, Sendable { let title: String }
    let id: Int
    let item: Item
}

/// A serializer that tags what it returns, to tell which serializer a task used.
private struct TaggingSerializer: ResponseSerialization {
    let tag: String
    func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        "\(self.tag):\(data?.count ?? -1)"
    }
}

extension ManagerNetworkTests {
    @Suite struct TypedCallsTests {
        @Test func typedGetDecodesWithoutTouchingTheManagersSerializer() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let doc = try await m.get("json", as: Document.self)
            #expect(doc == Document(name: "hawser", ok: true, values: [1, 2, 3]))
            #expect(m.responseSerializer is DataSerializer, "the manager's serializer is left as it was")
            let (untyped, _) = try await m.get("json")
            #expect(untyped is Data, "an untyped call still uses the manager's serializer")

            let (greeting, response) = try await m.request(
                .get,
                "api/greeting",
                parameters: ["name": "typed"],
                as: Greeting.self
            )
            #expect(greeting.message == "Hello, typed!")
            #expect(response.statusCode == 200)

            let created = try await HTTPSessionManager.withJSON(server).post(
                "api/items",
                parameters: ["title": "a"],
                as: Created.self
            )
            #expect(created.item.title == "a" && created.id == 1)
        }

        @Test func concurrentCallsWithDifferentTypesAndDecodersShareNothing() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            struct Snake: Decodable, Sendable { let nameValue: String }
            try await withThrowingTaskGroup(of: String.self) { group in
                for i in 0..<24 {
                    group.addTask {
                        switch i % 3 {
                        case 0: return try await m.get("json", as: Document.self).name
                        case 1:
                            return try await m.get("api/greeting", parameters: ["name": "n\(i)"], as: Greeting.self)
                                .message
                        default:
                            // A decoder of its own, configured differently: no other call sees it.
                            let decoder = JSONDecoder()
                            decoder.keyDecodingStrategy = .custom { _ in SnakeKey("nameValue") }
                            return try await m.get("api/greeting", as: Snake.self, decoder: decoder).nameValue
                        }
                    }
                }
                var results: [String] = []
                for try await r in group { results.append(r) }
                #expect(results.count == 24)
                #expect(results.filter { $0 == "hawser" }.count == 8)
                #expect(results.filter { $0.hasPrefix("Hello, n") }.count == 8)
                #expect(results.filter { $0 == "Hello, World!" }.count == 8)
            }
            #expect(m.responseSerializer is DataSerializer)
        }

        @Test func typedFailuresAreSerializationErrorsReadThroughHawserFailure() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            do {
                _ = try await m.get("status/404", as: Document.self)
                Issue.record("a 404 decoded")
            } catch let e as any HawserFailure {
                #expect(e is SerializationError)
                #expect(e.domain == SerializationError.responseDomain && e.errorCode == -1011)
                #expect(e.response?.statusCode == 404)
                #expect(e.failingURL?.path == "/status/404")
            }
            do {
                _ = try await m.get("api/greeting", as: Document.self)
                Issue.record("a greeting decoded as a document")
            } catch let e as any HawserFailure {
                #expect(e.domain == SerializationError.cocoaDomain && e.errorCode == 3840)
                #expect(e.underlyingError is DecodingError, "the decoder's error is the cause")
                #expect(e.responseData.map { String(decoding: $0, as: UTF8.self) } == #"{"message":"Hello, World!"}"#)
                #expect(e.response?.statusCode == 200)
            }
            do {
                _ = try await m.get("status/204", as: Document.self)
                Issue.record("an empty body decoded")
            } catch let e as SerializationError {
                #expect(e.code == .cannotParseResponse)
                #expect(e.message.contains("empty"))
            }
        }

        @Test func engineAndManagerErrorsAreHawserFailuresToo() async throws {
            // A port nothing listens on: the engine's cannotConnect (-1004).
            let closed = try TestServer()
            let base = closed.baseURL
            closed.shutdown()
            let m = HTTPSessionManager(baseURL: URL(string: base + "/"))
            do {
                _ = try await m.get("json", as: Document.self)
                Issue.record("a closed port answered")
            } catch let e as any HawserFailure {
                #expect(e is HawserError)
                #expect(e.domain == "NSURLErrorDomain" && e.errorCode == -1004)
                #expect(e.response == nil && e.responseData == nil)
                #expect(e.failingURL?.path == "/json")
            }
            m.invalidateSessionCancelingTasks(true, resetSession: false)
            do {
                _ = try await m.get("json", as: Document.self)
                Issue.record("an invalidated manager made a task")
            } catch let e as any HawserFailure {
                #expect(e is SessionManagerError)
                #expect(e.domain == "NSURLErrorDomain" && e.errorCode == -999)
                #expect(e.underlyingError == nil)
            }
        }

        @Test func typedCallbackAndPerTaskSerializers() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let done = Expectation()
            let got = Box<Result<(value: Document, response: HawserResponse), any Error>?>(nil)
            let task = m.request(.get, "json", as: Document.self) { result in
                got.value = result
                done.fulfill()
            }
            #expect(task != nil)
            #expect(await done.wait())
            let (doc, response) = try #require(got.value).get()
            #expect(doc.name == "hawser" && response.statusCode == 200)

            // Two tasks at once, each with its own serializer; the manager's stays.
            let both = Expectation()
            let values = Box<[String]>([])
            for tag in ["a", "b"] {
                let t = m.dataTask(
                    withHTTPMethod: .get,
                    urlString: "hello",
                    parameters: nil,
                    headers: nil,
                    responseSerializer: TaggingSerializer(tag: tag),
                    uploadProgress: nil,
                    downloadProgress: nil,
                    success: { _, object in
                        values.value.append(object as? String ?? "?")
                        both.fulfill()
                    },
                    failure: { _, e in
                        Issue.record("\(e)")
                        both.fulfill()
                    }
                )
                t?.resume()
            }
            #expect(await both.wait(for: 2))
            #expect(values.value.sorted() == ["a:13", "b:13"])
            let (asyncTagged, _) = try await m.request(.get, "hello", responseSerializer: TaggingSerializer(tag: "c"))
            #expect(asyncTagged as? String == "c:13")
            #expect(m.responseSerializer is DataSerializer)
        }

        @Test func asyncDownloadReportsProgressAndItsUpdatesEnd() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-typed-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let target = dir.appendingPathComponent("stream.bin")
            let seen = Box<[Int64]>([])
            let request = HTTPClientRequest(method: .get, url: URL(string: server.baseURL + "/stream/1048576")!)
            let (url, response) = try await m.download(
                for: request,
                progress: { p in seen.value.append(p.completedUnitCount) }
            ) { _, _ in target }
            #expect(url == target && response.statusCode == 200)
            #expect(try FileManager.default.attributesOfItem(atPath: target.path)[.size] as? Int == 1_048_576)
            #expect(seen.value.count > 1, "more than one progress report for 1 MiB")
            #expect(seen.value == seen.value.sorted(), "progress only grows")
            #expect(seen.value.last == 1_048_576)

            // The same progress as an AsyncSequence, on the callback API's task: it ends.
            let task = m.downloadTask(
                with: request,
                destination: { _, _ in dir.appendingPathComponent("2") },
                completionHandler: nil
            )
            let updates = try #require(m.downloadProgress(for: task)).updates
            task.resume()
            var last: TransferProgress.Update? = nil
            for await u in updates { last = u }
            #expect(last?.isLast == true && last?.isFinished == true)
            #expect(last?.completedUnitCount == 1_048_576 && last?.fractionCompleted == 1)
        }

        @Test func progressUpdatesEndWhenTheTaskFails() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let request = HTTPClientRequest(method: .get, url: URL(string: server.baseURL + "/fault/close-mid-body")!)
            let task = m.downloadTask(with: request, completionHandler: nil)
            let updates = try #require(m.downloadProgress(for: task)).updates
            task.resume()
            var last: TransferProgress.Update? = nil
            for await u in updates { last = u }
            #expect(last?.isLast == true, "a failed task ends its progress updates")
            #expect(last?.isFinished == false)
            #expect(task.error != nil)
        }

        @Test func cancellingTheSwiftTaskCancelsAsyncDownloadsAndUploads() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let started = Expectation()
            let download = Task {
                try await m.download(
                    for: HTTPClientRequest(
                        method: .get,
                        url: URL(string: server.baseURL + "/fault/trickle?bytes=100000&every=5")!
                    ),
                    progress: { p in if p.completedUnitCount > 0 { started.fulfill() } }
                ) { tmp, _ in tmp.appendingPathExtension("kept") }
            }
            #expect(await started.wait())
            download.cancel()
            await #expect(throws: HawserError.self) { _ = try await download.value }
            do {
                _ = try await download.value
            } catch let e as HawserError {
                #expect(e.code == .cancelled)
            }

            let sent = Expectation()
            let upload = Task {
                try await m.upload(
                    for: HTTPClientRequest(method: .post, url: URL(string: server.baseURL + "/fault/no-answer")!),
                    from: Data(repeating: 7, count: 1000),
                    progress: { p in if p.completedUnitCount == 1000 { sent.fulfill() } }
                )
            }
            #expect(await sent.wait(), "the body was sent; the server never answers")
            upload.cancel()
            do {
                _ = try await upload.value
                Issue.record("a cancelled upload returned")
            } catch let e as HawserError {
                #expect(e.code == .cancelled)
            }
        }

        @Test func asyncUploadsFromDataAndFileReportProgress() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let length = 300_000
            let pattern = Data((0..<length).map { UInt8($0 % 251) })
            let sent = Box<Int64>(0)
            let (_, response) = try await m.upload(
                for: HTTPClientRequest(method: .post, url: URL(string: server.baseURL + "/sink")!),
                from: pattern,
                progress: { p in sent.value = p.completedUnitCount }
            )
            #expect(response.headers["X-Sink-Length"] == "\(length)" && response.headers["X-Sink-Pattern"] == "ok")
            #expect(sent.value == Int64(length))

            let file = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-up-\(UUID().uuidString)")
            try pattern.write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let fileSent = Box<Int64>(0)
            let (tagged, fileResponse) = try await m.upload(
                for: HTTPClientRequest(method: .put, url: URL(string: server.baseURL + "/sink")!),
                fromFile: file,
                progress: { p in fileSent.value = p.completedUnitCount },
                responseSerializer: TaggingSerializer(tag: "file")
            )
            #expect(fileResponse.headers["X-Sink-Length"] == "\(length)")
            #expect(fileSent.value == Int64(length))
            #expect((tagged as? String)?.hasPrefix("file:") == true, "the per-request serializer judged the response")

            await #expect(throws: SessionManagerError.self) {
                _ = try await m.upload(
                    for: HTTPClientRequest(method: .put, url: URL(string: server.baseURL + "/sink")!),
                    fromFile: URL(fileURLWithPath: "/nonexistent/hawser-upload")
                )
            }
        }
    }
}

/// A coding key made from a string.
private struct SnakeKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ s: String) { self.stringValue = s }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension HTTPSessionManager {
    /// A manager with AFNetworking's JSON request serializer over `server`.
    fileprivate static func withJSON(_ server: TestServer) -> HTTPSessionManager {
        let m = HTTPSessionManager(baseURL: URL(string: server.baseURL + "/"))
        m.requestSerializer = JSONRequestSerializer()
        return m
    }
}
