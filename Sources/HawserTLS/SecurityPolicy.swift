// Who decides whether a server's chain is accepted: the protocol the transport calls after a
// handshake, the no-policy default, AFSecurityPolicy's rules (SecurityPolicy), and a per-host
// map of evaluators (ServerTrustManager, as Alamofire's). docs/SECURITY.md has the whole model.
import HawserPosix

/// Decides whether to accept a server's certificate chain. Called by the TLS transport after
/// each full handshake, before any request byte is sent.
public protocol ServerTrustEvaluating: Sendable {
    /// Returns when `trust` is acceptable for `host`; throws why not otherwise.
    func evaluate(_ trust: ServerTrust, forHost host: String) throws(TrustFailure)

    /// Reads from disk what ``evaluate(_:forHost:)`` will need (the system trust bundle, stores
    /// of custom anchors), so that evaluations on an event loop do no file IO. A session calls it
    /// on its IO pool before its first https connection. The default does nothing; an evaluator
    /// that reads the system store through ``ServerTrust/evaluate(anchors:hostname:at:allowsCommonNameFallback:revocation:)``
    /// can call ``TrustAnchors/load()`` here.
    func loadTrustStores()

    /// Whether the TLS client should ask `host` to staple an OCSP response to its handshake
    /// (the status_request extension), for ``evaluate(_:forHost:)`` to find in
    /// ``ServerTrust/stapledOCSPResponse``. The default is false: no evaluator of this package
    /// asks unless its ``RevocationPolicy`` checks stapled OCSP.
    func requestsStapledOCSP(forHost host: String) -> Bool
}

extension ServerTrustEvaluating {
    /// Nothing to load.
    public func loadTrustStores() {}

    /// No staple asked for.
    public func requestsStapledOCSP(forHost host: String) -> Bool { false }
}

/// What a client does with no policy: the chain must verify against `anchors` and, with
/// `validatesHost`, the leaf must name the host.
public struct DefaultTrustEvaluator: ServerTrustEvaluating {
    /// The certificates a chain must lead to (the system store by default).
    public var anchors: TrustAnchors
    /// Whether the leaf must name the host (RFC 6125). On by default.
    public var validatesHost: Bool
    /// Accept a leaf that names the host only in its subject's common name (no DNS
    /// subjectAltName at all). Off by default, as on Apple's platforms, in browsers, Go and
    /// Python; an opt-in for private CAs that still issue such certificates.
    public var allowsCommonNameFallback: Bool
    /// Revocation checking (docs/SECURITY.md, "Revocation"); ``RevocationPolicy/off`` by default.
    public var revocation: RevocationPolicy

    /// Creates the evaluator that a session without a policy uses.
    ///
    /// - Parameters:
    ///   - anchors: the certificates a chain must lead to; the system store by default.
    ///   - validatesHost: whether the leaf must name the host; on by default.
    ///   - allowsCommonNameFallback: accept a leaf naming the host only in its common name
    ///     (no DNS subjectAltName); off by default.
    ///   - revocation: revocation checking; off by default.
    public init(
        anchors: TrustAnchors = .system,
        validatesHost: Bool = true,
        allowsCommonNameFallback: Bool = false,
        revocation: RevocationPolicy = .off
    ) {
        self.anchors = anchors
        self.validatesHost = validatesHost
        self.allowsCommonNameFallback = allowsCommonNameFallback
        self.revocation = revocation
    }

    /// Loads the store of ``anchors`` (the system bundle by default) and the CRL files of
    /// ``revocation``.
    public func loadTrustStores() {
        self.anchors.load()
        try? self.revocation.loadCRLs()
    }

    /// True when ``revocation`` checks stapled OCSP.
    public func requestsStapledOCSP(forHost host: String) -> Bool { self.revocation.requestsStapledOCSP }

    /// Throws why `trust`'s chain is not acceptable for `host`.
    public func evaluate(_ trust: ServerTrust, forHost host: String) throws(TrustFailure) {
        _ = try trust.evaluate(
            anchors: self.anchors,
            hostname: self.validatesHost ? host : nil,
            allowsCommonNameFallback: self.allowsCommonNameFallback,
            revocation: self.revocation
        ).get()
    }
}

