// The intent of AFURLSessionManagerTests, against the project's TestServer on loopback.
import Foundation
import Hawser
import HawserTestServer
import Testing

/// A manager with the test serializer and a known completion queue.
func makeManager(_ configure: (SessionManager) -> Void = { _ in }) -> SessionManager {
    let m = SessionManager()
    m.responseSerializer = DataSerializer()
    configure(m)
    return m
}

func request(_ server: TestServer, _ path: String, method: HTTPMethod = .get) -> HTTPClientRequest {
    HTTPClientRequest(method: method, url: URL(string: server.baseURL + path)!)
}

extension ManagerNetworkTests {
    @Suite struct SessionManagerTests {
        @Test func dataTaskCompletesOnceOnTheCompletionQueueInsideTheGroup() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let queue = DispatchQueue(label: "test.completion")
            let key = DispatchSpecificKey<Int>()
            queue.setSpecific(key: key, value: 42)
            let group = DispatchGroup()
            let manager = makeManager {
                $0.completionQueue = queue
                $0.completionGroup = group
            }
            let done = Expectation()
            let seen = Box<(onQueue: Bool, status: Int?, body: Data?, error: String?)>((false, nil, nil, nil))
            let task = manager.dataTask(with: request(server, "/json")) { response, object, error in
                seen.value = (
                    DispatchQueue.getSpecific(key: key) == 42, response?.statusCode, object as? Data,
                    error.map { "\($0)" }
                )
                done.fulfill()
            }
            #expect(task.state == .suspended, "tasks start suspended, as in NSURLSession")
            #expect(manager.tasks.contains(task) && manager.dataTasks.contains(task))
            task.resume()
            #expect(await done.wait())
            #expect(group.wait(timeout: .now() + 10) == .success, "the completion ran inside the completion group")
            let s = seen.value
            #expect(s.onQueue, "the completion ran on the completion queue")
            #expect(s.status == 200 && s.error == nil)
            #expect(s.body.map { String(decoding: $0, as: UTF8.self).contains("hawser") } == true)
            #expect(task.state == .completed && task.error == nil && task.metrics != nil)
            #expect(task.countOfBytesReceived == Int64(s.body?.count ?? -1))
            #expect(manager.tasks.isEmpty, "a completed task leaves the manager")
            #expect(done.fulfilled == 1)
        }

        @Test func identifiersAreUniquePerManager() {
            let manager = makeManager()
            let url = URL(string: "http://127.0.0.1:1/")!
            let ids = (0..<50).map { _ in
                manager.dataTask(with: HTTPClientRequest(url: url), completionHandler: nil).taskIdentifier
            }
            #expect(Set(ids).count == 50)
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
        }

