// SecurityPolicy as Codable: AFSecurityPolicy's NSSecureCoding, every setting round-tripped.
// Certificates are encoded as base64 DER and public-key pins as `sha256/BASE64`, both sorted, so
// the same policy always encodes to the same bytes.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension SecurityPolicy: Codable {
    private enum Keys: String, CodingKey {
        case pinningMode, pinnedCertificates, pinnedPublicKeyHashes, allowInvalidCertificates, validatesDomainName,
            anchors
        case allowsCommonNameFallback, revocation
    }
    private enum AnchorKeys: String, CodingKey {
        case kind, certificates
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let mode: PinningMode
        switch try c.decode(String.self, forKey: .pinningMode) {
        case "none": mode = .none
        case "publicKey": mode = .publicKey
        case "certificate": mode = .certificate
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .pinningMode,
                in: c,
                debugDescription: "unknown pinning mode '\(other)' (none, publicKey, certificate)"
            )
        }
        let certificates = try Self.certificates(
            try c.decode([String].self, forKey: .pinnedCertificates),
            key: .pinnedCertificates,
            in: c
        )
        self.init(pinningMode: mode, pinnedCertificates: Set(certificates))
        for pin in try c.decode([String].self, forKey: .pinnedPublicKeyHashes) {
            do {
                self.pinnedPublicKeyHashes.insert(try PublicKeyPin(pin))
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: .pinnedPublicKeyHashes,
                    in: c,
                    debugDescription: "\(error)"
                )
            }
        }
        self.allowInvalidCertificates = try c.decode(Bool.self, forKey: .allowInvalidCertificates)
        self.validatesDomainName = try c.decode(Bool.self, forKey: .validatesDomainName)
        // Absent in archives made before the setting existed: the default, off.
        self.allowsCommonNameFallback = try c.decodeIfPresent(Bool.self, forKey: .allowsCommonNameFallback) ?? false
        // Absent in archives made before the setting existed: off.
        self.revocation = try c.decodeIfPresent(RevocationPolicy.self, forKey: .revocation) ?? .off
        let a = try c.nestedContainer(keyedBy: AnchorKeys.self, forKey: .anchors)
        switch try a.decode(String.self, forKey: .kind) {
        case "system":
            self.anchors = .system
        case "custom":
            self.anchors = .custom(
                try Self.certificates(try a.decode([String].self, forKey: .certificates), key: .certificates, in: a)
            )
        case "systemAndCustom":
            self.anchors = .systemAndCustom(
                try Self.certificates(try a.decode([String].self, forKey: .certificates), key: .certificates, in: a)
            )
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .kind,
                in: a,
                debugDescription: "unknown anchors '\(other)' (system, custom, systemAndCustom)"
            )
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        let mode: String
        switch self.pinningMode {
        case .none: mode = "none"
        case .publicKey: mode = "publicKey"
        case .certificate: mode = "certificate"
        }
        try c.encode(mode, forKey: .pinningMode)
        try c.encode(
            self.pinnedCertificates.map { Data($0.derBytes).base64EncodedString() }.sorted(),
            forKey: .pinnedCertificates
        )
        try c.encode(self.pinnedPublicKeyHashes.map(\.description).sorted(), forKey: .pinnedPublicKeyHashes)
        try c.encode(self.allowInvalidCertificates, forKey: .allowInvalidCertificates)
        try c.encode(self.validatesDomainName, forKey: .validatesDomainName)
        try c.encode(self.allowsCommonNameFallback, forKey: .allowsCommonNameFallback)
        try c.encode(self.revocation, forKey: .revocation)
        var a = c.nestedContainer(keyedBy: AnchorKeys.self, forKey: .anchors)
        switch self.anchors {
        case .system:
            try a.encode("system", forKey: .kind)
        case .custom(let certificates):
            try a.encode("custom", forKey: .kind)
            try a.encode(certificates.map { Data($0.derBytes).base64EncodedString() }, forKey: .certificates)
        case .systemAndCustom(let certificates):
            try a.encode("systemAndCustom", forKey: .kind)
            try a.encode(certificates.map { Data($0.derBytes).base64EncodedString() }, forKey: .certificates)
        }
    }

    private static func certificates<K: CodingKey>(
        _ encoded: [String],
        key: K,
        in container: KeyedDecodingContainer<K>
    ) throws -> [Certificate] {
        try encoded.map { text in
            guard let der = Data(base64Encoded: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key,
                    in: container,
                    debugDescription: "a certificate is not base64"
                )
            }
            do {
                return try Certificate(derEncoded: Array(der))
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: key,
                    in: container,
                    debugDescription: "a certificate does not parse: \(error)"
                )
            }
        }
    }
}

extension RevocationPolicy: Codable {
    private enum Keys: String, CodingKey {
        case mode, checksStapledOCSP, crlFiles, checksWholeChain, allowedClockSkew
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let mode: Mode
        switch try c.decode(String.self, forKey: .mode) {
        case "off": mode = .off
        case "softFail": mode = .softFail
        case "strict": mode = .strict
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .mode,
                in: c,
                debugDescription: "unknown revocation mode '\(other)' (off, softFail, strict)"
            )
        }
        self.init(
            mode: mode,
            checksStapledOCSP: try c.decodeIfPresent(Bool.self, forKey: .checksStapledOCSP) ?? true,
            crlFiles: try c.decodeIfPresent([String].self, forKey: .crlFiles) ?? [],
            checksWholeChain: try c.decodeIfPresent(Bool.self, forKey: .checksWholeChain) ?? false,
            allowedClockSkew: try c.decodeIfPresent(Double.self, forKey: .allowedClockSkew) ?? 300
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        switch self.mode {
        case .off: try c.encode("off", forKey: .mode)
        case .softFail: try c.encode("softFail", forKey: .mode)
        case .strict: try c.encode("strict", forKey: .mode)
        }
        try c.encode(self.checksStapledOCSP, forKey: .checksStapledOCSP)
        try c.encode(self.crlFiles, forKey: .crlFiles)
        try c.encode(self.checksWholeChain, forKey: .checksWholeChain)
        try c.encode(self.allowedClockSkew, forKey: .allowedClockSkew)
    }
}
