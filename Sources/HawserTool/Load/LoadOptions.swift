// `hawser load`'s flags: wrk's where they exist, wrk2's -R, and the `get` command's TLS and
// connection flags (parsed by CurlOptions, so they mean exactly what they mean for `hawser get`).

/// What `hawser load` was asked to do.
struct LoadOptions {
    /// Which client drives the load.
    enum Engine: String {
        /// Raw sockets on the engine's loops with the HTTP/1.1 parser over each connection's
        /// buffer: the engine's floor, comparable to wrk. Plain http over TCP only.
        case raw
        /// `Session.execute(_:completion:)` chains on the session's loop: the engine's public
        /// API, with TLS, --resolve, --unix-socket and the pool.
        case session
    }

    /// How the session engine calls the Session (--api).
    enum API: String {
        /// `Session.execute(_:completion:)` chains on the session's loop.
        case completion
        /// Swift tasks awaiting `Session.response(for:)`: how applications call it.
        case async
    }

    /// Where the async callers run (--executor).
    enum Executor: String {
        /// The event loops installed as the Swift global executor (the tool's default).
        case installed
        /// The runtime's default executor: the tool does not install the loops.
        case `default`
        /// The default executor, each caller preferring the session's loop.
        case loop
    }

    /// How --requests picks the next request.
    enum Order: String {
        case roundRobin = "round-robin"
        case random
    }

    var url: String?
    var connections = 10
    var threads = 1
    /// -d (seconds); nil with -n.
    var duration: Double?
    /// -n: requests in all.
    var requestCount: Int?
    /// -R: requests per second in all (open loop); nil: closed loop.
    var rate: Double?
    var latency = false
    var method: String?
    var headers: [(String, String)] = []
    var bodyPath: String?
    var requestsPath: String?
    var order = Order.roundRobin
    var newConnection = false
    /// --no-resumption: every TLS handshake a full one (session engine).
    var noResumption = false
    /// --timeout: seconds a request may take before it counts as a timeout error.
    var timeout: Double?
    /// --engine; nil: raw when the flags allow it, else session.
    var engine: Engine?
    /// --api (session engine).
    var api = API.completion
    /// --executor (async callers); nil: installed.
    var executor: Executor?
    var json = false
    var hdrOutPath: String?
    var svgPath: String?
    var failIf: [String] = []
    /// --result-line: the benchmark scripts' `RESULT requests=N errors=E seconds=S …` line on stdout.
    var resultLine = false
    /// --quiet: no live line, even on a terminal.
    var quiet = false
    /// The `get` command's flags (TLS, --resolve, --unix-socket, --connect-timeout) as `hawser get`
    /// parses them.
    var curlArguments: [String] = []

    struct UsageError: Error, CustomStringConvertible, Equatable {
        var description: String
    }

    /// The `get` flags `load` passes through: those with a value, then those without.
    static let passedWithValue: Set<String> = [
        "--cacert", "--capath", "--pinnedpubkey", "--pinning", "--pinned-cert", "--crlfile", "--cert", "-E",
        "--cert-type", "--key", "--tls-max", "--resolve", "--unix-socket", "--connect-timeout",
    ]
    static let passedWithoutValue: Set<String> = [
        "-k", "--insecure", "--allow-invalid-certificates", "--no-validate-domain-name", "--cn-fallback",
        "--cert-status", "--tlsv1.2", "--tlsv1.3",
    ]

    /// Flags the raw engine cannot honour (it speaks plain http over TCP to one resolved address).
    static let sessionOnlyFlags: Set<String> = passedWithValue.union(passedWithoutValue).subtracting(["--resolve"])

    /// A duration: seconds (`30`, `1.5`), or wrk's `10s`, `2m`, `1h`; positive.
    static func duration(_ s: String) -> Double? {
        var digits = Substring(s)
        var unit = 1.0
        switch digits.last {
        case "s": unit = 1
        case "m": unit = 60
        case "h": unit = 3600
        default: break
        }
        if digits.last.map({ "smh".contains($0) }) == true { digits = digits.dropLast() }
        guard let v = Double(digits), v.isFinite, v > 0 else { return nil }
        return v * unit
    }

