// curl-compatible command-line options for `hawser get`.

/// What `hawser get` was asked to do.
struct CurlOptions {
    var url: String?
    var method: String?
    /// -H in order; an empty value with a colon (`Name:`) removes the field, as curl's does.
    var headers: [(String, String)] = []
    /// -H 'Name;': sent with an empty value.
    var emptyHeaders: [String] = []
    /// -d / --data-binary / --data-raw, joined with `&` as curl joins them.
    var data: [UInt8]?
    /// --json, concatenated as curl concatenates it.
    var json: [UInt8]?
    /// -d @FILE that could not be read: curl warns and sends what it has.
    var dataWarnings: [String] = []
    var includeHead = false  // -i
    var headOnly = false  // -I
    var dumpHeaderPath: String?  // -D
    var outputPath: String?  // -o
    var remoteName = false  // -O
    var silent = false  // -s
    var showError = false  // -S
    var verbose = false  // -v
    var maxTime: Double?  // --max-time
    var connectTimeout: Double?  // --connect-timeout
    var writeOut: String?  // -w
    var failOnError = false  // -f
    var followRedirects = false  // -L
    var compressed = false  // --compressed
    var cookieInput: String?  // -b FILE or NAME=VALUE
    var cookieJarPath: String?  // -c FILE
    var userAgent: String?  // -A
    var referer: String?  // -e
    var getWithData = false  // -G
    var uploadPath: String?  // -T FILE ('-' for stdin)
    var forms: [String] = []  // -F
    // Retries
    var retry = 0  // --retry N
    var retryDelay: Double?  // --retry-delay S
    var retryMaxTime: Double?  // --retry-max-time S
    var retryConnectionRefused = false  // --retry-connrefused
    /// --retry-all-errors: retry every failure (an HTTP error only with -f), non-idempotent
    /// methods included, as curl's does.
    var retryAllErrors = false
    // Transfer
    var limitRate: Int64?  // --limit-rate
    var unixSocket: String?  // --unix-socket PATH
    var resolve: [ResolveEntry] = []  // --resolve HOST:PORT:ADDRESS[,ADDRESS…]
    // TLS
    var insecure = false  // -k
    var caCertPath: String?  // --cacert
    var caPath: String?  // --capath
    var pinnedPublicKey: String?  // --pinnedpubkey sha256//…;sha256//…
    var pinning: PinningOption?  // --pinning
    var pinnedCertificatePaths: [String] = []  // --pinned-cert
    var allowInvalidCertificates = false  // --allow-invalid-certificates
    var validatesDomainName = true  // --no-validate-domain-name
    /// --cn-fallback: accept a leaf that names the host only in its subject's common name (no
    /// DNS subjectAltName), as `SecurityPolicy.allowsCommonNameFallback`.
    var commonNameFallback = false
    /// --cert-status: require a stapled OCSP response saying the certificate is good.
    var certStatus = false
    var crlFiles: [String] = []  // --crlfile FILE (repeatable)
    var certPath: String?  // --cert FILE[:PASSWORD]
    var certType: String?  // --cert-type PEM|P12
    var keyPath: String?  // --key
    var tlsMinimum: TLSVersionOption?  // --tlsv1.2 / --tlsv1.3
    var tlsMaximum: String?  // --tls-max
    // Authentication and proxies
    var user: String?  // -u USER:PASSWORD
    var digest = false  // --digest (else --basic, curl's default)
    var proxy: String?  // -x / --proxy
    var proxyUser: String?  // --proxy-user
    var socks5Hostname: String?  // --socks5-hostname
    var noProxy: String?  // --noproxy
    var proxyCACertPath: String?  // --proxy-cacert
    var proxyCAPath: String?  // --proxy-capath
    var proxyInsecure = false  // --proxy-insecure
    var resume = false  // -C -
    var expect100Timeout: Double?  // --expect100-timeout

    enum TLSVersionOption: String {
        case tls12 = "1.2"
        case tls13 = "1.3"
    }
    enum PinningOption: String {
        case none
        case publicKey = "public-key"
        case certificate
    }
    var maxRedirects: Int?  // --max-redirs

