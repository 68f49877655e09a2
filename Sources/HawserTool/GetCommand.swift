#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HawserCore

#if canImport(Glibc)
import Glibc
#endif

/// `hawser get URL [curl options]`.
enum GetCommand {
    static func run(_ args: [String]) async -> Int32 {
        if args.contains("--help") || args.contains("-h") {
            OutputFile.stdout.write(CurlOptions.help + "\n")
            return 0
        }
        let o: CurlOptions
        do {
            o = try CurlOptions.parse(args)
        } catch {
            OutputFile.stderr.write("hawser: \(error)\nTry 'hawser help'.\n")
            return CurlOptions.usageExit
        }
        guard let text = o.url else {
            OutputFile.stderr.write("hawser: no URL given\n\(CurlOptions.help)\n")
            return CurlOptions.usageExit
        }
        guard let url = URL(string: text.contains("://") ? text : "http://" + text) else {
            return Self.fail(o, 3, "malformed URL '\(text)'")
        }
        var config = SessionConfiguration()
        if let t = o.connectTimeout { config.connectTimeout = t }
        if let t = o.maxTime {
            config.timeoutIntervalForResource = t
            config.connectTimeout = min(config.connectTimeout, t)
        }
        config.redirects.followsRedirects = o.followRedirects
        // curl neither asks for nor decodes compressed bodies unless told (--compressed).
        config.automaticallyDecodesContent = o.compressed
        // curl's cookie engine is off unless -b FILE or -c FILE turns it on.
        var literalCookie: String? = nil
        if let input = o.cookieInput, input.contains("=") {
            literalCookie = input
        }
        if (o.cookieInput != nil && literalCookie == nil) || o.cookieJarPath != nil {
            let jar = CookieJar()
            if let path = o.cookieInput, literalCookie == nil {
                do {
                    try jar.load(netscapeFile: path)
                } catch {
                    // curl carries on without cookies when the file cannot be read.
                    if o.verbose { OutputFile.stderr.write("* cannot read cookies from \(path): \(error)\n") }
                }
            }
            config.httpCookieStorage = jar
        } else {
            config.httpCookieStorage = nil
        }
        // curl's default is 50 with -L; -1 means no limit.
        config.redirects.maximumRedirects = o.maxRedirects.map { $0 < 0 ? Int.max : $0 } ?? 50
        do {
            try Self.applyTLS(o, to: &config)
            try Self.applyProxy(o, to: &config)
        } catch let e as HawserError {
            return Self.fail(o, Self.exitCode(for: e), e.message)
        } catch {
            return Self.fail(o, 2, "\(error)")
        }
        if let t = o.expect100Timeout { config.expectContinueTimeout = t }
        // Like curl, the tool sends a body only when asked (no automatic 100-continue wait
        // below curl's own 1 MiB threshold, which matches the session default).
        let session = Session(configuration: config)
        defer { session.shutdown() }

        var request = HTTPClientRequest(url: url)
        request.method = HTTPMethod(rawValue: o.method ?? (o.headOnly ? "HEAD" : (o.data != nil ? "POST" : "GET")))
        for (n, v) in o.headers { request.headers.add(name: n, value: v) }
        if let literalCookie, !request.headers.contains(name: "Cookie") { request.headers.add(name: "Cookie", value: literalCookie) }
        if let user = o.user {
            let (name, password) = Self.splitUser(user)
            if o.digest {
                // --digest: answer the server's Digest challenge with these credentials.
                request.url = Self.url(url, withUser: name, password: password)
            } else if !request.headers.contains(name: "Authorization"),
                      let value = try? BasicAuthentication.authorizationValue(user: name, password: password) {
                // curl's --basic sends the credentials with the first request.
                request.headers.add(name: "Authorization", value: value)
            }
        }
        if let d = o.data {
            request.body = .bytes(d)
            if !request.headers.contains(name: "Content-Type") {
                request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            }
        }

        let body: OutputFile
        var resumeFrom: Int64? = nil
        do {
            if o.resume {
                guard let path = o.outputPath, path != "-" else { return Self.fail(o, 2, "-C - needs -o FILE to resume into") }
                let (file, size) = try OutputFile.openForAppend(path)
                body = file
                resumeFrom = size
                if size > 0 { request.headers.replaceOrAdd(name: "Range", value: "bytes=\(size)-") }
            } else {
                body = try o.outputPath.map(OutputFile.open) ?? .stdout
            }
        } catch {
            return Self.fail(o, 23, "\(error)")
        }
        defer { body.close() }
        let dump: OutputFile?
        do {
            dump = try o.dumpHeaderPath.map(OutputFile.open)
        } catch {
            return Self.fail(o, 23, "\(error)")
        }
        defer { dump?.close() }

        let showProgress = !o.silent && !o.verbose && o.outputPath != nil && o.outputPath != "-" && OutputFile.stderr.isTerminal
        let printer = TransferPrinter(options: o, body: body, dump: dump, progress: showProgress,
                                      resumingFrom: resumeFrom.flatMap { $0 > 0 ? $0 : nil })
        if o.verbose {
            OutputFile.stderr.write("> \(request.method) \(url.absoluteString)\n")
            for f in request.headers { OutputFile.stderr.write("> \(f.name): \(f.value)\n") }
        }
        let result = await printer.run(session: session, request: request)
        if showProgress { printer.finishProgressLine() }
        if let path = o.cookieJarPath, let jar = config.httpCookieStorage {
            do {
                try jar.save(toNetscapeFile: path)
            } catch {
                OutputFile.stderr.write("hawser: cannot write cookies to \(path): \(error)\n")
            }
        }
        switch result {
        case .failure(let e):
            return Self.fail(o, Self.exitCode(for: e), e.description)
        case .success(let (head, metrics, effectiveURL)):
            let url = effectiveURL
            if o.verbose {
                let ms = { (a: UInt64?, b: UInt64?) in TaskMetrics.span(a, b).map { String(format2: Double($0) / 1e6) + " ms" } ?? "-" }
                OutputFile.stderr.write("* connect \(ms(metrics.connectStart, metrics.connectEnd)), first byte \(ms(metrics.fetchStart, metrics.responseStart)), total \(ms(metrics.fetchStart, metrics.responseEnd)), connection \(metrics.isReusedConnection ? "reused" : "new") to \(metrics.remoteAddress?.description ?? "?")\n")
            }
            if let w = o.writeOut {
                OutputFile.stdout.write(WriteOut.render(w, head: head, metrics: metrics, url: url, bodyBytes: printer.bodyBytes, headBytes: printer.headBytes))
            }
            if body.failed { return Self.fail(o, 23, "failed writing the body") }
            if let from = resumeFrom, from > 0 {
                if head.status == 200 { return Self.fail(o, 33, "HTTP server doesn't seem to support byte ranges. Cannot resume.") }
                if head.status == 416 { return 0 }   // already complete
            }
            if o.failOnError && head.status >= 400 {
                return Self.fail(o, 22, "the requested URL returned error: \(head.status)")
            }
            return 0
        }
    }

