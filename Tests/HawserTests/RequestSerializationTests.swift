// AFHTTPRequestSerializationTests, AFJSONSerializationTests (request half) and
// AFPropertyListRequestSerializerTests, ported in intent.
import Foundation
import Hawser
import HawserFoundation
import Testing

private let example = URL(string: "http://example.com")!

private func bodyBytes(_ request: HTTPClientRequest) -> [UInt8]? {
    if case .bytes(let b)? = request.body { return b }
    return nil
}

@Suite struct QueryStringTests {
    @Test("AFQueryStringFromParameters: sorted keys, escaped values")
    func simple() {
        #expect(
            HTTPRequestSerializer.queryString(from: ["key": "value", "key1": "value&"]) == "key=value&key1=value%26"
        )
    }

    @Test(
        "nested dictionaries, arrays, sets and null, in AF's order and syntax",
        arguments: [
            (["a": ["b": "c", "a": 1] as Parameters] as Parameters, "a%5Ba%5D=1&a%5Bb%5D=c"),
            (["list": ["x", "y", "x"]] as Parameters, "list%5B%5D=x&list%5B%5D=y&list%5B%5D=x"),
            (["s": Set(["b", "c", "a"])] as Parameters, "s=a&s=b&s=c"),
            (["flag": ParameterNull.null, "z": "1"] as Parameters, "flag&z=1"),
            (["n": NSNull()] as Parameters, "n"),
            (["o": Optional<String>.none as any Sendable] as Parameters, "o"),
            (
                ["deep": ["k": [["x": 1], ["x": 2]]]] as Parameters,
                "deep%5Bk%5D%5B%5D%5Bx%5D=1&deep%5Bk%5D%5B%5D%5Bx%5D=2"
            ),
            (["b": true, "f": false, "i": -3, "d": 2.0, "e": 0.5] as Parameters, "b=1&d=2&e=0.5&f=0&i=-3"),
            ([:] as Parameters, ""),
        ]
    )
    func shapes(parameters: Parameters, expected: String) {
        #expect(HTTPRequestSerializer.queryString(from: parameters) == expected)
    }

    @Test(
        "percent escaping: reserved characters escaped, ? and / left alone (RFC 3986 §3.4)",
        arguments: [
            (":#[]@!$&'()*+,;=?/", "%3A%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D?/"),
            (" :#[]@!$&'()*+,;=/?", "%20%3A%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D/?"),
            (
                "%20%21%22%23%24%25%26%27%28%29%2A%2B%2C%2F",
                "%2520%2521%2522%2523%2524%2525%2526%2527%2528%2529%252A%252B%252C%252F"
            ),
            ("AZaz09-._~", "AZaz09-._~"),
            ("é", "%C3%A9"),
            ("e\u{301}", "e%CC%81"),
            ("\"<>\\^`{|}", "%22%3C%3E%5C%5E%60%7B%7C%7D"),
        ]
    )
    func escaping(input: String, expected: String) {
        #expect(HTTPRequestSerializer.percentEscaped(input) == expected)
    }

    @Test("emoji sequences across AF's 50-unit batch boundary are never split (AF #3028)")
    func emoji() throws {
        var parameter = "!"
        while parameter.utf16.count < 50 { parameter += "👴🏿👷🏻👮🏽" }
        let r = try HTTPRequestSerializer().request(
            withMethod: .get,
            urlString: "http://test.com",
            parameters: ["test": parameter]
        )
        let expected =
            "test=%21"
            + String(repeating: "%F0%9F%91%B4%F0%9F%8F%BF%F0%9F%91%B7%F0%9F%8F%BB%F0%9F%91%AE%F0%9F%8F%BD", count: 5)
        #expect(r.url.query(percentEncoded: true) == expected)
        // And the escaped string decodes back to the original.
        #expect(HTTPRequestSerializer.percentEscaped(parameter).removingPercentEncoding == parameter)
    }
}

@Suite struct HTTPRequestSerializerTests {
    let serializer = HTTPRequestSerializer(environment: ["LANG": "en_US.UTF-8"])

