// The requests a load run sends: one (-X, -H, --body) or a list (--requests FILE).
import HawserCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One request of the run, before it is bound to an engine.
struct LoadRequestSpec: Equatable {
    var method: String
    /// The path and query, percent-encoded as sent (`/`, `/a?b=1`).
    var target: String
    var headers: [(String, String)]
    var body: [UInt8]?

    static func == (a: LoadRequestSpec, b: LoadRequestSpec) -> Bool {
        a.method == b.method && a.target == b.target && a.body == b.body
            && a.headers.map { $0.0 + ":" + $0.1 } == b.headers.map { $0.0 + ":" + $0.1 }
    }
}

enum LoadRequests {
    struct JSONLine: Decodable {
        var method: String?
        var path: String
        var headers: [String: String]?
        var body_file: String?
    }

    /// The request list of `o`: the --requests file's lines, or the one request of -X/-H/--body.
    /// `readFile` reads a body file (a path relative to the current directory).
    static func specs(_ o: LoadOptions, url: URL, readFile: (String) throws -> [UInt8]) throws -> [LoadRequestSpec] {
        var target = url.path(percentEncoded: true)
        if target.isEmpty { target = "/" }
        if let q = url.query(percentEncoded: true) { target += "?" + q }
        guard let path = o.requestsPath else {
            let body = try o.bodyPath.map { p in
                do { return try readFile(p) } catch {
                    throw LoadOptions.UsageError(description: "--body: cannot read '\(p)': \(error)")
                }
            }
            return [
                LoadRequestSpec(
                    method: o.method ?? (body == nil ? "GET" : "POST"),
                    target: target,
                    headers: o.headers,
                    body: body
                )
            ]
        }
        let text: [UInt8]
        do { text = try readFile(path) } catch {
            throw LoadOptions.UsageError(description: "--requests: cannot read '\(path)': \(error)")
        }
        return try Self.parse(String(decoding: text, as: UTF8.self), defaults: o, readFile: readFile)
    }

    /// The lines of a --requests file: `METHOD PATH` or a JSON object; blank lines and lines
    /// starting with # are skipped. -H headers apply to every line, before the line's own.
    static func parse(
        _ text: String,
        defaults o: LoadOptions,
        readFile: (String) throws -> [UInt8]
    ) throws -> [LoadRequestSpec] {
        var out: [LoadRequestSpec] = []
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(
                raw.drop(while: { $0 == " " || $0 == "\t" || $0 == "\r" }).reversed().drop(while: {
                    $0 == " " || $0 == "\t" || $0 == "\r"
                }).reversed()
            )
            if line.isEmpty || line.hasPrefix("#") { continue }
            func bad(_ why: String) -> LoadOptions.UsageError {
                LoadOptions.UsageError(description: "--requests line \(n + 1): \(why)")
            }
            if line.hasPrefix("{") {
                let j: JSONLine
                do { j = try JSONDecoder().decode(JSONLine.self, from: Data(line.utf8)) } catch {
                    throw bad("not a JSON object with \"path\" (and \"method\", \"headers\", \"body_file\")")
                }
                guard j.path.hasPrefix("/") else { throw bad("the path '\(j.path)' does not start with /") }
                var body: [UInt8]?
                if let f = j.body_file {
                    do { body = try readFile(f) } catch { throw bad("cannot read body_file '\(f)'") }
                }
                let extra = (j.headers ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
                out.append(
                    LoadRequestSpec(
                        method: j.method ?? (body == nil ? "GET" : "POST"),
                        target: j.path,
                        headers: o.headers + extra,
                        body: body
                    )
                )
            } else {
                let parts = line.split(separator: " ", omittingEmptySubsequences: true)
                guard parts.count == 2, parts[1].hasPrefix("/") else {
                    throw bad("expected 'METHOD /path', got '\(line)'")
                }
                out.append(
                    LoadRequestSpec(method: String(parts[0]), target: String(parts[1]), headers: o.headers, body: nil)
                )
            }
        }
        guard !out.isEmpty else { throw LoadOptions.UsageError(description: "--requests: the file has no requests") }
        return out
    }
}

/// Picks the index of the next request: round-robin, or random (xorshift, per connection).
struct RequestPicker {
    let count: Int
    let random: Bool
    var position: Int
    var state: UInt64

    init(count: Int, order: LoadOptions.Order, seed: Int) {
        self.count = count
        self.random = order == .random
        self.position = seed % max(1, count)
        self.state = 0x9E37_79B9_7F4A_7C15 &* UInt64(seed + 1)
    }

    @inline(__always)
    mutating func next() -> Int {
        if self.count == 1 { return 0 }
        if self.random {
            self.state ^= self.state << 13
            self.state ^= self.state >> 7
            self.state ^= self.state << 17
            return Int(self.state % UInt64(self.count))
        }
        let p = self.position
        self.position = p + 1 == self.count ? 0 : p + 1
        return p
    }
}
