// `hawser load URL [options]`: parses the flags, builds the requests and the engine, runs the
// load with a live line on a terminal, and writes the report, the SVG, the interval log and
// the --fail-if verdict.
import HawserCore
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// `hawser load ...` (and `hawser load merge ...`).
func runLoad(arguments: [String]) -> Int32 {
    if arguments.first == "merge" { return runLoadMerge(arguments: Array(arguments.dropFirst())) }
    if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) {
        OutputFile.stdout.write(LoadOptions.help + "\n")
        return 0
    }
    do {
        return try LoadCommand.run(try LoadOptions.parse(arguments))
    } catch let e as LoadOptions.UsageError {
        return LoadCommand.usage(e.description)
    } catch let e as CurlOptions.UsageError {
        return LoadCommand.usage(e.description)
    } catch let e as ToolFailure {
        OutputFile.stderr.write("hawser load: \(e.message)\n")
        return e.code
    } catch {
        OutputFile.stderr.write("hawser load: \(error)\n")
        return 1
    }
}

enum LoadCommand {
    static func usage(_ message: String) -> Int32 {
        OutputFile.stderr.write("hawser load: \(message)\n(see hawser load --help)\n")
        return 2
    }

    static func run(_ o: LoadOptions) throws -> Int32 {
        var conditions: [FailCondition] = []
        for c in o.failIf {
            do { conditions.append(try FailCondition(parsing: c)) } catch {
                throw LoadOptions.UsageError(description: "--fail-if '\(c)': \(error)")
            }
        }
        let what = o.duration.map { "\(LoadDriverFormat.seconds($0)) test" } ?? "\(o.requestCount!)-request test"
        if !o.json {
            OutputFile.stdout.write(
                "Running \(what) @ \(o.url!)\n  \(o.threads) thread\(o.threads == 1 ? "" : "s") and \(o.connections) connections, \(o.resolvedEngine.rawValue) engine\(o.resolvedEngine == .session && o.api == .async ? " (async callers, \((o.executor ?? .installed).rawValue) executor)" : "")\(o.rate.map { ", \(LoadDriverFormat.number($0)) requests/s" } ?? "")\n"
            )
        }
        let liveLine = !o.quiet && isatty(2) == 1
        let report = try Self.measure(o, live: liveLine ? LiveLine().draw : nil)
        if liveLine { OutputFile.stderr.write("\r\u{1B}[K") }
        OutputFile.stdout.write(o.json ? report.renderJSON() + "\n" : report.renderText(latencyDistribution: o.latency))
        if let path = o.svgPath { try Self.write(report.renderSVG(), to: path, flag: "--svg") }
        if let path = o.hdrOutPath {
            do { try writeIntervalLog(report, to: path) } catch {
                throw ToolFailure(1, "--hdr-out: cannot write '\(path)': \(error)")
            }
        }
        if o.resultLine { OutputFile.stdout.write(Self.resultLine(report) + "\n") }
        var status: Int32 = report.requests > 0 ? 0 : 1
        for c in conditions where c.isViolated(by: report) {
            OutputFile.stderr.write("hawser load: --fail-if \(c.description) holds\n")
            status = ExitCode.loadConditionFailed
        }
        return status
    }

