// Certificates and pins parsed from bytes and files, on the test PKI (no network).

import Foundation
import HawserCore
import HawserTestServer
import Testing

@Suite struct CertificateParsingTests {
    @Test func propertiesOfTheGeneratedLeaf() throws {
        let p = try pki()
        let leaf = p.valid.certificate
        #expect(leaf.subjectSummary == "localhost")
        #expect(leaf.subject.contains("CN=localhost"))
        #expect(leaf.issuer.contains("CN=Hawser Test Intermediate CA"))
        #expect(leaf.subjectAlternativeNames == ["localhost", "127.0.0.1", "::1"])
        #expect(leaf.notValidBefore < Date())
        #expect(leaf.notValidAfter > Date())
        #expect(p.expired.certificate.notValidAfter < Date())
        #expect(p.notYetValid.certificate.notValidBefore > Date())
        #expect(leaf.publicKeyAlgorithm == "RSA")
        #expect(leaf.publicKeyBits == 2048)
        #expect(p.rsa1024.certificate.publicKeyBits == 1024)
        #expect(p.ecdsa.certificate.publicKeyAlgorithm == "EC")
        #expect(p.ecdsa.certificate.publicKeyBits == 256)
        #expect(!leaf.isCertificateAuthority)
        #expect(p.root.isCertificateAuthority && p.intermediate.isCertificateAuthority)
        #expect(p.root.isSelfSigned && p.selfSigned.certificate.isSelfSigned)
        #expect(!leaf.isSelfSigned && !p.intermediate.isSelfSigned)
        #expect(p.cnOnly.certificate.subjectAlternativeNames.isEmpty)
        #expect(p.wildcard.certificate.subjectAlternativeNames == ["*.hawser.localhost"])
        #expect(p.client.certificate.subjectSummary == "hawser-client")
    }

    @Test func publicKeyInfoAndPins() throws {
        let p = try pki()
        let leaf = p.valid.certificate
        #expect(leaf.publicKeyInfoDER.first == 0x30)
        let pin = leaf.publicKeySHA256Pin
        #expect(pin.hasPrefix("sha256/") && pin.count == 7 + 44)
        // The scenarios that share the leaf key share the pin; other keys differ.
        #expect(p.expired.certificate.publicKeySHA256Pin == pin)
        #expect(p.ecdsa.certificate.publicKeySHA256Pin != pin)
        #expect(try PublicKeyPin(pin) == PublicKeyPin(certificate: leaf))
        #expect(leaf.sha256Fingerprint.split(separator: ":").count == 32)
    }

    @Test func pemBundleAndDERFiles() throws {
        let p = try pki()
        let chain = try Certificate.load(contentsOf: p.valid.chainPath)
        #expect(chain == [p.valid.certificate, p.intermediate])
        #expect(try Certificate.load(contentsOf: p.rootDERPath) == [p.root])
        #expect(try Certificate.load(contentsOf: p.valid.derPath) == [p.valid.certificate])
        let reparsed = try Certificate(derEncoded: p.valid.certificate.derBytes)
        #expect(reparsed == p.valid.certificate)
        #expect(Set([reparsed, p.valid.certificate]).count == 1)
    }

    @Test func directoryLoadingSkipsKeysAndOtherFiles() throws {
        let p = try pki()
        // The PKI directory holds certificate PEM/DER files and key PEM files.
        let all = try Certificate.certificates(inDirectory: p.directory)
        #expect(all.contains(p.root) && all.contains(p.valid.certificate) && all.contains(p.intermediate))
        #expect(!all.isEmpty)
        let pinned = try SecurityPolicy.certificates(inDirectory: p.directory)
        #expect(pinned == Set(all))
        #expect(throws: CertificateError.self) { try Certificate.certificates(inDirectory: p.directory + "/missing") }
    }

