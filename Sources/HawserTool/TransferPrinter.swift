#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HawserCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Streams one transfer to the terminal or files the way curl does: heads for -i / -I / -D,
/// the body to stdout or -o, a progress bar on a terminal.
final class TransferPrinter: ResponseDelegate, @unchecked Sendable {
    // Touched on the session's event loop only, until `run` returns.
    private let options: CurlOptions
    private let body: OutputFile
    private let dump: OutputFile?
    private let progress: Bool
    private var head: HTTPResponseHead?
    private var expected: Int64?
    private(set) var bodyBytes: Int64 = 0
    private(set) var headBytes = 0
    private var lastDraw: UInt64 = 0
    private let done = Mutex<CheckedContinuation<Result<(HTTPResponseHead, TaskMetrics, URL), HawserError>, Never>?>(nil)

    /// With -C -: the size of the partial file; only a 206 body is appended to it.
    private let resumingFrom: Int64?

    init(options: CurlOptions, body: OutputFile, dump: OutputFile?, progress: Bool, resumingFrom: Int64? = nil) {
        self.options = options
        self.resumingFrom = resumingFrom
        self.body = body
        self.dump = dump
        self.progress = progress
    }

    func run(session: Session, request: HTTPClientRequest) async -> Result<(HTTPResponseHead, TaskMetrics, URL), HawserError> {
        await withCheckedContinuation { cont in
            self.done.withLock { $0 = cont }
            session.execute(request, delegate: self)
        }
    }

    private func emitHead(_ head: HTTPResponseHead) {
        var text = "\(head.version) \(head.status)\(head.reasonPhrase.isEmpty ? "" : " " + head.reasonPhrase)\r\n"
        for f in head.headers { text += "\(f.name): \(f.value)\r\n" }
        text += "\r\n"
        self.headBytes += text.utf8.count
        if self.options.includeHead || self.options.headOnly { OutputFile.stdout.write(text) }
        self.dump?.write(text)
        if self.options.verbose {
            for line in text.split(separator: "\r\n", omittingEmptySubsequences: true) {
                OutputFile.stderr.write("< \(line)\n")
            }
        }
    }

    func task(_ task: RequestTask, didReceiveInterimHead head: HTTPResponseHead) {
        self.emitHead(head)
    }

    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        self.head = head
        self.expected = head.headers.contentLength.map(Int64.init)
        self.emitHead(head)
    }

    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        self.bodyBytes += Int64(bytes.count)
        let appendable = self.resumingFrom == nil || self.head?.status == 206
        if !self.options.headOnly && appendable { self.body.write(bytes) }
        if self.body.failed {
            task.fail(with: HawserError(.ioError, "failed writing the body"))
            return
        }
        if self.progress {
            let now = TaskMetrics.now()
            if now - self.lastDraw > 100_000_000 {
                self.lastDraw = now
                self.drawProgress()
            }
        }
    }

    /// With -L, curl shows each redirect's head (-i, -D, -v) before following it.
    func task(_ task: RequestTask, willPerformRedirection response: HTTPResponseHead, newRequest: HTTPClientRequest,
              completion: @escaping @Sendable (HTTPClientRequest?) -> Void) {
        self.emitHead(response)
        if self.options.verbose {
            OutputFile.stderr.write("* following the redirect to \(newRequest.url.absoluteString)\n> \(newRequest.method) \(newRequest.url.absoluteString)\n")
        }
        completion(newRequest)
    }

    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        let r: Result<(HTTPResponseHead, TaskMetrics, URL), HawserError>
        switch result {
        case .success:
            if let h = self.head {
                r = .success((h, metrics, task.request.url))
            } else {
                r = .failure(HawserError(.protocolError, "no response head"))
            }
        case .failure(let e):
            r = .failure(e)
        }
        if self.progress { self.drawProgress() }
        self.done.withLock { $0?.resume(returning: r); $0 = nil }
    }

    private func drawProgress() {
        let width = 40
        var line = "\r"
        if let total = self.expected, total > 0 {
            let fraction = min(1.0, Double(self.bodyBytes) / Double(total))
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
            line += "\(Int(fraction * 100))% "
        }
        line += Self.size(self.bodyBytes)
        if let total = self.expected { line += " / " + Self.size(total) }
        OutputFile.stderr.write(line)
    }

    func finishProgressLine() { OutputFile.stderr.write("\n") }

    static func size(_ n: Int64) -> String {
        if n >= 1 << 30 { return String(format2: Double(n) / Double(1 << 30)) + " GiB" }
        if n >= 1 << 20 { return String(format2: Double(n) / Double(1 << 20)) + " MiB" }
        if n >= 1 << 10 { return String(format2: Double(n) / 1024) + " KiB" }
        return "\(n) B"
    }
}
