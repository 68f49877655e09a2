// HTTPHeaders.swift: ordered, case-insensitive, duplicate-preserving header fields.
//
// Storage: ONE heap object (a ManagedBuffer) holding a span table followed by the raw
// field bytes:
//
//     [ span 0 | span 1 | … | span (spanCapacity-1) ][ raw bytes … ]
//       16 bytes each: nameStart, nameLength, valueStart, valueLength (UInt32,
//       offsets relative to the start of the raw bytes)
//
// A head from the parser is one allocation: the head's field lines are copied with
// one memcpy and the spans point into them. No String exists for a field until
// someone asks for it. Name comparisons are ASCII case-insensitive byte compares.

/// The shared storage of `HTTPHeaders`: one heap object, span table then raw bytes.
@usableFromInline
final class HeaderStorage: ManagedBuffer<HeaderStorage.Header, UInt8> {
    @usableFromInline
    struct Header {
        @usableFromInline var fieldCount: Int
        @usableFromInline var spanCapacity: Int
        @usableFromInline var byteCount: Int
        @usableFromInline var byteCapacity: Int
    }

    @usableFromInline
    static func make(spanCapacity: Int, byteCapacity: Int, fieldCount: Int = 0, byteCount: Int = 0) -> HeaderStorage {
        let buffer = self.create(minimumCapacity: spanCapacity &* HTTPHeaders.spanSize &+ byteCapacity) { _ in
            Header(fieldCount: fieldCount, spanCapacity: spanCapacity, byteCount: byteCount, byteCapacity: byteCapacity)
        }
        return unsafeDowncast(buffer, to: HeaderStorage.self)
    }

    /// The header, read without an exclusivity check (reads never overlap a write: see
    /// `HTTPHeaders`).
    @inlinable @inline(__always)
    var info: Header { self.withUnsafeMutablePointerToHeader { $0.pointee } }
}

/// Ordered, case-insensitive, duplicate-preserving header fields.
///
/// `@unchecked Sendable`: ManagedBuffer is not Sendable, but the storage is written only
/// while uniquely referenced (by the parser before it hands the headers out, or by a
/// mutating method after `isKnownUniquelyReferenced`); shared storage is only read.
public struct HTTPHeaders: @unchecked Sendable {
    /// nil: no fields.
    @usableFromInline var storage: HeaderStorage?

    @usableFromInline static let spanSize = 16

    /// No fields.
    @inlinable
    public init() {
        self.storage = nil
    }

    @usableFromInline
    init(storage: HeaderStorage) {
        self.storage = storage
    }

    /// The given fields, in order.
    public init(_ fields: [(name: String, value: String)]) {
        self.storage = nil
        if fields.isEmpty { return }
        var byteCount = 0
        for field in fields { byteCount += field.name.utf8.count + field.value.utf8.count }
        self.storage = HeaderStorage.make(spanCapacity: fields.count, byteCapacity: byteCount)
        for field in fields { self.add(name: field.name, value: field.value) }
    }

    /// The number of fields (duplicates count once each).
    @inlinable
    public var count: Int { self.storage?.info.fieldCount ?? 0 }

    // MARK: - Raw access

    @usableFromInline
    struct Span {
        @usableFromInline var nameStart: Int
        @usableFromInline var nameLength: Int
        @usableFromInline var valueStart: Int
        @usableFromInline var valueLength: Int

        @inlinable
        init(nameStart: Int, nameLength: Int, valueStart: Int, valueLength: Int) {
            self.nameStart = nameStart
            self.nameLength = nameLength
            self.valueStart = valueStart
            self.valueLength = valueLength
        }
    }

    @inlinable @inline(__always)
    static func span(_ elements: UnsafeMutablePointer<UInt8>, _ index: Int) -> Span {
        let raw = UnsafeRawPointer(elements) + index &* spanSize
        return Span(
            nameStart: Int(raw.loadUnaligned(as: UInt32.self)),
            nameLength: Int(raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self)),
            valueStart: Int(raw.loadUnaligned(fromByteOffset: 8, as: UInt32.self)),
            valueLength: Int(raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        )
    }

