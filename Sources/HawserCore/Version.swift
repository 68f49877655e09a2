#if !os(Linux)
#error(
    "Hawser runs on Linux only: its engine is built on epoll, eventfd, timerfd and netlink, which this platform does not have. Build it on Linux, or cross-compile with a Linux Swift SDK."
)
#endif

/// The version of the Hawser package, as released and recorded in `CHANGELOG.md`.
///
/// Hawser follows Semantic Versioning: while ``major`` is 0, a minor release may change the
/// public API and a patch release never does. The default `User-Agent` of a
/// ``SessionConfiguration`` and of the AFNetworking layer's request serializer is made from
/// ``userAgentProduct``, so servers see which release sent a request.
public enum HawserVersion {
    /// The major version: 0 until the public API is declared stable.
    public static let major = 0
    /// The minor version: raised for new features (and, while ``major`` is 0, API changes).
    public static let minor = 1
    /// The patch version: raised for fixes that change no public API.
    public static let patch = 0
    /// The version as `"major.minor.patch"`, for example `"0.1.0"`.
    public static let string = "\(major).\(minor).\(patch)"
    /// The product token for a `User-Agent` field (RFC 9110 §10.1.5): `"Hawser/"` followed by
    /// ``string``, for example `"Hawser/0.1.0"`.
    public static let userAgentProduct = "Hawser/\(string)"
}
