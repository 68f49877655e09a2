import Foundation
import HawserCore
import Testing

/// The version constant, the CHANGELOG and the README's install line name the same release.
@Suite("Version")
struct VersionTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("HawserVersion.string is major.minor.patch")
    func components() {
        #expect(HawserVersion.string == "\(HawserVersion.major).\(HawserVersion.minor).\(HawserVersion.patch)")
        #expect(HawserVersion.userAgentProduct == "Hawser/" + HawserVersion.string)
    }

    @Test("The newest released entry of CHANGELOG.md is HawserVersion.string")
    func changelog() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        // Entries are "## [X.Y.Z] - DATE", newest first, after "## [Unreleased]".
        let released = text.split(separator: "\n")
            .filter { $0.hasPrefix("## [") && !$0.hasPrefix("## [Unreleased]") }
            .compactMap { line -> String? in
                guard let close = line.firstIndex(of: "]") else { return nil }
                return String(line[line.index(line.startIndex, offsetBy: 4)..<close])
            }
        #expect(released.first == HawserVersion.string)
    }

    @Test("The README's install line asks for this release")
    func readme() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(text.contains(#"from: "\#(HawserVersion.string)")"#))
    }

    @Test("A session's default User-Agent is Hawser's product token")
    func userAgent() {
        #expect(SessionConfiguration().httpAdditionalHeaders["User-Agent"] == HawserVersion.userAgentProduct)
    }
}
