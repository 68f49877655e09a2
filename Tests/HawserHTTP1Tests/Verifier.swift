// Verifier.swift: feeds a message whole, byte by byte and split at every point (the
// NIO ByteToMessageDecoderVerifier / pico test_chunked_per_byte idea) and checks that
// every way gives the same events and the same error.

import HawserHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A parse outcome in comparable form. Body bytes are materialized and adjacent body
/// events merged, since how a body is cut depends on how the input was.
enum Observed: Equatable, CustomStringConvertible {
    case head(String, [String])
    case body([UInt8])
    case trailers([String])
    case end(keepAlive: Bool)
    case error(HTTP1ParseError.Kind, offset: Int)

    static func body(_ text: String) -> Observed { .body(Array(text.utf8)) }

    var description: String {
        switch self {
        case .head(let line, let fields): return "head(\(line) \(fields))"
        case .body(let bytes): return "body(\(String(decoding: bytes, as: UTF8.self).debugDescription))"
        case .trailers(let fields): return "trailers(\(fields))"
        case .end(let keepAlive): return "end(keepAlive: \(keepAlive))"
        case .error(let kind, let offset): return "error(\(kind) at \(offset))"
        }
    }
}

func fieldStrings(_ headers: HTTPHeaders) -> [String] {
    headers.map { "\($0.name): \($0.value)" }
}

/// The two parsers behind one face.
protocol ParserHarness {
    associatedtype Event
    mutating func next(_ input: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (consumed: Int, event: Event?)
    mutating func finish() throws(HTTP1ParseError) -> Event?
    /// Converts an event; `input` is what the event's call was given.
    func observe(_ event: Event, _ input: UnsafeRawBufferPointer) -> Observed
    mutating func messageEnded()
}

struct ResponseHarness: ParserHarness {
    var parser: HTTP1ResponseParser
    let method: HTTPMethod

    init(
        method: HTTPMethod = .get,
        limits: HTTP1Limits = .default,
        obsoleteLineFolding: HTTP1ObsoleteLineFolding = .replaceWithSpace
    ) {
        self.parser = HTTP1ResponseParser(limits: limits, obsoleteLineFolding: obsoleteLineFolding)
        self.method = method
        self.parser.expectResponse(to: method)
    }

    mutating func next(
        _ input: UnsafeRawBufferPointer
    ) throws(HTTP1ParseError) -> (consumed: Int, event: HTTP1ResponseEvent?) {
        try self.parser.next(input)
    }

    mutating func finish() throws(HTTP1ParseError) -> HTTP1ResponseEvent? { try self.parser.finish() }

    func observe(_ event: HTTP1ResponseEvent, _ input: UnsafeRawBufferPointer) -> Observed {
        switch event {
        case .head(let head):
            return .head("\(head.version) \(head.status) \(head.reasonPhrase)", fieldStrings(head.headers))
        case .body(let range): return .body(Array(input[range]))
        case .trailers(let trailers): return .trailers(fieldStrings(trailers))
        case .end(let keepAlive): return .end(keepAlive: keepAlive)
        }
    }

    mutating func messageEnded() { self.parser.expectResponse(to: self.method) }
}

struct RequestHarness: ParserHarness {
    var parser: HTTP1RequestParser

    init(limits: HTTP1Limits = .default) {
        self.parser = HTTP1RequestParser(limits: limits)
    }

    mutating func next(
        _ input: UnsafeRawBufferPointer
    ) throws(HTTP1ParseError) -> (consumed: Int, event: HTTP1RequestEvent?) {
        try self.parser.next(input)
    }

    mutating func finish() throws(HTTP1ParseError) -> HTTP1RequestEvent? { try self.parser.finish() }

    func observe(_ event: HTTP1RequestEvent, _ input: UnsafeRawBufferPointer) -> Observed {
        switch event {
        case .head(let head):
            return .head("\(head.method) \(head.target) \(head.version)", fieldStrings(head.headers))
        case .body(let range): return .body(Array(input[range]))
        case .trailers(let trailers): return .trailers(fieldStrings(trailers))
        case .end(let keepAlive): return .end(keepAlive: keepAlive)
        }
    }