    @Test(
        "GET, HEAD and DELETE put parameters in the query; the others in a form body",
        arguments: ["GET", "HEAD", "DELETE", "get", "POST", "PUT", "PATCH", "OPTIONS"]
    )
    func methodsInURI(method: String) throws {
        let r = try serializer.request(
            bySerializing: HTTPClientRequest(method: HTTPMethod(rawValue: method), url: example),
            parameters: ["key": "value"]
        )
        if ["GET", "HEAD", "DELETE"].contains(method.uppercased()) {
            #expect(r.url.query() == "key=value")
            #expect(r.body == nil)
            #expect(r.headers["Content-Type"] == nil)
        } else {
            #expect(r.url == example)
            #expect(bodyBytes(r) == Array("key=value".utf8))
            #expect(r.headers["Content-Type"] == "application/x-www-form-urlencoded")
        }
    }

    @Test("POST without parameters: an empty form body is still a body (AF #2864)")
    func emptyForm() throws {
        let r = try serializer.request(bySerializing: HTTPClientRequest(method: .post, url: example), parameters: nil)
        #expect(r.headers["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(bodyBytes(r) == [])
    }

    @Test("a Content-Type the request sets is kept")
    func contentTypeKept() throws {
        let r = try serializer.request(
            bySerializing: HTTPClientRequest(method: .post, url: example, headers: ["content-type": "text/plain"]),
            parameters: ["a": "b"]
        )
        #expect(r.headers.values(for: "Content-Type") == ["text/plain"])
    }

    @Test("empty parameters leave no trailing ?; an existing query gets & and the fragment stays last")
    func queryAppending() throws {
        let r1 = try serializer.request(withMethod: .get, urlString: "http://example.com/p", parameters: [:])
        #expect(r1.url.absoluteString == "http://example.com/p")
        let r2 = try serializer.request(
            withMethod: .get,
            urlString: "http://example.com/p?x=1#frag",
            parameters: ["y": "2"]
        )
        #expect(r2.url.absoluteString == "http://example.com/p?x=1&y=2#frag")
    }

    @Test("default headers are added unless the request has them; setValue nil removes one")
    func defaultHeaders() throws {
        var s = serializer
        s.setValue("Actual Value", forHTTPHeaderField: "Set-Header")
        #expect(s.value(forHTTPHeaderField: "set-header") == "Actual Value")
        #expect(s.value(forHTTPHeaderField: "Unset-Header") == nil)
        let r = try s.request(
            bySerializing: HTTPClientRequest(url: example, headers: ["User-Agent": "mine"]),
            parameters: nil
        )
        #expect(r.headers["Set-Header"] == "Actual Value")
        #expect(r.headers.values(for: "User-Agent") == ["mine"])
        #expect(r.headers["Accept-Language"] == "en-US;q=1")
        s.setValue(nil, forHTTPHeaderField: "Set-Header")
        #expect(s.value(forHTTPHeaderField: "Set-Header") == nil)
    }

