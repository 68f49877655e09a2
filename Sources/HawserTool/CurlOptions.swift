// curl-compatible command-line options for `hawser get`.

/// What `hawser get` was asked to do.
struct CurlOptions {
    var url: String?
    var method: String?
    var headers: [(String, String)] = []
    var data: [UInt8]?
    var includeHead = false        // -i
    var headOnly = false           // -I
    var dumpHeaderPath: String?    // -D
    var outputPath: String?        // -o
    var silent = false             // -s
    var showError = false          // -S
    var verbose = false            // -v
    var maxTime: Double?           // --max-time
    var connectTimeout: Double?    // --connect-timeout
    var writeOut: String?          // -w
    var failOnError = false        // -f
    var followRedirects = false    // -L
    var compressed = false         // --compressed
    var cookieInput: String?       // -b FILE or NAME=VALUE
    var cookieJarPath: String?     // -c FILE
    // TLS
    var insecure = false           // -k
    var caCertPath: String?        // --cacert
    var caPath: String?            // --capath
    var pinnedPublicKey: String?   // --pinnedpubkey sha256//…;sha256//…
    var certPath: String?          // --cert FILE[:PASSWORD]
    var certType: String?          // --cert-type PEM|P12
    var keyPath: String?           // --key
    var tlsMinimum: TLSVersionOption?  // --tlsv1.2 / --tlsv1.3
    var tlsMaximum: String?        // --tls-max
    // Authentication and proxies
    var user: String?              // -u USER:PASSWORD
    var digest = false             // --digest (else --basic, curl's default)
    var proxy: String?             // -x / --proxy
    var proxyUser: String?         // --proxy-user
    var socks5Hostname: String?    // --socks5-hostname
    var noProxy: String?           // --noproxy
    var resume = false             // -C -
    var expect100Timeout: Double?  // --expect100-timeout

    enum TLSVersionOption: String { case tls12 = "1.2", tls13 = "1.3" }
    var maxRedirects: Int?         // --max-redirs

    /// Exit status for a usage error, as curl (CURLE_FAILED_INIT is 2 for bad options).
    static let usageExit: Int32 = 2

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    static let help = """
    Usage: hawser get URL [options]
      -X, --request METHOD       request method
      -H, --header 'Name: value' add a header (repeatable)
      -d, --data DATA            send DATA as the body (POST); @FILE reads FILE
      -i, --include              include the response head (and interim heads) in the output
      -I, --head                 send HEAD, print the head
      -D, --dump-header FILE     write response heads to FILE ('-' for stdout)
      -o, --output FILE          write the body to FILE
      -s, --silent               no progress bar, no error messages
      -S, --show-error           with -s, still print errors
      -v, --verbose              print request and response heads and timings to stderr
      -f, --fail                 exit 22 on HTTP status >= 400
      -L, --location             follow redirects (each redirect's head is shown with -i)
          --compressed           ask for gzip/deflate and decode the body
      -b, --cookie FILE|N=V      send cookies: from a Netscape cookie file (and turn the
                                 cookie engine on), or the literal NAME=VALUE[; …]
      -c, --cookie-jar FILE      write every cookie to FILE (Netscape format) at the end
      -k, --insecure             accept any server certificate (no chain or host check)
          --cacert FILE          trust the CA certificates in FILE (PEM) instead of the system's
          --capath DIR           trust the certificates in DIR (.pem .crt .cer .der)
          --pinnedpubkey PINS    sha256//BASE64[;sha256//BASE64…]: one must match a key in the chain
      -E, --cert FILE[:PASS]     client certificate (PEM, or PKCS#12 with --cert-type P12)
          --cert-type PEM|P12    the type of --cert
          --key FILE             the client certificate's private key (PEM)
          --tlsv1.2, --tlsv1.3   the lowest TLS version to use (default 1.2)
          --tls-max 1.2|1.3      the highest TLS version to use
      -u, --user USER:PASS       server credentials (Basic, sent at once, unless --digest)
          --basic, --digest      the authentication scheme for -u
      -x, --proxy [SCHEME://]HOST[:PORT]  proxy (http:// with CONNECT for https, socks5://, socks5h://)
      -U, --proxy-user USER:PASS proxy credentials
          --socks5-hostname HOST[:PORT]  SOCKS5 proxy that resolves host names
          --noproxy LIST         hosts that bypass the proxy (as no_proxy)
      -C -                       resume: ask for the rest of the -o file with Range
          --expect100-timeout S  how long to wait for 100 Continue (default 1)
    Proxies also come from http_proxy, https_proxy, all_proxy and no_proxy, as curl reads them.
          --max-redirs N         at most N redirects with -L (default 50 as curl; -1: no limit)
      -w, --write-out FORMAT     print FORMAT after the transfer: %{http_code} %{size_download}
                                 %{size_header} %{time_connect} %{time_starttransfer} %{time_total}
                                 %{num_connects} %{url_effective} %{content_type} %{remote_ip} %{remote_port}
          --max-time SECONDS     limit the whole transfer
          --connect-timeout S    limit connecting
    Exit status (curl's): 0 ok, 2 usage, 3 bad URL, 6 cannot resolve, 7 cannot connect,
      5 proxy, 8 invalid response, 22 HTTP error with -f, 33 range not supported, 35 TLS,
      47 too many redirects, 58 client certificate, 60 untrusted certificate, 61 bad encoding, 23 write error, 28 timeout, 52 empty reply, 56 connection lost.
    """

