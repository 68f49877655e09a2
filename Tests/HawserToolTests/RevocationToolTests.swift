// hawser get --cert-status and --crlfile against the test server stapling OCSP responses made at
// test time, with the same exit statuses as curl (checked side by side).
import Foundation
import HawserCore
import HawserTestServer
import Testing

@testable import HawserTool

@Suite("hawser get: --cert-status and --crlfile", .serialized)
struct RevocationToolTests {
    /// Runs `body` with a TLS test server presenting `leaf` and stapling `staple`.
    static func withServer(
        _ leaf: TestPKI.Leaf,
        staple: [UInt8]?,
        _ body: (String) async throws -> Void
    ) async throws {
        let server = try TestServer(
            host: "127.0.0.1",
            tls: .init(certificateChainPath: leaf.chainPath, privateKeyPath: leaf.keyPath, stapledOCSPResponse: staple)
        )
        defer { server.shutdown() }
        try await body("https://localhost:\(server.port)/hello")
    }

    @Test("flags parse: --cert-status, --crlfile repeatable and taking a value")
    func parse() throws {
        let o = try CurlOptions.parse(["--cert-status", "--crlfile", "a.crl", "--crlfile", "-b.crl", "https://x/"])
        #expect(o.certStatus && o.crlFiles == ["a.crl", "-b.crl"])
        #expect(try !CurlOptions.parse(["https://x/"]).certStatus)
    }

    @Test("--cert-status: a good staple 0; revoked, none, unknown, forged or expired 91; curl's statuses too")
    func certStatus() async throws {
        let pki = try TestPKI.shared()
        let cases: [(TestPKI.Leaf, [UInt8]?, Int32)] = [
            (pki.valid, try pki.ocspResponse(for: pki.valid, status: .good), 0),
            (pki.revoked, try pki.ocspResponse(for: pki.revoked, status: .revoked), 91),
            (pki.valid, nil, 91),
            (pki.valid, try pki.ocspResponse(for: pki.valid, status: .unknown), 91),
            (pki.valid, try pki.ocspResponse(for: pki.valid, status: .good, signer: .impostor), 91),
            (
                pki.valid,
                try pki.ocspResponse(for: pki.valid, status: .good, thisUpdate: -3 * 86_400, nextUpdate: -2 * 86_400),
                91
            ),
        ]
        for (index, (leaf, staple, expected)) in cases.enumerated() {
            try await Self.withServer(leaf, staple: staple) { u in
                let args = ["-s", "--cacert", pki.rootPath, "--cert-status", "-o", "/dev/null", u]
                #expect(await GetCommand.run(args) == expected, "case \(index)")
                let curl = try Curl.run(args)
                #expect(curl == expected, "curl, case \(index)")
                // Without --cert-status the staple is not asked for.
                #expect(await GetCommand.run(["-s", "--cacert", pki.rootPath, "-o", "/dev/null", u]) == 0)
            }
        }
    }

    @Test("--crlfile: a listed certificate 60, others 0, a missing CRL 60, an unreadable file 82; as curl")
    func crlFile() async throws {
        let pki = try TestPKI.shared()
        let intermediateCRL = try pki.crlFile("tool-crl-intermediate", revoking: [pki.revoked])
        let rootCRL = try pki.crlFile("tool-crl-root", issuer: .root, revoking: [])
        // curl reads one file: both CRLs in it.
        let both = pki.directory + "/tool-crl-both.crl"
        let bytes =
            try Data(contentsOf: URL(fileURLWithPath: intermediateCRL.pem))
            + Data(contentsOf: URL(fileURLWithPath: rootCRL.pem))
        try bytes.write(to: URL(fileURLWithPath: both))
        defer { try? FileManager.default.removeItem(atPath: both) }
        let cases: [(TestPKI.Leaf, String, Int32)] = [
            (pki.valid, both, 0),
            (pki.revoked, both, 60),
            (pki.valid, intermediateCRL.pem, 60),  // no CRL of the root (the whole chain is checked)
            (pki.valid, pki.rootPath, 82),  // a certificate, not a CRL
        ]
        for (index, (leaf, file, expected)) in cases.enumerated() {
            try await Self.withServer(leaf, staple: nil) { u in
                let args = ["-s", "--cacert", pki.rootPath, "--crlfile", file, "-o", "/dev/null", u]
                #expect(await GetCommand.run(args) == expected, "case \(index)")
                let curl = try Curl.run(args)
                #expect(curl == expected, "curl, case \(index)")
            }
        }
    }
}
