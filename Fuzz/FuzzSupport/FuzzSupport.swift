// FuzzSupport: what the parser fuzz targets share. Each target adapts its parser to
// `FuzzedParser` and calls `checkSplitInvariant`.
//
// Invariant: parsing the input whole and parsing it in pieces (split points derived from
// the input's own bytes, so a crash reproduces) give the same events, with body bytes
// materialized and adjacent body events merged, and the same error (kind and offset) or
// none. Any thrown HTTP1ParseError is fine; a trap or a mismatch is a bug.

import HawserHTTP1

#if canImport(Glibc)
import Glibc
#endif

/// A parser's events, as the driver needs them (heads already rendered as text).
public enum FuzzedEvent {
    case head(String)
    case body(Range<Int>)
    case trailers(HTTPHeaders)
    case end(keepAlive: Bool)
}

/// One of HawserHTTP1's parsers, adapted for the driver.
public protocol FuzzedParser {
    /// `next(_:)`, with the event translated.
    mutating func step(_ input: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (consumed: Int, event: FuzzedEvent?)
    /// `finish()`: the keep-alive flag of a final `.end`, or nil.
    mutating func finishStream() throws(HTTP1ParseError) -> Bool?
    /// Called after a kept-alive message ends, before the next one.
    mutating func nextMessage()
}

/// Small limits for a quarter of the inputs, so that every limit is reachable.
public func fuzzLimits(seed: UInt64) -> HTTP1Limits {
    seed & 3 == 0
        ? HTTP1Limits(
            maxHeadBytes: 300,
            maxHeaderCount: 6,
            maxLineLength: 90,
            maxChunkExtensionBytes: 12,
            maxTrailerBytes: 80
        )
        : HTTP1Limits.default
}

/// Whole vs random pieces vs (for small inputs) byte by byte: traps on any difference.
public func checkSplitInvariant<P: FuzzedParser>(_ bytes: [UInt8], seed: UInt64, makeParser: () -> P) {
    let whole = observe([bytes[...]], makeParser())
    let split = observe(pieces(of: bytes, seed: seed, maxPiece: 1 + Int(seed >> 32 & 31)), makeParser())
    if whole != split {
        fatalError("whole and split parses differ:\n whole: \(whole)\n split: \(split)")
    }
    if bytes.count <= 2048 {
        let bytewise = observe(bytes.indices.map { bytes[$0...$0] }, makeParser())
        if whole != bytewise {
            fatalError("whole and byte-by-byte parses differ:\n whole: \(whole)\n bytes: \(bytewise)")
        }
    }
}

/// The replay `main` of a target built without -DFUZZING: runs `fuzz` on each file named.
public func replay(_ arguments: [String], _ fuzz: (UnsafePointer<UInt8>, Int) -> CInt) -> Never {
    var failed = false
    for path in arguments {
        guard let bytes = readFile(path) else {
            print("cannot read \(path)")
            failed = true
            continue
        }
        _ = bytes.withUnsafeBufferPointer { fuzz($0.baseAddress ?? UnsafePointer(bitPattern: 1)!, $0.count) }
        print("ok \(path) (\(bytes.count) bytes)")
    }
    exit(failed ? 1 : 0)
}

/// Reads a whole file with plain POSIX calls (no Foundation).
func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY)
    if fd < 0 { return nil }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        out.append(contentsOf: chunk[0..<n])
    }
    return out
}

/// A parse outcome in comparable form.
public enum Observed: Equatable, CustomStringConvertible {
    case head(String)
    case body([UInt8])
    case trailers(String)
    case end(Bool)
    case error(HTTP1ParseError)

    public var description: String {
        switch self {
        case .head(let s): return "head(\(s))"
        case .body(let b): return "body(\(b.count) bytes)"
        case .trailers(let s): return "trailers(\(s))"
        case .end(let k): return "end(keepAlive: \(k))"
        case .error(let e): return "error(\(e))"
        }
    }
}

