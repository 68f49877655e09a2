// The API rows AFNetworking 4's own tests use that Hawser lacked: parameters that are not a
// dictionary, NSSecureCoding (Codable), NSCopying (copy()), the security-policy refusal on a
// non-https base URL, and errors that read like Foundation's. Each test names the AF test it ports.
import Foundation
import Hawser
import HawserFoundation
import HawserTestServer
import Testing

private func body(_ r: HTTPClientRequest) -> String {
    guard case .bytes(let b)? = r.body else { return "" }
    return String(decoding: b, as: UTF8.self)
}

private func roundTrip<T: Codable>(_ value: T) throws -> T {
    try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
}

private func encoded<T: Encodable>(_ value: T) throws -> String {
    let e = JSONEncoder()
    e.outputFormatting = [.sortedKeys]
    return String(decoding: try e.encode(value), as: UTF8.self)
}

@Suite struct ParametersOfAnyShapeTests {
    @Test("JSON: a dictionary and a top-level array (AFJSONSerializationTests …HandlesParametersDictionary / …Array)")
    func jsonDictionaryAndArray() throws {
        let s = JSONRequestSerializer()
        let dict = try s.request(withMethod: .post, urlString: "http://example.com", parameters: ["key": "value"])
        #expect(body(dict) == #"{"key":"value"}"#)
        let array = try s.request(withMethod: .post, urlString: "http://example.com", parameters: [["key": "value"]])
        #expect(body(array) == #"[{"key":"value"}]"#)
        #expect(array.headers["Content-Type"] == "application/json")
        let json = try s.request(
            withMethod: .post,
            urlString: "http://example.com",
            parameters: JSONValue.array([1, "two", nil])
        )
        #expect(body(json) == #"[1,"two",null]"#)
    }

    @Test(
        "JSON: a fragment needs .fragmentsAllowed; a set is not JSON (…ErrorsWithInvalidJSON: request domain, -1016, AF's failure reason)"
    )
    func jsonFragmentsAndInvalid() throws {
        do {
            _ = try JSONRequestSerializer().request(
                withMethod: .post,
                urlString: "http://example.com",
                parameters: "just a string"
            )
            Issue.record("a fragment was written without .fragmentsAllowed")
        } catch let e as SerializationError {
            #expect(e.code == .invalidParameters && e.errorCode == -1016)
        }
        let fragment = try JSONRequestSerializer(writingOptions: .fragmentsAllowed)
            .request(withMethod: .post, urlString: "http://example.com", parameters: "just a string")
        #expect(body(fragment) == #""just a string""#)
        do {
            _ = try JSONRequestSerializer().request(
                withMethod: .post,
                urlString: "http://example.com",
                parameters: ["key": Set(["value"])]
            )
            Issue.record("a set was written as JSON")
        } catch let e as SerializationError {
            #expect(e.domain == SerializationError.requestDomain)
            #expect(e.errorCode == -1016)
            #expect(e.failureReason == "The `parameters` argument is not valid JSON.")
            #expect((e as NSError).domain == "com.alamofire.error.serialization.request")
            #expect(
                e.nsError.userInfo[NSLocalizedFailureReasonErrorKey] as? String
                    == "The `parameters` argument is not valid JSON."
            )
        }
    }

    @Test(
        "the query string takes arrays and sets as AFQueryStringFromParameters does (with an empty key where AF writes (null))"
    )
    func queryStrings() throws {
        #expect(HTTPRequestSerializer.queryString(from: ["a", "b"] as any Sendable) == "%5B%5D=a&%5B%5D=b")
        #expect(HTTPRequestSerializer.queryString(from: Set(["b", "a"]) as any Sendable) == "=a&=b")
        #expect(HTTPRequestSerializer.queryString(from: [["k": "v"]] as any Sendable) == "%5B%5D%5Bk%5D=v")
        #expect(
            HTTPRequestSerializer.queryString(from: ["k": ["x", "y"]] as [String: [String]] as any Sendable)
                == "k%5B%5D=x&k%5B%5D=y",
            "a dictionary of another value type is still a dictionary"
        )
        #expect(
            HTTPRequestSerializer.queryString(from: JSONValue.object(["a": 1, "b": [true]]) as any Sendable)
                == "a=1&b%5B%5D=1"
        )

        let get = try HTTPRequestSerializer().request(
            withMethod: .get,
            urlString: "http://example.com/p?x=1",
            parameters: ["a", "b"]
        )
        #expect(get.url.absoluteString == "http://example.com/p?x=1&%5B%5D=a&%5B%5D=b")
        let post = try HTTPRequestSerializer().request(
            withMethod: .post,
            urlString: "http://example.com",
            parameters: Set([2, 1])
        )
        #expect(body(post) == "=1&=2")
        // The dictionary form is unchanged (AFHTTPRequestSerializationTests testQueryStringFromParameters).
        #expect(
            HTTPRequestSerializer.queryString(from: ["key": "value", "key1": "value&"]) == "key=value&key1=value%26"
        )
    }

    @Test("a property list at the top level may be an array")
    func propertyListArray() throws {
        let r = try PropertyListRequestSerializer().request(
            withMethod: .post,
            urlString: "http://example.com",
            parameters: ["a", 1] as [any Sendable]
        )
        guard case .bytes(let b)? = r.body else {
            Issue.record("no body")
            return
        }
        let back = try PropertyListSerialization.propertyList(from: Data(b), format: nil) as? [Any]
        #expect(back?.count == 2 && back?.first as? String == "a")
    }

    @Test("a serializer of your own that knows only dictionaries refuses other shapes with a typed error")
    func defaultRefusesOtherShapes() throws {
        let r = HTTPClientRequest(method: .post, url: URL(string: "http://example.com")!)
        let dict = try QuerySerializer().request(
            bySerializing: r,
            parameters: ["b": 2, "a": 1] as [String: Int] as any Sendable
        )
        #expect(body(dict) == "a=1&b=2", "a dictionary of any value type reaches the dictionary form")
        #expect(throws: SerializationError.self) {
            _ = try QuerySerializer().request(bySerializing: r, parameters: [1, 2] as any Sendable)
        }
    }
}

