// Download tasks: destination, move failure, resume data, large transfers with bounded memory.
import Foundation
import Hawser
import HawserTestServer
import Testing

extension ManagerNetworkTests {
    @Suite struct DownloadTaskTests {
        @Test func downloadMovesToDestinationAndPostsTheMove() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let target = tempURL("dest")
            defer { try? FileManager.default.removeItem(at: target) }
            let moved = Expectation()
            let completedInfo = Box<TaskCompletionInfo?>(nil)
            manager.addObserver { e in
                if case .downloadTaskDidMoveFile(_, let url) = e, url == target { moved.fulfill() }
                if case .taskDidComplete(_, let info) = e { completedInfo.value = info }
            }
            let done = Expectation()
            let result = Box<(URL?, (any Error)?)>((nil, nil))
            let temp = Box<URL?>(nil)
            let task = manager.downloadTask(
                with: request(server, "/bytes/300000?chunk=10000"),
                progress: nil,
                destination: { location, response in
                    temp.value = location
                    #expect(response?.statusCode == 200)
                    return target
                }
            ) { _, url, error in
                result.value = (url, error)
                done.fulfill()
            }
            #expect(manager.downloadTasks.contains(task))
            let progress = manager.downloadProgress(for: task)
            task.resume()
            #expect(await done.wait())
            #expect(await moved.wait())
            #expect(result.value.0 == target && result.value.1 == nil)
            #expect(try Data(contentsOf: target) == Data(pattern(300_000)))
            #expect(progress?.fractionCompleted == 1.0, "chunked, no Content-Length: still 1.0 at the end")
            #expect(
                temp.value.map { !FileManager.default.fileExists(atPath: $0.path) } == true,
                "the temporary file is gone"
            )
            for _ in 0..<2000 where completedInfo.value == nil { await Task.yield() }
            #expect(completedInfo.value?.assetPath == target)
        }

        @Test func moveFailureIsReportedAndTheTemporaryFileRemoved() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            let target = URL(fileURLWithPath: "/nonexistent-dir-\(UUID().uuidString)/file")
            let failedMove = Expectation()
            let eventError = Box<(any Error)?>(nil)
            manager.addObserver { e in
                if case .downloadTaskDidFailToMoveFile(_, let url, let error) = e, url == target {
                    eventError.value = error
                    failedMove.fulfill()
                }
            }
            let done = Expectation()
            let result = Box<(URL?, (any Error)?)>((nil, nil))
            let temp = Box<URL?>(nil)
            manager.downloadTask(
                with: request(server, "/bytes/1000"),
                progress: nil,
                destination: { location, _ in
                    temp.value = location
                    return target
                }
            ) { _, url, error in
                result.value = (url, error)
                done.fulfill()
            }.resume()
            #expect(await done.wait())
            #expect(await failedMove.wait())
            #expect(result.value.0 == nil)
            guard case .cannotMoveDownloadedFile(let to, _)? = result.value.1 as? SessionManagerError else {
                Issue.record("expected cannotMoveDownloadedFile, got \(String(describing: result.value.1))")
                return
            }
            #expect(to == target)
            #expect(eventError.value is SessionManagerError)
            #expect(
                temp.value.map { !FileManager.default.fileExists(atPath: $0.path) } == true,
                "the temporary file was removed"
            )
        }

        /// Downloads `/range/N[?query]` halfway, cancels with resume data, resumes, and returns
        /// the final file's bytes and what the resume reported.
        func interruptAndResume(
            _ server: TestServer,
            size: Int,
            query: String = "",
            edit: (inout DownloadResumeData) -> Void = { _ in }
        ) async throws
            -> (bytes: Data, resumedAt: Int64?, resumeData: DownloadResumeData)
        {
            let manager = makeManager()
            let produced = Expectation()
            let resumeBox = Box<Data?>(nil)
            let cancelled = Box(false)
            manager.downloadTaskDidWriteData = { task, _, total, _ in
                if total >= Int64(size / 2) && !cancelled.value {
                    cancelled.value = true
                    task.cancel { data in
                        resumeBox.value = data
                        produced.fulfill()
                    }
                }
            }
            let firstDone = Expectation()
            let firstError = Box<(any Error)?>(nil)
            manager.downloadTask(with: request(server, "/range/\(size)\(query)"), progress: nil, destination: nil) {
                _,
                _,
                e in
                firstError.value = e
                firstDone.fulfill()
            }.resume()
            #expect(await produced.wait())
            #expect(await firstDone.wait())
            #expect((firstError.value as? HawserError)?.code == .cancelled)
            let data = try #require(resumeBox.value, "resume data was produced")
            var resume = try DownloadResumeData(data: data)
            #expect(resume.version == 1 && resume.bytesWritten >= Int64(size / 2) && resume.bytesWritten < Int64(size))
            #expect(resume.entityTag == "\"v1-\(size)\"")
            #expect(FileManager.default.fileExists(atPath: resume.temporaryFilePath), "the partial file was kept")
            edit(&resume)

            manager.downloadTaskDidWriteData = nil
            let resumedAt = Box<Int64?>(nil)
            manager.downloadTaskDidResume = { _, offset, _ in resumedAt.value = offset }
            let target = tempURL("resumed")
            defer { try? FileManager.default.removeItem(at: target) }
            let done = Expectation()
            let error = Box<(any Error)?>(nil)
            let task = manager.downloadTask(
                withResumeData: resume.encoded(),
                progress: nil,
                destination: { _, _ in target }
            ) { _, _, e in
                error.value = e
                done.fulfill()
            }
            task.resume()
            #expect(await done.wait())
            #expect(error.value == nil, "\(String(describing: error.value))")
            return (try Data(contentsOf: target), resumedAt.value, resume)
        }

        @Test func resumedDownloadIsByteIdentical() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let size = 3_000_000
            let r = try await interruptAndResume(server, size: size)
            #expect(r.bytes == Data(pattern(size)))
            #expect(r.resumedAt == r.resumeData.bytesWritten, "a 206 continued where the file stopped")
        }

        @Test func resumeRestartsCleanlyWhenTheServerIgnoresRange() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let size = 3_000_000
            let r = try await interruptAndResume(server, size: size, query: "?ignore-range=1")
            #expect(r.bytes == Data(pattern(size)))
            #expect(r.resumedAt == 0, "a 200 restarted from zero")
        }

        @Test func resumeRestartsWhenTheValidatorChanged() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let size = 2_000_000
            let r = try await interruptAndResume(server, size: size) {
                $0.entityTag = "\"stale\""
                $0.lastModified = nil
            }
            #expect(r.bytes == Data(pattern(size)))
            #expect(r.resumedAt == 0, "If-Range did not match: the server sent the whole entity")
        }

        @Test func resumeAfter416StartsOver() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let size = 2_000_000
            let r = try await interruptAndResume(server, size: size) { resume in
                // The partial file claims more than the entity has: the server answers 416.
                let extra = [UInt8](repeating: 7, count: size)
                let h = FileHandle(forWritingAtPath: resume.temporaryFilePath)!
                h.seekToEndOfFile()
                h.write(Data(extra))
                h.closeFile()
                resume.bytesWritten += Int64(size)
            }
            #expect(r.bytes == Data(pattern(size)))
        }

        /// A resumed download whose 206 comes back content-coded (the server ignored the
        /// `Accept-Encoding: identity` the resume asked for) fails with cannotDecodeContent and
        /// writes nothing after the partial file: a coded range is never decoded or spliced onto it.
        @Test func codedPartialContentIsRefusedAndNeverSpliced() async throws {
            let kept = pattern(1000)
            let partial = FileManager.default.temporaryDirectory.appendingPathComponent(
                "hawser-download-\(UUID().uuidString).tmp"
            )
            try Data(kept).write(to: partial)
            defer { try? FileManager.default.removeItem(at: partial) }
            var state: UInt32 = 7
            let coded = try GzipEncoder.compress(
                (0..<4000).map { _ -> UInt8 in
                    state = state &* 1_103_515_245 &+ 12345
                    return UInt8(truncatingIfNeeded: state >> 16)
                }
            )
            let slice = Array(coded[100..<600])
            let head =
                "HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\nContent-Encoding: gzip\r\nContent-Range: bytes 1000-1499/5000\r\nContent-Length: \(slice.count)\r\n\r\n"
            let server = try ScriptedServer([[.readRequest(), .send(Array(head.utf8) + slice), .waitForClose]])
            defer { server.stop() }
            let resume = DownloadResumeData(
                url: URL(string: "http://127.0.0.1:\(server.port)/file")!,
                headers: [],
                bytesWritten: Int64(kept.count),
                temporaryFilePath: partial.path,
                entityTag: "\"v1\"",
                lastModified: nil
            )
            let manager = makeManager()
            let written = Box<Int64>(0)
            manager.downloadTaskDidWriteData = { _, n, _, _ in written.value += n }
            let done = Expectation()
            let error = Box<(any Error)?>(nil)
            manager.downloadTask(withResumeData: resume.encoded(), progress: nil, destination: nil) { _, _, e in
                error.value = e
                done.fulfill()
            }.resume()
            #expect(await done.wait())
            #expect((error.value as? HawserError)?.code == .cannotDecodeContent, "\(String(describing: error.value))")
            let sent = String(decoding: server.requests.first ?? [], as: UTF8.self)
            #expect(
                sent.contains("Range: bytes=1000-\r\n") && sent.contains("Accept-Encoding: identity\r\n"),
                "\(sent)"
            )
            #expect(written.value == 0, "no byte of the coded range was written after the partial file")
        }

        /// Signals the first response head a manager's tasks receive (on the loop, just before a
        /// download opens its file).
        struct HeadMonitor: EventMonitor {
            let head: Expectation
            func task(_ task: SessionTask, didReceive response: HawserResponse) { self.head.fulfill() }
        }

        @Test(
            "a download's file is opened off the loop: while the open blocks, another request on the session completes"
        )
        func downloadFileIOIsOffTheLoop() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            // Resume data naming a FIFO as the partial file: opening it for writing blocks until
            // the test opens its read end, after the other request has completed.
            let fifo = FileManager.default.temporaryDirectory
                .appendingPathComponent("hawser-download-fifo-\(UUID().uuidString).tmp").path
            try #require(mkfifo(fifo, 0o600) == 0)
            defer { unlink(fifo) }
            let resume = DownloadResumeData(
                url: URL(string: server.baseURL + "/range/1000")!,
                headers: [],
                bytesWritten: 10,
                temporaryFilePath: fifo,
                entityTag: "\"v1-1000\"",
                lastModified: nil
            )
            let manager = makeManager()
            let head = Expectation()
            manager.addEventMonitor(HeadMonitor(head: head))
            let reader = FIFOPeer.reader(fifo)
            let done = Expectation()
            let failure = Box<(any Error)?>(nil)
            manager.downloadTask(withResumeData: resume.encoded(), progress: nil, destination: nil) { _, _, error in
                failure.value = error
                done.fulfill()
            }.resume()
            #expect(await head.wait())
            // The loop has gone on to open the file; the open waits for a reader.
            let other = try await manager.data(for: request(server, "/hello"))
            #expect(other.response.statusCode == 200)
            reader.release()
            #expect(
                !reader.releasedByWatchdog,
                "the other request waited for the download's open: the loop was blocked"
            )
            #expect(await done.wait())
            // A FIFO cannot be truncated to the resume offset: a write failure naming the file.
            guard case .downloadWriteFailed(let path, _)? = failure.value as? SessionManagerError else {
                Issue.record("expected downloadWriteFailed, got \(String(describing: failure.value))")
                return
            }
            #expect(path == fifo)
        }

        @Test("a stalled download's bytes reach the file (and the progress) before the rest arrives")
        func stalledBodyIsWrittenBeforeTheRest() async throws {
            let whole = pattern(3000)
            let gate = ScriptedServer.Gate()
            let head = Array("HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n".utf8)
            let server = try ScriptedServer([
                [
                    .readRequest(), .send(head + whole[..<1000]), .gate(gate), .send(Array(whole[1000...])),
                    .waitForClose,
                ]
            ])
            defer {
                gate.openGate()
                server.stop()
            }
            let manager = makeManager()
            // Less than a write batch arrives, then nothing until the test opens the gate.
            let firstWritten = Expectation()
            manager.downloadTaskDidWriteData = { _, _, total, _ in
                if total >= 1000 { firstWritten.fulfill() }
            }
            let target = tempURL("stalled")
            defer { try? FileManager.default.removeItem(at: target) }
            let done = Expectation()
            let result = Box<(URL?, (any Error)?)>((nil, nil))
            manager.downloadTask(
                with: HTTPClientRequest(url: URL(string: server.baseURL + "/file")!),
                progress: nil,
                destination: { _, _ in target }
            ) { _, url, error in
                result.value = (url, error)
                done.fulfill()
            }.resume()
            #expect(await firstWritten.wait(), "the first 1000 bytes were written while the server held the rest")
            #expect(done.fulfilled == 0)
            gate.openGate()
            #expect(await done.wait())
            #expect(result.value.0 == target && result.value.1 == nil, "\(String(describing: result.value.1))")
            #expect(try Data(contentsOf: target) == Data(whole))
        }

        @Test func invalidResumeDataIsATypedError() async throws {
            let manager = makeManager()
            for (data, why) in [
                (Data("garbage".utf8), "not json"),
                (
                    DownloadResumeData(
                        url: URL(string: "http://x/")!,
                        headers: [],
                        bytesWritten: 1,
                        temporaryFilePath: "/etc/passwd",
                        entityTag: "\"e\"",
                        lastModified: nil
                    ).encoded(),
                    "a file Hawser did not make"
                ),
            ] {
                let done = Expectation()
                let error = Box<(any Error)?>(nil)
                manager.downloadTask(withResumeData: data, progress: nil, destination: nil) { _, _, e in
                    error.value = e
                    done.fulfill()
                }.resume()
                #expect(await done.wait())
                if case .invalidResumeData? = error.value as? SessionManagerError {
                } else {
                    Issue.record("\(why): expected invalidResumeData, got \(String(describing: error.value))")
                }
            }
            var newer = DownloadResumeData(
                url: URL(string: "http://x/")!,
                headers: [],
                bytesWritten: 1,
                temporaryFilePath: FileManager.default.temporaryDirectory.appendingPathComponent("hawser-download-x")
                    .path,
                entityTag: "\"e\"",
                lastModified: nil
            )
            newer.version = 2
            #expect(throws: SessionManagerError.self) { try DownloadResumeData(data: newer.encoded()) }
        }

        @Test func largeStreamedUploadAndDownloadKeepMemoryBounded() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            // 1 GiB each way, the size issue 4 names (about 4 s on this VM; 2 GiB of temporary disk).
            let size = 1024 * 1024 * 1024
            // The upload file is written in bounded chunks too, so the test itself stays small.
            let file = tempURL("big-upload")
            defer { try? FileManager.default.removeItem(at: file) }
            #expect(FileManager.default.createFile(atPath: file.path, contents: nil))
            let h = try FileHandle(forWritingTo: file)
            let piece = pattern(251 * 4096)
            var written = 0
            while written < size {
                let n = min(piece.count, size - written)
                h.write(Data(piece[0..<n]))
                written += n
            }
            try h.close()
            let target = tempURL("big-download")
            defer { try? FileManager.default.removeItem(at: target) }

            #expect(resetPeakRSS(), "the kernel lets us reset VmHWM (clear_refs 5)")
            let before = peakRSSKiB()

            let up = Expectation()
            let upResult = Box<(HawserResponse?, (any Error)?)>((nil, nil))
            let uploadTask = manager.uploadTask(
                with: request(server, "/sink", method: .put),
                fromFile: file,
                progress: nil
            ) { r, _, e in
                upResult.value = (r, e)
                up.fulfill()
            }
            let upProgress = manager.uploadProgress(for: uploadTask)
            uploadTask.resume()
            #expect(await up.wait(timeout: 300))
            #expect(upResult.value.1 == nil)
            #expect(upResult.value.0?.headers["X-Sink-Length"] == String(size))
            #expect(upResult.value.0?.headers["X-Sink-Pattern"] == "ok", "the server got the file's bytes in order")
            #expect(upProgress?.fractionCompleted == 1.0)

            let down = Expectation()
            let downResult = Box<(URL?, (any Error)?)>((nil, nil))
            manager.downloadTask(
                with: request(server, "/stream/\(size)?chunked=1"),
                progress: nil,
                destination: { _, _ in target }
            ) { _, u, e in
                downResult.value = (u, e)
                down.fulfill()
            }.resume()
            #expect(await down.wait(timeout: 300))
            #expect(downResult.value.1 == nil)
            let attrs = try FileManager.default.attributesOfItem(atPath: target.path)
            #expect((attrs[.size] as? NSNumber)?.intValue == size)
            // Spot-check the content at a few offsets (reading it all back would cost what we measure).
            let rh = try FileHandle(forReadingFrom: target)
            for offset in [0, size / 3, size - 4096] {
                try rh.seek(toOffset: UInt64(offset))
                #expect(rh.readData(ofLength: 4096) == Data(pattern(4096, from: offset)), "bytes at \(offset)")
            }
            try rh.close()

            let growthMiB = (peakRSSKiB() - before) / 1024
            #expect(growthMiB < 64, "peak RSS grew by \(growthMiB) MiB while moving 2 × \(size >> 20) MiB")
            print("large transfer: peak RSS growth \(growthMiB) MiB for 2 × \(size >> 20) MiB")
        }
    }
}