    private func parseError(_ bytes: [UInt8]) -> CertificateError? {
        do {
            _ = try Certificate.parse(pemOrDER: bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func garbageEmptyAndTruncatedInput() throws {
        let p = try pki()
        #expect(parseError([])?.kind == .empty)
        #expect(parseError(Array(" \n\t".utf8))?.kind == .empty)
        #expect(parseError(Array("hello, world".utf8))?.kind == .unrecognizedFormat)
        let der = p.valid.certificate.derBytes
        #expect(parseError(Array(der.dropLast(10)))?.kind == .invalidDER)
        #expect(parseError([0x30, 0x03, 0x02, 0x01, 0x01])?.kind == .invalidDER)
        let trailing = parseError(der + [0x00, 0x01])
        #expect(trailing?.kind == .trailingData)
        #expect(trailing?.message.contains("2 bytes") == true)
    }

    @Test func malformedPEM() throws {
        let p = try pki()
        let pem = String(decoding: try Data(contentsOf: URL(fileURLWithPath: p.valid.certificatePath)), as: UTF8.self)
        // No block at all, only a key, an empty block.
        #expect(parseError(Array("-----BEGIN CERTIFICATE-----\n".utf8))?.kind == .invalidPEM)
        let keyOnly = try Data(contentsOf: URL(fileURLWithPath: p.valid.keyPath))
        let noCertificate = parseError([UInt8](keyOnly))
        #expect(noCertificate?.kind == .noCertificate)
        #expect(noCertificate?.message.contains("PRIVATE KEY") == true)
        #expect(parseError(Array("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n".utf8))?.kind == .empty)
        // Truncated base64, mismatched END, stray characters, missing END.
        let lines = pem.split(separator: "\n")
        // Whole base64 lines missing: the base64 is fine, the DER inside is cut short.
        let cut = (lines.prefix(3) + [lines.last!]).joined(separator: "\n")
        let cutError = parseError(Array(cut.utf8))
        #expect(cutError?.kind == .invalidDER)
        #expect(cutError?.message.contains("block #1") == true)
        // Base64 cut inside a quantum.
        let ragged = (lines.prefix(3) + [lines[3].dropLast(2)] + [lines.last!]).joined(separator: "\n")
        #expect(parseError(Array(ragged.utf8))?.kind == .invalidPEM)
        let mismatched = pem.replacing("-----END CERTIFICATE-----", with: "-----END X509 CRL-----")
        #expect(parseError(Array(mismatched.utf8))?.kind == .invalidPEM)
        let stray = pem.replacing("\n", with: "\n!", maxReplacements: 1)
        #expect(parseError(Array(stray.utf8))?.kind == .invalidPEM)
        let noEnd = pem.replacing("-----END CERTIFICATE-----", with: "")
        #expect(parseError(Array(noEnd.utf8))?.kind == .invalidPEM)
        // Text around blocks is fine.
        #expect(
            try Certificate.parse(pemOrDER: Array(("subject=CN=localhost\n" + pem + "\ntrailer\n").utf8)) == [
                p.valid.certificate
            ]
        )
    }

    @Test func unreadableFileNamesThePath() throws {
        do {
            _ = try Certificate.load(contentsOf: "/nonexistent/hawser.pem")
            Issue.record("loading a missing file succeeded")
        } catch {
            #expect(error.kind == .unreadable)
            #expect(error.path == "/nonexistent/hawser.pem")
            #expect(error.description.contains("/nonexistent/hawser.pem"))
        }
    }

    @Test func derChainFromTheTransport() throws {
        let p = try pki()
        let trust = try ServerTrust(host: "localhost", derChain: p.valid.presentedChain.map(\.derBytes))
        #expect(trust.certificates == p.valid.presentedChain)
        do {
            _ = try ServerTrust(host: "localhost", derChain: [p.valid.certificate.derBytes, [0x30, 0x00]])
            Issue.record("a garbage certificate was accepted")
        } catch {
            #expect(error.reason == .invalidCertificate)
            #expect(error.depth == 1)
        }
    }
}

@Suite struct PinParsingTests {
    @Test func validPinsRoundTrip() throws {
        let digest = [UInt8](0..<32)
        let pin = try PublicKeyPin(sha256: digest)
        #expect(try PublicKeyPin(pin.description) == pin)
        #expect(try PublicKeyPin("  \(pin)\n") == pin)
    }

    @Test(arguments: [
        "", "sha256/", "sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=", "SHA256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",  // no padding
        "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=",  // non-zero bits under the padding
        "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAA=",  // 20 bytes
        "sha256/AAAAAAAAAAAAAAAAAAAA AAAAAAAAAAAAAAAAAAAAAAA=",  // space inside
        "sha256/!AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==A",
    ])
    func malformedPinsAreRefused(_ text: String) {
        #expect(throws: PinError.self) { try PublicKeyPin(text) }
    }

    @Test func messagesSayWhatWasWrong() {
        func message(_ text: String) -> String {
            do {
                _ = try PublicKeyPin(text)
                return ""
            } catch {
                return error.message
            }
        }
        #expect(message("sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=").contains("unsupported hash 'sha1'"))
        #expect(message("sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAA=").contains("20 bytes"))
        #expect(message("sha256/@@@").contains("base64"))
    }

    @Test func lists() throws {
        let a = try PublicKeyPin(sha256: [UInt8](repeating: 1, count: 32))
        let b = try PublicKeyPin(sha256: [UInt8](repeating: 2, count: 32))
        #expect(try PublicKeyPin.parseList("\(a);\(b)") == [a, b])
        #expect(try PublicKeyPin.parseList("\(a), \(b)") == [a, b])
        #expect(throws: PinError.self) { try PublicKeyPin.parseList("\(a);;\(b)") }
        #expect(throws: PinError.self) { try PublicKeyPin.parseList("\(a);") }
        #expect(throws: PinError.self) { try PublicKeyPin.parseList("  ") }
        #expect(throws: PinError.self) { try SecurityPolicy(pinnedPublicKeyHashes: ["\(a)", "sha256/nope"]) }
    }
}
