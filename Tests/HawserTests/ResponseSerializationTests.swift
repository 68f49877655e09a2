// AFHTTPResponseSerializationTests, AFJSONSerializationTests (response half),
// AFPropertyListResponseSerializerTests and AFCompoundResponseSerializerTests, ported in intent.
import Foundation
import Hawser
import HawserFoundation
import Testing

private let responseURL = URL(string: "http://example.com/resource")!

private func response(_ status: Int = 200, _ contentType: String? = "application/json") -> HawserResponse {
    var headers = HTTPHeaders()
    if let contentType { headers.add(name: "Content-Type", value: contentType) }
    return HawserResponse(url: responseURL, statusCode: status, headers: headers)
}

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// The SerializationError `body` throws, or nil.
private func caught(_ body: () throws -> Any?) -> SerializationError? {
    do {
        _ = try body()
        return nil
    } catch { return error as? SerializationError }
}

@Suite struct HTTPResponseSerializerTests {
    @Test("2xx is acceptable; the body comes back as bytes", arguments: [200, 201, 204, 299])
    func acceptable(status: Int) throws {
        let r = try HTTPResponseSerializer().responseObject(for: response(status, "text/plain"), data: bytes("x"))
        #expect(r as? [UInt8] == bytes("x"))
    }

    @Test(
        "a status outside 200..<300 is -1011 with URL, response and data attached",
        arguments: [100, 199, 300, 404, 500, 1000]
    )
    func badStatus(status: Int) {
        let e = caught {
            try HTTPResponseSerializer().responseObject(for: response(status, "text/plain"), data: bytes("oops"))
        }
        #expect(e?.code == .unacceptableStatusCode)
        #expect(e?.errorCode == -1011)
        #expect(e?.domain == "com.alamofire.error.serialization.response")
        #expect(e?.url == responseURL)
        #expect(e?.response?.statusCode == status)
        #expect(e?.data == bytes("oops"))
        #expect(e?.underlying == nil)
    }

    @Test("the message names the status as AF does")
    func message() {
        let e = caught { try HTTPResponseSerializer().responseObject(for: response(404), data: nil) }
        #expect(e?.message == "Request failed: not found (404)")
    }

    @Test("an unacceptable content type is -1016; with a bad status too, -1011 with -1016 chained under it")
    func contentTypeAndChain() {
        var s = HTTPResponseSerializer()
        s.acceptableContentTypes = ["application/json"]
        let ct = caught { try s.responseObject(for: response(200, "text/html"), data: bytes("<html>")) }
        #expect(ct?.code == .unacceptableContentType && ct?.errorCode == -1016 && ct?.data == bytes("<html>"))
        let both = caught { try s.responseObject(for: response(500, "text/html"), data: bytes("<html>")) }
        #expect(both?.code == .unacceptableStatusCode)
        #expect((both?.underlying as? SerializationError)?.code == .unacceptableContentType)
        #expect(both?.contains(.unacceptableContentType) == true)
        #expect(both?.contains(.cannotParseResponse) == false)
    }

    @Test("content types compare without parameters and case; an empty body skips the check; nil sets accept anything")
    func contentTypeRules() throws {
        var s = HTTPResponseSerializer()
        s.acceptableContentTypes = ["application/json"]
        try s.validate(response: response(200, "Application/JSON; charset=utf-8"), data: bytes("{}"))
        try s.validate(response: response(200, "text/html"), data: [])
        try s.validate(response: response(200, nil), data: nil)
        #expect(throws: SerializationError.self) { try s.validate(response: response(200, nil), data: bytes("x")) }
        s.acceptableContentTypes = nil
        s.acceptableStatusCodes = nil
        try s.validate(response: response(999, "whatever/type"), data: bytes("x"))
        try s.validate(response: nil, data: bytes("x"))
    }

    @Test(
        "mimeType: the media type without parameters or blanks, lower-cased (NSURLResponse.MIMEType)",
        arguments: [
            ("application/json", "application/json"), ("Application/JSON", "application/json"),
            ("text/html; charset=utf-8", "text/html"), (" text/plain ", "text/plain"),
            ("\ttext/plain;x=y", "text/plain"),
            ("TEXT/XML ;charset=x", "text/xml"),
        ]
    )
    func mimeType(header: String, expected: String) {
        #expect(response(200, header).mimeType == expected)
    }

    @Test(
        "mimeType is nil without Content-Type, or with only parameters or blanks",
        arguments: [nil, "", " ", "; charset=utf-8"]
    )
    func noMimeType(header: String?) {
        #expect(response(200, header).mimeType == nil)
    }

    @Test("custom acceptable status codes")
    func customCodes() throws {
        var s = HTTPResponseSerializer()
        s.acceptableStatusCodes = RangeSet([200..<201, 404..<405])
        try s.validate(response: response(404), data: nil)
        #expect(throws: SerializationError.self) { try s.validate(response: response(201), data: nil) }
    }