    /// Builds the requests and the engine of `o`, runs the load and returns its report.
    static func measure(_ o: LoadOptions, live: ((Double, LoadTimeline) -> Void)? = nil) throws -> LoadReport {
        let text = o.url!
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host(percentEncoded: false).map({ !$0.isEmpty }) == true
        else {
            throw LoadOptions.UsageError(description: "'\(text)' is not an http:// or https:// URL with a host")
        }
        let curl = try CurlOptions.parse(o.curlArguments + [text])
        let specs = try LoadRequests.specs(o, url: url, readFile: { try FileIO.readAll(path: $0) })
        let plan = LoadPlan(
            connections: o.connections,
            total: o.requestCount,
            rate: o.rate,
            order: o.order,
            timeout: o.timeout
        )
        Self.raiseFileLimit()
        signal(SIGPIPE, SIG_IGN)

        let engine: any LoadEngine
        switch o.resolvedEngine {
        case .raw:
            let address = try Self.address(url, curl: curl)
            let encoded = try specs.map { try Self.encode($0, url: url, newConnection: o.newConnection) }
            let raw = try RawLoadEngine(threads: o.threads, address: address, requests: encoded, plan: plan)
            raw.connectAll()
            engine = raw
        case .session:
            var config = try GetCommand.configuration(curl)
            if o.noResumption { config.tls.sessionResumption = false }
            var requests: [HTTPClientRequest] = []
            for spec in specs {
                guard let u = URL(string: spec.target, relativeTo: url)?.absoluteURL else {
                    throw LoadOptions.UsageError(description: "cannot make a URL of '\(spec.target)'")
                }
                var headers = HTTPHeaders()
                for (name, value) in spec.headers { headers.add(name: name, value: value) }
                if o.newConnection { headers.replaceOrAdd(name: "Connection", value: "close") }
                var r = HTTPClientRequest(
                    method: HTTPMethod(rawValue: spec.method),
                    url: u,
                    headers: headers,
                    body: spec.body.map { .bytes($0) }
                )
                try GetCommand.applyRouting(curl, url: u, config: &config, request: &r)
                requests.append(r)
            }
            if o.api == .async {
                engine = try AsyncSessionLoadEngine(
                    configuration: config,
                    requests: requests,
                    plan: plan,
                    threads: o.threads,
                    executor: o.executor ?? .installed
                )
            } else {
                engine = try SessionLoadEngine(configuration: config, requests: requests, plan: plan)
            }
        }

        let result = LoadRunner.run(
            engine,
            duration: o.duration,
            keepIntervals: o.hdrOutPath != nil,
            live: live
        )
        return LoadReport(
            url: text,
            method: specs.count == 1 ? specs[0].method : "mixed",
            connections: o.connections,
            threads: o.threads,
            targetRate: o.rate,
            startedAt: result.startedAt,
            elapsedSeconds: result.elapsedSeconds,
            requests: result.requests,
            bytesRead: result.bytes,
            status: result.status,
            errors: result.errors,
            corrected: result.corrected,
            uncorrected: result.uncorrected,
            timeline: result.timeline,
            intervals: result.intervals
        )
    }

    /// The line Benchmarks/scripts parse (the same as the peers' and curl-multi's).
    static func resultLine(_ r: LoadReport) -> String {
        var u = rusage()
        getrusage(RUSAGE_SELF.rawValue, &u)
        let user = Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6
        let sys = Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
        let c = r.corrected
        return
            "RESULT requests=\(r.requests) errors=\(r.errorCount) seconds=\(LoadDriverFormat.fixed(r.elapsedSeconds)) rps=\(LoadDriverFormat.fixed(r.rps)) cpu_user=\(LoadDriverFormat.fixed(user)) cpu_sys=\(LoadDriverFormat.fixed(sys)) maxrss_kb=\(u.ru_maxrss) p50_us=\(c.value(atPercentile: 50) / 1000) p99_us=\(c.value(atPercentile: 99) / 1000) p999_us=\(c.value(atPercentile: 99.9) / 1000) max_us=\(c.maxValue / 1000) u_p99_us=\(r.uncorrected.value(atPercentile: 99) / 1000) u_p999_us=\(r.uncorrected.value(atPercentile: 99.9) / 1000)"
    }