    /// One --resolve entry: connections to HOST:PORT go to these addresses.
    struct ResolveEntry: Equatable {
        var host: String
        var port: Int
        var addresses: [String]
    }

    /// Exit status for a usage error, as curl (CURLE_FAILED_INIT is 2 for bad options).
    static let usageExit: Int32 = 2

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    static let help = """
        Usage: hawser get URL [options]
          -X, --request METHOD       request method
          -H, --header 'Name: value' add a header (repeatable); 'Name:' removes one, 'Name;' sends it empty
          -A, --user-agent STRING    the User-Agent field
          -e, --referer URL          the Referer field
          -d, --data DATA            send DATA as the body (POST); @FILE reads FILE (without newlines);
                                     repeated -d are joined with '&'
              --data-binary DATA     as -d, @FILE sent as it is; --data-raw: no @FILE
              --json DATA            POST DATA with Content-Type and Accept application/json
          -G, --get                  put the -d data in the URL's query and send GET
          -F, --form NAME=VALUE      a multipart/form-data field; NAME=@FILE a file part (streamed),
                                     NAME=<FILE a field from FILE; ;type=MIME ;filename=NAME
          -T, --upload-file FILE     PUT FILE, streamed ('-' for stdin, chunked); a URL ending in '/'
                                     gets the file's name
          -i, --include              include the response head (and interim heads) in the output
          -I, --head                 send HEAD, print the head
          -D, --dump-header FILE     write response heads to FILE ('-' for stdout)
          -o, --output FILE          write the body to FILE
          -O, --remote-name          write the body to the URL's file name, in this directory
          -s, --silent               no progress meter, no error messages
          -S, --show-error           with -s, still print errors
          -v, --verbose              what went on the wire: connection, TLS and certificate, the request
                                     head as sent and the response heads, on stderr
          -f, --fail                 exit 22 on HTTP status >= 400
          -L, --location             follow redirects (each redirect's head is shown with -i)
              --max-redirs N         at most N redirects with -L (default 50 as curl; -1: no limit)
              --compressed           ask for gzip/deflate/br/zstd and decode the body
          -b, --cookie FILE|N=V      send cookies: from a Netscape cookie file (and turn the
                                     cookie engine on), or the literal NAME=VALUE[; …]
          -c, --cookie-jar FILE      write every cookie to FILE (Netscape format) at the end
              --retry N              retry a transient failure N times (timeouts, 408 429 500 502 503
                                     504, a name that did not resolve); idempotent methods only
              --retry-all-errors     with --retry: retry on any error (an HTTP status >= 400 only with
                                     -f), and retry POST and other non-idempotent requests too
              --retry-delay S        wait S seconds between retries (default: 1, doubling to 600);
                                     0 retries at once (curl's 0 means its default)
              --retry-max-time S     no retry after S seconds
              --retry-connrefused    also retry a refused connection
              --limit-rate RATE      receive and send at most RATE bytes a second (K, M, G suffixes),
                                     each transfer on its own, head bytes included
              --unix-socket PATH     connect to the Unix domain socket PATH instead of the URL's host
              --resolve H:P:ADDR     connect to ADDR (an IP address; several: A1,A2) for host H port P;
                                     Host, SNI and the certificate check keep the name H (repeatable)
          -k, --insecure             accept any server certificate (no chain or host check)
              --cacert FILE          trust the CA certificates in FILE (PEM) instead of the system's
              --capath DIR           trust the certificates in DIR (.pem .crt .cer .der)
              --pinnedpubkey PINS    sha256//BASE64[;sha256//BASE64…]: one must match a key in the chain
              --pinning MODE         none | public-key | certificate (AFSecurityPolicy's pinning modes)
              --pinned-cert FILE     a certificate to pin, DER or PEM (repeatable); alone it means
                                     --pinning certificate
              --allow-invalid-certificates  accept chains that do not verify (a pin must still match)
              --no-validate-domain-name     do not check that the certificate names the host
              --cn-fallback          accept a certificate that names the host only in its subject's
                                     common name (no DNS subjectAltName; never for an IP address)
              --cert-status          require the server to staple an OCSP response saying its
                                     certificate is good (signed by its issuer, current)
              --crlfile FILE         refuse certificates revoked by the CRLs in FILE (PEM or DER,
                                     repeatable); every CA of the chain needs a CRL there
          -E, --cert FILE[:PASS]     client certificate (PEM, or PKCS#12 with --cert-type P12)
              --cert-type PEM|P12    the type of --cert
              --key FILE             the client certificate's private key (PEM)
              --tlsv1.2, --tlsv1.3   the lowest TLS version to use (default 1.2)
              --tls-max 1.2|1.3      the highest TLS version to use
          -u, --user USER:PASS       server credentials (Basic, sent at once, unless --digest)
              --basic, --digest      the authentication scheme for -u
          -x, --proxy [SCHEME://]HOST[:PORT]  proxy (http:// with CONNECT for https, https:// over TLS,
                                     socks5://, socks5h://)
          -U, --proxy-user USER:PASS proxy credentials
              --proxy-cacert FILE    trust the CA certificates in FILE (PEM) for an https:// proxy
              --proxy-capath DIR     trust the certificates in DIR for an https:// proxy
              --proxy-insecure       accept any certificate from an https:// proxy (not the origin's)
              --socks5-hostname HOST[:PORT]  SOCKS5 proxy that resolves host names
              --noproxy LIST         hosts that bypass the proxy (as no_proxy)
        Proxies also come from http_proxy, https_proxy, all_proxy and no_proxy, as curl reads them.
          -C -                       resume: ask for the rest of the -o file with Range
              --expect100-timeout S  how long to wait for 100 Continue (default 1)
          -w, --write-out FORMAT     print FORMAT after the transfer (@FILE reads it): %{http_code}
                                     %{http_version} %{size_download} %{size_upload} %{size_header}
                                     %{speed_download} %{speed_upload} %{time_namelookup} %{time_connect}
                                     %{time_appconnect} %{time_pretransfer} %{time_starttransfer}
                                     %{time_redirect} %{time_total} %{num_connects} %{num_redirects}
                                     %{url_effective} %{content_type} %{remote_ip} %{remote_port}
                                     %{scheme} %{method} %{ssl_verify_result} %{errormsg} %{exitcode}
                                     %{url} %{num_headers} %{filename_effective};
                                     %{json}: all of these as one JSON object (curl's names and types);
                                     %{header_json}: the last response's fields as a JSON object
          -m, --max-time SECONDS     limit the whole transfer
              --connect-timeout S    limit connecting
        Exit status (curl's): 0 ok, 1 unsupported protocol, 2 usage, 3 malformed URL, 5 proxy,
          6 cannot resolve, 7 cannot connect, 8 weird server reply, 18 partial body, 22 HTTP error
          with -f, 23 write error, 26 read error, 28 timeout, 33 range not supported, 35 TLS handshake,
          47 too many redirects, 52 empty reply, 55 send error, 56 receive failure, 58 client
          certificate, 60 untrusted certificate, 61 bad content encoding, 63 size limit,
          82 unusable --crlfile, 90 pinned key or certificate did not match, 91 no good stapled
          OCSP response (--cert-status).
        """