    /// Calls `body` with the raw name and value bytes of field `index` (< count).
    @inlinable
    func withRawField<R>(
        at index: Int,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        let storage = self.storage!
        let spanCapacity = storage.info.spanCapacity
        return try storage.withUnsafeMutablePointerToElements { elements in
            let span = Self.span(elements, index)
            let bytes = UnsafeRawPointer(elements) + spanCapacity &* Self.spanSize
            return try body(
                UnsafeRawBufferPointer(start: bytes + span.nameStart, count: span.nameLength),
                UnsafeRawBufferPointer(start: bytes + span.valueStart, count: span.valueLength)
            )
        }
    }

    /// The name of field `index` as a String.
    public func name(at index: Int) -> String {
        precondition(index >= 0 && index < self.count, "header index out of range")
        return self.withRawField(at: index) { name, _ in String(decoding: name, as: UTF8.self) }
    }

    /// The value of field `index` as a String (bytes that are not UTF-8 become U+FFFD).
    public func value(at index: Int) -> String {
        precondition(index >= 0 && index < self.count, "header index out of range")
        return self.withRawField(at: index) { _, value in String(decoding: value, as: UTF8.self) }
    }

    /// The value of field `index` as received, byte for byte: obs-text (0x80–0xFF, RFC 9110
    /// §5.5) that is not UTF-8 is kept, where ``value(at:)`` would give U+FFFD.
    public func valueBytes(at index: Int) -> [UInt8] {
        precondition(index >= 0 && index < self.count, "header index out of range")
        return self.withRawField(at: index) { _, value in Array(value) }
    }

    /// Indices of the fields named `name` (ASCII case-insensitive), in order.
    @inlinable
    func indices(of name: String) -> [Int] {
        var result: [Int] = []
        self.forEachIndex(of: name) {
            result.append($0)
            return true
        }
        return result
    }

    /// Calls `body` with each index whose name matches; stops when `body` returns false.
    @inlinable
    func forEachIndex(of name: String, _ body: (Int) -> Bool) {
        guard let storage = self.storage else { return }
        let count = storage.info.fieldCount
        let spanCapacity = storage.info.spanCapacity
        var name = name
        name.withUTF8 { wanted in
            storage.withUnsafeMutablePointerToElements { elements in
                let bytes = UnsafeRawPointer(elements) + spanCapacity &* Self.spanSize
                for index in 0..<count {
                    let span = Self.span(elements, index)
                    if span.nameLength == wanted.count,
                        wanted.isEmpty
                            || asciiCaseInsensitiveEquals(bytes + span.nameStart, wanted.baseAddress!, wanted.count)
                    {
                        if !body(index) { return }
                    }
                }
            }
        }
    }

    // MARK: - Lookup

    /// The first value of the field `name` (case-insensitive), or nil.
    public subscript(name: String) -> String? {
        var found: Int?
        self.forEachIndex(of: name) {
            found = $0
            return false
        }
        return found.map { self.value(at: $0) }
    }

    /// Every value of the field `name` (case-insensitive), in order. Comma lists are not split.
    public func values(for name: String) -> [String] {
        self.indices(of: name).map { self.value(at: $0) }
    }

    /// Every value of the field `name` (case-insensitive), in order, byte for byte as received
    /// (see ``valueBytes(at:)``): what `Set-Cookie` is parsed from.
    public func valueBytes(for name: String) -> [[UInt8]] {
        self.indices(of: name).map { self.valueBytes(at: $0) }
    }

    /// Whether a field named `name` (case-insensitive) is present.
    public func contains(name: String) -> Bool {
        var found = false
        self.forEachIndex(of: name) { _ in
            found = true
            return false
        }
        return found
    }