    @Test("User-Agent names the application, Hawser and Linux, never the kernel release or build")
    func userAgent() throws {
        let ua = HTTPRequestSerializer().value(forHTTPHeaderField: "User-Agent") ?? ""
        let app = try #require(CommandLine.arguments.first?.split(separator: "/").last)
        #expect(ua.hasPrefix("\(app) Hawser/\(HawserVersion.string) (Linux; "), "\(ua)")
        #expect(ua.allSatisfy { $0.isASCII })
        // The kernel's release and version strings, as the kernel reports them.
        for file in ["/proc/sys/kernel/osrelease", "/proc/sys/kernel/version"] {
            let text = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!ua.contains(text), "the User-Agent tells the kernel: \(ua)")
        }
        #expect(
            HTTPRequestSerializer.userAgent(application: "my app", machine: "x86_64")
                == "my_app Hawser/\(HawserVersion.string) (Linux; x86_64)"
        )
        #expect(
            HTTPRequestSerializer.userAgent(application: "", machine: "") == "Hawser/\(HawserVersion.string) (Linux)"
        )
    }

    @Test(
        "Accept-Language from the locale variables, in AF's q-value format",
        arguments: [
            (["LANG": "de_DE.UTF-8"], "de-DE;q=1"),
            (["LANG": "C"], "en;q=1"),
            ([:], "en;q=1"),
            (["LANG": "fr_FR.UTF-8", "LC_ALL": "pt_BR.UTF-8@euro"], "pt-BR;q=1"),
            (["LANG": "fr_FR.UTF-8", "LANGUAGE": "fr:de:en_GB"], "fr;q=1, de;q=0.9, en-GB;q=0.8, fr-FR;q=0.7"),
            (["LANG": "C", "LANGUAGE": "fr:de"], "en;q=1"),
            (["LANG": "en_US", "LANGUAGE": "a:b:c:d:e:f:g:h"], "a;q=1, b;q=0.9, c;q=0.8, d;q=0.7, e;q=0.6, f;q=0.5"),
        ]
    )
    func acceptLanguage(env: [String: String], expected: String) {
        #expect(HTTPRequestSerializer.acceptLanguage(environment: env) == expected)
    }

    @Test("Basic authorization header, and clearing it")
    func authorization() throws {
        var s = serializer
        s.setAuthorizationHeaderField(username: "user", password: "pässword")
        #expect(
            s.value(forHTTPHeaderField: "Authorization") == "Basic " + Data("user:pässword".utf8).base64EncodedString()
        )
        #expect(s.value(forHTTPHeaderField: "Authorization") == "Basic dXNlcjpww6Rzc3dvcmQ=")
        s.clearAuthorizationHeader()
        #expect(s.value(forHTTPHeaderField: "Authorization") == nil)
    }

    @Test("request defaults apply only once set (AF's changed-key-path rule), and stop when reset")
    func changedKeyPaths() throws {
        var s = serializer
        let plain = try s.request(withMethod: .get, urlString: "http://example.com", parameters: nil)
        #expect(plain.timeoutInterval == nil && plain.cachePolicy == nil && plain.shouldHandleCookies == nil)
        #expect(plain.timeoutIntervalForResource == nil)
        s.timeoutInterval = 7
        s.timeoutIntervalForResource = 30
        s.cachePolicy = .reloadIgnoringLocalCacheData
        s.shouldHandleCookies = false
        s.allowsCellularAccess = false
        s.shouldUsePipelining = true
        let set = try s.request(withMethod: .get, urlString: "http://example.com", parameters: nil)
        #expect(set.timeoutInterval == 7)
        #expect(set.timeoutIntervalForResource == 30, "the per-request total deadline flows to the engine's request")
        #expect(set.cachePolicy == .reloadIgnoringLocalCacheData)
        #expect(set.shouldHandleCookies == false)
        s.timeoutInterval = nil
        #expect(
            try s.request(withMethod: .get, urlString: "http://example.com", parameters: nil).timeoutInterval == nil
        )
    }

    @Test("a custom query-string closure replaces the default encoding")
    func customQuery() throws {
        var s = serializer
        s.queryStringSerialization = { _, parameters in
            parameters.keys.sorted().map { "\($0)**\(parameters[$0]!)" }.joined()
        }
        let r = try s.request(bySerializing: HTTPClientRequest(url: example), parameters: ["key": "value"])
        #expect(r.url.query() == "key**value")
    }

    struct Refused: Error, Equatable {}

    @Test("a custom query-string closure that throws fails the request with its error as the cause")
    func customQueryError() {
        var s = serializer
        s.queryStringSerialization = { _, _ in throw Refused() }
        #expect {
            _ = try s.request(withMethod: .get, urlString: "http://example.com", parameters: [:])
        } throws: { e in
            let s = e as? SerializationError
            return s?.code == .queryStringSerializationFailed && s?.cause as? Refused == Refused()
                && s?.domain == SerializationError.requestDomain
        }
    }

    @Test(
        "a URL string that is not an absolute URL is .invalidURL (-1000)",
        arguments: ["url", "", "http://exa mple.com"]
    )
    func badURL(string: String) {
        #expect {
            _ = try serializer.request(withMethod: .get, urlString: string, parameters: nil)
        } throws: { e in
            (e as? SerializationError)?.code == .invalidURL && (e as? SerializationError)?.errorCode == -1000
        }
    }

    @Test("the methods-in-URI set can be changed")
    func customURISet() throws {
        var s = serializer
        s.httpMethodsEncodingParametersInURI = ["GET", "HEAD", "DELETE", "POST"]
        let r = try s.request(withMethod: .post, urlString: "http://example.com", parameters: ["a": "1"])
        #expect(r.url.query() == "a=1")
    }
}