public func render(_ headers: HTTPHeaders) -> String {
    headers.map { "\($0.name): \($0.value)" }.joined(separator: "|")
}

/// Collects events; adjacent body events are merged (their split depends on the input's).
struct Recorder {
    var events: [Observed] = []
    var body: [UInt8] = []

    mutating func add(_ event: Observed) {
        if case .body(let bytes) = event {
            self.body.append(contentsOf: bytes)
            return
        }
        self.flush()
        self.events.append(event)
    }

    mutating func addBody(_ bytes: UnsafeRawBufferPointer) {
        self.body.append(contentsOf: bytes)
    }

    mutating func flush() {
        if !self.body.isEmpty {
            self.events.append(.body(self.body))
            self.body = []
        }
    }

    mutating func finished() -> [Observed] {
        self.flush()
        return self.events
    }
}

/// Feeds `pieces` in order, the way a connection would, then EOF.
public func observe<P: FuzzedParser>(_ pieces: [ArraySlice<UInt8>], _ parser: P) -> [Observed] {
    var parser = parser
    // The unconsumed bytes are copied into an exactly sized heap block before each call
    // (when small enough that this stays cheap), so ASan sees any read past the input.
    var buffer: [UInt8] = []
    var start = 0  // unconsumed bytes are buffer[start...]
    var recorder = Recorder()
    var steps = 0
    for piece in pieces {
        if start > 4096 && start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: piece)
        while true {
            steps += 1
            if steps > 10_000_000 { fatalError("no progress") }
            let rest = buffer.count - start
            let result = buffer.withUnsafeBytes { raw in
                let unconsumed = UnsafeRawBufferPointer(rebasing: raw[start...])
                let exact: UnsafeMutableRawBufferPointer? =
                    rest <= 4096 ? UnsafeMutableRawBufferPointer.allocate(byteCount: rest, alignment: 1) : nil
                defer { exact?.deallocate() }
                if let exact { exact.copyMemory(from: unconsumed) }
                let input = exact.map { UnsafeRawBufferPointer($0) } ?? unconsumed
                return Result { () throws(HTTP1ParseError) in
                    let (consumed, event) = try parser.step(input)
                    if case .body(let range)? = event {
                        precondition(
                            range.lowerBound >= 0 && range.upperBound <= consumed,
                            "body range outside consumed"
                        )
                        recorder.addBody(UnsafeRawBufferPointer(rebasing: input[range]))
                    }
                    return (consumed, event)
                }
            }
            switch result {
            case .failure(let error):
                recorder.add(.error(error))
                return recorder.finished()
            case .success(let (consumed, event)):
                precondition(consumed >= 0 && consumed <= rest, "consumed out of range")
                start += consumed
                guard let event else { break }
                switch event {
                case .head(let line):
                    recorder.add(.head(line))
                case .body:
                    break
                case .trailers(let trailers):
                    recorder.add(.trailers(render(trailers)))
                case .end(let keepAlive):
                    recorder.add(.end(keepAlive))
                    if keepAlive { parser.nextMessage() }
                }
                continue
            }
            break
        }
    }
    do {
        if let keepAlive = try parser.finishStream() {
            recorder.add(.end(keepAlive))
        }
    } catch {
        recorder.add(.error(error))
    }
    return recorder.finished()
}

/// Deterministic pseudo-random pieces from the input's own bytes (FNV-1a seed, xorshift).
public func pieces(of bytes: [UInt8], seed: UInt64, maxPiece: Int) -> [ArraySlice<UInt8>] {
    var state = seed | 1
    var result: [ArraySlice<UInt8>] = []
    var start = 0
    while start < bytes.count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        let length = 1 + Int(state % UInt64(maxPiece))
        let end = min(bytes.count, start + length)
        result.append(bytes[start..<end])
        start = end
    }
    return result
}

public func fnv1a(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return hash
}