/// A response serializer of the test's own, for the compound's registry.
private struct TaggedSerializer: CodableResponseSerialization {
    static var codingName: String { "test.tagged" }
    var tag: String
    func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? { self.tag }
}

@Suite struct CodingAndCopyingTests {
    @Test("HTTPRequestSerializer round-trips every setting (AF's NSSecureCoding)")
    func httpRequestSerializer() throws {
        var s = HTTPRequestSerializer(environment: ["LANG": "fr_FR.UTF-8"])
        s.setValue("foo value", forHTTPHeaderField: "X-Foo")
        s.setValue(nil, forHTTPHeaderField: "User-Agent")
        s.setAuthorizationHeaderField(username: "u", password: "p")
        s.httpMethodsEncodingParametersInURI = ["GET", "OPTIONS"]
        s.timeoutInterval = 12.5
        s.timeoutIntervalForResource = 90
        s.cachePolicy = .returnCacheDataElseLoad
        s.shouldHandleCookies = false
        s.allowsCellularAccess = false
        s.shouldUsePipelining = true
        let back = try roundTrip(s)
        #expect(
            back.httpRequestHeaders.map { [$0.name, $0.value] } == s.httpRequestHeaders.map { [$0.name, $0.value] }
        )
        #expect(back.value(forHTTPHeaderField: "User-Agent") == nil)
        #expect(back.httpMethodsEncodingParametersInURI == ["GET", "OPTIONS"])
        let delete = try back.request(withMethod: .delete, urlString: "http://example.com", parameters: ["a": 1])
        #expect(
            body(delete) == "a=1" && delete.url.query == nil,
            "the decoded set is the one applied: DELETE sends a body"
        )
        let options = try back.request(withMethod: .options, urlString: "http://example.com", parameters: ["a": 1])
        #expect(options.url.query == "a=1")
        #expect(back.timeoutInterval == 12.5 && back.cachePolicy == .returnCacheDataElseLoad)
        #expect(back.timeoutIntervalForResource == 90)
        #expect(
            back.shouldHandleCookies == false && back.allowsCellularAccess == false && back.shouldUsePipelining == true
        )
        #expect(try encoded(back) == encoded(s))
        // Unset defaults stay unset (AF's observed key paths).
        let plain = try roundTrip(HTTPRequestSerializer())
        #expect(plain.timeoutInterval == nil && plain.cachePolicy == nil && plain.shouldHandleCookies == nil)
        #expect(plain.timeoutIntervalForResource == nil)
    }

    @Test("JSON and property-list request serializers round-trip their options and their HTTP settings")
    func bodySerializers() throws {
        var json = JSONRequestSerializer(writingOptions: [.sortedKeys, .prettyPrinted])
        json.timeoutInterval = 3
        let j = try roundTrip(json)
        #expect(j.writingOptions == [.sortedKeys, .prettyPrinted] && j.timeoutInterval == 3)
        var plist = PropertyListRequestSerializer(format: .binary)
        plist.setValue("x", forHTTPHeaderField: "X-Plist")
        let p = try roundTrip(plist)
        #expect(p.format == .binary && p.value(forHTTPHeaderField: "X-Plist") == "x")
    }

    @Test(
        "response serializers round-trip status codes, content types and options (AFJSONSerializationTests …CanBeArchivedAndUnarchived)"
    )
    func responseSerializers() throws {
        var http = HTTPResponseSerializer(acceptableContentTypes: ["test/type"])
        http.acceptableStatusCodes = RangeSet(100..<101)
        let h = try roundTrip(http)
        #expect(h.acceptableStatusCodes == RangeSet(100..<101) && h.acceptableContentTypes == ["test/type"])
        var anyStatus = HTTPResponseSerializer()
        anyStatus.acceptableStatusCodes = nil
        #expect(try roundTrip(anyStatus).acceptableStatusCodes == nil, "nil (any status) stays nil")
        var json = JSONResponseSerializer(readingOptions: .fragmentsAllowed, removesKeysWithNullValues: true)
        json.acceptableStatusCodes = RangeSet([200..<204, 400..<401])
        let j = try roundTrip(json)
        #expect(j.readingOptions == .fragmentsAllowed && j.removesKeysWithNullValues)
        #expect(
            j.acceptableStatusCodes == RangeSet([200..<204, 400..<401])
                && j.acceptableContentTypes == json.acceptableContentTypes
        )
        let plist = try roundTrip(PropertyListResponseSerializer(format: .binary))
        #expect(plist.format == .binary && plist.acceptableContentTypes == ["application/x-plist"])
    }

    @Test(
        "the compound serializer round-trips its members by type (AFCompoundResponseSerializerTests …CanBeArchivedAndUnarchived)"
    )
    func compound() throws {
        var compound = CompoundResponseSerializer([
            HTTPResponseSerializer(acceptableContentTypes: ["image/png"]), JSONResponseSerializer(),
        ])
        compound.acceptableStatusCodes = RangeSet(100..<101)
        compound.acceptableContentTypes = ["test/type"]
        let back = try roundTrip(compound)
        #expect(back.responseSerializers.count == 2)
        #expect((back.responseSerializers[0] as? HTTPResponseSerializer)?.acceptableContentTypes == ["image/png"])
        #expect(back.responseSerializers[1] is JSONResponseSerializer)
        #expect(back.acceptableStatusCodes == RangeSet(100..<101) && back.acceptableContentTypes == ["test/type"])

        // A member whose type is not registered: a decoding error naming the tag and the fix.
        let withOwn = CompoundResponseSerializer([TaggedSerializer(tag: "t")])
        let data = try JSONEncoder().encode(withOwn)
        do {
            _ = try JSONDecoder().decode(CompoundResponseSerializer.self, from: data)
            Issue.record("an unregistered member type decoded")
        } catch {
            #expect("\(error)".contains("test.tagged") && "\(error)".contains("register"), "\(error)")
        }
        CompoundResponseSerializer.register(TaggedSerializer.self)
        let decoded = try JSONDecoder().decode(CompoundResponseSerializer.self, from: data)
        #expect((decoded.responseSerializers.first as? TaggedSerializer)?.tag == "t")

        // A member that cannot be encoded says so.
        let withDecodable = CompoundResponseSerializer([DecodableResponseSerializer<[String]>()])
        #expect(throws: EncodingError.self) { _ = try JSONEncoder().encode(withDecodable) }
    }

    @Test("SecurityPolicy round-trips every setting (AFSecurityPolicyTests testThatPolicyCanBeEncodedAndDecoded)")
    func securityPolicy() throws {
        let pki = try TestPKI.shared()
        var policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pki.root])
        policy.allowInvalidCertificates = true
        policy.validatesDomainName = false
        policy.allowsCommonNameFallback = true
        policy.pinnedPublicKeyHashes = [PublicKeyPin(certificate: pki.untrustedRoot)]
        policy.anchors = .systemAndCustom([pki.root])
        policy.revocation = RevocationPolicy(
            mode: .strict,
            checksStapledOCSP: false,
            crlFiles: ["a.crl", "b.pem"],
            checksWholeChain: true,
            allowedClockSkew: 42
        )
        let back = try roundTrip(policy)
        #expect(back.revocation == policy.revocation)
        #expect(try roundTrip(SecurityPolicy(pinningMode: .none)).revocation == .off)
        #expect(back.allowsCommonNameFallback)
        #expect(!(try roundTrip(SecurityPolicy(pinningMode: .none))).allowsCommonNameFallback)
        #expect(back.pinningMode == .certificate)
        #expect(back.pinnedCertificates == [pki.root])
        #expect(back.pinnedPublicKeyHashes == policy.pinnedPublicKeyHashes)
        #expect(back.allowInvalidCertificates && !back.validatesDomainName)
        #expect(back.anchors == .systemAndCustom([pki.root]))
        #expect(try encoded(back) == encoded(policy))
        #expect(try roundTrip(SecurityPolicy.default).anchors == .system)
        let bad = Data(
            #"{"pinningMode":"always","pinnedCertificates":[],"pinnedPublicKeyHashes":[],"allowInvalidCertificates":false,"validatesDomainName":true,"anchors":{"kind":"system"}}"#
                .utf8
        )
        #expect(throws: DecodingError.self) { _ = try JSONDecoder().decode(SecurityPolicy.self, from: bad) }
    }

    @Test("copy() of the serializers and the policy: equal settings, independent values (AF's NSCopying tests)")
    func serializerCopies() throws {
        var json = JSONResponseSerializer(readingOptions: .fragmentsAllowed, removesKeysWithNullValues: true)
        json.acceptableStatusCodes = RangeSet(100..<101)
        json.acceptableContentTypes = ["test/type"]
        var copied = json.copy()
        #expect(
            copied.acceptableStatusCodes == json.acceptableStatusCodes
                && copied.acceptableContentTypes == json.acceptableContentTypes
        )
        #expect(
            copied.readingOptions == json.readingOptions
                && copied.removesKeysWithNullValues == json.removesKeysWithNullValues
        )
        copied.acceptableContentTypes = ["other/type"]
        #expect(json.acceptableContentTypes == ["test/type"], "changing the copy leaves the original")

        var request = HTTPRequestSerializer()
        var requestCopy = request.copy()
        requestCopy.setValue("copy", forHTTPHeaderField: "X-Copy")
        request.timeoutInterval = 1
        #expect(request.value(forHTTPHeaderField: "X-Copy") == nil && requestCopy.timeoutInterval == nil)

        let compound = CompoundResponseSerializer([HTTPResponseSerializer(), JSONResponseSerializer()]).copy()
        #expect(compound.responseSerializers.count == 2 && compound.responseSerializers[1] is JSONResponseSerializer)

        var policy = SecurityPolicy(pinningMode: .certificate)
        policy.allowInvalidCertificates = true
        var policyCopy = policy.copy()
        #expect(policyCopy.pinningMode == .certificate && policyCopy.allowInvalidCertificates)
        policyCopy.validatesDomainName = false
        #expect(policy.validatesDomainName)
    }
}

