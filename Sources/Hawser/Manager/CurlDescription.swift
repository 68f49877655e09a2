import HawserCore

// A curl command line for any request, for logs and bug reports.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension HTTPClientRequest {
    /// A curl command line that sends this request: method, URL, every header, and the body
    /// (as text when it is UTF-8, otherwise as a note of its length). Arguments are single-quoted
    /// for a POSIX shell.
    public var curlDescription: String {
        var parts = ["curl"]
        var note: String? = nil
        if self.method == .head {
            parts.append("--head")
        } else if self.method != .get || self.body != nil {
            parts.append("-X \(Self.quote(self.method.rawValue))")
        }
        for field in self.headers {
            parts.append("-H \(Self.quote("\(field.name): \(field.value)"))")
        }
        switch self.body {
        case .bytes(let bytes)?:
            if let text = String(validating: bytes, as: UTF8.self) {
                parts.append("--data-binary \(Self.quote(text))")
            } else {
                parts.append("--data-binary @-")
                note = "# \(bytes.count) bytes of binary body on stdin"
            }
        case .stream(let length, _)?:
            parts.append("--data-binary @-")
            note = "# streamed body, \(length.map { "\($0) bytes" } ?? "length unknown"), on stdin"
        case nil:
            break
        }
        parts.append(Self.quote(self.url.absoluteString))
        if let note { parts.append(note) }
        return parts.joined(separator: " ")
    }

    /// `'…'` with each `'` written as `'\''`.
    static func quote(_ s: String) -> String {
        "'" + s.replacing("'", with: #"'\''"#) + "'"
    }
}