    /// Whether some field `name` holds `token` as an element of its comma-separated list
    /// (RFC 9110 §5.6.1), comparing ASCII case-insensitively: `Connection: close`,
    /// `Transfer-Encoding: gzip, chunked`. Parameters after `;` are not part of the token.
    public func contains(name: String, token: String) -> Bool {
        var found = false
        var token = token
        token.withUTF8 { wanted in
            self.forEachIndex(of: name) { index in
                found = self.withRawField(at: index) { _, value in
                    listContainsToken(value, wanted)
                }
                return !found
            }
        }
        return found
    }

    /// The value of `Content-Length` when every Content-Length field holds the same plain
    /// decimal number; nil if absent, malformed or ambiguous.
    public var contentLength: Int? {
        var result: Int?
        var valid = true
        self.forEachIndex(of: "content-length") { index in
            let value = self.withRawField(at: index) { _, value in ContentLength.parse(value) }
            switch value {
            case .value(let v) where result == nil || result == v: result = v
            default: valid = false
            }
            return valid
        }
        return valid ? result : nil
    }

    // MARK: - Mutation

    /// Appends a field (duplicates are kept). Validity is checked by the encoder, not here.
    public mutating func add(name: String, value: String) {
        var name = name
        var value = value
        name.withUTF8 { name in
            value.withUTF8 { value in
                self.addRaw(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value))
            }
        }
    }

    /// Removes every field named `name` (case-insensitive), then appends `name: value`.
    public mutating func replaceOrAdd(name: String, value: String) {
        self.remove(name: name)
        self.add(name: name, value: value)
    }

    /// Removes every field named `name` (case-insensitive).
    public mutating func remove(name: String) {
        let doomed = self.indices(of: name)
        if doomed.isEmpty { return }
        let count = self.count
        var kept = HTTPHeaders()
        if count > doomed.count {
            kept.storage = HeaderStorage.make(
                spanCapacity: count - doomed.count,
                byteCapacity: self.storage!.info.byteCount
            )
        }
        var next = 0
        for index in 0..<count {
            if next < doomed.count && doomed[next] == index {
                next += 1
                continue
            }
            self.withRawField(at: index) { name, value in kept.addRaw(name: name, value: value) }
        }
        self = kept
    }

    mutating func addRaw(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let needed = name.count + value.count
        self.reserve(fields: 1, bytes: needed)
        let storage = self.storage!
        let header = storage.info
        storage.withUnsafeMutablePointerToElements { elements in
            let raw = UnsafeMutableRawPointer(elements)
            let bytes = raw + header.spanCapacity * Self.spanSize
            let nameStart = header.byteCount
            let valueStart = nameStart + name.count
            if !name.isEmpty { (bytes + nameStart).copyMemory(from: name.baseAddress!, byteCount: name.count) }
            if !value.isEmpty { (bytes + valueStart).copyMemory(from: value.baseAddress!, byteCount: value.count) }
            let slot = raw + header.fieldCount * Self.spanSize
            slot.storeBytes(of: UInt32(truncatingIfNeeded: nameStart), toByteOffset: 0, as: UInt32.self)
            slot.storeBytes(of: UInt32(truncatingIfNeeded: name.count), toByteOffset: 4, as: UInt32.self)
            slot.storeBytes(of: UInt32(truncatingIfNeeded: valueStart), toByteOffset: 8, as: UInt32.self)
            slot.storeBytes(of: UInt32(truncatingIfNeeded: value.count), toByteOffset: 12, as: UInt32.self)
        }
        storage.header.fieldCount += 1
        storage.header.byteCount += needed
    }

    /// Makes the storage unique with room for `fields` more fields and `bytes` more bytes.
    private mutating func reserve(fields: Int, bytes: Int) {
        guard let old = self.storage else {
            self.storage = HeaderStorage.make(spanCapacity: Swift.max(8, fields), byteCapacity: Swift.max(256, bytes))
            return
        }
        let header = old.info
        if isKnownUniquelyReferenced(&self.storage) && header.fieldCount + fields <= header.spanCapacity
            && header.byteCount + bytes <= header.byteCapacity
        {
            return
        }
        let spanCapacity =
            Swift.max(header.spanCapacity, header.fieldCount + fields, 8)
            * (header.fieldCount + fields > header.spanCapacity ? 2 : 1)
        let byteCapacity = Swift.max(header.byteCapacity, 256, (header.byteCount + bytes) * 2)
        let grown = HeaderStorage.make(spanCapacity: spanCapacity, byteCapacity: byteCapacity)
        old.withUnsafeMutablePointerToElements { from in
            grown.withUnsafeMutablePointerToElements { to in
                let src = UnsafeRawPointer(from)
                let dst = UnsafeMutableRawPointer(to)
                dst.copyMemory(from: src, byteCount: header.fieldCount * Self.spanSize)
                (dst + spanCapacity * Self.spanSize).copyMemory(
                    from: src + header.spanCapacity * Self.spanSize,
                    byteCount: header.byteCount
                )
            }
        }
        grown.header.fieldCount = header.fieldCount
        grown.header.byteCount = header.byteCount
        self.storage = grown
    }
}

