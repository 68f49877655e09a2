// AFXMLParserResponseSerializer, in its own module so that only programs that want XML link
// FoundationXML (and with it libxml2).
import Foundation
import FoundationXML
import Hawser

/// An XML element as a Sendable value: what ``XMLParserResponseSerializer`` returns.
public struct XMLElementNode: Sendable, Hashable {
    /// The element name, with its prefix if it had one (`soap:Envelope`).
    public var name: String
    /// The attributes (XMLParser reports them unordered).
    public var attributes: [String: String]
    /// Child elements, in document order.
    public var children: [XMLElementNode]
    /// The character data directly inside this element (CDATA included), concatenated.
    public var text: String

    /// Creates an element (tests build expected trees with it); each parameter sets the property of
    /// the same name.
    public init(name: String, attributes: [String: String] = [:], children: [XMLElementNode] = [], text: String = "") {
        self.name = name
        self.attributes = attributes
        self.children = children
        self.text = text
    }

    /// The first child element named `name`.
    public subscript(name: String) -> XMLElementNode? {
        self.children.first { $0.name == name }
    }

    /// Every child element named `name`.
    public func children(named name: String) -> [XMLElementNode] {
        self.children.filter { $0.name == name }
    }
}

/// AFXMLParserResponseSerializer: validates (`application/xml`, `text/xml`), then parses the
/// body with Foundation's `XMLParser` and returns the root ``XMLElementNode``.
///
/// AF returns an unstarted `NSXMLParser`; an `XMLParser` is a mutable, non-Sendable object that
/// cannot cross to the completion handler in Swift 6, so Hawser parses here and returns a value
/// tree. Malformed XML is therefore an error (`.cannotParseResponse`) at serialization time, not
/// later. External entities are never resolved.
public struct XMLParserResponseSerializer: HTTPResponseValidating {
    public var acceptableStatusCodes: RangeSet<Int>? = RangeSet(200..<300)
    public var acceptableContentTypes: Set<String>? = ["application/xml", "text/xml"]
    /// Whether element names are reported without prefix, with namespace processing on.
    public var processesNamespaces = false
    /// Whether whitespace-only text between elements is kept in ``XMLElementNode/text``.
    public var keepsWhitespaceText = false

    /// Creates a serializer that accepts `application/xml` and `text/xml` bodies with a 2xx status,
    /// without namespace processing, dropping whitespace-only text.
    public init() {}

    public func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        try self.document(for: response, data: data)
    }

    /// ``responseObject(for:data:)`` with its static type: the root element, or nil without a body.
    public func document(for response: HawserResponse?, data: [UInt8]?) throws -> XMLElementNode? {
        var statusFailure: SerializationError?
        do {
            try self.validate(response: response, data: data)
        } catch let e as SerializationError {
            if e.contains(.unacceptableContentType) { throw e }
            statusFailure = e
        }
        guard let data, !data.isEmpty else {
            if let statusFailure { throw statusFailure }
            return nil
        }
        let builder = TreeBuilder(keepsWhitespace: self.keepsWhitespaceText)
        let parser = XMLParser(data: Data(data))
        parser.shouldResolveExternalEntities = false
        parser.shouldProcessNamespaces = self.processesNamespaces
        parser.delegate = builder
        let ok = parser.parse()
        guard ok, let root = builder.root else {
            let detail = parser.parserError.map { "\($0)" } ?? "no root element"
            throw SerializationError(
                .cannotParseResponse,
                "the body is not well-formed XML (line \(parser.lineNumber), column \(parser.columnNumber)): \(detail)",
                url: response?.url,
                response: response,
                data: data,
                cause: parser.parserError
            ).chaining(statusFailure)
        }
        if let statusFailure { throw statusFailure }
        return root
    }
}

private final class TreeBuilder: NSObject, XMLParserDelegate {
    let keepsWhitespace: Bool
    var stack: [XMLElementNode] = []
    var root: XMLElementNode?

    init(keepsWhitespace: Bool) { self.keepsWhitespace = keepsWhitespace }

    func parser(
        _ parser: XMLParser,
        didStartElement elementName: String,
        namespaceURI: String?,
        qualifiedName qName: String?,
        attributes attributeDict: [String: String] = [:]
    ) {
        self.stack.append(XMLElementNode(name: elementName, attributes: attributeDict))
    }

    func parser(
        _ parser: XMLParser,
        didEndElement elementName: String,
        namespaceURI: String?,
        qualifiedName qName: String?
    ) {
        guard var done = self.stack.popLast() else { return }
        if !self.keepsWhitespace, done.text.allSatisfy(\.isWhitespace) { done.text = "" }
        if self.stack.isEmpty {
            self.root = done
        } else {
            self.stack[self.stack.count - 1].children.append(done)
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard !self.stack.isEmpty else { return }
        self.stack[self.stack.count - 1].text += string
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        guard !self.stack.isEmpty else { return }
        self.stack[self.stack.count - 1].text += String(decoding: CDATABlock, as: UTF8.self)
    }
}

extension XMLParserResponseSerializer: CodableResponseSerialization {
    /// Register it before decoding a compound serializer that holds one:
    /// `CompoundResponseSerializer.register(XMLParserResponseSerializer.self)`.
    public static var codingName: String { "xmlParser" }
    private enum Keys: String, CodingKey {
        case acceptableStatusCodes, acceptableContentTypes, processesNamespaces, keepsWhitespaceText
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init()
        self.acceptableStatusCodes = try StatusCodesCoding.decode(
            try c.decodeIfPresent([[Int]].self, forKey: .acceptableStatusCodes)
        )
        self.acceptableContentTypes = try c.decodeIfPresent([String].self, forKey: .acceptableContentTypes).map(
            Set.init
        )
        self.processesNamespaces = try c.decode(Bool.self, forKey: .processesNamespaces)
        self.keepsWhitespaceText = try c.decode(Bool.self, forKey: .keepsWhitespaceText)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(StatusCodesCoding.encode(self.acceptableStatusCodes), forKey: .acceptableStatusCodes)
        try c.encode(self.acceptableContentTypes?.sorted(), forKey: .acceptableContentTypes)
        try c.encode(self.processesNamespaces, forKey: .processesNamespaces)
        try c.encode(self.keepsWhitespaceText, forKey: .keepsWhitespaceText)
    }

    /// A copy (AF's NSCopying).
    public func copy() -> XMLParserResponseSerializer { self }
}
