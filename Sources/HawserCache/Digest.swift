import CHawser

/// SHA-256 through OpenSSL and random names, for the disk store's file names.
enum Digest {
    /// The 32-byte SHA-256 digest of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer { _ = CHawser_sha256(input.baseAddress, input.count, $0.baseAddress) }
        }
        return digest
    }

    /// `byteCount` random bytes from the system generator, as lower-case hex (file names, nonces).
    static func randomHex(byteCount: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return Self.hex((0..<byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The SHA-256 digest of `bytes` as lower-case hex.
    static func sha256Hex(_ bytes: [UInt8]) -> String { Self.hex(Self.sha256(bytes)) }

    /// `bytes` as lower-case hex.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