    /// Short flags that take a value: in a cluster (`-sSo FILE`, `-XPUT`) the rest of the cluster,
    /// or else the next argument, is the value.
    static let shortWithValue: Set<Character> = [
        "X", "H", "A", "e", "d", "F", "T", "D", "o", "w", "b", "c", "E", "u",
        "x", "U", "C", "m",
    ]
    static let shortBoolean: Set<Character> = ["i", "I", "s", "S", "v", "f", "L", "k", "G", "O"]

    static func parse(_ args: [String]) throws -> CurlOptions {
        var o = CurlOptions()
        // Expand short-flag clusters first: -sSfL, -XPUT, -sSo FILE.
        var expanded: [String] = []
        var i = 0
        while i < args.count {
            let a = args[i]
            i += 1
            guard a.count > 2, a.hasPrefix("-"), !a.hasPrefix("--") else {
                expanded.append(a)
                // The value of a flag is never re-read as a flag.
                if a.count == 2, let c = a.last, a.first == "-", shortWithValue.contains(c), i < args.count {
                    expanded.append(args[i])
                    i += 1
                } else if a.hasPrefix("--"), Self.longWithValue.contains(a), i < args.count {
                    expanded.append(args[i])
                    i += 1
                }
                continue
            }
            var rest = a.dropFirst()
            while let c = rest.first {
                rest = rest.dropFirst()
                if shortWithValue.contains(c) {
                    expanded.append("-\(c)")
                    if !rest.isEmpty {
                        expanded.append(String(rest))
                    } else if i < args.count {
                        expanded.append(args[i])
                        i += 1
                    }
                    break
                }
                guard shortBoolean.contains(c) else {
                    throw UsageError(description: "unknown option '-\(c)' in '\(a)'")
                }
                expanded.append("-\(c)")
            }
        }

        i = 0
        let args = expanded
        func value(_ flag: String) throws -> String {
            i += 1
            guard i < args.count else { throw UsageError(description: "option \(flag) needs a value") }
            return args[i]
        }
        func seconds(_ flag: String, allowZero: Bool = false) throws -> Double {
            let v = try value(flag)
            guard let t = Double(v), allowZero ? t >= 0 : t > 0, t.isFinite else {
                throw UsageError(
                    description:
                        "\(flag) needs a \(allowZero ? "non-negative" : "positive") number of seconds, not '\(v)'"
                )
            }
            return t
        }
        while i < args.count {
            let a = args[i]
            switch a {
            case "-X", "--request": o.method = try value(a)
            case "-H", "--header":
                let h = try value(a)
                if let colon = h.firstIndex(of: ":") {
                    let name = String(h[..<colon])
                    let v = String(h[h.index(after: colon)...]).drop(while: { $0 == " " || $0 == "\t" })
                    guard !name.isEmpty else { throw UsageError(description: "header '\(h)' has no name") }
                    o.headers.append((name, String(v)))
                } else if h.hasSuffix(";"), h.count > 1 {
                    // curl: 'Name;' sends the field with an empty value.
                    o.emptyHeaders.append(String(h.dropLast()))
                } else {
                    throw UsageError(description: "header '\(h)' has no colon")
                }
            case "-A", "--user-agent": o.userAgent = try value(a)
            case "-e", "--referer": o.referer = try value(a)
            case "-d", "--data", "--data-ascii", "--data-binary", "--data-raw":
                let d = try value(a)
                var piece: [UInt8]
                if d.hasPrefix("@") && a != "--data-raw" {
                    let path = String(d.dropFirst())
                    do {
                        piece = path == "-" ? try FileIO.readAll(fd: 0, name: "stdin") : try FileIO.readAll(path: path)
                        // curl's -d strips CR and LF from a file; --data-binary keeps them.
                        if a != "--data-binary" { piece.removeAll { $0 == 0x0A || $0 == 0x0D } }
                    } catch {
                        o.dataWarnings.append("Couldn't read data from file \"\(path)\", this makes an empty POST.")
                        piece = []
                    }
                } else {
                    piece = Array(d.utf8)
                }
                if var existing = o.data {
                    existing.append(UInt8(ascii: "&"))
                    existing += piece
                    o.data = existing
                } else {
                    o.data = piece
                }
            case "--json":
                let d = try value(a)
                var piece: [UInt8]
                if d.hasPrefix("@") {
                    let path = String(d.dropFirst())
                    do {
                        piece = path == "-" ? try FileIO.readAll(fd: 0, name: "stdin") : try FileIO.readAll(path: path)
                    } catch {
                        o.dataWarnings.append("Couldn't read data from file \"\(path)\", this makes an empty POST.")
                        piece = []
                    }
                } else {
                    piece = Array(d.utf8)
                }
                o.json = (o.json ?? []) + piece
            case "-G", "--get": o.getWithData = true
            case "-F", "--form": o.forms.append(try value(a))
            case "-T", "--upload-file": o.uploadPath = try value(a)
            case "-i", "--include": o.includeHead = true
            case "-I", "--head": o.headOnly = true
            case "-D", "--dump-header": o.dumpHeaderPath = try value(a)
            case "-o", "--output": o.outputPath = try value(a)
            case "-O", "--remote-name": o.remoteName = true
            case "-s", "--silent": o.silent = true
            case "-S", "--show-error": o.showError = true
            case "-v", "--verbose": o.verbose = true
            case "-f", "--fail": o.failOnError = true
            case "-L", "--location": o.followRedirects = true
            case "--compressed": o.compressed = true
            case "-k", "--insecure": o.insecure = true
            case "--cacert": o.caCertPath = try value(a)
            case "--capath": o.caPath = try value(a)
            case "--pinnedpubkey": o.pinnedPublicKey = try value(a)
            case "--pinning":
                let v = try value(a)
                guard let mode = PinningOption(rawValue: v) else {
                    throw UsageError(description: "--pinning takes none, public-key or certificate, not '\(v)'")
                }
                o.pinning = mode
            case "--pinned-cert": o.pinnedCertificatePaths.append(try value(a))
            case "--allow-invalid-certificates": o.allowInvalidCertificates = true
            case "--no-validate-domain-name": o.validatesDomainName = false
            case "--cn-fallback": o.commonNameFallback = true
            case "--cert-status": o.certStatus = true
            case "--crlfile": o.crlFiles.append(try value(a))
            case "-E", "--cert": o.certPath = try value(a)
            case "--cert-type": o.certType = try value(a).uppercased()
            case "--key": o.keyPath = try value(a)
            case "--tlsv1.2": o.tlsMinimum = .tls12
            case "--tlsv1.3": o.tlsMinimum = .tls13
            case "--tls-max":
                let v = try value(a)
                guard v == "1.2" || v == "1.3" else {
                    throw UsageError(description: "--tls-max takes 1.2 or 1.3, not '\(v)'")
                }
                o.tlsMaximum = v
            case "-u", "--user": o.user = try value(a)
            case "--basic": o.digest = false
            case "--digest": o.digest = true
            case "-x", "--proxy": o.proxy = try value(a)
            case "-U", "--proxy-user": o.proxyUser = try value(a)
            case "--socks5-hostname": o.socks5Hostname = try value(a)
            case "--noproxy": o.noProxy = try value(a)
            case "--proxy-cacert": o.proxyCACertPath = try value(a)
            case "--proxy-capath": o.proxyCAPath = try value(a)
            case "--proxy-insecure": o.proxyInsecure = true
            case "-C", "--continue-at":
                let v = try value(a)
                guard v == "-" else {
                    throw UsageError(description: "-C takes '-' (resume where the output file ends), not '\(v)'")
                }
                o.resume = true
            case "--expect100-timeout": o.expect100Timeout = try seconds(a, allowZero: true)
            case "-b", "--cookie": o.cookieInput = try value(a)
            case "-c", "--cookie-jar": o.cookieJarPath = try value(a)
            case "--max-redirs":
                let v = try value(a)
                guard let n = Int(v), n >= -1 else {
                    throw UsageError(description: "--max-redirs needs a number, not '\(v)'")
                }
                o.maxRedirects = n
            case "--retry":
                let v = try value(a)
                guard let n = Int(v), n >= 0 else {
                    throw UsageError(description: "--retry needs a number of retries, not '\(v)'")
                }
                o.retry = n
            case "--retry-delay": o.retryDelay = try seconds(a, allowZero: true)
            case "--retry-max-time": o.retryMaxTime = try seconds(a, allowZero: true)
            case "--retry-connrefused": o.retryConnectionRefused = true
            case "--retry-all-errors": o.retryAllErrors = true
            case "--no-retry-all-errors": o.retryAllErrors = false
            case "--limit-rate":
                let v = try value(a)
                guard let rate = Self.rate(v) else {
                    throw UsageError(description: "--limit-rate needs bytes per second (e.g. 100K, 2M), not '\(v)'")
                }
                o.limitRate = rate > 0 ? rate : nil
            case "--unix-socket": o.unixSocket = try value(a)
            case "--resolve": o.resolve.append(try Self.resolveEntry(try value(a)))
            case "-w", "--write-out": o.writeOut = try value(a)
            case "--max-time", "-m": o.maxTime = try seconds(a)
            case "--connect-timeout": o.connectTimeout = try seconds(a)
            default:
                if a.hasPrefix("-") && a != "-" {
                    throw UsageError(description: "unknown option '\(a)'")
                } else if o.url == nil {
                    o.url = a
                } else {
                    throw UsageError(description: "more than one URL given ('\(o.url!)' and '\(a)')")
                }
            }
            i += 1
        }
        if o.forms.count > 0 && (o.data != nil || o.json != nil) {
            throw UsageError(
                description:
                    "-F cannot be combined with -d or --json (curl: \"You can only select one HTTP request method!\")"
            )
        }
        if o.uploadPath != nil && (o.data != nil || o.json != nil || !o.forms.isEmpty) {
            throw UsageError(description: "-T cannot be combined with -d, --json or -F")
        }
        return o
    }

