// HTTP1Limits.swift: every bound the parser enforces. Defaults and their precedents are
// in docs/HTTP1.md.

/// Bounds on what a peer may make the parser look at. Each one hit is a typed error.
/// Byte limits are used clamped to 0...UInt32.max.
public struct HTTP1Limits: Sendable, Hashable {
    /// Bytes of a head, start line and blank line included (64 KiB).
    public var maxHeadBytes: Int
    /// Field lines in a head, or in a trailer section (256).
    public var maxHeaderCount: Int
    /// Bytes of one line (start line or field line) before its LF, CR included (16 KiB).
    public var maxLineLength: Int
    /// Bytes of a chunk-size line after the size digits: BWS, extensions (1 KiB).
    public var maxChunkExtensionBytes: Int
    /// Bytes of a trailer section, blank line included (16 KiB).
    public var maxTrailerBytes: Int

    /// Creates limits; each argument defaults to the value documented on its property.
    public init(
        maxHeadBytes: Int = 64 * 1024,
        maxHeaderCount: Int = 256,
        maxLineLength: Int = 16 * 1024,
        maxChunkExtensionBytes: Int = 1024,
        maxTrailerBytes: Int = 16 * 1024
    ) {
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxLineLength = maxLineLength
        self.maxChunkExtensionBytes = maxChunkExtensionBytes
        self.maxTrailerBytes = maxTrailerBytes
    }

    /// The defaults: 64 KiB heads, 256 fields, 16 KiB lines, 1 KiB chunk extensions, 16 KiB trailers.
    public static let `default` = HTTP1Limits()
}

/// What a parser does with obsolete line folding (obs-fold, RFC 9112 §5.2): a field line
/// continued on the next line, which starts with SP or HTAB.
///
/// RFC 9112 §5.2: a user agent that receives obs-fold in a response must replace each one
/// with SP before interpreting the field value; a server may reject a request that has it.
/// The response parser takes ``replaceWithSpace`` by default; the request parser always
/// rejects (``HTTP1ParseError/Kind/obsoleteLineFolding``).
public enum HTTP1ObsoleteLineFolding: Sendable, Hashable {
    /// Unfold: each obs-fold (the line end, and the whitespace around it) becomes one SP in the
    /// field's value (h11, curl and http-parser accept such responses too). A line that starts with whitespace where
    /// there is no field to continue (the first field line, or the first trailer line) is still
    /// rejected: RFC 9112 §2.2 lets a recipient reject it.
    case replaceWithSpace
    /// Reject the message with ``HTTP1ParseError/Kind/obsoleteLineFolding``.
    case reject
}