    @Test("chaining keeps an existing underlying error (AFErrorWithUnderlyingError)")
    func chaining() {
        let a = SerializationError(.unacceptableStatusCode, "a")
        let b = SerializationError(.unacceptableContentType, "b")
        let c = SerializationError(.cannotParseResponse, "c")
        let ab = a.chaining(b)
        #expect((ab.underlying as? SerializationError)?.message == "b")
        #expect((ab.chaining(c).underlying as? SerializationError)?.message == "b")
        #expect(a.chaining(nil).underlying == nil)
    }
}

@Suite struct JSONResponseSerializerTests {
    let serializer = JSONResponseSerializer()

    @Test(
        "application/json, text/json and text/javascript are acceptable",
        arguments: ["application/json", "text/json", "text/javascript"]
    )
    func types(contentType: String) throws {
        #expect(try serializer.json(for: response(200, contentType), data: bytes("{\"a\":1}")) == ["a": 1])
    }

    @Test("text/html is -1016 and nothing is parsed")
    func html() {
        let e = caught { try serializer.responseObject(for: response(200, "text/html"), data: bytes("{}")) }
        #expect(e?.code == .unacceptableContentType)
    }

    @Test("an empty body and a single space are nil without an error", arguments: ["", " "])
    func emptyAndSpace(body: String) throws {
        #expect(try serializer.responseObject(for: response(), data: bytes(body)) == nil)
        #expect(try serializer.responseObject(for: response(), data: nil) == nil)
    }