// MARK: - Sequence

extension HTTPHeaders: Sequence {
    public typealias Element = (name: String, value: String)

    public struct Iterator: IteratorProtocol {
        @usableFromInline let headers: HTTPHeaders
        @usableFromInline var index = 0

        @usableFromInline
        init(headers: HTTPHeaders) { self.headers = headers }

        public mutating func next() -> (name: String, value: String)? {
            guard self.index < self.headers.count else { return nil }
            defer { self.index += 1 }
            return (self.headers.name(at: self.index), self.headers.value(at: self.index))
        }
    }

    public func makeIterator() -> Iterator { Iterator(headers: self) }

    public var underestimatedCount: Int { self.count }
}

// MARK: - ExpressibleByDictionaryLiteral

extension HTTPHeaders: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements.map { (name: $0.0, value: $0.1) })
    }
}

// MARK: - CustomStringConvertible

extension HTTPHeaders: CustomStringConvertible {
    /// `["Name": "value", …]`, in order, duplicates included.
    public var description: String {
        "[" + self.map { "\"\($0.name)\": \"\($0.value)\"" }.joined(separator: ", ") + "]"
    }
}

// MARK: - Byte helpers shared with the parser

/// ASCII case-insensitive equality of `count` bytes at `a` and `b`.
@inlinable
func asciiCaseInsensitiveEquals(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
    for i in 0..<count {
        let x = a.load(fromByteOffset: i, as: UInt8.self)
        let y = b.load(fromByteOffset: i, as: UInt8.self)
        if x != y && asciiLower(x) != asciiLower(y) { return false }
    }
    return true
}

@inlinable @inline(__always)
func asciiLower(_ byte: UInt8) -> UInt8 {
    byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
}

/// Whether the comma-separated list `value` has an element whose token (before any `;`)
/// equals `token`, ASCII case-insensitively. Empty elements are ignored (RFC 9110 §5.6.1).
func listContainsToken(_ value: UnsafeRawBufferPointer, _ token: UnsafeBufferPointer<UInt8>) -> Bool {
    var found = false
    forEachListElement(value) { start, end in
        if end - start == token.count,
            asciiCaseInsensitiveEquals(value.baseAddress! + start, token.baseAddress!, token.count)
        {
            found = true
            return false
        }
        return true
    }
    return found
}

/// Calls `body(start, end)` for each non-empty element of a comma-separated list, trimmed
/// of OWS and cut at the first `;` (parameters); stops when `body` returns false.
func forEachListElement(_ value: UnsafeRawBufferPointer, _ body: (Int, Int) -> Bool) {
    var i = 0
    let n = value.count
    while i < n {
        var start = i
        while start < n && isOWS(value[start]) { start += 1 }
        var end = start
        while end < n && value[end] != 0x2C { end += 1 }  // ","
        let next = end + 1
        var tokenEnd = start
        while tokenEnd < end && value[tokenEnd] != 0x3B { tokenEnd += 1 }  // ";"
        while tokenEnd > start && isOWS(value[tokenEnd - 1]) { tokenEnd -= 1 }
        if tokenEnd > start && !body(start, tokenEnd) { return }
        i = next
    }
}
