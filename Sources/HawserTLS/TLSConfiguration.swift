// Public TLS settings of a session: protocol floor, client identity, session resumption.
// What to *trust* is decided by the server-trust evaluation (see ServerTrust and
// SecurityPolicy); these settings only shape the handshake.

/// A TLS protocol version.
public enum TLSVersion: Int, Sendable, Comparable, CustomStringConvertible {
    /// TLS 1.0 (RFC 2246). Offered only when ``TLSConfiguration/minimumVersion`` asks for it, which
    /// also lowers that session's OpenSSL security level to 0; deprecated by RFC 8996.
    case tls1_0 = 0x0301
    /// TLS 1.1 (RFC 4346). As ``tls1_0``: only on request, and deprecated by RFC 8996.
    case tls1_1 = 0x0302
    /// TLS 1.2 (RFC 5246): the lowest version offered by default.
    case tls1_2 = 0x0303
    /// TLS 1.3 (RFC 8446): the highest version OpenSSL 3 supports, offered by default.
    case tls1_3 = 0x0304

    public static func < (a: TLSVersion, b: TLSVersion) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .tls1_0: return "TLSv1"
        case .tls1_1: return "TLSv1.1"
        case .tls1_2: return "TLSv1.2"
        case .tls1_3: return "TLSv1.3"
        }
    }
}

/// A client certificate and its private key, presented when a server asks for one (mutual TLS).
public enum TLSClientIdentity: Sendable, Hashable {
    /// A PEM file holding the certificate (and optionally its chain), and a PEM private key
    /// (which may be the same file). `password` decrypts an encrypted key.
    case pem(certificateChainPath: String, privateKeyPath: String, password: String? = nil)
    /// A PKCS#12 (.p12 / .pfx) bundle.
    case pkcs12(path: String, password: String)
}

/// How a session speaks TLS.
public struct TLSConfiguration: Sendable, Hashable {
    /// The lowest protocol version offered (default TLS 1.2; TLS 1.0 and 1.1 are refused).
    public var minimumVersion: TLSVersion = .tls1_2
    /// The highest protocol version offered (nil: the highest OpenSSL supports, TLS 1.3).
    public var maximumVersion: TLSVersion? = nil
    /// The identity presented when a server requests a client certificate.
    public var clientIdentity: TLSClientIdentity? = nil
    /// Resume TLS sessions per origin (host and port), so a second connection skips the full
    /// handshake. Metrics say whether a handshake was resumed.
    public var sessionResumption = true
    /// OpenSSL cipher list for TLS 1.2 and below (nil: OpenSSL's default).
    public var cipherList: String? = nil
    /// Ask every server to staple an OCSP response (status_request), also when the session's
    /// trust evaluator does not check one: for delegates that evaluate ``ServerTrust`` themselves
    /// and read ``ServerTrust/stapledOCSPResponse``. Off by default; an evaluator whose
    /// ``RevocationPolicy`` checks stapled OCSP asks for it anyway.
    public var requestsStapledOCSP = false

    /// Creates the defaults: TLS 1.2 to 1.3, no client certificate, session resumption on,
    /// OpenSSL's default cipher list.
    public init() {}
}
