// FuzzAuthChallenge: libFuzzer target for the WWW-Authenticate parser and Digest answers.
// Built with -DFUZZING (see Fuzz/run.sh); without it, a replay `main` runs the same checks on
// the files named on the command line.
//
// Invariants: parsing never traps; a parsed field, printed and parsed again, gives the same
// challenges; the header-based (lenient) parse returns a prefix-consistent result within
// the bounds; every Digest answer that succeeds is itself a well-formed credentials field
// with a hex response of the algorithm's length.

import FuzzSupport
import HawserCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAuthChallenge(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let field = String(decoding: bytes, as: UTF8.self)

    if let challenges = try? HTTPAuthChallenge.parse(fieldValue: field) {
        precondition(challenges.count <= HTTPAuthChallenge.maximumChallenges)
        let printed = challenges.map(\.description).joined(separator: ", ")
        guard let again = try? HTTPAuthChallenge.parse(fieldValue: printed), again == challenges else {
            fatalError("round trip changed \(challenges) into \(printed)")
        }
        answer(challenges)
    }

    // The same bytes as two fields of a response: never more than the bound.
    let headers = HTTPHeaders([(name: "WWW-Authenticate", value: field), (name: "www-authenticate", value: field)])
    let lenient = HTTPAuthChallenge.parse(headers, proxy: false)
    precondition(lenient.count <= HTTPAuthChallenge.maximumChallenges)
    precondition(HTTPAuthChallenge.parse(headers, proxy: true).isEmpty)
    answer(lenient)
    return 0
}

private func answer(_ challenges: [HTTPAuthChallenge]) {
    _ = HTTPAuthChallenge.strongest(of: challenges)
    let authenticator = DigestAuthenticator(cnonce: { "0a4f113b" })
    let space = ProtectionSpace(
        host: "example.org",
        port: 80,
        urlScheme: .http,
        realm: "r",
        authenticationMethod: .digest
    )
    let credential = Credential(user: "Mufasa", password: "Circle of Life")
    for challenge in challenges.prefix(4) {
        guard let digest = try? DigestChallenge(challenge) else { continue }
        for body: [UInt8]? in [nil, [1, 2, 3]] {
            guard
                let value = try? authenticator.authorization(
                    responding: challenge,
                    in: space,
                    credential: credential,
                    method: .get,
                    target: "/dir/index.html",
                    body: body
                )
            else { continue }
            guard let parsed = try? HTTPAuthChallenge.parse(fieldValue: value), parsed.count == 1,
                parsed[0].hasScheme("Digest"), let response = parsed[0][parameter: "response"]
            else { fatalError("malformed Digest answer \(value)") }
            let length = digest.algorithm.strength == 1 ? 32 : 64
            precondition(
                response.utf8.count == length
                    && response.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
            )
        }
        _ = authenticator.authorization(for: space, credential: credential, method: .post, target: "/x")
    }
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzAuthChallenge) }
}
#endif
