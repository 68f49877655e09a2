// FuzzRequestParser: libFuzzer target for HTTP1RequestParser (the invariant is in
// Fuzz/FuzzSupport). Built with -DFUZZING (see Fuzz/run.sh); without it, a replay `main`
// runs the same check on the files named on the command line.

import FuzzSupport
import HawserHTTP1

struct RequestParser: FuzzedParser {
    var parser: HTTP1RequestParser

    mutating func step(_ input: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (consumed: Int, event: FuzzedEvent?)
    {
        let (consumed, event) = try self.parser.next(input)
        switch event {
        case nil: return (consumed, nil)
        case .head(let h)?: return (consumed, .head("\(h.method) \(h.target) \(h.version) [\(render(h.headers))]"))
        case .body(let r)?: return (consumed, .body(r))
        case .trailers(let t)?: return (consumed, .trailers(t))
        case .end(let k)?: return (consumed, .end(keepAlive: k))
        }
    }

    mutating func finishStream() throws(HTTP1ParseError) -> Bool? {
        guard let event = try self.parser.finish() else { return nil }
        guard case .end(let keepAlive) = event else { fatalError("finish gave \(event)") }
        return keepAlive
    }

    mutating func nextMessage() {}
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let seed = fnv1a(bytes)
    let limits = fuzzLimits(seed: seed)
    checkSplitInvariant(bytes, seed: seed) { RequestParser(parser: HTTP1RequestParser(limits: limits)) }
    return 0
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzRequestParser) }
}
#endif
