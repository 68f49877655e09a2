import Hawser
import HawserCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
            OutputFile.stderr.write("hawser: \(error)\nTry 'hawser get --help'.\n")
            return CurlOptions.usageExit
        }
        guard o.url != nil else {
            OutputFile.stderr.write("hawser: no URL given\n\(CurlOptions.help)\n")
            return CurlOptions.usageExit
        }
        if !o.silent {
            for w in o.dataWarnings { OutputFile.stderr.write("Warning: \(w)\n") }
        }
        do {
            return try await Self.transfer(o)
        } catch let f as ToolFailure {
            return Self.fail(o, f.code, f.message)
        } catch let e as HawserError {
            return Self.fail(o, ExitCode.forError(e), e.message)
        } catch let u as CurlOptions.UsageError {
            OutputFile.stderr.write("hawser: \(u)\nTry 'hawser get --help'.\n")
            return CurlOptions.usageExit
        } catch {
            return Self.fail(o, ExitCode.usage, "\(error)")
        }
    }

    /// The URL as curl reads it: `http://` when no scheme is given; http and https only.
    static func targetURL(_ o: CurlOptions) throws -> URL {
        let text = o.url ?? ""
        let full = text.contains("://") ? text : "http://" + text
        let scheme = String(full[..<full.firstRange(of: "://")!.lowerBound]).lowercased()
        guard scheme == "http" || scheme == "https" else {
            throw ToolFailure(ExitCode.unsupportedProtocol, "Protocol \"\(scheme)\" not supported or disabled")
        }
        // The authority as the user wrote it, before Foundation's parser percent-encodes a space
        // or a backslash into it (curl: "URL rejected", exit 3).
        if case .failure(let e) = URLAuthority.parse(full) {
            throw ToolFailure(ExitCode.malformedURL, "URL rejected: \(e.message)")
        }
        guard var url = URL(string: full), let host = url.host(percentEncoded: true), !host.isEmpty else {
            throw ToolFailure(ExitCode.malformedURL, "URL using bad/illegal format or missing URL: '\(text)'")
        }
        if o.getWithData, let data = o.data ?? o.json {
            // -G: the data goes in the query, joined to one that is there with '&'.
            let query = String(decoding: data, as: UTF8.self)
            guard var c = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
                throw ToolFailure(ExitCode.malformedURL, "URL using bad/illegal format: '\(text)'")
            }
            c.percentEncodedQuery = c.percentEncodedQuery.map { $0 + "&" + query } ?? query
            guard let u = c.url else {
                throw ToolFailure(ExitCode.malformedURL, "-G data makes a malformed URL: '\(query)'")
            }
            url = u
        }
        if let path = o.uploadPath, path != "-",
            url.path(percentEncoded: true).isEmpty || url.path(percentEncoded: true).hasSuffix("/")
        {
            // curl -T FILE http://host/dir/ uploads to http://host/dir/FILE.
            let name = FormParts.lastPathComponent(path)
            let encoded = Self.percentEncodedPathSegment(name)
            var c = URLComponents(url: url, resolvingAgainstBaseURL: false)
            let base = c?.percentEncodedPath ?? ""
            c?.percentEncodedPath = (base.isEmpty ? "/" : base) + encoded
            if let u = c?.url { url = u }
        }
        return url
    }

    /// A file name as one path segment: unreserved characters and sub-delimiters kept, the
    /// other bytes percent-encoded.
    static func percentEncodedPathSegment(_ s: String) -> String {
        let kept = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@".utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for b in s.utf8 {
            if kept.contains(b) {
                out.append(b)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// -O: the URL's last path component, in the current directory.
    static func remoteFileName(_ url: URL) throws -> String {
        let path = url.path(percentEncoded: true)
        guard !path.hasSuffix("/"), let last = path.split(separator: "/").last, !last.isEmpty else {
            throw ToolFailure(ExitCode.writeError, "Remote file name has no length!")
        }
        return String(last)
    }

    static func transfer(_ o: CurlOptions) async throws -> Int32 {
        let url = try Self.targetURL(o)
        var config = try Self.configuration(o)
        let trustLog = TrustLog()
        config.serverTrustEvaluator = config.serverTrustEvaluator.map {
            TrustRecorder(inner: $0, log: trustLog, anchors: Self.anchors(o), pinning: Self.pinningName(o))
        }
        var request = try Self.makeRequest(o, url: url)
        try Self.applyRouting(o, url: url, config: &config, request: &request)

        let session = Session(configuration: config)
        defer { session.shutdown() }

        // Where the body goes.
        var outputPath = o.outputPath
        if o.remoteName && outputPath == nil { outputPath = try Self.remoteFileName(url) }
        let body: OutputFile
        var resumeFrom: Int64? = nil
        var attemptRequest = request
        do {
            if o.resume {
                guard let path = outputPath, path != "-" else {
                    throw ToolFailure(ExitCode.usage, "-C - needs -o FILE to resume into")
                }
                let (file, size) = try OutputFile.openForAppend(path)
                body = file
                resumeFrom = size
                if size > 0 { attemptRequest.headers.replaceOrAdd(name: "Range", value: "bytes=\(size)-") }
            } else {
                body = outputPath.map(OutputFile.openOnFirstWrite) ?? .stdout
            }
        } catch let e as FileIO.Error {
            throw ToolFailure(ExitCode.writeError, e.description)
        }
        defer { body.close() }
        let dump: OutputFile?
        do {
            dump = try o.dumpHeaderPath.map(OutputFile.open)
        } catch let e as FileIO.Error {
            throw ToolFailure(ExitCode.writeError, e.description)
        }
        defer { dump?.close() }

        // curl's meter: output to a file (not the terminal), not silenced, and stderr a terminal.
        let showProgress = !o.silent && !o.verbose && !body.isTerminal && OutputFile.stderr.isTerminal
        let start = TaskMetrics.now()
        var attempt = 0
        var sleepSeconds = o.retryDelay ?? 1
        var printer: TransferPrinter
        var outcome: TransferPrinter.Outcome
        while true {
            printer = TransferPrinter(
                options: o,
                body: body,
                dump: dump,
                trustLog: trustLog,
                progress: showProgress,
                start: TaskMetrics.now(),
                resumingFrom: resumeFrom.flatMap { $0 > 0 ? $0 : nil }
            )
            outcome = await printer.run(session: session, request: attemptRequest)
            // A non-idempotent request is retried only with --retry-all-errors (the user's consent).
            guard attempt < o.retry, request.method.isIdempotent || o.retryAllErrors,
                let reason = Self.retryReason(outcome, o)
            else {
                break
            }
            let elapsed = Double(TaskMetrics.now() - start) / 1e9
            // --retry-max-time 0 (curl's default) means no limit.
            let maxTime = o.retryMaxTime.flatMap { $0 > 0 ? $0 : nil }
            if let maxTime, elapsed >= maxTime { break }
            var wait = sleepSeconds
            if let status = outcome.head?.status, status == 429 || status == 503,
                let after = outcome.head?.headers["Retry-After"].flatMap(Double.init), after > 0
            {
                wait = after
            }
            if let maxTime { wait = min(wait, max(0, maxTime - elapsed)) }
            attempt += 1
            if !o.silent {
                OutputFile.stderr.write(
                    "Warning: Problem \(reason). Will retry in \(Int(wait.rounded(.up))) seconds. \(o.retry - attempt + 1) retries left.\n"
                )
            }
            if printer.bodyBytes > 0 && resumeFrom == nil && body.truncate() && !o.silent {
                OutputFile.stderr.write("Warning: Throwing away \(printer.bodyBytes) bytes\n")
            }
            if wait > 0 { try? await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
            if o.retryDelay == nil { sleepSeconds = min(sleepSeconds * 2, 600) }
        }
        let end = TaskMetrics.now()

        if let path = o.cookieJarPath, let jar = config.httpCookieStorage {
            do {
                try jar.save(toNetscapeFile: path)
            } catch {
                OutputFile.stderr.write("hawser: cannot write cookies to \(path): \(error)\n")
            }
        }

        // The exit status and message, as curl decides them.
        var code: Int32 = 0
        var message = ""
        // curl -f writes no body for an HTTP error (and creates no file for it).
        let httpFailure = o.failOnError && (outcome.head?.status ?? 0) >= 400
        if outcome.error == nil && !httpFailure { body.create() }
        if let e = outcome.error {
            code = e.code == .ioError && body.failed ? ExitCode.writeError : ExitCode.forError(e)
            message =
                e.code == .ioError && body.failed
                ? "Failure writing output to destination" + (body.openError.map { ": \($0)" } ?? "") : e.message
        } else if body.failed {
            (code, message) = (
                ExitCode.writeError, "Failure writing output to destination" + (body.openError.map { ": \($0)" } ?? "")
            )
        } else if let head = outcome.head {
            if let from = resumeFrom, from > 0, head.status == 200 {
                (code, message) = (
                    ExitCode.rangeError, "HTTP server doesn't seem to support byte ranges. Cannot resume."
                )
            } else if let from = resumeFrom, from > 0, head.status == 416 {
                code = 0  // already complete
            } else if o.failOnError && head.status >= 400 {
                (code, message) = (ExitCode.httpReturnedError, "The requested URL returned error: \(head.status)")
            }
        }

        if o.verbose {
            let m = outcome.metrics
            let ms = { (a: UInt64?, b: UInt64?) in
                TaskMetrics.span(a, b).map { String(format2: Double($0) / 1e6) + " ms" } ?? "-"
            }
            OutputFile.stderr.write(
                "* connect \(ms(m.connectStart, m.connectEnd)), first byte \(ms(m.fetchStart, m.responseStart)), total \(ms(m.fetchStart, m.responseEnd)), connection \(m.isReusedConnection ? "reused" : "new")\(m.remoteAddress.map { " to \($0)" } ?? "")\n"
            )
        }
        if var w = o.writeOut {
            if w.hasPrefix("@") {
                let path = String(w.dropFirst())
                w =
                    (try? String(
                        decoding: (path == "-" ? FileIO.readAll(fd: 0, name: "stdin") : FileIO.readAll(path: path)),
                        as: UTF8.self
                    )) ?? ""
            }
            let t = WriteOut.Transfer(
                head: outcome.head,
                metrics: outcome.metrics,
                url: o.unixSocket == nil ? outcome.url : Self.withoutUnixSocket(outcome.url, original: url),
                method: attemptRequest.method.rawValue,
                bodyBytes: printer.bodyBytes,
                headBytes: printer.headBytes,
                uploadBytes: printer.uploadBytes,
                start: start,
                lastRedirect: printer.lastRedirect,
                startTransfer: printer.lastRedirect == nil ? nil : printer.firstHeadOfLastRequest,
                end: end,
                sslVerifyResult: trustLog.lastVerifyResult,
                connects: printer.connects,
                errorMessage: message,
                exitCode: code,
                inputURL: url.absoluteString,
                outputFile: outputPath
            )
            OutputFile.stdout.write(WriteOut.render(w, t) { OutputFile.stderr.write("hawser: \($0)\n") })
        }
        return code == 0 ? 0 : Self.fail(o, code, message)
    }

    /// Why curl would retry this outcome (its words, as its warning prints them), or nil: a
    /// timeout or a name that did not resolve, a refused connection with --retry-connrefused,
    /// 408, 429, 500, 502, 503, 504; with --retry-all-errors any other error (an HTTP status
    /// >= 400 is an error only with -f, as in curl).
    static func retryReason(_ outcome: TransferPrinter.Outcome, _ o: CurlOptions) -> String? {
        let allErrors = o.retryAllErrors ? "(retrying all errors)" : nil
        if let e = outcome.error {
            switch e.code {
            case .connectTimeout, .idleTimeout, .resourceTimeout, .cannotResolveHost: return ": timeout"
            case .cannotConnect where o.retryConnectionRefused: return ": connection refused"
            default: return allErrors
            }
        }
        if let status = outcome.head?.status, [408, 429, 500, 502, 503, 504].contains(status) { return ": HTTP error" }
        if o.failOnError, let status = outcome.head?.status, status >= 400 { return allErrors }
        return nil
    }

    // MARK: - The session

    static func configuration(_ o: CurlOptions) throws -> SessionConfiguration {
        var config = SessionConfiguration()
        if let t = o.connectTimeout { config.connectTimeout = t }
        if let t = o.maxTime {
            config.timeoutIntervalForResource = t
            config.connectTimeout = min(config.connectTimeout, t)
        }
        config.redirects.followsRedirects = o.followRedirects
        // curl's default is 50 with -L; -1 means no limit.
        config.redirects.maximumRedirects = o.maxRedirects.map { $0 < 0 ? Int.max : $0 } ?? 50
        // curl neither asks for nor decodes compressed bodies unless told (--compressed).
        config.automaticallyDecodesContent = o.compressed
        // What curl sends with every request unless told otherwise: -A, -H 'Name:' removes.
        var additional: HTTPHeaders = ["User-Agent": o.userAgent ?? "hawser/0.1", "Accept": "*/*"]
        if o.userAgent == "" { additional.remove(name: "User-Agent") }
        for (name, value) in o.headers where value.isEmpty { additional.remove(name: name) }
        config.httpAdditionalHeaders = additional
        // --limit-rate: curl's one rate for both directions, each task (transfer) on its own.
        config.maximumReceiveBytesPerSecond = o.limitRate
        config.maximumSendBytesPerSecond = o.limitRate
        // curl's cookie engine is off unless -b FILE or -c FILE turns it on.
        let literalCookie = o.cookieInput.map { $0.contains("=") } ?? false
        if (o.cookieInput != nil && !literalCookie) || o.cookieJarPath != nil {
            let jar = CookieJar()
            if let path = o.cookieInput, !literalCookie {
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
        if let t = o.expect100Timeout { config.expectContinueTimeout = t }
        try Self.applyTLS(o, to: &config)
        try Self.applyProxy(o, to: &config)
        return config
    }

    // MARK: - Routing

    /// --resolve: curl's entries are for one HOST:PORT, and so are the engine's `dnsOverride` keys
    /// made of them (`HOST:PORT`, the host as A-labels): every entry goes in, so that a redirect to
    /// another name or port that has one goes where it says, as in curl. The name stays for Host,
    /// SNI and the certificate check.
    /// --unix-socket: the URL becomes `http+unix://<percent-encoded path>/path` (or `https+unix`)
    /// and the Host field is the original URL's, as curl sends it.
    static func applyRouting(
        _ o: CurlOptions,
        url: URL,
        config: inout SessionConfiguration,
        request: inout HTTPClientRequest
    ) throws {
        let scheme = (url.scheme ?? "http").lowercased()
        let defaultPort = scheme == "https" ? 443 : 80
        let authority: URLAuthority
        switch URLAuthority.parse(url) {
        case .success(let a): authority = a
        case .failure(let e): throw ToolFailure(ExitCode.malformedURL, "URL rejected: \(e.message)")
        }
        let port = authority.port ?? defaultPort
        let host = authority.host
        for entry in o.resolve {
            var name = entry.host
            if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
            if !name.contains(":"), case .success(let ascii) = IDNA.toASCII(name) { name = ascii }
            let key = name.contains(":") ? "[\(name.lowercased())]:\(entry.port)" : "\(name):\(entry.port)"
            // curl: the first entry for a HOST:PORT wins.
            if config.dnsOverride[key] == nil { config.dnsOverride[key] = entry.addresses }
        }
        guard let socket = o.unixSocket else { return }
        guard !socket.isEmpty else { throw CurlOptions.UsageError(description: "--unix-socket needs a path") }
        let hostField = (host.contains(":") ? "[\(host)]" : host) + (port == defaultPort ? "" : ":\(port)")
        var rest = url.path(percentEncoded: true)
        if rest.isEmpty { rest = "/" }
        if let q = url.query(percentEncoded: true) { rest += "?" + q }
        let text = "\(scheme)+unix://\(Self.percentEncodedAuthority(socket))\(rest)"
        guard let unixURL = URL(string: text) else {
            throw ToolFailure(ExitCode.malformedURL, "cannot make a URL for the Unix-domain socket '\(socket)'")
        }
        request.url = unixURL
        if !request.headers.contains(name: "Host") { request.headers.add(name: "Host", value: hostField) }
    }

    /// An `http+unix` URL the way curl names it with --unix-socket: the original URL's scheme
    /// and authority, this URL's path and query.
    static func withoutUnixSocket(_ u: URL, original: URL) -> URL {
        guard let scheme = u.scheme, scheme.hasSuffix("+unix"),
            var c = URLComponents(url: original, resolvingAgainstBaseURL: false)
        else {
            return u
        }
        c.percentEncodedPath = u.path(percentEncoded: true)
        c.percentEncodedQuery = u.query(percentEncoded: true)
        return c.url ?? u
    }

    /// A socket path as a URL's authority: letters, digits, `-`, `.`, `_` and `~` kept, every
    /// other byte (`/` included) percent-encoded.
    static func percentEncodedAuthority(_ s: String) -> String {
        let kept = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for b in s.utf8 {
            if kept.contains(b) {
                out.append(b)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: - The request

    static func makeRequest(_ o: CurlOptions, url: URL) throws -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url)
        var method = o.headOnly ? "HEAD" : "GET"
        for (n, v) in o.headers where !v.isEmpty { request.headers.add(name: n, value: v) }
        for n in o.emptyHeaders { request.headers.add(name: n, value: "") }
        if let referer = o.referer, !request.headers.contains(name: "Referer") {
            request.headers.add(name: "Referer", value: referer)
        }
        if let cookie = o.cookieInput, cookie.contains("="), !request.headers.contains(name: "Cookie") {
            request.headers.add(name: "Cookie", value: cookie)
        }
        if let user = o.user {
            let (name, password) = Self.splitUser(user)
            if o.digest {
                // --digest: answer the server's Digest challenge with these credentials.
                request.url = Self.url(url, withUser: name, password: password)
            } else if !request.headers.contains(name: "Authorization"),
                let value = try? BasicAuthentication.authorizationValue(user: name, password: password)
            {
                // curl's --basic sends the credentials with the first request.
                request.headers.add(name: "Authorization", value: value)
            }
        }
        if o.getWithData {
            // -G: the data went into the URL's query.
        } else if let json = o.json {
            if let d = o.data { request.body = .bytes(d + json) } else { request.body = .bytes(json) }
            method = "POST"
            if !request.headers.contains(name: "Content-Type") {
                request.headers.add(name: "Content-Type", value: "application/json")
            }
            if !request.headers.contains(name: "Accept") {
                request.headers.add(name: "Accept", value: "application/json")
            }
        } else if let d = o.data {
            request.body = .bytes(d)
            method = "POST"
            if !request.headers.contains(name: "Content-Type") {
                request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            }
        } else if !o.forms.isEmpty {
            let form = try FormParts.form(o.forms) { if !o.silent { OutputFile.stderr.write("Warning: \($0)\n") } }
            request.body = form.makeRequestBody()
            method = "POST"
            if !request.headers.contains(name: "Content-Type") {
                request.headers.add(name: "Content-Type", value: form.contentType)
            }
        } else if let path = o.uploadPath {
            request.body = try Self.uploadBody(path: path)
            method = "PUT"
        }
        request.method = HTTPMethod(rawValue: o.method ?? method)
        return request
    }

    /// -T: the file streamed, 64 KiB at a time, opened again for every send (a redirect or a
    /// retry reads it from the start); stdin is sent chunked. --limit-rate is the session's send
    /// limit: each `write` waits while the connection is held at the rate.
    static func uploadBody(path: String) throws -> RequestBody {
        let first: InputFile
        do {
            first = try InputFile(path: path)
        } catch let e as FileIO.Error {
            throw ToolFailure(ExitCode.readError, e.description)
        }
        let length = first.regularFileSize
        let stdin = path == "-" ? first : nil
        return .stream(length: length) { writer in
            let file = try stdin ?? InputFile(path: path)
            while true {
                let chunk = try file.read(max: 64 * 1024)
                if chunk.isEmpty { break }
                try await writer.write(chunk)
            }
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

    // MARK: - TLS

    static func anchors(_ o: CurlOptions) -> TrustAnchors {
        var anchors: [Certificate] = []
        if let path = o.caCertPath { anchors += (try? Certificate.load(contentsOf: path)) ?? [] }
        if let dir = o.caPath { anchors += (try? Certificate.certificates(inDirectory: dir)) ?? [] }
        return anchors.isEmpty ? .system : .custom(anchors)
    }

    static func pinningName(_ o: CurlOptions) -> String? {
        switch Self.pinningMode(o) {
        case .none: return nil
        case .publicKey: return "public-key"
        case .certificate: return "certificate"
        }
    }

    static func pinningMode(_ o: CurlOptions) -> SecurityPolicy.PinningMode {
        switch o.pinning {
        case .none?: return .none
        case .publicKey?: return .publicKey
        case .certificate?: return .certificate
        case nil:
            if o.pinnedPublicKey != nil { return .publicKey }
            return o.pinnedCertificatePaths.isEmpty ? .none : .certificate
        }
    }

    /// -k, --cacert, --capath, --pinnedpubkey, --pinning, --pinned-cert, --allow-invalid-certificates,
    /// --no-validate-domain-name, --cert/--key/--cert-type, --tlsv1.x, --tls-max.
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
                config.tls.clientIdentity = .pem(
                    certificateChainPath: path,
                    privateKeyPath: o.keyPath ?? path,
                    password: password.isEmpty ? nil : password
                )
            }
        }
        do {
            if let path = o.caCertPath { _ = try Certificate.load(contentsOf: path) }
            if let dir = o.caPath { _ = try Certificate.certificates(inDirectory: dir) }
        } catch {
            throw ToolFailure(77, "error setting certificate verify locations: \(error)")
        }
        let mode = Self.pinningMode(o)
        var pinnedCertificates: Set<Certificate> = []
        for path in o.pinnedCertificatePaths {
            do {
                pinnedCertificates.formUnion(try Certificate.load(contentsOf: path))
            } catch {
                throw ToolFailure(ExitCode.readError, "--pinned-cert: \(error)")
            }
        }
        var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: pinnedCertificates)
        policy.anchors = Self.anchors(o)
        if let pins = o.pinnedPublicKey {
            // curl's form: sha256//BASE64;sha256//BASE64; Hawser's pins are sha256/BASE64.
            let list = pins.split(separator: ";").map { String($0).replacing("sha256//", with: "sha256/") }
            do {
                policy.pinnedPublicKeyHashes = Set(try list.map { (p: String) throws(PinError) in try PublicKeyPin(p) })
            } catch {
                throw CurlOptions.UsageError(description: "--pinnedpubkey: \(error)")
            }
            if mode == .certificate {
                throw CurlOptions.UsageError(
                    description: "--pinnedpubkey pins keys: use it with --pinning public-key, not certificate"
                )
            }
        }
        if mode == .certificate && pinnedCertificates.isEmpty {
            throw CurlOptions.UsageError(description: "--pinning certificate needs --pinned-cert FILE")
        }
        if mode == .publicKey && pinnedCertificates.isEmpty && policy.pinnedPublicKeyHashes.isEmpty {
            throw CurlOptions.UsageError(description: "--pinning public-key needs --pinned-cert FILE or --pinnedpubkey")
        }
        if o.allowInvalidCertificates { policy.allowInvalidCertificates = true }
        if !o.validatesDomainName { policy.validatesDomainName = false }
        if o.commonNameFallback { policy.allowsCommonNameFallback = true }
        if o.insecure {
            policy.allowInvalidCertificates = true
            policy.validatesDomainName = false
        }
        if o.certStatus || !o.crlFiles.isEmpty {
            // curl's rules: --cert-status needs a good staple; --crlfile checks every CA of the
            // chain (X509_V_FLAG_CRL_CHECK_ALL) and refuses a certificate without a CRL.
            policy.revocation = RevocationPolicy(
                mode: .strict,
                checksStapledOCSP: o.certStatus,
                crlFiles: o.crlFiles,
                checksWholeChain: true
            )
            do {
                try policy.revocation.loadCRLs()
            } catch {
                throw ToolFailure(ExitCode.sslCRLBadFile, "error loading CRL file: \(error.message)")
            }
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
            throw ToolFailure(5, "invalid proxy: \(error)")
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
        // An https:// proxy's own trust: the system store unless --proxy-cacert/--proxy-capath;
        // --proxy-insecure accepts anything (-k and --cacert are about origins only, as in curl).
        var anchors: [Certificate] = []
        do {
            if let path = o.proxyCACertPath { anchors += try Certificate.load(contentsOf: path) }
            if let dir = o.proxyCAPath { anchors += try Certificate.certificates(inDirectory: dir) }
        } catch {
            throw ToolFailure(77, "error setting the proxy's certificate verify locations: \(error)")
        }
        if o.proxyInsecure {
            var policy = SecurityPolicy(pinningMode: .none)
            policy.allowInvalidCertificates = true
            policy.validatesDomainName = false
            config.proxyTrustEvaluator = policy
        } else if !anchors.isEmpty {
            config.proxyTrustEvaluator = DefaultTrustEvaluator(anchors: .custom(anchors))
        }
    }

    static func fail(_ o: CurlOptions, _ code: Int32, _ message: String) -> Int32 {
        if !o.silent || o.showError {
            OutputFile.stderr.write("hawser: (\(code)) \(message)\n")
        }
        return code
    }

    /// curl's exit code for an engine error (see ``ExitCode``).
    static func exitCode(for e: HawserError) -> Int32 { ExitCode.forError(e) }
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
