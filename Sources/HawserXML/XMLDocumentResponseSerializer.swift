// AFXMLDocumentResponseSerializer: the body as a FoundationXML `XMLDocument` (on Linux too:
// swift-corelibs-foundation has XMLDocument, on libxml2).
import Foundation
import FoundationXML
import Hawser

/// The document ``XMLDocumentResponseSerializer`` made for one response, handed to whoever
/// receives the response object.
///
/// `XMLDocument` is a mutable class that is not `Sendable`; the serializer makes a new document
/// per response and never touches it again, so the receiver (the completion handler, the async
/// caller) owns it. Do not share it between threads without your own synchronization.
public struct XMLDocumentResponse: @unchecked Sendable {
    /// The parsed document.
    public let document: XMLDocument
}

/// AFXMLDocumentResponseSerializer: validates (`application/xml`, `text/xml`), then parses the
/// body into an `XMLDocument` with ``options``, returned inside an ``XMLDocumentResponse``.
///
/// As AF's: a content-type failure ends serialization; with a status-code failure the body is
/// still parsed and a parse failure is thrown with the status failure as its underlying error;
/// malformed XML is `.cannotParseResponse` (with the parser's error as the cause; the body is
/// checked with a strict `XMLParser` pass first, because swift-corelibs-foundation's
/// `XMLDocument` recovers from malformed input where Apple's refuses it). An empty body is
/// nil. External entities are never loaded (`nodeLoadExternalEntitiesNever` is always added), so
/// a response cannot make the client read local files or fetch URLs.
public struct XMLDocumentResponseSerializer: HTTPResponseValidating {
    public var acceptableStatusCodes: RangeSet<Int>? = RangeSet(200..<300)
    public var acceptableContentTypes: Set<String>? = ["application/xml", "text/xml"]
    /// `XMLDocument`'s input options (AF's `options`). Default: none.
    public var options: XMLNode.Options

    /// A serializer that accepts `application/xml` and `text/xml` with a 2xx status.
    /// - Parameter options: `XMLDocument`'s input options; `nodeLoadExternalEntitiesNever` is
    ///   added whatever is given.
    public init(options: XMLNode.Options = []) {
        self.options = options
    }

    public func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        try self.document(for: response, data: data)
    }

    /// ``responseObject(for:data:)`` with its static type: the document, or nil without a body.
    public func document(for response: HawserResponse?, data: [UInt8]?) throws -> XMLDocumentResponse? {
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
        let bytes = Data(data)
        // swift-corelibs' XMLDocument recovers from malformed input (libxml2's recover mode): a
        // strict pass with XMLParser first, so malformed XML is an error as on Apple's platforms.
        let check = XMLParser(data: bytes)
        check.shouldResolveExternalEntities = false
        let root = RootWatcher()
        check.delegate = root
        let document: XMLDocument
        do {
            guard check.parse() else {
                throw check.parserError ?? SerializationError(.cannotParseResponse, "XMLParser refused the document")
            }
            // A document cut off inside its first tag parses without an error: it has no root.
            guard root.closed else {
                throw SerializationError(.cannotParseResponse, "the document has no complete root element")
            }
            document = try XMLDocument(data: bytes, options: self.options.union(.nodeLoadExternalEntitiesNever))
        } catch {
            throw SerializationError(
                .cannotParseResponse,
                "the body is not well-formed XML (line \(check.lineNumber), column \(check.columnNumber)): \(error)",
                url: response?.url,
                response: response,
                data: data,
                cause: error
            ).chaining(statusFailure)
        }
        if let statusFailure { throw statusFailure }
        return XMLDocumentResponse(document: document)
    }
}

extension XMLDocumentResponseSerializer: CodableResponseSerialization {
    /// Register it before decoding a compound serializer that holds one:
    /// `CompoundResponseSerializer.register(XMLDocumentResponseSerializer.self)`.
    public static var codingName: String { "xmlDocument" }
    private enum Keys: String, CodingKey { case acceptableStatusCodes, acceptableContentTypes, options }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(options: XMLNode.Options(rawValue: try c.decode(UInt.self, forKey: .options)))
        self.acceptableStatusCodes = try StatusCodesCoding.decode(
            try c.decodeIfPresent([[Int]].self, forKey: .acceptableStatusCodes)
        )
        self.acceptableContentTypes = try c.decodeIfPresent([String].self, forKey: .acceptableContentTypes).map(
            Set.init
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(StatusCodesCoding.encode(self.acceptableStatusCodes), forKey: .acceptableStatusCodes)
        try c.encode(self.acceptableContentTypes?.sorted(), forKey: .acceptableContentTypes)
        try c.encode(self.options.rawValue, forKey: .options)
    }

    /// A copy (AF's NSCopying).
    public func copy() -> XMLDocumentResponseSerializer { self }
}

/// Whether the strict pass saw a whole root element (start and end).
private final class RootWatcher: NSObject, XMLParserDelegate {
    private var depth = 0
    private(set) var closed = false

    func parser(
        _ parser: XMLParser,
        didStartElement elementName: String,
        namespaceURI: String?,
        qualifiedName qName: String?,
        attributes attributeDict: [String: String] = [:]
    ) {
        self.depth += 1
    }

    func parser(
        _ parser: XMLParser,
        didEndElement elementName: String,
        namespaceURI: String?,
        qualifiedName qName: String?
    ) {
        self.depth -= 1
        if self.depth == 0 { self.closed = true }
    }
}