/// AFNetworking's `AFSecurityPolicy`: certificate or public-key pinning on top of chain
/// validation, with the same properties and the same decision rules (the differences, all
/// stricter, are listed in docs/SECURITY.md).
public struct SecurityPolicy: ServerTrustEvaluating {
    /// `AFSSLPinningMode`.
    public enum PinningMode: Sendable, Hashable {
        /// No pinning: the chain must validate (or `allowInvalidCertificates`).
        case none
        /// At least one public key of the chain must match a pinned key (the keys of
        /// ``SecurityPolicy/pinnedCertificates`` and ``SecurityPolicy/pinnedPublicKeyHashes``).
        case publicKey
        /// The pinned certificates are the only anchors: the chain must validate against them
        /// and contain one of them.
        case certificate
    }

    /// The pinning mode (`SSLPinningMode`), fixed at creation as in AFNetworking.
    public let pinningMode: PinningMode
    /// Certificates to pin. In ``PinningMode/certificate`` mode they are the anchors; in
    /// ``PinningMode/publicKey`` mode their public keys are pinned.
    public var pinnedCertificates: Set<Certificate>
    /// SHA-256 SPKI pins (`sha256/BASE64`), used in ``PinningMode/publicKey`` mode together
    /// with the keys of ``pinnedCertificates``; any one matching suffices, so extra pins are
    /// backup pins. (Not in AFNetworking.)
    public var pinnedPublicKeyHashes: Set<PublicKeyPin>
    /// Accept chains that do not validate (expired, self-signed, untrusted, wrong host…).
    /// Default false. With pinning, a pin must still match.
    public var allowInvalidCertificates = false
    /// Check that the leaf names the host. Default true.
    public var validatesDomainName = true
    /// Accept a leaf that names the host only in its subject's common name (no DNS
    /// subjectAltName). Default false, as on Apple's platforms since iOS 13 / macOS 10.15, where
    /// AFNetworking's own policy runs; an opt-in for private CAs. (Not in AFNetworking.)
    public var allowsCommonNameFallback = false
    /// The anchors of the first, ordinary chain validation (the system store by default).
    /// AFNetworking always uses the system's; this lets a client trust a private CA without
    /// allowing invalid certificates. (Not in AFNetworking.)
    public var anchors: TrustAnchors = .system
    /// Revocation checking of the validated chain: stapled OCSP and CRL files, soft-fail or
    /// strict (docs/SECURITY.md, "Revocation"). ``RevocationPolicy/off`` by default. With
    /// ``allowInvalidCertificates`` a certificate found revoked is still refused, but an unknown
    /// status is accepted, and a chain that does not validate is not checked. (Not in AFNetworking.)
    public var revocation: RevocationPolicy = .off

    /// `defaultPolicy`: no pinning, domain names validated, invalid certificates refused.
    public static var `default`: SecurityPolicy { SecurityPolicy(pinningMode: .none) }

    /// `policyWithPinningMode:`. AFNetworking fills the pins from the app bundle's `.cer`
    /// files; Linux has no bundle, so the pins start empty: set ``pinnedCertificates``, or use
    /// ``certificates(inDirectory:)``.
    public init(pinningMode: PinningMode) {
        self.init(pinningMode: pinningMode, pinnedCertificates: [])
    }

    /// `policyWithPinningMode:withPinnedCertificates:`.
    public init(pinningMode: PinningMode, pinnedCertificates: Set<Certificate>) {
        self.pinningMode = pinningMode
        self.pinnedCertificates = pinnedCertificates
        self.pinnedPublicKeyHashes = []
    }

    /// Public-key pinning on SPKI hashes (`sha256/BASE64` strings, as curl's `--pinnedpubkey`
    /// or OkHttp's CertificatePinner take them). Pass a backup pin or two besides the current key.
    /// - Throws: ``PinError`` for a malformed pin, naming it.
    public init(pinnedPublicKeyHashes pins: [String]) throws(PinError) {
        self.init(pinningMode: .publicKey, pinnedCertificates: [])
        for pin in pins { self.pinnedPublicKeyHashes.insert(try PublicKeyPin(pin)) }
    }