    @Test("integers stay exact, doubles are doubles, booleans are not numbers")
    func exactness() throws {
        let v = try #require(
            try serializer.json(
                for: response(),
                data: bytes(
                    #"{"big":9007199254740993,"neg":-9223372036854775808,"d":0.1,"t":true,"one":1,"huge":18446744073709551616,"s":"x","n":null,"a":[1,"2"]}"#
                )
            )
        )
        #expect(v["big"] == .number(.integer(9_007_199_254_740_993)))
        #expect(v["neg"]?.int64Value == Int64.min)
        #expect(v["d"] == .number(.double(0.1)))
        #expect(v["t"] == .bool(true) && v["t"]?.intValue == nil)
        #expect(v["one"]?.boolValue == nil && v["one"]?.intValue == 1)
        #expect(v["huge"]?.doubleValue == 18_446_744_073_709_551_616.0 && v["huge"]?.int64Value == nil)
        #expect(v["s"]?.stringValue == "x")
        #expect(v["n"]?.isNull == true)
        #expect(v["a"]?[1] == "2" && v["a"]?[5] == nil)
    }

    @Test("removesKeysWithNullValues removes null members and elements at every depth")
    func removesNulls() throws {
        var s = serializer
        s.removesKeysWithNullValues = true
        let v = try s.json(
            for: response(),
            data: bytes(#"{"a":null,"b":{"c":null,"d":[null,{"e":null,"f":1}]},"g":2}"#)
        )
        #expect(v == ["b": ["d": [["f": 1]]], "g": 2])
        let kept = try serializer.json(for: response(), data: bytes(#"{"a":null}"#))
        #expect(kept == ["a": nil])
    }

    @Test("fragments only with .fragmentsAllowed")
    func fragments() throws {
        #expect(
            caught { try serializer.responseObject(for: response(), data: bytes("\"hi\"")) }?.code
                == .cannotParseResponse
        )
        let s = JSONResponseSerializer(readingOptions: .fragmentsAllowed)
        #expect(try s.json(for: response(), data: bytes("\"hi\"")) == "hi")
        #expect(try s.json(for: response(), data: bytes("42")) == 42)
        #expect(try s.json(for: response(), data: bytes("null")) == .null)
    }

    @Test(
        "invalid JSON is a parse error (3840) carrying the response and data, with the cause",
        arguments: ["{", "{\"a\":}", "[01]", "nul", "{\"a\":1}x", "\u{FEFF}\u{0}"]
    )
    func invalid(body: String) {
        let e = caught { try serializer.responseObject(for: response(), data: bytes(body)) }
        #expect(e?.code == .cannotParseResponse)
        #expect(e?.errorCode == 3840)
        #expect(e?.data == bytes(body))
        #expect(e?.cause != nil)
        #expect(e?.underlying == nil)
    }

    @Test("numbers: exact when the written value is an Int64, however written; the nearest Double otherwise")
    func numbers() throws {
        let v = try JSONValue(
            parsing: bytes(
                "[100, 100.0, 1e2, 0.5e3, -0, 1.5, 1e-999, 9223372036854775807, 9223372036854775808, 92233720368547758.07e2, 1E+2]"
            )
        )
        let n = try #require(v.arrayValue).map { $0.numberValue }
        #expect(n[0] == .integer(100) && n[1] == .integer(100) && n[2] == .integer(100) && n[3] == .integer(500))
        #expect(n[4] == .integer(0) && n[5] == .double(1.5) && n[6] == .double(0))
        #expect(n[7] == .integer(Int64.max) && n[8] == .double(9_223_372_036_854_775_808.0))
        #expect(n[9] == .integer(Int64.max) && n[10] == .integer(100))
    }

    @Test("strings: escapes, surrogate pairs, raw UTF-8; a repeated name keeps its first value")
    func strings() throws {
        let v = try JSONValue(parsing: bytes(#"{"s":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00é","k":1,"k":2}"#))
        #expect(v["s"] == .string("a\"\\/\u{8}\u{C}\n\r\té😀é"))
        #expect(v["k"] == 1)
        // A byte-order mark, whitespace around, and a trailing comma (as Foundation's readers allow).
        #expect(try JSONValue(parsing: [0xEF, 0xBB, 0xBF] + bytes(" [1,2,] \r\n")) == [1, 2])
        #expect(try JSONValue(parsing: bytes(#"{"a":1,}"#)) == ["a": 1])
    }

    @Test(
        "malformed texts are DecodingErrors that say what and where",
        arguments: [
            #"["\ud800"]"#, #"["\udc00"]"#, #"["\ud800\u0041"]"#, "[\"a\u{1}\"]", #"["\x"]"#, #"["\u12"]"#,
            "[1.]", "[.5]", "[+1]", "[1e]", "[-]", "[01]", "[1e999]", "[NaN]", "[tru]", "[1 2]", "{\"a\" 1}", "{1:2}",
            "[,]", "",
        ]
    )
    func malformed(text: String) {
        #expect(throws: DecodingError.self) { try JSONValue(parsing: bytes(text), allowFragments: true) }
    }

    @Test("invalid UTF-8 in a string is an error")
    func invalidUTF8() throws {
        #expect(throws: DecodingError.self) { try JSONValue(parsing: [0x5B, 0x22, 0xC3, 0x28, 0x22, 0x5D]) }
        // After an escape (the copying path), and a sequence cut short by the closing quote.
        #expect(throws: DecodingError.self) { try JSONValue(parsing: [0x5B, 0x22, 0x5C, 0x6E, 0xFF, 0x22, 0x5D]) }
        #expect(throws: DecodingError.self) { try JSONValue(parsing: [0x5B, 0x22, 0x61, 0xE2, 0x82, 0x22, 0x5D]) }
        #expect(try JSONValue(parsing: [0x5B, 0x22, 0x5C, 0x6E, 0xE2, 0x82, 0xAC, 0x22, 0x5D]) == ["\n€"])
    }

    @Test(
        "513 '[' (the depth limit's error on the last byte, which traps Foundation's JSON scanner) is an error, in JSON and JSON5",
        arguments: [false, true]
    )
    func depthErrorOnTheLastByte(json5: Bool) {
        let body = bytes(String(repeating: "[", count: 513))
        #expect(throws: (any Error).self) { try JSONValue(parsing: body, allowJSON5: json5) }
    }

    @Test("deep nesting is an error, not a stack overflow")
    func deep() {
        let depth = 100_000
        let body = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(
            caught { try serializer.responseObject(for: response(), data: bytes(body)) }?.code == .cannotParseResponse
        )
    }

    @Test("a bad status with valid JSON throws -1011; with invalid JSON the parse error chains -1011")
    func statusChains() {
        let valid = caught { try serializer.responseObject(for: response(404), data: bytes(#"{"error":"nope"}"#)) }
        #expect(valid?.code == .unacceptableStatusCode && valid?.data == bytes(#"{"error":"nope"}"#))
        let invalid = caught { try serializer.responseObject(for: response(500), data: bytes("<html>")) }
        #expect(invalid?.code == .cannotParseResponse)
        #expect((invalid?.underlying as? SerializationError)?.code == .unacceptableStatusCode)
        let empty = caught { try serializer.responseObject(for: response(500), data: []) }
        #expect(empty?.code == .unacceptableStatusCode)
    }

    struct Widget: Decodable, Equatable, Sendable {
        var id: Int
        var name: String
    }

    @Test("JSONValue bridges to Decodable")
    func decodableBridge() throws {
        let v: JSONValue = ["id": 7, "name": "w"]
        #expect(try v.decode(Widget.self) == Widget(id: 7, name: "w"))
    }
}

@Suite struct DecodableResponseSerializerTests {
    struct Widget: Decodable, Equatable, Sendable {
        var id: Int
        var createdAt: String
    }

    @Test("decodes with a custom decoder")
    func decodes() throws {
        let s = DecodableResponseSerializer(Widget.self) {
            let d = JSONDecoder()
            d.keyDecodingStrategy = .convertFromSnakeCase
            return d
        }
        #expect(
            try s.value(for: response(), data: bytes(#"{"id":1,"created_at":"now"}"#))
                == Widget(id: 1, createdAt: "now")
        )
        #expect(try s.value(for: response(), data: []) == nil)
    }

    @Test("513 '[' is a parse error, not the crash it is in Foundation's JSON scanner")
    func depthErrorOnTheLastByte() {
        let e = caught {
            try DecodableResponseSerializer(Widget.self).responseObject(
                for: response(),
                data: bytes(String(repeating: "[", count: 513))
            )
        }
        #expect(e?.code == .cannotParseResponse)
    }

    @Test("a body that does not decode is a parse error with the DecodingError as cause")
    func mismatch() {
        let e = caught {
            try DecodableResponseSerializer(Widget.self).responseObject(for: response(), data: bytes(#"{"id":"x"}"#))
        }
        #expect(e?.code == .cannotParseResponse)
        #expect(e?.cause is DecodingError)
    }

    @Test("validation applies first")
    func validation() {
        let e = caught {
            try DecodableResponseSerializer(Widget.self).responseObject(
                for: response(200, "text/html"),
                data: bytes("{}")
            )
        }
        #expect(e?.code == .unacceptableContentType)
    }
}

@Suite struct PropertyListResponseSerializerTests {
    @Test("an XML property list becomes Sendable Swift values with booleans distinct from integers")
    func parses() throws {
        let plist: [String: Any] = [
            "s": "x", "i": 3, "b": true, "d": 1.5, "data": Data([9]), "a": ["y"], "o": ["k": "v"],
        ]
        let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
        let v =
            try PropertyListResponseSerializer().responseObject(
                for: response(200, "application/x-plist"),
                data: Array(data)
            ) as? [String: any Sendable]
        #expect(v?["s"] as? String == "x")
        #expect(v?["i"] as? Int == 3)
        #expect(v?["b"] as? Bool == true)
        #expect(v?["d"] as? Double == 1.5)
        #expect(v?["data"] as? Data == Data([9]))
        #expect((v?["a"] as? [any Sendable])?.first as? String == "y")
        #expect((v?["o"] as? [String: any Sendable])?["k"] as? String == "v")
    }

    @Test("only application/x-plist is acceptable; garbage is a parse error; a bad status chains")
    func errors() {
        let s = PropertyListResponseSerializer()
        #expect(
            caught { try s.responseObject(for: response(200, "application/json"), data: bytes("{}")) }?.code
                == .unacceptableContentType
        )
        #expect(
            caught {
                try s.responseObject(for: response(200, "application/x-plist"), data: bytes("<plist><dict><key>"))
            }?.code == .cannotParseResponse
        )
        let chained = caught {
            try s.responseObject(for: response(500, "application/x-plist"), data: bytes("\u{1}garbage"))
        }
        #expect(
            chained?.code == .cannotParseResponse
                && (chained?.underlying as? SerializationError)?.code == .unacceptableStatusCode
        )
    }
}

@Suite struct CompoundResponseSerializerTests {
    @Test("the first serializer that returns an object wins")
    func firstWins() throws {
        let compound = CompoundResponseSerializer([JSONResponseSerializer(), PropertyListResponseSerializer()])
        let json = try compound.responseObject(for: response(200, "application/json"), data: bytes("[1]"))
        #expect(json as? JSONValue == [1])
        let data = try PropertyListSerialization.data(fromPropertyList: ["a": "b"], format: .xml, options: 0)
        let plist = try compound.responseObject(for: response(200, "application/x-plist"), data: Array(data))
        #expect((plist as? [String: any Sendable])?["a"] as? String == "b")
    }

    @Test("when all fail, the first error is thrown with the second chained under it")
    func allFail() {
        let compound = CompoundResponseSerializer([JSONResponseSerializer(), PropertyListResponseSerializer()])
        let e = caught { try compound.responseObject(for: response(200, "text/html"), data: bytes("<p>")) }
        #expect(e?.code == .unacceptableContentType)
        #expect(e?.response?.mimeType == "text/html")
        let second = e?.underlying as? SerializationError
        #expect(second?.code == .unacceptableContentType)
    }

    @Test("when none returns an object and none fails, the compound validates and returns the bytes")
    func fallback() throws {
        let compound = CompoundResponseSerializer([JSONResponseSerializer()])
        #expect(try compound.responseObject(for: response(200, "application/json"), data: []) as? [UInt8] == [])
        #expect(caught { try compound.responseObject(for: response(204, nil), data: nil) } == nil)
    }

    @Test("an empty compound behaves as HTTPResponseSerializer")
    func empty() {
        let e = caught { try CompoundResponseSerializer([]).responseObject(for: response(503), data: nil) }
        #expect(e?.code == .unacceptableStatusCode)
    }
}
