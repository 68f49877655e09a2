import HawserCore
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Streams one transfer the way curl does: heads for -i / -I / -D / -v (byte for byte as they
/// arrived), the body to stdout or a file, and the progress meter. (--limit-rate is the
/// session's bandwidth limit, not the printer's.)
final class TransferPrinter: ResponseDelegate, @unchecked Sendable {
    /// How a transfer ended.
    struct Outcome {
        /// The final response head, when one arrived.
        var head: HTTPResponseHead?
        var metrics: TaskMetrics
        /// The URL of the last request (after redirects).
        var url: URL
        var error: HawserError?
    }

    // Touched on the session's event loop only, until `run` returns.
    private let options: CurlOptions
    private let body: OutputFile
    private let dump: OutputFile?
    private let trustLog: TrustLog
    private var meter: ProgressMeter?
    private(set) var head: HTTPResponseHead?
    private(set) var bodyBytes: Int64 = 0
    private(set) var headBytes = 0
    private(set) var uploadBytes: Int64 = 0
    /// When the last redirect was decided (curl's time_redirect ends there).
    private(set) var lastRedirect: UInt64?
    /// -v: the connection and the request head of the current request were shown.
    private var requestShown = false
    /// The current request's connection was counted in ``connects``.
    private var connectionCounted = false
    /// New connections the transfer made (curl's num_connects), redirects included.
    private(set) var connects = 0
    /// With -C -: the size of the partial file; only a 206 body is appended to it.
    private let resumingFrom: Int64?
    private let done = Mutex<CheckedContinuation<Outcome, Never>?>(nil)

    init(
        options: CurlOptions,
        body: OutputFile,
        dump: OutputFile?,
        trustLog: TrustLog,
        progress: Bool,
        start: UInt64,
        resumingFrom: Int64? = nil
    ) {
        self.options = options
        self.body = body
        self.dump = dump
        self.trustLog = trustLog
        self.meter = progress ? ProgressMeter(start: start) : nil
        self.resumingFrom = resumingFrom
    }

    func run(session: Session, request: HTTPClientRequest) async -> Outcome {
        if let length = request.body?.knownLength { self.meter?.setUploadTotal(length) }
        return await withCheckedContinuation { cont in
            self.done.withLock { $0 = cont }
            session.execute(request, delegate: self)
        }
    }

    /// The head as it was on the wire: status line and fields, each field value's bytes as
    /// received (obs-text included), CRLF line ends.
    static func headBytes(_ head: HTTPResponseHead) -> [UInt8] {
        var out = Array("\(head.version) \(head.status)".utf8)
        let reason = head.reasonPhraseBytes
        if !reason.isEmpty {
            out.append(0x20)
            out += reason
        }
        out += [0x0D, 0x0A]
        let fields = head.headers
        for i in 0..<fields.count {
            out += Array(fields.name(at: i).utf8)
            out += [0x3A, 0x20]
            out += fields.valueBytes(at: i)
            out += [0x0D, 0x0A]
        }
        out += [0x0D, 0x0A]
        return out
    }

    private func showRequest(_ task: RequestTask) {
        guard self.options.verbose, !self.requestShown else { return }
        self.requestShown = true
        let m = task.currentMetrics
        OutputFile.stderr.write(Verbose.connection(m, url: task.request.url, trust: self.trustLog.take()))
        OutputFile.stderr.write(Verbose.request(task.wireRequestHead))
    }

    private func countConnection(_ m: TaskMetrics) {
        guard !self.connectionCounted else { return }
        self.connectionCounted = true
        if m.remoteAddress != nil && !m.isReusedConnection { self.connects += 1 }
    }

    /// When the first head of the current request arrived (the engine's `responseStart` is the
    /// first request's when redirects were followed).
    private(set) var firstHeadOfLastRequest: UInt64?

    private func emitHead(_ head: HTTPResponseHead, task: RequestTask) {
        if self.firstHeadOfLastRequest == nil { self.firstHeadOfLastRequest = TaskMetrics.now() }
        self.countConnection(task.currentMetrics)
        self.showRequest(task)
        let bytes = Self.headBytes(head)
        self.headBytes += bytes.count
        if self.options.includeHead || self.options.headOnly { self.body.write(bytes) }
        self.dump?.write(bytes)
        if self.options.verbose { OutputFile.stderr.write(Verbose.response(bytes)) }
    }

    func task(_ task: RequestTask, didReceiveInterimHead head: HTTPResponseHead) {
        self.emitHead(head, task: task)
    }

    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        self.head = head
        self.meter?.setDownloadTotal(head.headers.contentLength.map(Int64.init))
        self.emitHead(head, task: task)
    }

    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        self.bodyBytes += Int64(bytes.count)
        let appendable = self.resumingFrom == nil || self.head?.status == 206
        // -f: an HTTP error's body is not written (curl's "fail silently").
        let failing = self.options.failOnError && (self.head?.status ?? 0) >= 400
        if !self.options.headOnly && appendable && !failing { self.body.write(bytes) }
        if self.body.failed {
            task.fail(with: HawserError(.ioError, "failed writing the body"))
            return
        }
        if var meter = self.meter {
            meter.setDownloaded(self.bodyBytes)
            if let line = meter.update(now: TaskMetrics.now()) { OutputFile.stderr.write(line) }
            self.meter = meter
        }
    }

    func task(_ task: RequestTask, didSendBodyBytes totalSent: Int64, expected: Int64?) {
        self.uploadBytes = totalSent
        if var meter = self.meter {
            meter.setUploaded(totalSent)
            if let expected { meter.setUploadTotal(expected) }
            if let line = meter.update(now: TaskMetrics.now()) { OutputFile.stderr.write(line) }
            self.meter = meter
        }
    }

    /// With -L, curl shows each redirect's head (-i, -D, -v) before following it.
    func task(
        _ task: RequestTask,
        willPerformRedirection response: HTTPResponseHead,
        newRequest: HTTPClientRequest,
        completion: @escaping @Sendable (HTTPClientRequest?) -> Void
    ) {
        self.emitHead(response, task: task)
        self.lastRedirect = TaskMetrics.now()
        if self.options.verbose {
            OutputFile.stderr.write("* Issue another request to this URL: '\(newRequest.url.absoluteString)'\n")
        }
        self.requestShown = false
        self.connectionCounted = false
        self.firstHeadOfLastRequest = nil
        completion(newRequest)
    }

    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        self.countConnection(metrics)
        var outcome = Outcome(head: self.head, metrics: metrics, url: task.request.url, error: nil)
        if case .failure(let e) = result {
            outcome.error = e
            if self.options.verbose && !self.requestShown {
                // What happened before the failure: the connection, a refused certificate, the
                // request if it went out.
                OutputFile.stderr.write(Verbose.connection(metrics, url: task.request.url, trust: self.trustLog.take()))
                if metrics.requestStart != nil { OutputFile.stderr.write(Verbose.request(task.wireRequestHead)) }
                self.requestShown = true
            }
        } else if self.head == nil {
            outcome.error = HawserError(.protocolError, "no response head")
        }
        if var meter = self.meter {
            meter.setDownloaded(self.bodyBytes)
            if let line = meter.update(now: TaskMetrics.now(), force: true) { OutputFile.stderr.write(line + "\n") }
            self.meter = meter
        }
        self.done.withLock {
            $0?.resume(returning: outcome)
            $0 = nil
        }
    }
}
