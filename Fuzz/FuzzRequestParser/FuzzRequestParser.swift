// FuzzRequestParser: libFuzzer target for HTTP1RequestParser.
//
// Invariant: parsing the input whole and parsing it in pieces (split points derived from
// the input's own bytes, so a crash reproduces) give the same events, with body bytes
// materialized and adjacent body events merged, and the same error (kind and offset) or
// none. Any thrown HTTP1ParseError is fine; a trap or a mismatch is a bug.
//
// Built with -DFUZZING (see Fuzz/run.sh); without it, a replay `main` runs the same check
// on the files named on the command line.

import HawserHTTP1

#if canImport(Glibc)
import Glibc
#endif

/// A parse outcome in comparable form.
enum Observed: Equatable, CustomStringConvertible {
    case head(String)
    case body([UInt8])
    case trailers(String)
    case end(Bool)
    case error(HTTP1ParseError)

    var description: String {
        switch self {
        case .head(let s): return "head(\(s))"
        case .body(let b): return "body(\(b.count) bytes)"
        case .trailers(let s): return "trailers(\(s))"
        case .end(let k): return "end(keepAlive: \(k))"
        case .error(let e): return "error(\(e))"
        }
    }
}

func render(_ headers: HTTPHeaders) -> String {
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
func observe(_ pieces: [ArraySlice<UInt8>], limits: HTTP1Limits) -> [Observed] {
    var parser = HTTP1RequestParser(limits: limits)
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
                    let (consumed, event) = try parser.next(input)
                    if case .body(let range)? = event {
                        precondition(range.lowerBound >= 0 && range.upperBound <= consumed, "body range outside consumed")
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
                case .head(let head):
                    let line = "\(head.method) \(head.target) \(head.version)"
                    recorder.add(.head(line + " [" + render(head.headers) + "]"))
                case .body:
                    break
                case .trailers(let trailers):
                    recorder.add(.trailers(render(trailers)))
                case .end(let keepAlive):
                    recorder.add(.end(keepAlive))
                }
                continue
            }
            break
        }
    }
    do {
        if let event = try parser.finish() {
            guard case .end(let keepAlive) = event else { fatalError("finish gave \(event)") }
            recorder.add(.end(keepAlive))
        }
    } catch {
        recorder.add(.error(error))
    }
    return recorder.finished()
}

/// Deterministic pseudo-random pieces from the input's own bytes (FNV-1a seed, xorshift).
func pieces(of bytes: [UInt8], seed: UInt64, maxPiece: Int) -> [ArraySlice<UInt8>] {
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

func fnv1a(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return hash
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let seed = fnv1a(bytes)
    // Small limits for a quarter of the inputs, so that every limit is reachable.
    let limits =
        seed & 3 == 0
        ? HTTP1Limits(maxHeadBytes: 300, maxHeaderCount: 6, maxLineLength: 90, maxChunkExtensionBytes: 12, maxTrailerBytes: 80)
        : HTTP1Limits.default
    let whole = observe([bytes[...]], limits: limits)
    let split = observe(pieces(of: bytes, seed: seed, maxPiece: 1 + Int(seed >> 32 & 31)), limits: limits)
    if whole != split {
        fatalError("whole and split parses differ:\n whole: \(whole)\n split: \(split)")
    }
    if bytes.count <= 2048 {
        let bytewise = observe(bytes.indices.map { bytes[$0...$0] }, limits: limits)
        if whole != bytewise {
            fatalError("whole and byte-by-byte parses differ:\n whole: \(whole)\n bytes: \(bytewise)")
        }
    }
    return 0
}

#if !FUZZING
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

@main
struct Replay {
    static func main() {
        var failed = false
        for path in CommandLine.arguments.dropFirst() {
            guard let bytes = readFile(path) else {
                print("cannot read \(path)")
                failed = true
                continue
            }
            _ = bytes.withUnsafeBufferPointer { fuzzRequestParser($0.baseAddress ?? UnsafePointer(bitPattern: 1)!, $0.count) }
            print("ok \(path) (\(bytes.count) bytes)")
        }
        if failed { exit(1) }
    }
}
#endif
