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