    mutating func messageEnded() {}
}

/// Bytes placed so that they end exactly at a PROT_NONE page: any read past the input
/// faults (picohttpparser's test.c does the same with mmap + mprotect).
final class GuardedBytes {
    static let page = 4096
    let base: UnsafeMutableRawPointer
    let usable: Int

    init(capacity: Int) {
        let usable = (Swift.max(capacity, 1) + Self.page - 1) / Self.page * Self.page
        let mapped = mmap(nil, usable + Self.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        precondition(mapped != MAP_FAILED, "mmap failed")
        self.base = mapped!
        self.usable = usable
        precondition(mprotect(self.base + usable, Self.page, PROT_NONE) == 0, "mprotect failed")
    }

    /// Copies `bytes` to end at the guard page; returns them there.
    func place(_ bytes: [UInt8]) -> UnsafeRawBufferPointer {
        precondition(bytes.count <= self.usable)
        let start = self.base + self.usable - bytes.count
        bytes.withUnsafeBytes { if let from = $0.baseAddress { start.copyMemory(from: from, byteCount: $0.count) } }
        return UnsafeRawBufferPointer(start: start, count: bytes.count)
    }

    deinit { munmap(self.base, self.usable + Self.page) }
}

/// Feeds `pieces` as a connection would (unconsumed rest + next piece, ending at a guard
/// page), then EOF.
func run<H: ParserHarness>(_ harness: H, _ pieces: [ArraySlice<UInt8>], finish: Bool = true) -> [Observed] {
    var harness = harness
    let guarded = GuardedBytes(capacity: pieces.reduce(0) { $0 + $1.count })
    var pending: [UInt8] = []
    var events: [Observed] = []
    func record(_ event: Observed) {
        if case .body(let more) = event {
            if case .body(let previous)? = events.last {
                events[events.count - 1] = .body(previous + more)
            } else if !more.isEmpty {
                events.append(event)
            }
        } else {
            events.append(event)
        }
    }
    for piece in pieces {
        pending.append(contentsOf: piece)
        let window = guarded.place(pending)
        var start = 0
        defer { pending = Array(window[start...]) }
        while true {
            let input = UnsafeRawBufferPointer(rebasing: window[start...])
            let outcome: Result<(Int, Observed?), HTTP1ParseError>
            do throws(HTTP1ParseError) {
                let (consumed, event) = try harness.next(input)
                outcome = .success((consumed, event.map { harness.observe($0, input) }))
            } catch {
                outcome = .failure(error)
            }
            switch outcome {
            case .failure(let error):
                events.append(.error(error.kind, offset: error.offset))
                return events
            case .success(let (consumed, observed)):
                start += consumed
                guard let observed else { break }
                record(observed)
                if case .end(true) = observed { harness.messageEnded() }
                continue
            }
            break
        }
    }
    guard finish else { return events }
    do throws(HTTP1ParseError) {
        if let event = try harness.finish() {
            record(harness.observe(event, UnsafeRawBufferPointer(start: nil, count: 0)))
        }
    } catch {
        events.append(.error(error.kind, offset: error.offset))
    }
    return events
}

/// Parses `bytes` whole, byte by byte, and split in two at every point (sampled for large
/// inputs); expects all to agree and returns the events of the whole parse.
@discardableResult
func verify<H: ParserHarness>(
    _ bytes: [UInt8],
    _ make: @autoclosure () -> H,
    sourceLocation: SourceLocation = #_sourceLocation
) -> [Observed] {
    let whole = run(make(), [bytes[...]])
    let bytewise = run(make(), bytes.indices.map { bytes[$0...$0] })
    #expect(bytewise == whole, "byte-by-byte parse differs from the whole parse", sourceLocation: sourceLocation)
    let step = bytes.count <= 2048 ? 1 : bytes.count / 509
    var split = 1
    while split < bytes.count {
        let events = run(make(), [bytes[..<split], bytes[split...]])
        if events != whole {
            Issue.record("split at \(split) gives \(events), whole gives \(whole)", sourceLocation: sourceLocation)
            break
        }
        split += step
    }
    return whole
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