        @Test func downloadProgressReachesOneWithAndWithoutContentLength() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            for path in ["/bytes/300000", "/bytes/300000?chunk=7000", "/close-delimited/100000"] {
                let done = Expectation()
                let fractions = Box<[Double]>([])
                let task = manager.dataTask(
                    with: request(server, path),
                    downloadProgress: { p in
                        fractions.mutate { $0.append(p.fractionCompleted) }
                    }
                ) { _, _, _ in done.fulfill() }
                let progress = manager.downloadProgress(for: task)
                task.resume()
                #expect(await done.wait())
                #expect(progress?.fractionCompleted == 1.0, "\(path): download progress ends at 1.0")
                #expect(progress?.completedUnitCount == task.countOfBytesReceived)
                #expect(fractions.value.last == 1.0, "\(path): the progress block saw 1.0")
                #expect(fractions.value == fractions.value.sorted(), "\(path): progress never goes back")
            }
        }

        @Test func uploadProgressReachesOneForDataFileAndStream() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let body = Data(pattern(200_000))
            let file = tempURL("upload")
            try body.write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            var post = request(server, "/echo", method: .post)
            post.headers.add(name: "Content-Type", value: "application/octet-stream")
            let streamed: HTTPClientRequest = {
                var r = post
                let bytes = Array(body)
                r.body = .stream(length: nil) { w in
                    var i = 0
                    while i < bytes.count {
                        try await w.write(Array(bytes[i..<min(i + 30_000, bytes.count)]))
                        i += 30_000
                    }
                }
                return r
            }()
            let tasks:
                [(String, (@escaping @Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void) -> UploadTask)] =
                    [
                        ("data", { manager.uploadTask(with: post, from: body, completionHandler: $0) }),
                        ("file", { manager.uploadTask(with: post, fromFile: file, completionHandler: $0) }),
                        (
                            "stream (chunked, no length)",
                            { manager.uploadTask(withStreamedRequest: streamed, completionHandler: $0) }
                        ),
                    ]
            for (name, make) in tasks {
                let done = Expectation()
                let echoed = Box<Data?>(nil)
                let task = make { _, object, error in
                    #expect(error == nil, "\(name): \(String(describing: error))")
                    echoed.value = object as? Data
                    done.fulfill()
                }
                #expect(manager.uploadTasks.contains(task))
                let progress = manager.uploadProgress(for: task)
                task.resume()
                #expect(await done.wait())
                #expect(echoed.value == body, "\(name): the server got the body intact")
                #expect(progress?.fractionCompleted == 1.0, "\(name): upload progress ends at 1.0")
                #expect(task.countOfBytesSent == Int64(body.count), "\(name)")
            }
        }

        @Test func unreadableUploadFileFailsTheTaskWithATypedError() async throws {
            let manager = makeManager()
            let done = Expectation()
            let failure = Box<(any Error)?>(nil)
            let task = manager.uploadTask(
                with: HTTPClientRequest(method: .post, url: URL(string: "http://127.0.0.1:9/")!),
                fromFile: URL(fileURLWithPath: "/nonexistent/hawser")
            ) { _, _, e in
                failure.value = e
                done.fulfill()
            }
            task.resume()
            #expect(await done.wait())
            guard case .cannotReadUploadFile(let path, _)? = failure.value as? SessionManagerError else {
                Issue.record("expected cannotReadUploadFile, got \(String(describing: failure.value))")
                return
            }
            #expect(path == "/nonexistent/hawser")
        }

        @Test func exactlyOneCompletionWhenCancelledFromManyThreadsWhileCompleting() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let n = 60
            let counts = Box<[Int: Int]>([:])
            let done = Expectation()
            var tasks: [DataTask] = []
            for i in 0..<n {
                // A mix of tasks that complete at once and tasks still running when the cancels land.
                let path = i % 3 == 0 ? "/hello" : (i % 3 == 1 ? "/bytes/20000" : "/delay/20")
                let t = manager.dataTask(with: request(server, path)) { _, _, _ in
                    counts.mutate { $0[i, default: 0] += 1 }
                    done.fulfill()
                }
                tasks.append(t)
            }
            let all = tasks
            for t in all { t.resume() }
            DispatchQueue.concurrentPerform(iterations: 8) { k in
                for (j, t) in all.enumerated() where (j + k) % 2 == 0 { t.cancel() }
            }
            #expect(await done.wait(for: n))
            // Anything late would arrive through the same queue: drain it before counting again.
            let drained = Expectation()
            manager.completionQueue = nil
            DispatchQueue.global().async { drained.fulfill() }
            _ = await drained.wait()
            #expect(
                counts.value.count == n && counts.value.values.allSatisfy { $0 == 1 },
                "\(counts.value.filter { $0.value != 1 })"
            )
            #expect(all.allSatisfy { $0.state == .completed })
            #expect(manager.tasks.isEmpty)
        }

        @Test func invalidateCancelsPendingTasksAndReportsInvalidation() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let invalidated = Expectation()
            manager.sessionDidBecomeInvalid = { _ in invalidated.fulfill() }
            let eventSeen = Expectation()
            manager.addObserver { if case .sessionDidInvalidate = $0 { eventSeen.fulfill() } }
            let done = Expectation()
            let errors = Box<[Int]>([])
            let running = manager.dataTask(with: request(server, "/fault/no-answer")) { _, _, e in
                errors.mutate { $0.append((e as? HawserError)?.urlErrorCode ?? 0) }
                done.fulfill()
            }
            let suspended = manager.dataTask(with: request(server, "/hello")) { _, _, e in
                errors.mutate { $0.append((e as? HawserError)?.urlErrorCode ?? 0) }
                done.fulfill()
            }
            running.resume()
            let sessionBefore = manager.session
            manager.invalidateSessionCancelingTasks(true, resetSession: false)
            #expect(await done.wait(for: 2))
            #expect(errors.value == [-999, -999], "both tasks ended cancelled (NSURLErrorCancelled)")
            #expect(running.state == .completed && suspended.state == .completed)
            #expect(await invalidated.wait())
            #expect(await eventSeen.wait())
            #expect(
                manager.session === sessionBefore,
                "the invalidated session stays readable (AFNetworking's testSessionIsStillValid)"
            )

            // A task on an invalidated manager fails with a typed error instead of trapping.
            let late = Expectation()
            let lateError = Box<(any Error)?>(nil)
            manager.dataTask(with: request(server, "/hello")) { _, _, e in
                lateError.value = e
                late.fulfill()
            }.resume()
            #expect(await late.wait())
            if case .sessionInvalidated? = lateError.value as? SessionManagerError {
            } else {
                Issue.record("expected sessionInvalidated, got \(String(describing: lateError.value))")
            }
        }

        @Test func invalidateWithResetKeepsTheManagerUsable() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let first = manager.session
            manager.invalidateSessionCancelingTasks(true, resetSession: true)
            #expect(
                manager.session !== first,
                "a fresh session replaced the old one (AFNetworking's testSessionRecreatesAgain)"
            )
            let done = Expectation()
            let status = Box<Int?>(nil)
            manager.dataTask(with: request(server, "/hello")) { r, _, _ in
                status.value = r?.statusCode
                done.fulfill()
            }.resume()
            #expect(await done.wait())
            #expect(status.value == 200)
        }

        @Test func asyncDataSerializesInTheCallerAndSkipsTheCompletionQueue() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            // A suspended completion queue: anything the async form sent through it would never run.
            let held = DispatchQueue(label: "test.held")
            held.suspend()
            defer { held.resume() }
            manager.completionQueue = held
            let events = Box<[TaskCompletionInfo]>([])
            let completed = Expectation()
            let token = manager.addObserver { e in
                if case .taskDidComplete(_, let info) = e {
                    events.mutate { $0.append(info) }
                    completed.fulfill()
                }
            }
            defer { manager.removeObserver(token) }
            let returned = Expectation()
            let calls = Task {
                defer { returned.fulfill() }
                let (value, response) = try await manager.data(for: request(server, "/hello"))
                #expect(response.statusCode == 200)
                #expect((value as? Data) == Data("Hello, World!".utf8))
                await #expect(throws: StatusError(status: 404)) {
                    _ = try await manager.data(for: request(server, "/status/404"))
                }
            }
            guard await returned.wait(timeout: 10) else {
                Issue.record("the async form waited for the (suspended) completion queue")
                return
            }
            try await calls.value
            // The didComplete events carry what the calling task's serializer produced.
            #expect(await completed.wait(for: 2))
            let infos = events.value
            #expect(infos.count == 2)
            #expect(
                infos.contains { ($0.serializedResponse as? Data) == Data("Hello, World!".utf8) && $0.error == nil }
            )
            #expect(infos.contains { ($0.error as? StatusError)?.status == 404 && $0.serializedResponse == nil })
            #expect(manager.tasks.isEmpty, "the delegates are gone")
        }

        @Test func eventsCarryTheRightUserInfo() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let serializer = DataSerializer()
            manager.responseSerializer = serializer
            let events = Box<[SessionEvent]>([])
            let completed = Expectation()
            let token = manager.addObserver { e in
                events.mutate { $0.append(e) }
                if case .taskDidComplete = e { completed.fulfill() }
            }
            let ok = manager.dataTask(with: request(server, "/hello"), completionHandler: nil)
            ok.resume()
            #expect(await completed.wait(for: 1))
            let bad = manager.dataTask(with: request(server, "/status/404"), completionHandler: nil)
            bad.resume()
            #expect(await completed.wait(for: 2))
            let list = events.value
            #expect(
                list.contains {
                    if case .taskDidResume(let t) = $0 { return t === ok }
                    return false
                }
            )
            let infos: [(SessionTask, TaskCompletionInfo)] = list.compactMap {
                if case .taskDidComplete(let t, let i) = $0 { return (t, i) }
                return nil
            }
            #expect(infos.count == 2)
            if let (t, info) = infos.first(where: { $0.0 === ok }) {
                #expect(t.state == .completed)
                #expect(info.responseData == Data("Hello, World!".utf8))
                #expect((info.serializedResponse as? Data) == Data("Hello, World!".utf8))
                #expect(info.error == nil)
                #expect(info.metrics?.responseEnd != nil)
                #expect(info.responseSerializer is DataSerializer)
                #expect(info.assetPath == nil)
            }
            if let (_, info) = infos.first(where: { $0.0 === bad }) {
                #expect((info.error as? StatusError)?.status == 404, "the serializer's error is in the user info")
                #expect(info.serializedResponse == nil)
            }
            // Suspend emits didSuspend; removing the observer stops delivery.
            let t = manager.dataTask(with: request(server, "/fault/no-answer"), completionHandler: nil)
            t.resume()
            t.suspend()
            t.cancel()
            #expect(await completed.wait(for: 3))
            #expect(
                events.value.contains {
                    if case .taskDidSuspend(let x) = $0 { return x === t }
                    return false
                }
            )
            manager.removeObserver(token)
            let count = events.value.count
            // A second observer sees the next completion; events are delivered in order on one queue,
            // so once it has, the removed observer would have too.
            let later = Expectation()
            manager.addObserver { if case .taskDidComplete = $0 { later.fulfill() } }
            manager.dataTask(with: request(server, "/hello"), completionHandler: nil).resume()
            #expect(await later.wait())
            #expect(events.value.count == count, "a removed observer gets nothing")
        }

        @Test func eventsAsAsyncSequence() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let stream = manager.events()
            let task = manager.dataTask(with: request(server, "/json"), completionHandler: nil)
            task.resume()
            var kinds: [String] = []
            for await e in stream {
                switch e {
                case .taskDidResume(let t) where t === task: kinds.append("resume")
                case .taskDidComplete(let t, _) where t === task: kinds.append("complete")
                default: break
                }
                if kinds.last == "complete" { break }
            }
            #expect(kinds == ["resume", "complete"])
        }

        @Test func eventMonitorSeesEveryStep() async throws {
            final class Monitor: EventMonitor, @unchecked Sendable {
                let log = Box<[String]>([])
                func taskDidCreate(_ task: SessionTask) { self.log.mutate { $0.append("create") } }
                func taskDidResume(_ task: SessionTask) { self.log.mutate { $0.append("resume") } }
                func task(_ task: SessionTask, didReceive response: HawserResponse) {
                    self.log.mutate { $0.append("response \(response.statusCode)") }
                }
                func task(_ task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
                    self.log.mutate { $0.append("metrics") }
                }
                func task(_ task: SessionTask, didCompleteWith error: (any Error)?) {
                    self.log.mutate { $0.append("complete") }
                }
            }
            let server = try TestServer()
            defer { server.shutdown() }
            let monitor = Monitor()
            let manager = SessionManager(eventMonitors: [monitor])
            let done = Expectation()
            manager.dataTask(with: request(server, "/hello")) { _, _, _ in done.fulfill() }.resume()
            #expect(await done.wait())
            #expect(monitor.log.value == ["create", "resume", "response 200", "metrics", "complete"])
        }

        @Test func suspendHoldsTheServerBackAndResumeFinishes() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let size = 128 * 1024 * 1024
            let suspended = Expectation()
            manager.dataTaskDidReceiveData = { task, _ in
                if suspended.fulfilled == 0 {
                    task.suspend()  // on the loop, inside the delivery: nothing more is read
                    suspended.fulfill()
                }
            }
            let done = Expectation()
            let failure = Box<(any Error)?>(nil)
            let task = manager.dataTask(with: request(server, "/stream/\(size)")) { _, _, e in
                failure.value = e
                done.fulfill()
            }
            task.resume()
            #expect(await suspended.wait())
            #expect(task.state == .suspended)
            let atSuspend = task.countOfBytesReceived
            // Let other requests use the loop and the server for a while.
            for _ in 0..<20 {
                let e = Expectation()
                manager.dataTask(with: request(server, "/hello")) { _, _, _ in e.fulfill() }.resume()
                _ = await e.wait()
            }
            #expect(task.countOfBytesReceived == atSuspend, "no bytes were delivered while suspended")
            let streamed = server.streamedBytes
            #expect(streamed < size / 8, "the server was held back by TCP: it sent \(streamed) of \(size) bytes")
            manager.dataTaskDidReceiveData = nil
            task.resume()
            #expect(await done.wait(timeout: 120))
            #expect(failure.value == nil)
            #expect(task.countOfBytesReceived == Int64(size))
            #expect(server.streamedBytes == size)
        }

        @Test func dataTaskCanBecomeADownload() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let target = tempURL("converted")
            defer { try? FileManager.default.removeItem(at: target) }
            manager.dataTaskDidReceiveResponse = { _, _ in .becomeDownload }
            let became = Box<(DataTask, DownloadTask)?>(nil)
            manager.dataTaskDidBecomeDownloadTask = { d, dl in became.value = (d, dl) }
            manager.downloadTaskDidFinishDownloading = { _, _ in target }
            let done = Expectation()
            let object = Box<(any Sendable)?>(nil)
            let task = manager.dataTask(with: request(server, "/bytes/100000")) { _, o, e in
                #expect(e == nil)
                object.value = o
                done.fulfill()
            }
            task.resume()
            #expect(await done.wait())
            #expect(became.value?.0 === task)
            #expect((object.value as? URL) == target, "the data task's completion got the file URL")
            #expect(try Data(contentsOf: target) == Data(pattern(100_000)))
            #expect(done.fulfilled == 1)
        }

        @Test func dispositionCancelCancels() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            manager.dataTaskDidReceiveResponse = { _, _ in .cancel }
            let done = Expectation()
            let code = Box<Int?>(nil)
            manager.dataTask(with: request(server, "/bytes/100000")) { _, _, e in
                code.value = (e as? HawserError)?.urlErrorCode
                done.fulfill()
            }.resume()
            #expect(await done.wait())
            #expect(code.value == -999)
        }

        @Test func noFDLeakAcrossAllTaskKinds() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let target = tempURL("fd")
            defer { try? FileManager.default.removeItem(at: target) }
            await expectNoFDLeak("data, upload and download tasks") {
                let manager = makeManager()
                let done = Expectation()
                manager.dataTask(with: request(server, "/json")) { _, _, _ in done.fulfill() }.resume()
                manager.uploadTask(with: request(server, "/echo", method: .post), from: Data(pattern(5000))) {
                    _,
                    _,
                    _ in done.fulfill()
                }.resume()
                manager.downloadTask(with: request(server, "/bytes/50000"), destination: { _, _ in target }) {
                    _,
                    _,
                    _ in done.fulfill()
                }.resume()
                manager.dataTask(with: request(server, "/fault/reset")) { _, _, _ in done.fulfill() }.resume()
                #expect(await done.wait(for: 4))
                manager.invalidateSessionCancelingTasks(true, resetSession: false)
            }
        }
    }
}