    static func write(_ text: String, to path: String, flag: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw ToolFailure(1, "\(flag): cannot write '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else {
                throw ToolFailure(1, "\(flag): cannot write '\(path)': \(String(cString: strerror(errno)))")
            }
            bytes = bytes.dropFirst(n)
        }
    }

    /// The request bytes the raw engine sends: Host (the URL's), -H, Content-Length for a body.
    static func encode(_ spec: LoadRequestSpec, url: URL, newConnection: Bool) throws -> EncodedLoadRequest {
        var host = url.host(percentEncoded: true) ?? ""
        if host.contains(":") { host = "[\(host)]" }
        if let p = url.port { host += ":\(p)" }
        var headers = HTTPHeaders()
        if !spec.headers.contains(where: { $0.0.lowercased() == "host" }) { headers.add(name: "Host", value: host) }
        for (name, value) in spec.headers { headers.add(name: name, value: value) }
        if let b = spec.body { headers.replaceOrAdd(name: "Content-Length", value: String(b.count)) }
        if newConnection { headers.replaceOrAdd(name: "Connection", value: "close") }
        let method = HTTPMethod(rawValue: spec.method)
        var bytes: [UInt8] = []
        do {
            try HTTP1Encoder.writeRequestHead(
                HTTPRequestHead(method: method, target: spec.target, headers: headers),
                into: &bytes
            )
        } catch {
            throw LoadOptions.UsageError(description: "cannot send \(spec.method) \(spec.target): \(error)")
        }
        bytes += spec.body ?? []
        return EncodedLoadRequest(bytes: bytes, method: method)
    }

    /// Where the raw engine connects: a --resolve entry for the URL's host and port, else the
    /// host's first address.
    static func address(_ url: URL, curl: CurlOptions) throws -> SocketAddress {
        var host = url.host(percentEncoded: false) ?? ""
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let port = url.port ?? 80
        for entry in curl.resolve where entry.port == port && entry.host.lowercased() == host.lowercased() {
            for a in entry.addresses {
                let bare = a.hasPrefix("[") ? String(a.dropFirst().dropLast()) : a
                if let s = SocketAddress(ipAddress: bare, port: port) { return s }
            }
        }
        let box = Mutex<Result<[SocketAddress], ResolutionError>?>(nil)
        let done = LoadCompletion()
        Resolver.shared.resolve(host: host, port: port) { r in
            box.withLock { $0 = r }
            done.finish()
        }
        _ = done.wait(until: UInt64.max)
        switch box.withLock({ $0 }) {
        case .success(let list)?:
            if let a = list.first { return a }
            throw ToolFailure(6, "cannot resolve '\(host)': no addresses")
        case .failure(let e)?:
            throw ToolFailure(6, "cannot resolve '\(host)': \(e)")
        case nil:
            throw ToolFailure(6, "cannot resolve '\(host)'")
        }
    }

    static func raiseFileLimit() {
        var r = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r)
        r.rlim_cur = r.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &r)
    }
}

/// The live line on a terminal: elapsed, the last second's rate, errors, p50/p99 so far.
final class LiveLine {
    private var lastRequests: UInt64 = 0
    private var lastTime = 0.0

    func draw(elapsed: Double, timeline: LoadTimeline) {
        let t = timeline.totals
        let dt = elapsed - self.lastTime
        let rate = dt > 0 ? Double(t.requests - self.lastRequests) / dt : 0
        self.lastRequests = t.requests
        self.lastTime = elapsed
        let h = timeline.soFar
        let p50 = h.totalCount == 0 ? "-" : LoadDriverFormat.latency(h.value(atPercentile: 50))
        let p99 = h.totalCount == 0 ? "-" : LoadDriverFormat.latency(h.value(atPercentile: 99))
        OutputFile.stderr.write(
            "\r\u{1B}[K[\(LoadDriverFormat.fixed(elapsed, 1))s] \(t.requests) requests, \(LoadDriverFormat.number(rate)) req/s, \(t.errors) errors, p50 \(p50), p99 \(p99)"
        )
    }
}

/// Small number formatting (no Foundation formatters in the static tool).
enum LoadDriverFormat {
    static func fixed(_ v: Double, _ digits: Int = 2) -> String {
        guard v.isFinite else { return "0" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(v) * scale).rounded()
        let whole = Int(scaled / scale)
        var frac = String(Int(scaled.truncatingRemainder(dividingBy: scale)))
        while frac.count < digits { frac = "0" + frac }
        return (v < 0 && scaled > 0 ? "-" : "") + "\(whole)" + (digits > 0 ? "." + frac : "")
    }

    static func number(_ v: Double) -> String { v == v.rounded() ? String(Int(v)) : Self.fixed(v, 1) }

    static func seconds(_ s: Double) -> String {
        if s >= 3600 && s.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(s / 3600))h" }
        if s >= 60 && s.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(s / 60))m" }
        return "\(Self.number(s))s"
    }

    static func latency(_ ns: UInt64) -> String {
        let v = Double(ns)
        if v >= 1e9 { return Self.fixed(v / 1e9) + "s" }
        if v >= 1e6 { return Self.fixed(v / 1e6) + "ms" }
        return Self.fixed(v / 1e3) + "us"
    }
}
