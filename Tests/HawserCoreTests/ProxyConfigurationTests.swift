import Foundation
import HawserCore
import Testing

@Suite("Proxy configuration (curl's rules)")
struct ProxyConfigurationTests {
    @Test("proxy strings: default scheme http, default ports 1080 (443 for https), userinfo percent-decoded")
    func parsing() throws {
        let plain = try ProxyServer(parsing: "proxy.local")
        #expect(plain.kind == .http && plain.host == "proxy.local" && plain.port == 1080 && plain.credentials == nil)
        let https = try ProxyServer(parsing: "HTTPS://proxy.local/")
        #expect(https.kind == .https && https.port == 443)
        let socks = try ProxyServer(parsing: "socks5://10.0.0.1:9050")
        #expect(socks.kind == .socks5(remoteDNS: false) && socks.port == 9050)
        let socksh = try ProxyServer(parsing: "socks5h://[::1]:1081")
        #expect(socksh.kind == .socks5(remoteDNS: true) && socksh.host == "::1" && socksh.port == 1081)
        let auth = try ProxyServer(parsing: "http://us%40er:p%3Ass:word@proxy:3128")
        #expect(auth.credentials == ProxyCredentials(user: "us@er", password: "p:ss:word"))
        #expect(auth.port == 3128)
        #expect(auth.description == "http://proxy:3128")  // never the password
        #expect(
            ProxyCredentials(user: "Aladdin", password: "open sesame").basicAuthorization
                == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        )
    }

    @Test(
        "bad proxy strings are errors that say what was wrong",
        arguments: [
            ("ftp://proxy", "unsupported proxy scheme"),
            ("socks4://proxy", "SOCKS4"),
            ("http://proxy:99999", "bad port"),
            ("http://proxy:12ab", "bad port"),
            ("http://:8080", "no host"),
            ("http://[::1", "unterminated"),
            ("http://u%zz@proxy", "percent-encoding"),
            ("", "empty"),
        ]
    )
    func badStrings(_ input: String, _ expected: String) {
        do {
            _ = try ProxyServer(parsing: input)
            Issue.record("'\(input)' was accepted")
        } catch {
            #expect(error.message.contains(expected), "\(error.message)")
        }
    }

    @Test(
        "environment: http_proxy only in lower case; HTTPS_PROXY and ALL_PROXY in either, lower case first; empty is unset"
    )
    func environment() throws {
        let upperOnly = try ProxyConfiguration.fromEnvironment(["HTTP_PROXY": "http://evil:1"])
        #expect(upperOnly.httpProxy == nil)
        #expect(try upperOnly.proxy(for: URL(string: "http://example.com/")!) == nil)

        let both = try ProxyConfiguration.fromEnvironment([
            "http_proxy": "http://h:1", "https_proxy": "http://lower:2", "HTTPS_PROXY": "http://upper:3",
            "ALL_PROXY": "socks5h://all:4",
        ])
        #expect(both.httpProxy?.host == "h")
        #expect(both.httpsProxy?.host == "lower")
        #expect(both.allProxy?.host == "all")
        let upperHTTPS = try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": "upper:3"])
        #expect(upperHTTPS.httpsProxy?.host == "upper")
        let emptyLower = try ProxyConfiguration.fromEnvironment([
            "https_proxy": "", "HTTPS_PROXY": "upper:3", "all_proxy": "",
        ])
        #expect(emptyLower.httpsProxy?.host == "upper")
        #expect(emptyLower.allProxy == nil)
        let noProxy = try ProxyConfiguration.fromEnvironment(["no_proxy": "a.com", "NO_PROXY": "b.com"])
        #expect(noProxy.bypass.rawValue == "a.com")
        let upperNoProxy = try ProxyConfiguration.fromEnvironment(["NO_PROXY": "b.com"])
        #expect(upperNoProxy.bypass.rawValue == "b.com")
    }

    @Test("a bad proxy variable is an error naming the variable")
    func badEnvironment() {
        do {
            _ = try ProxyConfiguration.fromEnvironment(["all_proxy": "gopher://x"])
            Issue.record("accepted")
        } catch {
            #expect(error.message.hasPrefix("all_proxy: "))
        }
    }

    @Test(
        "init(environment:) records a variable it cannot parse, naming it; proxy(for:) throws it only where it applies"
    )
    func unparsableVariables() throws {
        let config = ProxyConfiguration(environment: [
            "HTTPS_PROXY": "socks4://u:pw@old:1080", "http_proxy": "http://web:3128", "no_proxy": "intranet",
        ])
        #expect(config.httpsProxy == nil && config.httpProxy?.host == "web")
        let error = try #require(config.invalidSettings[.https])
        #expect(error.variable == "HTTPS_PROXY")
        #expect(
            error.message
                == "HTTPS_PROXY: proxy 'socks4://u:***@old:1080': SOCKS4 is not supported (use socks5:// or socks5h://)"
        )
        #expect(config.invalidSettings[.http] == nil && config.invalidSettings[.all] == nil)
        #expect(throws: error) { try config.proxy(for: URL(string: "https://example.com/")!) }
        // Not for the URLs it would not serve: http (its own proxy), a bypassed host, other schemes.
        #expect(try config.proxy(for: URL(string: "http://example.com/")!)?.server.host == "web")
        #expect(try config.proxy(for: URL(string: "https://intranet/")!) == nil)
        #expect(try config.proxy(for: URL(string: "ftp://example.com/")!) == nil)
        // fromEnvironment is strict: it throws the same error.
        #expect(throws: error) { try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": "socks4://u:pw@old:1080"]) }

        // A bad all_proxy matters only where the scheme has no proxy of its own.
        let fallback = ProxyConfiguration(environment: ["all_proxy": "http://proxy:0", "https_proxy": "https://ok:443"])
        #expect(fallback.invalidSettings[.all]?.variable == "all_proxy")
        #expect(try fallback.proxy(for: URL(string: "https://example.com/")!)?.server.host == "ok")
        #expect(throws: ProxyConfigurationError.self) { try fallback.proxy(for: URL(string: "http://example.com/")!) }
        // A bad scheme variable is not replaced by a good all_proxy (curl uses the variable that is set).
        let shadowed = ProxyConfiguration(environment: ["https_proxy": "nope://x", "all_proxy": "http://all:3128"])
        #expect(throws: ProxyConfigurationError.self) { try shadowed.proxy(for: URL(string: "https://example.com/")!) }
        #expect(try shadowed.proxy(for: URL(string: "http://example.com/")!)?.server.host == "all")
        // An explicit setting wins over a recorded error.
        var fixed = shadowed
        fixed.httpsProxy = ProxyServer(kind: .http, host: "fixed", port: 3128)
        #expect(try fixed.proxy(for: URL(string: "https://example.com/")!)?.server.host == "fixed")
    }

    @Test("messages about a proxy string never show its password")
    func passwordsRedacted() {
        for (input, shown) in [
            ("ftp://user:secret@proxy:1", "ftp://user:***@proxy:1"),
            ("http://user:secret@proxy:99999/x", "http://user:***@proxy:99999/x"),
            ("user:p@ss:word@proxy:12ab", "user:***@proxy:12ab"),
        ] {
            do {
                _ = try ProxyServer(parsing: input)
                Issue.record("'\(input)' was accepted")
            } catch {
                #expect(error.message.contains("'\(shown)'"), "\(error.message)")
                #expect(!error.message.contains("secret") && !error.message.contains("p@ss"))
            }
        }
    }

    @Test("which proxy for which URL: scheme-specific first, then all_proxy; CONNECT for https; none for other schemes")
    func selection() throws {
        let config = try ProxyConfiguration.fromEnvironment([
            "http_proxy": "http://web:3128", "all_proxy": "socks5://all:1080", "no_proxy": "internal.example",
        ])
        let http = try config.proxy(for: URL(string: "http://example.com/a")!)
        #expect(http?.server.host == "web" && http?.mode == .forward && http?.port == 80 && http?.host == "example.com")
        let https = try config.proxy(for: URL(string: "https://example.com:8443/")!)
        #expect(https?.server.host == "all" && https?.mode == .socks5(remoteDNS: false) && https?.port == 8443)
        #expect(try config.proxy(for: URL(string: "http://api.internal.example/")!) == nil)
        #expect(try config.proxy(for: URL(string: "ftp://example.com/")!) == nil)

        let tunnel = try ProxyConfiguration.fromEnvironment(["https_proxy": "http://web:3128"])
        #expect(try tunnel.proxy(for: URL(string: "https://example.com/")!)?.mode == .connectTunnel)
        #expect(try tunnel.proxy(for: URL(string: "http://example.com/")!) == nil)  // no http_proxy, no all_proxy
        let v6 = try tunnel.proxy(for: URL(string: "https://[2001:db8::1]:444/")!)
        #expect(v6?.host == "2001:db8::1" && v6?.port == 444)
    }

    // host, no_proxy, bypassed? — each row as curl's Curl_check_noproxy decides it.
    static let noProxyTable: [(String, String, Bool)] = [
        ("example.com", "example.com", true),
        ("www.example.com", "example.com", true),
        ("www.example.com", ".example.com", true),
        ("example.com", ".example.com", true),  // a leading dot is ignored
        ("notexample.com", "example.com", false),
        ("example.com.org", "example.com", false),
        ("EXAMPLE.com", "example.COM", true),
        ("example.com.", "example.com", true),  // trailing dots ignored on both sides
        ("example.com", "example.com.", true),
        ("a.com", "b.com, a.com", true),
        ("a.com", "b.com,,, a.com ,c.com", true),
        ("a.com", "b.com a.com", false),  // blanks end an entry; without a comma the list ends
        ("anything.test", "*", true),
        ("anything.test", "*,b.com", false),  // only the whole list "*" is the wildcard
        ("anything.test", "", false),
        ("192.168.1.7", "192.168.0.0/16", true),
        ("192.169.1.7", "192.168.0.0/16", false),
        ("10.1.2.3", "10.1.2.3", true),
        ("10.1.2.3", "10.1.2.4", false),
        ("10.1.2.3", "10.1.2.0/0", false),  // /0 means an exact match in curl
        ("10.1.2.3", "10.1.2.0/33", false),
        ("10.1.2.3", "10.0.0.0/8", true),
        ("10.1.2.3", "10.1.2.3.example", false),
        ("[::1]", "::1", true),
        ("::1", "::1", true),
        ("[2001:db8::5]", "2001:db8::/32", true),
        ("[2001:db9::5]", "2001:db8::/32", false),
        ("[2001:db8::5]", "2001:db8::/29", true),  // a prefix that is not a whole number of bytes
        ("[2001:db8::5]", "192.168.0.0/16", false),
        ("localhost", "127.0.0.1", false),  // names never match addresses (no DNS)
        ("127.0.0.1", "localhost", false),
        // Bytes, not Characters: a comma followed by a combining mark still separates, and
        // names that are only canonically equivalent (é precomposed, e + U+0301) differ.
        ("\u{301}b.com", "a.com,\u{301}b.com", true),
        ("x.\u{301}b.com", "\u{301}b.com", true),
        ("caf\u{E9}.test", "cafe\u{301}.test", false),
        ("\u{C9}.test", "\u{E9}.test", false),  // only ASCII letters fold case, as in curl
    ]

    @Test("no_proxy table")
    func noProxyMatching() {
        for (host, list, expected) in Self.noProxyTable {
            #expect(NoProxyList(list).matches(host: host) == expected, "host \(host), no_proxy '\(list)'")
        }
    }
}