    /// The certificates of the `.cer`, `.der`, `.crt` and `.pem` files in a directory
    /// (`certificatesInBundle:`); see ``Certificate/certificates(inDirectory:)``.
    public static func certificates(inDirectory path: String) throws(CertificateError) -> Set<Certificate> {
        Set(try Certificate.certificates(inDirectory: path))
    }

    /// Every pinned key: those of ``pinnedCertificates`` and ``pinnedPublicKeyHashes``.
    public var pinnedPublicKeys: Set<PublicKeyPin> {
        self.pinnedPublicKeyHashes.union(self.pinnedCertificates.map(PublicKeyPin.init(certificate:)))
    }

    /// `evaluateServerTrust:forDomain:`: whether to accept the chain. `domain` nil skips the
    /// host check (as AFNetworking's does).
    public func evaluateServerTrust(_ trust: ServerTrust, forDomain domain: String?) -> Bool {
        do {
            try self.validateServerTrust(trust, forDomain: domain)
            return true
        } catch {
            return false
        }
    }

    /// The same decision as ``evaluateServerTrust(_:forDomain:)``, throwing why a chain is refused.
    public func validateServerTrust(_ trust: ServerTrust, forDomain domain: String?) throws(TrustFailure) {
        let hasPins: Bool
        switch self.pinningMode {
        case .none: hasPins = false
        case .certificate: hasPins = !self.pinnedCertificates.isEmpty
        case .publicKey: hasPins = !self.pinnedCertificates.isEmpty || !self.pinnedPublicKeyHashes.isEmpty
        }
        if domain != nil && self.allowInvalidCertificates && self.validatesDomainName && !hasPins {
            // AFNetworking refuses this configuration: with invalid certificates allowed there
            // is nothing to check the domain name against but pins.
            throw TrustFailure(
                .policyMisconfigured,
                "validating the domain name of an invalid (e.g. self-signed) certificate requires pinning: allowInvalidCertificates with validatesDomainName needs a pinning mode and pinned certificates or keys"
            )
        }
        guard let leaf = trust.leaf else {
            throw TrustFailure(.invalidCertificate, "the server presented no certificate")
        }
        let hostname = self.validatesDomainName ? domain : nil
        let cnFallback = self.allowsCommonNameFallback
        let base = trust.evaluate(
            anchors: self.anchors,
            hostname: hostname,
            allowsCommonNameFallback: cnFallback,
            revocation: self.revocation
        )
        switch self.pinningMode {
        case .none:
            if self.allowInvalidCertificates {
                if let failure = base.failure, failure.reason == .revoked { throw failure }
                return
            }
            _ = try base.get()
            return
        case .certificate, .publicKey:
            if let failure = base.failure, !self.allowInvalidCertificates { throw failure }
            if let failure = base.failure, failure.reason == .revoked { throw failure }
        }

        if self.pinningMode == .certificate {
            guard hasPins else {
                throw TrustFailure(
                    .policyMisconfigured,
                    "certificate pinning with no pinned certificates trusts no server"
                )
            }
            let pinned = trust.evaluate(
                anchors: .custom(Array(self.pinnedCertificates)),
                hostname: hostname,
                allowsCommonNameFallback: cnFallback,
                revocation: self.revocation
            )
            if var failure = pinned.failure {
                switch failure.reason {
                case .untrustedRoot, .selfSigned, .incompleteChain:
                    // No path from the leaf reaches a pinned certificate.
                    failure.reason = .pinMismatch
                    failure.message =
                        "none of the \(self.pinnedCertificates.count) pinned certificates is in the chain of '\(leaf.subjectSummary)': \(failure.message)"
                default:
                    break
                }
                throw failure
            }
            guard pinned.chain.contains(where: { self.pinnedCertificates.contains($0) }) else {
                throw TrustFailure(
                    .pinMismatch,
                    "none of the \(self.pinnedCertificates.count) pinned certificates is in the chain of '\(leaf.subjectSummary)'",
                    certificate: leaf,
                    depth: 0
                )
            }
            return
        }

        // Public-key pinning. A verified path proves every key on it; an unverified chain
        // (allowInvalidCertificates) proves only the leaf's key (the handshake showed the
        // server holds it), so only the leaf may match then.
        guard hasPins else {
            throw TrustFailure(
                .policyMisconfigured,
                "public-key pinning with no pinned certificates or keys trusts no server"
            )
        }
        let candidates: [Certificate]
        if base.isTrusted {
            candidates = base.chain
        } else {
            if let hostname, !leaf.matches(host: hostname, allowsCommonNameFallback: cnFallback) {
                throw TrustFailure(
                    .hostnameMismatch,
                    "certificate '\(leaf.subjectSummary)' is not valid for '\(hostname)' (\(leaf.namesExplanation(for: hostname, commonNameFallback: cnFallback)))",
                    certificate: leaf,
                    depth: 0
                )
            }
            candidates = [leaf]
        }
        let keys = self.pinnedPublicKeys
        if candidates.contains(where: { keys.contains(PublicKeyPin(certificate: $0)) }) { return }
        let seen = candidates.map { "'\($0.subjectSummary)' \(PublicKeyPin(certificate: $0))" }.joined(separator: ", ")
        throw TrustFailure(
            .pinMismatch,
            "none of the \(keys.count) pinned public keys is in the \(base.isTrusted ? "verified chain" : "unverified chain's leaf") (\(seen))",
            certificate: leaf,
            depth: 0
        )
    }

