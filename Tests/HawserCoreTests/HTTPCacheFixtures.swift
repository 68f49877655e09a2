// What the HTTP cache suites build their requests and responses from (HTTPCacheTests,
// HTTPCacheValidationTests, HTTPCacheDiskTests, CacheDiskIOTests): one fixed instant, instants
// after it, a response head, a GET and a body of n bytes.
import Foundation
import HawserCore

/// The instant the cache suites' clocks start at.
let t0 = Date(timeIntervalSince1970: 1_700_000_000)

/// `seconds` after ``t0``.
func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }

/// A response head with `status` and `fields`.
func head(_ status: Int = 200, _ fields: [(String, String)]) -> HTTPResponseHead {
    HTTPResponseHead(status: status, headers: HTTPHeaders(fields.map { (name: $0.0, value: $0.1) }))
}

/// A GET of `url` with `fields`.
func get(_ url: String, _ fields: [(String, String)] = []) -> HTTPClientRequest {
    HTTPClientRequest(url: URL(string: url)!, headers: HTTPHeaders(fields.map { (name: $0.0, value: $0.1) }))
}

/// `n` bytes of "a".
func body(_ n: Int) -> [UInt8] { [UInt8](repeating: 0x61, count: n) }
