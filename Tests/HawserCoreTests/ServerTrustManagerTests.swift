// The per-host ServerTrustManager: pattern matching and the policy it picks (no network).

import Foundation
import HawserCore
import HawserTestServer
import Testing

@Suite struct ServerTrustManagerTests {
    private struct Tag: ServerTrustEvaluating {
        let name: String
        func evaluate(_ trust: ServerTrust, forHost host: String) throws(TrustFailure) {
            throw TrustFailure(.other, self.name)
        }
    }

    private func tag(_ manager: ServerTrustManager, _ host: String) -> String? {
        (manager.evaluator(forHost: host) as? Tag)?.name
    }

    @Test func mostSpecificPatternWins() throws {
        let manager = try ServerTrustManager(
            evaluators: [
                "api.example.com": Tag(name: "exact"),
                "*.example.com": Tag(name: "one"),
                "**.example.com": Tag(name: "any"),
                "**.deep.example.com": Tag(name: "deeper"),
                "127.0.0.1": Tag(name: "ip"),
                "[::1]": Tag(name: "ipv6"),
            ],
            default: Tag(name: "default")
        )
        #expect(tag(manager, "api.example.com") == "exact")
        #expect(tag(manager, "API.Example.COM.") == "exact")
        #expect(tag(manager, "www.example.com") == "one")
        #expect(tag(manager, "example.com") == "any")
        #expect(tag(manager, "a.b.example.com") == "any")
        #expect(tag(manager, "deep.example.com") == "one")
        #expect(tag(manager, "x.y.deep.example.com") == "deeper")
        #expect(tag(manager, "127.0.0.1") == "ip")
        #expect(tag(manager, "::1") == "ipv6")
        #expect(tag(manager, "example.org") == "default")
        #expect(tag(manager, "notexample.com") == "default")
    }

    @Test("names are labels of bytes: a dot before a combining mark still cuts, equivalent spellings differ")
    func bytesNotCharacters() throws {
        let manager = try ServerTrustManager(
            evaluators: [
                "*.example.com": Tag(name: "one"),
                "cafe\u{301}.test": Tag(name: "decomposed"),
            ],
            default: Tag(name: "default")
        )
        // "a.\u{301}b.example.com" is three labels deep in DNS; as Characters ".\u{301}" is no dot.
        #expect(tag(manager, "a.\u{301}b.example.com") == "default")
        #expect(tag(manager, "\u{301}b.example.com") == "one")
        #expect(tag(manager, "cafe\u{301}.test") == "decomposed")
        #expect(tag(manager, "caf\u{E9}.test") == "default")
        #expect(throws: TrustFailure.self) { try ServerTrustManager(evaluators: ["*.a..b": Tag(name: "x")]) }
    }

    @Test func oneLabelWildcardDoesNotMatchTheDomainOrDeeperNames() throws {
        let manager = try ServerTrustManager(evaluators: ["*.example.com": Tag(name: "one")], default: nil)
        #expect(tag(manager, "a.example.com") == "one")
        #expect(manager.evaluator(forHost: "example.com") == nil)
        #expect(manager.evaluator(forHost: "a.b.example.com") == nil)
    }

    @Test func withoutADefaultUnknownHostsAreRefused() throws {
        let p = try pki()
        let manager = try ServerTrustManager(
            evaluators: ["localhost": DefaultTrustEvaluator(anchors: .custom([p.root]))],
            default: nil
        )
        check(
            manager,
            [
                Row("valid, localhost", p.valid.presentedChain, nil),
                Row("valid, 127.0.0.1", p.valid.presentedChain, host: "127.0.0.1", .policyMisconfigured),
            ],
            "manager without default"
        )
    }

    @Test func evaluatesWithTheChosenPolicy() throws {
        let p = try pki()
        var pinned = try policy(.certificate, pinned: [p.selfSigned.certificate], allowInvalid: true)
        pinned.validatesDomainName = true
        let manager = try ServerTrustManager(
            evaluators: ["localhost": pinned],
            default: DefaultTrustEvaluator(anchors: .custom([p.root]))
        )
        check(
            manager,
            [
                Row("self-signed on the pinned host", p.selfSigned.presentedChain, nil),
                Row("valid on the pinned host", p.valid.presentedChain, .pinMismatch),
                Row("valid elsewhere", p.valid.presentedChain, host: "127.0.0.1", nil),
                Row("self-signed elsewhere", p.selfSigned.presentedChain, host: "127.0.0.1", .selfSigned),
            ],
            "manager"
        )
    }

    @Test(arguments: ["", "*", "**.", "*.", "a*.example.com", "*.*.example.com", "api.*.com", ".example.com", "a..com"])
    func invalidPatternsAreRefused(_ pattern: String) {
        do {
            _ = try ServerTrustManager(evaluators: [pattern: DefaultTrustEvaluator()])
            Issue.record("'\(pattern)' was accepted")
        } catch {
            #expect(error.reason == .policyMisconfigured)
        }
    }

    @Test func duplicatePatternsAreRefused() {
        #expect(throws: TrustFailure.self) {
            try ServerTrustManager(evaluators: [
                "Example.com": DefaultTrustEvaluator(), "example.com.": DefaultTrustEvaluator(),
            ])
        }
    }
}
