// SHA-256 pins of SubjectPublicKeyInfo, in the `sha256/BASE64` form shared by curl's
// --pinnedpubkey, OkHttp's CertificatePinner and HPKP (RFC 7469).

/// Why a pin string was refused.
public struct PinError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What exactly was wrong, quoting the pin.
    public var message: String

    /// Creates an error whose message says what was wrong with the pin.
    public init(_ message: String) { self.message = message }

    public var description: String { self.message }
}

/// A SHA-256 hash of a certificate's SubjectPublicKeyInfo (DER).
///
/// The key, not the certificate, is pinned, so a pin survives certificate renewal with the same
/// key. Several pins in a policy are alternatives (backup pins): any one matching suffices.
public struct PublicKeyPin: Sendable, Hashable, CustomStringConvertible {
    /// The 32-byte SHA-256 digest.
    public let sha256: [UInt8]

    /// A pin from a 32-byte digest.
    public init(sha256 digest: [UInt8]) throws(PinError) {
        guard digest.count == 32 else {
            throw PinError("a SHA-256 pin is 32 bytes, not \(digest.count)")
        }
        self.sha256 = digest
    }

    /// The pin of a certificate's public key.
    public init(certificate: Certificate) {
        self.sha256 = HawserTLS.sha256(certificate.publicKeyInfoDER)
    }

    /// Parses `sha256/BASE64` (44 base64 characters, padded, for 32 bytes). The `sha256/`
    /// prefix is required and lower-case; surrounding spaces are ignored; nothing else is.
    public init(_ string: String) throws(PinError) {
        let text = string.trimmingSpaces
        let prefix = "sha256/"
        guard text.hasPrefix(prefix) else {
            if let slash = text.firstIndex(of: "/") {
                throw PinError(
                    "pin '\(text)': unsupported hash '\(text[..<slash])' (only 'sha256/' pins are supported)"
                )
            }
            throw PinError("pin '\(text)' does not start with 'sha256/'")
        }
        let encoded = text.utf8.dropFirst(prefix.utf8.count)
        guard !encoded.isEmpty else { throw PinError("pin '\(text)' has no hash after 'sha256/'") }
        guard let digest = TrustBase64.decode(encoded, ignoringWhitespace: false) else {
            throw PinError("pin '\(text)': the hash is not valid padded base64")
        }
        guard digest.count == 32 else {
            throw PinError("pin '\(text)': the hash is \(digest.count) bytes, a SHA-256 hash is 32")
        }
        self.sha256 = digest
    }

    /// Parses a list of pins separated by `;` (curl's `--pinnedpubkey` form) or `,`. Empty
    /// entries are errors, so a stray separator cannot silently drop a pin.
    public static func parseList(_ string: String) throws(PinError) -> [PublicKeyPin] {
        let trimmed = string.trimmingSpaces
        guard !trimmed.isEmpty else { throw PinError("the pin list is empty") }
        var pins: [PublicKeyPin] = []
        var position = 0
        for part in trimmed.split(separator: ";", omittingEmptySubsequences: false)
            .flatMap({ $0.split(separator: ",", omittingEmptySubsequences: false) })
        {
            position += 1
            if part.trimmingSpaces.isEmpty { throw PinError("pin #\(position) of the list is empty") }
            pins.append(try PublicKeyPin(String(part)))
        }
        return pins
    }

    /// `sha256/BASE64`.
    public var description: String { "sha256/" + TrustBase64.encode(self.sha256) }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" || c == "\n" || c == "\r" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\n" || c == "\r" { s.removeLast() }
        return String(s)
    }
}