@Suite struct JSONRequestSerializerTests {
    @Test("parameters become a JSON body with Content-Type application/json")
    func body() throws {
        let s = JSONRequestSerializer(writingOptions: [.sortedKeys])
        let r = try s.request(
            bySerializing: HTTPClientRequest(method: .post, url: example),
            parameters: [
                "key": "value", "n": 1, "b": true, "null": ParameterNull.null, "list": [1.5, 2], "o": ["x": "y"],
            ]
        )
        #expect(r.headers["Content-Type"] == "application/json")
        #expect(
            bodyBytes(r).map { String(decoding: $0, as: UTF8.self) }
                == #"{"b":true,"key":"value","list":[1.5,2],"n":1,"null":null,"o":{"x":"y"}}"#
        )
    }

    @Test("a Content-Type the request sets is kept; nil parameters send no body and no Content-Type")
    func contentTypeRules() throws {
        let s = JSONRequestSerializer()
        let kept = try s.request(
            bySerializing: HTTPClientRequest(
                method: .post,
                url: example,
                headers: ["Content-Type": "application/vnd.api+json"]
            ),
            parameters: ["a": 1]
        )
        #expect(kept.headers["Content-Type"] == "application/vnd.api+json")
        let none = try s.request(bySerializing: HTTPClientRequest(method: .post, url: example), parameters: nil)
        #expect(none.body == nil && none.headers["Content-Type"] == nil)
    }

    @Test("GET parameters still go into the query")
    func get() throws {
        let r = try JSONRequestSerializer().request(
            withMethod: .get,
            urlString: "http://example.com",
            parameters: ["key": "value"]
        )
        #expect(r.url.query() == "key=value")
        #expect(r.body == nil)
    }

    @Test(
        "an invalid JSON object is an .invalidParameters error, not a crash",
        arguments: [
            ["nan": Double.nan] as Parameters,
            ["inf": Double.infinity] as Parameters,
            ["set": Set([1])] as Parameters,
            ["date": Date()] as Parameters,
            ["keys": [1: "a"]] as Parameters,
        ]
    )
    func invalid(parameters: Parameters) {
        #expect {
            _ = try JSONRequestSerializer().request(
                withMethod: .post,
                urlString: "http://example.com",
                parameters: parameters
            )
        } throws: { e in
            (e as? SerializationError)?.code == .invalidParameters && (e as? SerializationError)?.url == example
        }
    }

    @Test("JSONValue parameters encode exactly; HTTPRequestSerializer settings reach through")
    func jsonValueAndForwarding() throws {
        var s = JSONRequestSerializer(writingOptions: [.sortedKeys])
        s.timeoutInterval = 3
        s.setValue("v", forHTTPHeaderField: "X-Custom")
        let r = try s.request(
            withMethod: .put,
            urlString: "http://example.com",
            parameters: ["v": JSONValue.array([1, 2.5, true, nil, "s"])]
        )
        #expect(bodyBytes(r).map { String(decoding: $0, as: UTF8.self) } == #"{"v":[1,2.5,true,null,"s"]}"#)
        #expect(r.timeoutInterval == 3)
        #expect(r.headers["X-Custom"] == "v")
    }
}

@Suite struct PropertyListRequestSerializerTests {
    @Test("parameters become an XML property list with Content-Type application/x-plist")
    func xml() throws {
        let r = try PropertyListRequestSerializer().request(
            withMethod: .post,
            urlString: "http://example.com",
            parameters: ["key": "value", "n": 2, "b": false, "d": Data([1, 2])]
        )
        #expect(r.headers["Content-Type"] == "application/x-plist")
        let bytes = try #require(bodyBytes(r))
        let back = try PropertyListSerialization.propertyList(from: Data(bytes), format: nil) as? [String: Any]
        #expect(back?["key"] as? String == "value")
        #expect((back?["n"] as? NSNumber)?.intValue == 2)
        #expect(back?["d"] as? Data == Data([1, 2]))
        #expect(String(decoding: bytes, as: UTF8.self).contains("<plist version=\"1.0\">"))
    }

    @Test("the binary format writes bplist00")
    func binary() throws {
        let r = try PropertyListRequestSerializer(format: .binary).request(
            withMethod: .post,
            urlString: "http://example.com",
            parameters: ["a": "b"]
        )
        #expect(bodyBytes(r).map { Array($0.prefix(8)) } == Array("bplist00".utf8))
    }

    @Test("null and non-plist values are .invalidParameters; OpenStep cannot be written")
    func invalid() {
        for parameters: Parameters in [["n": ParameterNull.null], ["s": Set([1])]] {
            #expect(throws: SerializationError.self) {
                _ = try PropertyListRequestSerializer().request(
                    withMethod: .post,
                    urlString: "http://example.com",
                    parameters: parameters
                )
            }
        }
        #expect(throws: SerializationError.self) {
            _ = try PropertyListRequestSerializer(format: .openStep).request(
                withMethod: .post,
                urlString: "http://example.com",
                parameters: ["a": "b"]
            )
        }
    }
}
