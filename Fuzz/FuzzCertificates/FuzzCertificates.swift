// FuzzCertificates: libFuzzer target for the trust inputs that come from files and settings:
// Certificate.parse(pemOrDER:) (PEM bundles and DER), the SPKI pin parser, and
// ServerTrustManager's host patterns. Built with -DFUZZING (see Fuzz/run.sh); without it, a
// replay `main` runs the same checks on the files named on the command line.
//
// Invariants (a trap is a finding; any thrown CertificateError / PinError / TrustFailure is fine):
// - every parsed certificate re-parses from its own DER to an equal value with equal properties;
// - a parsed certificate can be evaluated (alone, as its own anchor) and host-matched without
//   crashing, and its pin round-trips through the pin parser;
// - a parsed pin prints as a string that parses back to the same pin.

import FuzzSupport
import HawserCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCertificates(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    checkCertificates(bytes)
    let text = String(decoding: bytes.prefix(4096), as: UTF8.self)
    checkPins(text)
    checkHostPatterns(text)
    return 0
}

private func checkCertificates(_ bytes: [UInt8]) {
    guard let certificates = try? Certificate.parse(pemOrDER: bytes) else { return }
    if certificates.isEmpty { fatalError("parse returned no certificate and no error") }
    for certificate in certificates.prefix(8) {
        let again: Certificate
        do {
            again = try Certificate(derEncoded: certificate.derBytes)
        } catch {
            fatalError("a parsed certificate does not re-parse from its DER: \(error)")
        }
        if again != certificate || again.subject != certificate.subject || again.issuer != certificate.issuer
            || again.subjectAlternativeNames != certificate.subjectAlternativeNames
            || again.publicKeyInfoDER != certificate.publicKeyInfoDER
            || again.notValidBefore != certificate.notValidBefore || again.notValidAfter != certificate.notValidAfter
        {
            fatalError("re-parsing changed the certificate: \(certificate) vs \(again)")
        }
        let pin = certificate.publicKeySHA256Pin
        guard let parsed = try? PublicKeyPin(pin), parsed == PublicKeyPin(certificate: certificate) else {
            fatalError("the certificate's own pin \(pin) does not parse back")
        }
        _ = certificate.subjectSummary
        _ = certificate.isSelfSigned
        _ = certificate.matches(host: "localhost")
        _ = certificate.matches(host: "127.0.0.1")
        for name in certificate.subjectAlternativeNames.prefix(4) { _ = certificate.matches(host: name) }
    }
    // Chain verification over whatever was parsed: the first as leaf, the rest as
    // intermediates, each of them also an anchor.
    let trust = ServerTrust(host: "localhost", certificates: Array(certificates.prefix(8)))
    let result = trust.evaluate(anchors: .custom(Array(certificates.prefix(8))), validatesHost: true)
    if result.chain.isEmpty { fatalError("evaluation of a non-empty chain built no chain at all") }
    if let failure = result.failure, failure.message.isEmpty { fatalError("a failure without a message") }
}

private func checkPins(_ text: String) {
    if let pin = try? PublicKeyPin(text) {
        guard let again = try? PublicKeyPin(pin.description), again == pin else {
            fatalError("pin '\(pin)' does not round-trip")
        }
    }
    if let pins = try? PublicKeyPin.parseList(text) {
        if pins.isEmpty { fatalError("parseList returned no pin and no error") }
        let joined = pins.map(\.description).joined(separator: ";")
        guard let again = try? PublicKeyPin.parseList(joined), again == pins else {
            fatalError("pin list '\(joined)' does not round-trip")
        }
    }
}

private func checkHostPatterns(_ text: String) {
    let patterns = text.split(separator: "\n", omittingEmptySubsequences: false).prefix(4).map(String.init)
    var evaluators: [String: any ServerTrustEvaluating] = [:]
    for pattern in patterns { evaluators[pattern] = DefaultTrustEvaluator() }
    guard let manager = try? ServerTrustManager(evaluators: evaluators, default: nil) else { return }
    for pattern in patterns {
        // A plain host pattern (no wildcard) must find its own evaluator.
        if !pattern.contains("*") && manager.evaluator(forHost: pattern) == nil {
            fatalError("exact pattern '\(pattern)' does not match itself")
        }
        _ = manager.evaluator(forHost: "a." + pattern)
    }
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzCertificates) }
}
#endif
