// AFXMLDocumentResponseSerializerTests, ported: content types, an XMLDocument for valid XML, an
// error for invalid XML, copying; plus Codable, the status rules and external entities.
import Foundation
import FoundationXML
import Hawser
import HawserXML
import Testing

private func response(_ status: Int = 200, _ contentType: String = "application/xml") -> HawserResponse {
    HawserResponse(
        url: URL(string: "http://example.com/doc")!,
        statusCode: status,
        headers: ["Content-Type": contentType]
    )
}

/// AF's AFXMLTestData().
private let xml = Array(
    #"<?xml version="1.0" encoding="UTF-8"?><foo attr1="1" attr2="2"><bar>someText</bar></foo>"#.utf8
)

@Suite struct XMLDocumentResponseSerializerTests {
    let serializer = XMLDocumentResponseSerializer()

    @Test(
        "application/xml and text/xml are accepted; nonstandard/xml is not (…AcceptsApplicationXMLMimeType, …TextXML, …DoesNotAccept…)"
    )
    func contentTypes() throws {
        try serializer.validate(response: response(200, "application/xml"), data: xml)
        try serializer.validate(response: response(200, "text/xml"), data: xml)
        #expect(throws: SerializationError.self) {
            try serializer.validate(response: response(200, "nonstandard/xml"), data: xml)
        }
    }

    @Test("valid XML gives an XMLDocument (…ReturnsNSXMLDocumentObjectForValidXML)")
    func document() throws {
        let object = try serializer.responseObject(for: response(), data: xml)
        let doc = try #require((object as? XMLDocumentResponse)?.document)
        #expect(doc.rootElement()?.name == "foo")
        #expect(doc.rootElement()?.attribute(forName: "attr2")?.stringValue == "2")
        #expect(doc.rootElement()?.elements(forName: "bar").first?.stringValue == "someText")
    }

    @Test("invalid XML is an error (…ReturnsErrorForInvalidXML); a bad status chains under it")
    func invalid() throws {
        #expect {
            _ = try serializer.responseObject(for: response(), data: Array("<foo".utf8))
        } throws: { e in
            (e as? SerializationError)?.code == .cannotParseResponse && (e as? SerializationError)?.cause != nil
        }
        #expect {
            _ = try serializer.responseObject(for: response(500), data: Array("<foo".utf8))
        } throws: { e in
            ((e as? SerializationError)?.underlying as? SerializationError)?.errorCode == -1011
        }
        #expect(throws: SerializationError.self) { _ = try serializer.responseObject(for: response(500), data: xml) }
        #expect(try serializer.responseObject(for: response(), data: []) == nil, "no body, no document")
    }

    @Test("copy and Codable keep status codes, content types and options (…CanBeCopied)")
    func copyAndCoding() throws {
        var s = XMLDocumentResponseSerializer(options: .nodePreserveWhitespace)
        s.acceptableStatusCodes = RangeSet(100..<101)
        s.acceptableContentTypes = ["test/type"]
        let copied = s.copy()
        #expect(
            copied.acceptableStatusCodes == s.acceptableStatusCodes
                && copied.acceptableContentTypes == s.acceptableContentTypes
        )
        #expect(copied.options == s.options)
        let back = try JSONDecoder().decode(XMLDocumentResponseSerializer.self, from: JSONEncoder().encode(s))
        #expect(back.options == .nodePreserveWhitespace && back.acceptableStatusCodes == RangeSet(100..<101))
        var parser = XMLParserResponseSerializer()
        parser.processesNamespaces = true
        let parserBack = try JSONDecoder().decode(XMLParserResponseSerializer.self, from: JSONEncoder().encode(parser))
        #expect(parserBack.processesNamespaces && !parserBack.keepsWhitespaceText)
        // In a compound, once registered.
        CompoundResponseSerializer.register(XMLDocumentResponseSerializer.self)
        let compound = CompoundResponseSerializer([s, JSONResponseSerializer()])
        let decoded = try JSONDecoder().decode(CompoundResponseSerializer.self, from: JSONEncoder().encode(compound))
        #expect(
            (decoded.responseSerializers.first as? XMLDocumentResponseSerializer)?.options == .nodePreserveWhitespace
        )
    }

    @Test("an external entity is never loaded, whatever the options say")
    func externalEntity() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-xmldoc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let secret = dir.appendingPathComponent("secret.txt")
        try Data("TOPSECRET".utf8).write(to: secret)
        let doc = #"<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "\#(secret.absoluteString)">]><a>&x;</a>"#
        let s = XMLDocumentResponseSerializer(options: [.nodeLoadExternalEntitiesAlways])
        let parsed = try? s.document(for: response(), data: Array(doc.utf8))
        #expect(parsed?.document.rootElement()?.stringValue?.contains("TOPSECRET") != true)
        #expect(parsed?.document.xmlString.contains("TOPSECRET") != true)
    }
}