@Suite struct SecurityPolicyRefusalTests {
    @Test(
        "a pinning policy on a manager whose base URL is not https is refused (AFHTTPSessionManagerTests testInvalid…PinningSecurityPolicy[WithoutBaseURL])"
    )
    func pinningNeedsHTTPS() throws {
        for base in [URL(string: "http://example.com/"), nil] {
            for mode in [SecurityPolicy.PinningMode.certificate, .publicKey] {
                let m = HTTPSessionManager(baseURL: base)
                defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
                let refusal: SessionManagerError? = {
                    do {
                        try m.setSecurityPolicy(SecurityPolicy(pinningMode: mode))
                        return nil
                    } catch {
                        return error as? SessionManagerError
                    }
                }()
                guard case .invalidSecurityPolicy(let why)? = refusal else {
                    Issue.record(
                        "\(mode) pinning on \(base?.absoluteString ?? "no base URL"): \(String(describing: refusal))"
                    )
                    continue
                }
                #expect(why.contains("https") && why.contains("pinning"), "\(why)")
                #expect(m.securityPolicy.pinningMode == .none, "the previous policy stays")
            }
        }
    }

    @Test(
        "pinning on an https base URL, no pinning anywhere, and a plain SessionManager are accepted (testValid…SecurityPolicy)"
    )
    func acceptedPolicies() throws {
        let https = HTTPSessionManager(baseURL: URL(string: "https://example.com/"))
        try https.setSecurityPolicy(SecurityPolicy(pinningMode: .certificate))
        try https.setSecurityPolicy(SecurityPolicy(pinningMode: .publicKey))
        #expect(https.securityPolicy.pinningMode == .publicKey)
        let http = HTTPSessionManager(baseURL: URL(string: "http://example.com/"))
        var none = SecurityPolicy(pinningMode: .none)
        none.allowInvalidCertificates = true
        try http.setSecurityPolicy(none)
        #expect(http.securityPolicy.allowInvalidCertificates)
        let plain = SessionManager()
        try plain.setSecurityPolicy(SecurityPolicy(pinningMode: .certificate))
        #expect(plain.securityPolicy.pinningMode == .certificate)
        for m in [https, http, plain] { m.invalidateSessionCancelingTasks(true, resetSession: false) }
    }
}