    static func parse(_ args: [String]) throws -> CurlOptions {
        var o = CurlOptions()
        var i = 0
        func value(_ flag: String) throws -> String {
            i += 1
            guard i < args.count else { throw UsageError(description: "option \(flag) needs a value") }
            return args[i]
        }
        while i < args.count {
            let a = args[i]
            switch a {
            case "-X", "--request": o.method = try value(a)
            case "-H", "--header":
                let h = try value(a)
                guard let colon = h.firstIndex(of: ":") else { throw UsageError(description: "header '\(h)' has no colon") }
                let name = String(h[..<colon])
                let v = String(h[h.index(after: colon)...]).drop(while: { $0 == " " || $0 == "\t" })
                o.headers.append((name, String(v)))
            case "-d", "--data", "--data-binary", "--data-raw":
                let d = try value(a)
                if d.hasPrefix("@") && a != "--data-raw" {
                    o.data = try FileIO.readAll(path: String(d.dropFirst()))
                } else {
                    o.data = Array(d.utf8)
                }
            case "-i", "--include": o.includeHead = true
            case "-I", "--head": o.headOnly = true
            case "-D", "--dump-header": o.dumpHeaderPath = try value(a)
            case "-o", "--output": o.outputPath = try value(a)
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
            case "-E", "--cert": o.certPath = try value(a)
            case "--cert-type": o.certType = try value(a).uppercased()
            case "--key": o.keyPath = try value(a)
            case "--tlsv1.2": o.tlsMinimum = .tls12
            case "--tlsv1.3": o.tlsMinimum = .tls13
            case "--tls-max":
                let v = try value(a)
                guard v == "1.2" || v == "1.3" else { throw UsageError(description: "--tls-max takes 1.2 or 1.3, not '\(v)'") }
                o.tlsMaximum = v
            case "-u", "--user": o.user = try value(a)
            case "--basic": o.digest = false
            case "--digest": o.digest = true
            case "-x", "--proxy": o.proxy = try value(a)
            case "-U", "--proxy-user": o.proxyUser = try value(a)
            case "--socks5-hostname": o.socks5Hostname = try value(a)
            case "--noproxy": o.noProxy = try value(a)
            case "-C", "--continue-at":
                let v = try value(a)
                guard v == "-" else { throw UsageError(description: "-C takes '-' (resume where the output file ends), not '\(v)'") }
                o.resume = true
            case "--expect100-timeout":
                let v = try value(a)
                guard let t = Double(v), t >= 0 else { throw UsageError(description: "\(a) needs a number of seconds, not '\(v)'") }
                o.expect100Timeout = t
            case "-b", "--cookie": o.cookieInput = try value(a)
            case "-c", "--cookie-jar": o.cookieJarPath = try value(a)
            case "--max-redirs":
                let v = try value(a)
                guard let n = Int(v), n >= -1 else { throw UsageError(description: "--max-redirs needs a number, not '\(v)'") }
                o.maxRedirects = n

            case "-w", "--write-out": o.writeOut = try value(a)
            case "--max-time", "-m":
                let v = try value(a)
                guard let t = Double(v), t > 0 else { throw UsageError(description: "\(a) needs a positive number, not '\(v)'") }
                o.maxTime = t
            case "--connect-timeout":
                let v = try value(a)
                guard let t = Double(v), t > 0 else { throw UsageError(description: "\(a) needs a positive number, not '\(v)'") }
                o.connectTimeout = t
            default:
                if a.hasPrefix("-") && a.count > 2 && !a.hasPrefix("--") {
                    // Combined short flags: -sS, -iv …
                    var expanded: [String] = []
                    for ch in a.dropFirst() { expanded.append("-\(ch)") }
                    let known: Set<String> = ["-i", "-I", "-s", "-S", "-v", "-f", "-L", "-k"]
                    if let bad = expanded.first(where: { !known.contains($0) }) {
                        throw UsageError(description: "unknown option '\(bad)' in '\(a)'")
                    }
                    for e in expanded { _ = try Self.parse([e]).apply(to: &o) }
                } else if a.hasPrefix("-") && a != "-" {
                    throw UsageError(description: "unknown option '\(a)'")
                } else if o.url == nil {
                    o.url = a
                } else {
                    throw UsageError(description: "more than one URL given ('\(o.url!)' and '\(a)')")
                }
            }
            i += 1
        }
        return o
    }

    /// Merges the boolean flags of `self` into `o` (for combined short flags).
    func apply(to o: inout CurlOptions) -> Bool {
        if self.includeHead { o.includeHead = true }
        if self.headOnly { o.headOnly = true }
        if self.silent { o.silent = true }
        if self.showError { o.showError = true }
        if self.verbose { o.verbose = true }
        if self.failOnError { o.failOnError = true }
        if self.followRedirects { o.followRedirects = true }
        if self.insecure { o.insecure = true }
        return true
    }
}
