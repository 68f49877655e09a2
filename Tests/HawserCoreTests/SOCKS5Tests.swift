import HawserCore
import Testing

@Suite("SOCKS5 handshake (pure)")
struct SOCKS5Tests {
    static let creds = ProxyCredentials(user: "alice", password: "s3cret")

    /// Feeds `reply` split at `split` (both halves, in order) and returns every step.
    static func feed(
        _ hs: inout SOCKS5Handshake,
        _ reply: [UInt8],
        split: Int
    ) throws(SOCKS5Error) -> [SOCKS5Handshake.Step] {
        var steps: [SOCKS5Handshake.Step] = []
        steps.append(try hs.receive(Array(reply[..<split])))
        if case .connected = steps.last! { return steps }  // the rest would be the tunnel's
        if split < reply.count { steps.append(try hs.receive(Array(reply[split...]))) }
        return steps
    }

    static func connectReply(_ rep: UInt8 = 0, atyp: UInt8, address: [UInt8], port: UInt16) -> [UInt8] {
        [0x05, rep, 0x00, atyp] + address + [UInt8(port >> 8), UInt8(port & 0xFF)]
    }

    @Test("no authentication, CONNECT by name (remote DNS): exact bytes, every split of every reply")
    func noAuthByName() throws {
        let reply = Self.connectReply(atyp: 0x01, address: [10, 0, 0, 1], port: 4321)
        for split1 in 0...2 {
            for split2 in 0...reply.count {
                var hs = try SOCKS5Handshake(destination: .hostname("example.com"), port: 443)
                #expect(hs.start() == [0x05, 0x01, 0x00])
                let method = try Self.feed(&hs, [0x05, 0x00], split: split1)
                let connect: [UInt8] = [0x05, 0x01, 0x00, 0x03, 11] + Array("example.com".utf8) + [0x01, 0xBB]
                #expect(method.last == .send(connect))
                #expect(method.dropLast().allSatisfy { $0 == .needMore })
                let done = try Self.feed(&hs, reply, split: split2)
                #expect(
                    done.last == .connected(bound: .ipv4([10, 0, 0, 1], port: 4321), leftover: []),
                    "split \(split2)"
                )
                #expect(done.dropLast().allSatisfy { $0 == .needMore })
                #expect(hs.isConnected)
            }
        }
    }

    @Test(
        "username/password: greeting offers both methods, sub-negotiation bytes, then CONNECT by IPv4 and IPv6 address"
    )
    func userPassword() throws {
        for dest in [
            SocketAddress(ipAddress: "192.0.2.7", port: 0)!, SocketAddress(ipAddress: "2001:db8::9", port: 0)!,
        ] {
            let reply = Self.connectReply(atyp: 0x04, address: Array(repeating: 0xAB, count: 16), port: 80)
            for split in 0...reply.count {  // up to the reply's end; the extra 2 bytes ride along
                var hs = try SOCKS5Handshake(destination: .address(dest), port: 8080, credentials: Self.creds)
                #expect(hs.start() == [0x05, 0x02, 0x00, 0x02])
                let auth: [UInt8] = [0x01, 5] + Array("alice".utf8) + [6] + Array("s3cret".utf8)
                #expect(try hs.receive([0x05, 0x02]) == .send(auth))
                #expect(try hs.receive([0x01]) == .needMore)
                let step = try hs.receive([0x00])
                let addressBytes: [UInt8] =
                    dest.family == 2
                    ? [0x01, 192, 0, 2, 7] : [0x04, 0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 10) + [0, 9]
                #expect(step == .send([0x05, 0x01, 0x00] + addressBytes + [0x1F, 0x90]))
                let done = try Self.feed(&hs, reply + [0x48, 0x49], split: split)
                // Bytes after the reply in the same read are the tunnel's first bytes.
                let leftover: [UInt8] = split == reply.count ? [] : [0x48, 0x49]
                #expect(
                    done.last
                        == .connected(bound: .ipv6(Array(repeating: 0xAB, count: 16), port: 80), leftover: leftover)
                )
            }
        }
    }

    @Test("a bound address given as a domain name is parsed at every split")
    func boundDomain() throws {
        let reply = Self.connectReply(atyp: 0x03, address: [4] + Array("gate".utf8), port: 1)
        for split in 0...reply.count {
            var hs = try SOCKS5Handshake(destination: .hostname("h"), port: 1)
            _ = hs.start()
            _ = try hs.receive([0x05, 0x00])
            let done = try Self.feed(&hs, reply, split: split)
            #expect(done.last == .connected(bound: .hostname("gate", port: 1), leftover: []))
        }
    }

    @Test("method 0xFF is a clear error, with and without credentials offered")
    func noAcceptableMethod() throws {
        var hs = try SOCKS5Handshake(destination: .hostname("h"), port: 1)
        _ = hs.start()
        do {
            _ = try hs.receive([0x05, 0xFF])
            Issue.record("accepted")
        } catch {
            #expect(error.kind == .noAcceptableAuthenticationMethod)
            #expect(error.description.contains("requires authentication"))
        }
        #expect(throws: SOCKS5Error.self) { try hs.receive([]) }  // the error sticks
        var withCreds = try SOCKS5Handshake(destination: .hostname("h"), port: 1, credentials: Self.creds)
        _ = withCreds.start()
        #expect(
            throws: SOCKS5Error(
                .noAcceptableAuthenticationMethod,
                "the proxy accepts none of the offered methods (no authentication, username/password)"
            )
        ) {
            try withCreds.receive([0x05, 0xFF])
        }
    }

    @Test("the proxy rejecting the credentials is an authentication error naming the user")
    func authRefused() throws {
        var hs = try SOCKS5Handshake(destination: .hostname("h"), port: 1, credentials: Self.creds)
        _ = hs.start()
        _ = try hs.receive([0x05, 0x02])
        do {
            _ = try hs.receive([0x01, 0x01])
            Issue.record("accepted")
        } catch {
            #expect(error.kind == .authenticationFailed)
            #expect(error.message.contains("alice"))
            #expect(!error.message.contains("s3cret"))
        }
    }

    @Test("every CONNECT reply code maps to its RFC 1928 meaning", arguments: Array(UInt8(1)...UInt8(9)))
    func replyCodes(_ code: UInt8) throws {
        let meanings: [UInt8: String] = [
            1: "general SOCKS server failure", 2: "connection not allowed by ruleset", 3: "network unreachable",
            4: "host unreachable", 5: "connection refused", 6: "TTL expired", 7: "command not supported",
            8: "address type not supported", 9: "unassigned reply code 0x9",
        ]
        var hs = try SOCKS5Handshake(destination: .hostname("example.com"), port: 443)
        _ = hs.start()
        _ = try hs.receive([0x05, 0x00])
        do {
            _ = try hs.receive([0x05, code])  // the code alone is enough to fail
            Issue.record("accepted")
        } catch {
            #expect(error.kind == .connectFailed(replyCode: code))
            #expect(error.message == "CONNECT to example.com:443 failed: \(meanings[code]!)")
            #expect(error.hawserError.code == .proxyError)
        }
    }

    @Test("protocol violations: wrong versions, an unoffered method, an unknown address type, bytes before being asked")
    func violations() throws {
        func fresh(_ creds: ProxyCredentials? = nil) throws -> SOCKS5Handshake {
            var hs = try SOCKS5Handshake(destination: .hostname("h"), port: 1, credentials: creds)
            _ = hs.start()
            return hs
        }
        var a = try fresh()
        #expect(throws: SOCKS5Error.self) { try a.receive([0x04, 0x00]) }
        var b = try fresh()
        #expect(throws: SOCKS5Error.self) { try b.receive([0x05, 0x02]) }  // user/pass not offered
        var c = try fresh()
        #expect(throws: SOCKS5Error.self) { try c.receive([0x05, 0x01]) }  // GSSAPI not offered
        var d = try fresh()
        _ = try d.receive([0x05, 0x00])
        #expect(throws: SOCKS5Error.self) { try d.receive([0x05, 0x00, 0x00, 0x07, 1, 2]) }
        var e = try fresh()
        #expect(throws: SOCKS5Error.self) { try e.receive([0x05, 0x00, 0x05, 0x00]) }  // reply before the request
        var f = try fresh(Self.creds)
        _ = try f.receive([0x05, 0x02])
        #expect(throws: SOCKS5Error.self) { try f.receive([0x03, 0x00]) }
        var g = try fresh()
        _ = try g.receive([0x05, 0x00])
        #expect(throws: SOCKS5Error.self) { try g.receive([0x04, 0x00]) }
    }

    @Test("names and credentials over 255 bytes, empty names and bad ports are refused before anything is sent")
    func refusedInput() {
        let long = String(repeating: "x", count: 256)
        #expect(throws: SOCKS5Error.self) { try SOCKS5Handshake(destination: .hostname(long), port: 1) }
        #expect(throws: SOCKS5Error.self) { try SOCKS5Handshake(destination: .hostname(""), port: 1) }
        #expect(throws: SOCKS5Error.self) { try SOCKS5Handshake(destination: .hostname("h"), port: 0) }
        #expect(throws: SOCKS5Error.self) { try SOCKS5Handshake(destination: .hostname("h"), port: 65536) }
        #expect(throws: SOCKS5Error.self) {
            try SOCKS5Handshake(
                destination: .hostname("h"),
                port: 1,
                credentials: ProxyCredentials(user: long, password: "")
            )
        }
        #expect(throws: SOCKS5Error.self) {
            try SOCKS5Handshake(
                destination: .hostname("h"),
                port: 1,
                credentials: ProxyCredentials(user: "u", password: long)
            )
        }
        #expect(throws: SOCKS5Error.self) {
            try SOCKS5Handshake(
                destination: .hostname("h"),
                port: 1,
                credentials: ProxyCredentials(user: "", password: "p")
            )
        }
        #expect((try? SOCKS5Handshake(destination: .hostname(String(repeating: "x", count: 255)), port: 1)) != nil)
    }
}