    /// Long flags that take a value (so a value that starts with '-' is not read as a flag).
    static let longWithValue: Set<String> = [
        "--request", "--header", "--user-agent", "--referer", "--data", "--data-ascii", "--data-binary", "--data-raw",
        "--json", "--form", "--upload-file", "--dump-header", "--output", "--cacert", "--capath", "--pinnedpubkey",
        "--pinning", "--pinned-cert", "--crlfile", "--cert", "--cert-type", "--key", "--tls-max", "--user", "--proxy",
        "--proxy-user",
        "--socks5-hostname", "--noproxy", "--proxy-cacert", "--proxy-capath", "--continue-at", "--expect100-timeout",
        "--cookie", "--cookie-jar",
        "--max-redirs", "--retry", "--retry-delay", "--retry-max-time", "--limit-rate", "--unix-socket", "--resolve",
        "--write-out", "--max-time", "--connect-timeout",
    ]

    /// curl's rate syntax: a number of bytes, or with K, M or G (powers of 1024), either case.
    static func rate(_ s: String) -> Int64? {
        var digits = Substring(s)
        var unit: Int64 = 1
        switch digits.last {
        case "k", "K": unit = 1024
        case "m", "M": unit = 1024 * 1024
        case "g", "G": unit = 1024 * 1024 * 1024
        default: break
        }
        if unit > 1 { digits = digits.dropLast() }
        guard let n = Double(digits), n >= 0, n.isFinite, n * Double(unit) < 9e18 else { return nil }
        return Int64(n * Double(unit))
    }

    /// `HOST:PORT:ADDRESS[,ADDRESS…]`, addresses possibly in brackets (IPv6).
    static func resolveEntry(_ s: String) throws -> ResolveEntry {
        let bad = UsageError(description: "--resolve takes HOST:PORT:ADDRESS[,ADDRESS…], not '\(s)'")
        guard let c1 = s.firstIndex(of: ":") else { throw bad }
        let host = String(s[..<c1])
        let afterHost = s[s.index(after: c1)...]
        guard let c2 = afterHost.firstIndex(of: ":"), let port = Int(afterHost[..<c2]), (1...65535).contains(port),
            !host.isEmpty
        else { throw bad }
        let addresses = afterHost[afterHost.index(after: c2)...].split(separator: ",").map { a -> String in
            var a = a.trimmingPrefix(" ")
            if a.hasPrefix("["), a.hasSuffix("]") { a = a.dropFirst().dropLast() }
            return String(a)
        }
        guard !addresses.isEmpty, addresses.allSatisfy({ !$0.isEmpty }) else { throw bad }
        return ResolveEntry(host: host.lowercased(), port: port, addresses: addresses)
    }
}