    static func splitUser(_ s: String) -> (String, String) {
        guard let colon = s.firstIndex(of: ":") else { return (s, "") }
        return (String(s[..<colon]), String(s[s.index(after: colon)...]))
    }

    static func url(_ u: URL, withUser user: String, password: String) -> URL {
        guard var c = URLComponents(url: u, resolvingAgainstBaseURL: false) else { return u }
        c.user = user
        c.password = password
        return c.url ?? u
    }

    /// -k, --cacert, --capath, --pinnedpubkey, --cert/--key/--cert-type, --tlsv1.x, --tls-max.
    static func applyTLS(_ o: CurlOptions, to config: inout SessionConfiguration) throws {
        switch o.tlsMinimum {
        case .tls12?: config.tls.minimumVersion = .tls1_2
        case .tls13?: config.tls.minimumVersion = .tls1_3
        case nil: break
        }
        if let m = o.tlsMaximum { config.tls.maximumVersion = m == "1.3" ? .tls1_3 : .tls1_2 }
        if let cert = o.certPath {
            let (path, password) = Self.splitUser(cert)
            if o.certType == "P12" {
                config.tls.clientIdentity = .pkcs12(path: path, password: password)
            } else {
                config.tls.clientIdentity = .pem(certificateChainPath: path, privateKeyPath: o.keyPath ?? path,
                                                 password: password.isEmpty ? nil : password)
            }
        }
        var anchors: [Certificate] = []
        do {
            if let path = o.caCertPath { anchors += try Certificate.load(contentsOf: path) }
            if let dir = o.caPath { anchors += try Certificate.certificates(inDirectory: dir) }
        } catch {
            throw HawserError(.invalidRequest, "cannot read CA certificates: \(error)")
        }
        var policy = SecurityPolicy(pinningMode: .none)
        policy.anchors = anchors.isEmpty ? .system : .custom(anchors)
        if let pins = o.pinnedPublicKey {
            // curl's form: sha256//BASE64;sha256//BASE64 — Hawser's pins are sha256/BASE64.
            let list = pins.split(separator: ";").map { String($0).replacing("sha256//", with: "sha256/") }
            do {
                var pinned = SecurityPolicy(pinningMode: .publicKey)
                pinned.pinnedPublicKeyHashes = Set(try list.map { (p: String) throws(PinError) in try PublicKeyPin(p) })
                pinned.anchors = policy.anchors
                policy = pinned
            } catch {
                throw HawserError(.invalidRequest, "--pinnedpubkey: \(error)")
            }
        }
        if o.insecure {
            policy.allowInvalidCertificates = true
            policy.validatesDomainName = false
        }
        config.serverTrustEvaluator = policy
    }