@Suite("HTTP CONNECT tunnel helpers (pure)")
struct HTTPConnectTunnelTests {
    @Test("the CONNECT head: authority-form target, Host, Basic Proxy-Authorization, bracketed IPv6")
    func requestHead() throws {
        let plain = try HTTPConnectTunnel.requestHead(host: "example.com", port: 443)
        #expect(
            String(decoding: plain, as: UTF8.self)
                == "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"
        )
        let authed = try HTTPConnectTunnel.requestHead(
            host: "::1",
            port: 8443,
            credentials: ProxyCredentials(user: "Aladdin", password: "open sesame")
        )
        #expect(
            String(decoding: authed, as: UTF8.self)
                == "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\nProxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n"
        )
        #expect(throws: HTTPConnectError.self) { try HTTPConnectTunnel.requestHead(host: "evil\r\nX: y", port: 443) }
        #expect(throws: HTTPConnectError.self) { try HTTPConnectTunnel.requestHead(host: "a b", port: 443) }
        #expect(throws: HTTPConnectError.self) { try HTTPConnectTunnel.requestHead(host: "h", port: 0) }
    }

    static func read(
        _ response: String,
        split: Int
    ) throws(HTTPConnectError) -> [HTTPConnectTunnel.ResponseReader.Outcome] {
        let bytes = Array(response.utf8)
        var reader = HTTPConnectTunnel.ResponseReader(host: "example.com", port: 443)
        var out: [HTTPConnectTunnel.ResponseReader.Outcome] = []
        out.append(try reader.receive(Array(bytes[..<split])))
        if case .established = out.last! { return out }
        out.append(try reader.receive(Array(bytes[split...])))
        return out
    }

    @Test("200 to CONNECT opens the tunnel at every split; bytes after the head are the tunnel's; 1xx is skipped")
    func established() throws {
        let response =
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 Connection established\r\nProxy-Agent: t\r\n\r\n\u{16}\u{03}\u{01}"
        let headEnd = response.utf8.count - 3
        for split in 0...response.utf8.count {
            let outcomes = try Self.read(response, split: split)
            // A 200 to CONNECT has no body: the three TLS bytes after it are handed over whole,
            // unless the split was before them (then they come with the second call's outcome).
            if split >= headEnd {
                let leftover = Array(response.utf8)[headEnd..<split]
                #expect(outcomes.last == .established(leftover: Array(leftover)), "split \(split)")
            } else {
                #expect(outcomes.last == .established(leftover: [0x16, 0x03, 0x01]), "split \(split)")
            }
        }
    }

    @Test("407 keeps the Proxy-Authenticate challenges; 403 is 'proxy refused CONNECT'; garbage is malformed")
    func refusals() {
        let challenge =
            "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"p\"\r\n"
            + "Proxy-Authenticate: Negotiate\r\nContent-Length: 5\r\n\r\ndenied"
        do {
            _ = try Self.read(challenge, split: 10)
            Issue.record("accepted")
        } catch {
            #expect(error.kind == .proxyAuthenticationRequired)
            #expect(error.challenges == ["Basic realm=\"p\"", "Negotiate"])
            #expect(error.head?.status == 407)
            #expect(error.hawserError.code == .proxyError)
        }
        do {
            _ = try Self.read("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", split: 5)
            Issue.record("accepted")
        } catch {
            #expect(error.kind == .refused)
            #expect(error.message == "proxy refused CONNECT example.com:443: 403 Forbidden")
        }
        #expect(throws: HTTPConnectError.self) { try Self.read("SSH-2.0-OpenSSH\r\n\r\n", split: 3) }
        var reader = HTTPConnectTunnel.ResponseReader(host: "example.com", port: 443)
        #expect((try? reader.receive(Array("HTTP/1.1 200".utf8))) == .needMore)
        #expect(reader.finish().kind == .closed)
    }
}