    static func parse(_ args: [String]) throws(UsageError) -> LoadOptions {
        var o = LoadOptions()
        var i = 0
        func value(_ flag: String) throws(UsageError) -> String {
            i += 1
            guard i < args.count else { throw UsageError(description: "\(flag) needs a value") }
            return args[i]
        }
        func positiveInt(_ flag: String, _ what: String) throws(UsageError) -> Int {
            let v = try value(flag)
            guard let n = Int(v), n > 0 else { throw UsageError(description: "\(flag) needs \(what), not '\(v)'") }
            return n
        }
        func seconds(_ flag: String) throws(UsageError) -> Double {
            let v = try value(flag)
            guard let d = duration(v) else {
                throw UsageError(description: "\(flag) needs a positive duration (30, 10s, 2m, 1h), not '\(v)'")
            }
            return d
        }
        while i < args.count {
            let a = args[i]
            switch a {
            case "-c", "--connections": o.connections = try positiveInt(a, "a positive number of connections")
            case "-t", "--threads": o.threads = try positiveInt(a, "a positive number of loops (threads)")
            case "-d", "--duration": o.duration = try seconds(a)
            case "-n", "--requests-total": o.requestCount = try positiveInt(a, "a positive number of requests")
            case "-R", "--rate":
                let v = try value(a)
                guard let r = Double(v), r.isFinite, r > 0 else {
                    throw UsageError(description: "\(a) needs a positive rate in requests per second, not '\(v)'")
                }
                o.rate = r
            case "--latency": o.latency = true
            case "-X", "--method":
                let v = try value(a)
                guard !v.isEmpty,
                    v.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains($0) })
                else { throw UsageError(description: "\(a) needs an HTTP method token, not '\(v)'") }
                o.method = v
            case "-H", "--header":
                let h = try value(a)
                guard let colon = h.firstIndex(of: ":"), colon != h.startIndex else {
                    throw UsageError(description: "header '\(h)' is not 'Name: value'")
                }
                let v = h[h.index(after: colon)...].drop(while: { $0 == " " || $0 == "\t" })
                o.headers.append((String(h[..<colon]), String(v)))
            case "--body": o.bodyPath = try value(a)
            case "--requests": o.requestsPath = try value(a)
            case "--order":
                let v = try value(a)
                guard let order = Order(rawValue: v) else {
                    throw UsageError(description: "--order takes round-robin or random, not '\(v)'")
                }
                o.order = order
            case "--new-connection": o.newConnection = true
            case "--no-resumption": o.noResumption = true
            case "--timeout": o.timeout = try seconds(a)
            case "--engine":
                let v = try value(a)
                guard let e = Engine(rawValue: v) else {
                    throw UsageError(description: "--engine takes raw or session, not '\(v)'")
                }
                o.engine = e
            case "--api":
                let v = try value(a)
                guard let api = API(rawValue: v) else {
                    throw UsageError(description: "--api takes completion or async, not '\(v)'")
                }
                o.api = api
            case "--executor":
                let v = try value(a)
                guard let e = Executor(rawValue: v) else {
                    throw UsageError(description: "--executor takes installed, default or loop, not '\(v)'")
                }
                o.executor = e
            case "--json": o.json = true
            case "--hdr-out": o.hdrOutPath = try value(a)
            case "--svg": o.svgPath = try value(a)
            case "--fail-if": o.failIf.append(try value(a))
            case "--result-line": o.resultLine = true
            case "-q", "--quiet": o.quiet = true
            default:
                if Self.passedWithValue.contains(a) {
                    o.curlArguments += [a, try value(a)]
                } else if Self.passedWithoutValue.contains(a) {
                    o.curlArguments.append(a)
                } else if a.hasPrefix("-") && a != "-" {
                    throw UsageError(description: "unknown option '\(a)' (see hawser load --help)")
                } else if o.url == nil {
                    o.url = a
                } else {
                    throw UsageError(description: "more than one URL given ('\(o.url!)' and '\(a)')")
                }
            }
            i += 1
        }
        guard o.url != nil else { throw UsageError(description: "no URL given") }
        if o.duration != nil && o.requestCount != nil {
            throw UsageError(
                description: "-d and -n exclude each other: run for a duration or for a number of requests"
            )
        }
        if o.duration == nil && o.requestCount == nil { o.duration = 10 }
        if o.bodyPath != nil && o.requestsPath != nil {
            throw UsageError(
                description: "--body and --requests exclude each other (a --requests line names its body_file)"
            )
        }
        if let r = o.rate, r < Double(o.connections) / 3600 {
            throw UsageError(description: "-R \(r) is below one request per hour per connection: lower -c")
        }
        try o.checkEngine()
        return o
    }

    /// Whether the tool must leave the runtime's default executor in place for `arguments` (the
    /// whole command line after the program name): `load … --executor default|loop`.
    static func keepsDefaultExecutor(_ arguments: [String]) -> Bool {
        guard arguments.first == "load" else { return false }
        return zip(arguments, arguments.dropFirst()).contains {
            $0 == "--executor" && ($1 == "default" || $1 == "loop")
        }
    }

    /// The engine that runs: --engine, or raw when every flag allows it.
    var resolvedEngine: Engine {
        if let e = self.engine { return e }
        if self.api == .async { return .session }
        return self.rawRefusal == nil ? .raw : .session
    }

    /// Why the raw engine cannot run these flags (nil: it can).
    var rawRefusal: String? {
        if let u = self.url, u.lowercased().hasPrefix("https:") { return "https URLs" }
        if let flag = self.curlArguments.first(where: { Self.sessionOnlyFlags.contains($0) }) { return flag }
        if self.noResumption { return "--no-resumption" }
        return nil
    }

    func checkEngine() throws(UsageError) {
        switch self.resolvedEngine {
        case .raw:
            if let why = self.rawRefusal {
                throw UsageError(description: "--engine raw speaks plain http over TCP: \(why) needs --engine session")
            }
            if self.api == .async {
                throw UsageError(description: "--api async needs --engine session")
            }
            if self.executor != nil {
                throw UsageError(description: "--executor places async callers: it needs --engine session --api async")
            }
        case .session:
            if self.executor != nil && self.api != .async {
                throw UsageError(description: "--executor places async callers: it needs --api async")
            }
            if self.threads > 1 && self.api == .completion {
                throw UsageError(
                    description:
                        "-t \(self.threads) with --api completion: the completion chains run on one loop (use --api async or --engine raw)"
                )
            }
        }
    }

    static let help = """
        Usage: hawser load URL [options]
        A load generator: wrk's flags, wrk2's constant rate with corrected latencies.

        How long and how hard
          -c, --connections N      connections held open (default 10)
          -t, --threads N          event loops, one thread each (default 1): the raw engine's
                                   connections spread over them, or one session over N loops
                                   (--api async)
          -d, --duration T         run for T: seconds, or 10s, 2m, 1h (default 10s)
          -n, --requests-total N   send N requests in all, then stop (excludes -d)
          -R, --rate RATE          open loop: RATE requests/s in all, RATE/c per connection at
                                   fixed intervals; latency counts from each request's intended
                                   send time (corrected) and from its actual send (uncorrected)
              --timeout T          a request answered after T counts as a timeout error

        What to send
          -X, --method METHOD      request method (default GET, POST with --body)
          -H, --header 'N: v'      add a header (repeatable)
              --body FILE          send FILE as the body of every request
              --requests FILE      requests to cycle through: one per line, 'METHOD PATH', or JSON
                                   lines {"method":..,"path":..,"headers":{..},"body_file":..}
              --order ORDER        round-robin (default) or random over --requests
              --new-connection     one request per connection (Connection: close)

        How to connect (as hawser get; session engine only, except --resolve)
          --cacert FILE, --capath DIR, -k/--insecure, --pinning MODE, --pinned-cert FILE,
          --pinnedpubkey PINS, --cert FILE, --key FILE, --cert-type, --tlsv1.2, --tlsv1.3,
          --tls-max V, --crlfile FILE, --cert-status, --resolve HOST:PORT:ADDR,
          --unix-socket PATH, --connect-timeout T, --no-resumption (no TLS session resumption)

        Engine
              --engine raw|session raw: the engine's loops and parser over raw sockets, the floor
                                   comparable to wrk (plain http; -t; every flag above but TLS and
                                   --unix-socket). session: the public Session API (TLS,
                                   --unix-socket). Default: raw when the flags allow it.
              --api completion|async
                                   session engine: completion chains of Session.execute on the
                                   session's loop (default), or -c Swift tasks awaiting
                                   Session.response(for:) in a loop (how applications call it)
              --executor installed|default|loop
                                   where the async callers run: the event loops installed as the
                                   Swift global executor (default), the runtime's own default
                                   executor (the loops are not installed), or the default
                                   executor with each caller preferring the session's loop

        Output
              --latency            the latency percentile table
              --json               the whole report as one JSON object on stdout
              --hdr-out FILE       HdrHistogram interval log, one interval per second
              --svg FILE           latency percentile spectrum and per-second timeline
              --fail-if COND       exit 110 when COND holds: 'p99>50ms', 'errors>0', 'rps<10000'
                                   (repeatable)
              --result-line        a last line 'RESULT requests=N errors=E seconds=S rps=R ...'
          -q, --quiet              no live line (it is drawn only when stderr is a terminal)

          hawser load merge FILE...  combine runs from several hosts (hawser load merge --help)
        Exit: 0; 110 when a --fail-if condition holds; 1 when no request was answered; 2 on a usage error.
        """
}