@Suite struct ErrorWordingTests {
    @Test(
        "serverTrustError(for:url:failure:) builds AF's AFServerTrustErrorForServerTrust error: -1202, the URL, the trust"
    )
    func serverTrustErrorBuilder() throws {
        let pki = try TestPKI.shared()
        let url = URL(string: "https://example.test/x")!
        let trust = ServerTrust(host: "example.test", certificates: pki.valid.presentedChain)
        let failure = TrustFailure(.untrustedRoot, "the chain ends at an unknown root")
        let e = HawserError.serverTrustError(for: trust, url: url, failure: failure)
        #expect(e.code == .serverCertificateUntrusted && e.urlErrorCode == -1202)
        #expect(e.url == url)
        #expect(e.peerTrust?.host == "example.test")
        #expect(e.peerCertificates == pki.valid.presentedChain)
        #expect((e.underlying as? TrustFailure)?.reason == .untrustedRoot)
        #expect(e.message == "the certificate of example.test is not trusted: the chain ends at an unknown root")
        let ns = e as NSError
        #expect(ns.domain == NSURLErrorDomain && ns.code == -1202)
        #expect(ns.localizedDescription.contains("pretending to be “example.test”"))
        #expect(ns.userInfo[NSURLErrorFailingURLErrorKey] as? URL == url)
        #expect(ns.userInfo["NSErrorFailingURLStringKey"] as? String == url.absoluteString)
        #expect(
            (ns.userInfo[HawserError.failingURLPeerTrustErrorKey] as? ServerTrust)?.certificates == trust.certificates
        )
        // No failure given: the reason is left out, and nothing is underneath.
        let bare = HawserError.serverTrustError(for: trust, url: nil)
        #expect(bare.message == "the certificate of example.test is not trusted" && bare.underlying == nil)
        #expect((bare as NSError).userInfo[NSURLErrorFailingURLErrorKey] == nil)
    }

    @Test("HawserError reads like NSURLSession's errors: description, domain, code, failing URL, underlying error")
    func hawserErrors() throws {
        let url = URL(string: "https://apple.com/")!
        let untrusted = HawserError(
            .serverCertificateUntrusted,
            "the chain ends at an unknown root",
            url: url,
            underlying: TrustFailure(.untrustedRoot, "unknown root")
        )
        #expect(
            untrusted.errorDescription
                == "The certificate for this server is invalid. You might be connecting to a server that is pretending to be “apple.com” which could put your confidential information at risk."
        )
        let ns = untrusted as NSError
        #expect(ns.domain == NSURLErrorDomain && ns.code == -1202)
        #expect(
            ns.localizedDescription == untrusted.errorDescription,
            "AFHTTPSessionManagerTests testInvalidServerTrustProducesCorrectError…"
        )
        #expect(ns.localizedFailureReason == "the chain ends at an unknown root")
        #expect(ns.userInfo[NSURLErrorFailingURLErrorKey] as? URL == url)
        #expect(ns.userInfo["NSErrorFailingURLStringKey"] as? String == url.absoluteString)
        #expect(ns.userInfo[NSUnderlyingErrorKey] is NSError)
        let cases: [(HawserError.Code, Int, String)] = [
            (.cancelled, -999, "cancelled"), (.unsupportedURL, -1002, "unsupported URL"),
            (.invalidRequest, -1000, "bad URL"),
            (.idleTimeout, -1001, "The request timed out."),
            (.cannotResolveHost, -1003, "A server with the specified hostname could not be found."),
            (.cannotConnect, -1004, "Could not connect to the server."),
            (.connectionLost, -1005, "The network connection was lost."),
            (.limitExceeded, -1103, "resource exceeds maximum size"),
        ]
        for (code, number, text) in cases {
            let e = HawserError(code, "detail")
            #expect((e as NSError).code == number && (e as NSError).localizedDescription == text, "\(code)")
        }
    }

    @Test("serialization and manager errors keep AF's domains and numbers as NSErrors")
    func otherErrors() throws {
        let response = HawserResponse(
            url: URL(string: "http://example.com/x")!,
            statusCode: 404,
            headers: ["Content-Type": "text/plain"]
        )
        do {
            _ = try HTTPResponseSerializer().responseObject(for: response, data: Array("nope".utf8))
            Issue.record("a 404 was accepted")
        } catch let e as SerializationError {
            let ns = e.nsError
            #expect(ns.domain == "com.alamofire.error.serialization.response" && ns.code == -1011)
            #expect(ns.localizedDescription == "Request failed: not found (404)")
            #expect(ns.userInfo[SerializationError.failingURLResponseDataErrorKey] as? Data == Data("nope".utf8))
            #expect(ns.userInfo[NSURLErrorFailingURLErrorKey] as? URL == response.url)
            #expect(
                (e as NSError).code == -1011 && (e as NSError).domain == "com.alamofire.error.serialization.response"
            )
        }
        let invalidated = SessionManagerError.sessionInvalidated as NSError
        #expect(invalidated.domain == NSURLErrorDomain && invalidated.code == -999)
        #expect(invalidated.localizedDescription.contains("invalidated"))
    }

    @Test(
        "an unsupported scheme is -1002 and a URL without a host -1000, at serialization time (failure(nil, …), no task)"
    )
    func unusableURLs() async throws {
        let m = HTTPSessionManager()
        defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
        for (url, code, number) in [
            ("ftp://example.com/file", SerializationError.Code.unsupportedURL, -1002),
            ("http:///no-host", .invalidURL, -1000), ("file:///etc/passwd", .unsupportedURL, -1002),
        ] {
            let done = Expectation()
            let seen = Box<(Bool, (any Error)?)>((false, nil))
            let task = m.get(
                url,
                success: { _, _ in done.fulfill() },
                failure: { t, e in
                    seen.value = (t == nil, e)
                    done.fulfill()
                }
            )
            #expect(task == nil, "\(url)")
            #expect(await done.wait())
            let e = seen.value.1 as? SerializationError
            #expect(
                seen.value.0 && e?.code == code && e?.errorCode == number,
                "\(url): \(String(describing: seen.value.1))"
            )
            await #expect(throws: SerializationError.self) { _ = try await m.get(url) }
        }
        #expect(throws: SerializationError.self) {
            _ = try HTTPRequestSerializer().request(withMethod: .get, urlString: "gopher://x/", parameters: nil)
        }
    }
}