    /// -x, -U, --socks5-hostname, --noproxy, on top of the environment (as curl does).
    static func applyProxy(_ o: CurlOptions, to config: inout SessionConfiguration) throws {
        var proxy = ProxyConfiguration.processEnvironment
        do {
            if let p = o.socks5Hostname {
                var server = try ProxyServer(parsing: p.contains("://") ? p : "socks5h://" + p)
                server.kind = .socks5(remoteDNS: true)
                proxy = ProxyConfiguration(allProxy: server, bypass: proxy.bypass)
            }
            if let p = o.proxy {
                proxy = ProxyConfiguration(allProxy: try ProxyServer(parsing: p), bypass: proxy.bypass)
            }
        } catch {
            throw HawserError(.proxyError, "invalid proxy: \(error)")
        }
        if let u = o.proxyUser {
            let (name, password) = Self.splitUser(u)
            let creds = ProxyCredentials(user: name, password: password)
            proxy.httpProxy?.credentials = creds
            proxy.httpsProxy?.credentials = creds
            proxy.allProxy?.credentials = creds
        }
        if let list = o.noProxy { proxy.bypass = NoProxyList(list) }
        config.proxy = proxy
    }

    static func fail(_ o: CurlOptions, _ code: Int32, _ message: String) -> Int32 {
        if !o.silent || o.showError {
            OutputFile.stderr.write("hawser: (\(code)) \(message)\n")
        }
        return code
    }

    /// curl's exit codes, so scripts that know curl read ours the same way.
    static func exitCode(for e: HawserError) -> Int32 {
        switch e.code {
        case .cannotResolveHost: return 6
        case .cannotConnect: return 7
        case .connectTimeout, .idleTimeout, .resourceTimeout: return 28
        case .protocolError: return 8
        case .invalidRequest: return 3
        case .unsupportedURL: return 1
        case .connectionLost:
            return e.message.contains("before sending a response") ? 52 : 56
        case .limitExceeded: return 63
        case .cancelled: return 42
        case .sessionShutDown, .ioError: return 55
        case .tooManyRedirects: return 47
        case .redirectRefused: return 1
        case .secureConnectionFailed: return 35
        case .serverCertificateUntrusted: return 60
        case .clientCertificateRequired: return 58
        case .cannotDecodeContent: return 61
        case .userAuthenticationRequired, .userCancelledAuthentication: return 22
        case .proxyError: return 5
        case .resourceUnavailable: return 37
        }
    }
}

extension String {
    /// Fixed two decimals without Foundation's String(format:).
    init(format2 value: Double) {
        let scaled = (value * 100).rounded()
        let whole = Int(scaled / 100)
        let frac = Int(abs(scaled).truncatingRemainder(dividingBy: 100))
        self = "\(whole).\(frac < 10 ? "0" : "")\(frac)"
    }
}

/// curl's `-w` variables.
enum WriteOut {
    static func render(_ format: String, head: HTTPResponseHead, metrics: TaskMetrics, url: URL, bodyBytes: Int64, headBytes: Int) -> String {
        func secs(_ a: UInt64?, _ b: UInt64?) -> String {
            let ns = TaskMetrics.span(a, b) ?? 0
            let us = Double(ns) / 1000
            let s = us / 1e6
            return String(format2: s * 1000).count > 0 ? Self.sixDecimals(s) : "0"
        }
        var out = format
        let vars: [(String, String)] = [
            ("http_code", String(head.status)),
            ("response_code", String(head.status)),
            ("size_download", String(bodyBytes)),
            ("size_header", String(headBytes)),
            ("time_connect", secs(metrics.fetchStart, metrics.connectEnd ?? metrics.requestStart)),
            ("time_starttransfer", secs(metrics.fetchStart, metrics.responseStart)),
            ("time_total", secs(metrics.fetchStart, metrics.responseEnd)),
            ("num_connects", metrics.isReusedConnection ? "0" : "1"),
            ("num_redirects", String(metrics.redirectCount)),
            ("url_effective", url.absoluteString),
            ("content_type", head.headers["Content-Type"] ?? ""),
            ("remote_ip", metrics.remoteAddress?.ipAddress ?? ""),
            ("remote_port", metrics.remoteAddress.map { String($0.port) } ?? ""),
        ]
        for (k, v) in vars { out = out.replacing("%{\(k)}", with: v) }
        return out.replacing("\\n", with: "\n").replacing("\\t", with: "\t")
    }

    static func sixDecimals(_ s: Double) -> String {
        let micros = Int((s * 1e6).rounded())
        let whole = micros / 1_000_000
        let frac = String(micros % 1_000_000)
        return "\(whole)." + String(repeating: "0", count: 6 - frac.count) + frac
    }
}
