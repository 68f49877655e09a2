// AFXMLParserResponseSerializerTests' intent: XML content types, validation, and a parsed tree.
import Foundation
import Hawser
import HawserXML
import Testing

private func response(_ status: Int = 200, _ contentType: String? = "application/xml") -> HawserResponse {
    var headers = HTTPHeaders()
    if let contentType { headers.add(name: "Content-Type", value: contentType) }
    return HawserResponse(url: URL(string: "http://example.com/feed")!, statusCode: status, headers: headers)
}

@Suite struct XMLParserResponseSerializerTests {
    let serializer = XMLParserResponseSerializer()

    @Test("application/xml and text/xml are acceptable, with or without parameters")
    func acceptableTypes() throws {
        for ct in ["application/xml", "text/xml", "text/xml; charset=utf-8"] {
            let root = try serializer.document(for: response(200, ct), data: Array("<a/>".utf8))
            #expect(root?.name == "a")
        }
    }

    @Test("another content type with a body is -1016 in AF's response domain")
    func unacceptableType() {
        #expect {
            _ = try serializer.responseObject(for: response(200, "application/json"), data: Array("<a/>".utf8))
        } throws: { e in
            let s = e as? SerializationError
            return s?.code == .unacceptableContentType && s?.errorCode == -1016
                && s?.domain == SerializationError.responseDomain
        }
    }

    @Test("a document becomes a tree of elements, attributes, text and CDATA")
    func tree() throws {
        let xml =
            #"<?xml version="1.0"?><feed lang="en"><entry id="1"><title>One &amp; two</title></entry><entry id="2"><title><![CDATA[<b>]]></title></entry></feed>"#
        let root = try #require(try serializer.document(for: response(), data: Array(xml.utf8)))
        #expect(root.name == "feed")
        #expect(root.attributes == ["lang": "en"])
        let entries = root.children(named: "entry")
        #expect(entries.map { $0.attributes["id"] } == ["1", "2"])
        #expect(entries[0]["title"]?.text == "One & two")
        #expect(entries[1]["title"]?.text == "<b>")
        #expect(root.text == "")
    }

    @Test("malformed XML is a parse error carrying the response and data")
    func malformed() {
        let data = Array("<a><b></a>".utf8)
        #expect {
            _ = try serializer.responseObject(for: response(), data: data)
        } throws: { e in
            let s = e as? SerializationError
            return s?.code == .cannotParseResponse && s?.data == data && s?.response?.statusCode == 200
        }
    }

    @Test("a bad status with malformed XML: the parse error with the -1011 error chained under it")
    func statusUnderParseError() {
        #expect {
            _ = try serializer.responseObject(for: response(500), data: Array("<a>".utf8))
        } throws: { e in
            let s = e as? SerializationError
            return s?.code == .cannotParseResponse && (s?.underlying as? SerializationError)?.errorCode == -1011
        }
    }

    @Test("an external entity is not resolved")
    func externalEntity() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-xml-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let secret = dir.appendingPathComponent("secret.txt")
        try Data("TOPSECRET".utf8).write(to: secret)
        let xml = #"<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "\#(secret.absoluteString)">]><a>&x;</a>"#
        let root = try? serializer.document(for: response(), data: Array(xml.utf8))
        #expect(root?.text.contains("TOPSECRET") != true)
    }
}