    /// Loads the store of ``anchors`` (the system bundle by default), and in certificate mode
    /// the store of the pinned certificates.
    public func loadTrustStores() {
        self.anchors.load()
        try? self.revocation.loadCRLs()
        if self.pinningMode == .certificate, !self.pinnedCertificates.isEmpty {
            TrustAnchors.custom(Array(self.pinnedCertificates)).load()
        }
    }

    /// True when ``revocation`` checks stapled OCSP.
    public func requestsStapledOCSP(forHost host: String) -> Bool { self.revocation.requestsStapledOCSP }

    /// ``ServerTrustEvaluating``: ``validateServerTrust(_:forDomain:)`` with the connected host.
    public func evaluate(_ trust: ServerTrust, forHost host: String) throws(TrustFailure) {
        try self.validateServerTrust(trust, forDomain: host)
    }
}

/// Evaluators per host, as Alamofire's `ServerTrustManager`: exact host names, `*.example.com`
/// (exactly one label before `example.com`) and `**.example.com` (`example.com` itself and any
/// subdomain), and a default evaluator for every other host.
///
/// The most specific entry wins: the exact host, then `*.` for its parent domain, then the
/// `**.` entry with the longest domain. Names compare byte for byte, ASCII letters
/// case-insensitively, a trailing dot ignored.
public struct ServerTrustManager: ServerTrustEvaluating {
    // Keyed by the normalized name's bytes: String keys would compare by Unicode canonical
    // equivalence, and a "." followed by a combining mark is not a "." Character, so labels
    // would be cut in other places than DNS cuts them.
    private let exact: [[UInt8]: any ServerTrustEvaluating]
    private let oneLabel: [[UInt8]: any ServerTrustEvaluating]
    private let anyDepth: [[UInt8]: any ServerTrustEvaluating]
    /// Used for hosts no entry matches; nil refuses them (Alamofire's `allHostsMustBeEvaluated`).
    public let defaultEvaluator: (any ServerTrustEvaluating)?

    /// - Parameters:
    ///   - evaluators: host patterns → evaluators.
    ///   - defaultEvaluator: for every other host; nil refuses them with `.policyMisconfigured`.
    /// - Throws: `.policyMisconfigured` for a pattern with `*` anywhere but a leading `*.` or
    ///   `**.`, an empty name or label, or two patterns that are the same after normalisation.
    public init(
        evaluators: [String: any ServerTrustEvaluating],
        default defaultEvaluator: (any ServerTrustEvaluating)? = DefaultTrustEvaluator()
    ) throws(TrustFailure) {
        var exact: [[UInt8]: any ServerTrustEvaluating] = [:]
        var oneLabel: [[UInt8]: any ServerTrustEvaluating] = [:]
        var anyDepth: [[UInt8]: any ServerTrustEvaluating] = [:]
        let star = UInt8(ascii: "*")
        let dot = UInt8(ascii: ".")
        for (pattern, evaluator) in evaluators {
            var name = Self.normalize(pattern)[...]
            let isAnyDepth = name.starts(with: [star, star, dot])
            let isOneLabel = !isAnyDepth && name.starts(with: [star, dot])
            if isAnyDepth { name = name.dropFirst(3) } else if isOneLabel { name = name.dropFirst(2) }
            guard !name.contains(star), !hasEmptyLabel(name) else {
                throw TrustFailure(
                    .policyMisconfigured,
                    "'\(pattern)' is not a host pattern (use 'host', '*.domain' or '**.domain')"
                )
            }
            let key = Array(name)
            let duplicate: Bool
            if isAnyDepth {
                duplicate = anyDepth.updateValue(evaluator, forKey: key) != nil
            } else if isOneLabel {
                duplicate = oneLabel.updateValue(evaluator, forKey: key) != nil
            } else {
                duplicate = exact.updateValue(evaluator, forKey: key) != nil
            }
            if duplicate {
                throw TrustFailure(
                    .policyMisconfigured,
                    "host pattern '\(pattern)' is given twice (names are case-insensitive)"
                )
            }
        }
        self.exact = exact
        self.oneLabel = oneLabel
        self.anyDepth = anyDepth
        self.defaultEvaluator = defaultEvaluator
    }

    /// The evaluator for `host`: the most specific matching entry, else the default (nil when
    /// there is none).
    public func evaluator(forHost host: String) -> (any ServerTrustEvaluating)? {
        let name = Self.normalize(host)
        if let e = self.exact[name] { return e }
        let dot = UInt8(ascii: ".")
        if let first = name.firstIndex(of: dot) {
            let parent = Array(name[(first + 1)...])
            if !parent.isEmpty, let e = self.oneLabel[parent] { return e }
        }
        var suffix = name[...]
        while !suffix.isEmpty {
            if let e = self.anyDepth[Array(suffix)] { return e }
            guard let next = suffix.firstIndex(of: dot) else { break }
            suffix = suffix[(next + 1)...]
        }
        return self.defaultEvaluator
    }

    /// Loads the stores of every evaluator in the map and of the default.
    public func loadTrustStores() {
        for map in [self.exact, self.oneLabel, self.anyDepth] {
            for evaluator in map.values { evaluator.loadTrustStores() }
        }
        self.defaultEvaluator?.loadTrustStores()
    }

    /// Whether the evaluator for `host` asks for a stapled OCSP response.
    public func requestsStapledOCSP(forHost host: String) -> Bool {
        self.evaluator(forHost: host)?.requestsStapledOCSP(forHost: host) ?? false
    }

    public func evaluate(_ trust: ServerTrust, forHost host: String) throws(TrustFailure) {
        guard let evaluator = self.evaluator(forHost: host) else {
            throw TrustFailure(
                .policyMisconfigured,
                "no trust evaluator is configured for host '\(host)' and there is no default"
            )
        }
        try evaluator.evaluate(trust, forHost: host)
    }

    /// ASCII letters lower-cased, IPv6 brackets and one trailing dot removed, as bytes.
    private static func normalize(_ host: String) -> [UInt8] {
        var h = host.utf8[...]
        if h.first == UInt8(ascii: "["), h.last == UInt8(ascii: "]") { h = h.dropFirst().dropLast() }
        if h.last == UInt8(ascii: ".") { h = h.dropLast() }
        return h.map(asciiLowercase)
    }
}
