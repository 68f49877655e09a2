// FuzzResponseParser: libFuzzer target for HTTP1ResponseParser (the invariant is in
// Fuzz/FuzzSupport). Built with -DFUZZING (see Fuzz/run.sh); without it, a replay `main`
// runs the same check on the files named on the command line.

import FuzzSupport
import HawserHTTP1

/// HTTP1ResponseParser answering requests of one method (HEAD, CONNECT change the framing).
struct ResponseParser: FuzzedParser {
    var parser: HTTP1ResponseParser
    let method: HTTPMethod

    init(method: HTTPMethod, limits: HTTP1Limits, folding: HTTP1ObsoleteLineFolding) {
        self.parser = HTTP1ResponseParser(limits: limits, obsoleteLineFolding: folding)
        self.method = method
        self.parser.expectResponse(to: method)
    }

    mutating func step(_ input: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (consumed: Int, event: FuzzedEvent?)
    {
        let (consumed, event) = try self.parser.next(input)
        switch event {
        case nil: return (consumed, nil)
        case .head(let h)?:
            return (
                consumed,
                .head("\(h.version) \(h.status) \(h.reasonPhrase) interim=\(h.isInterim) [\(render(h.headers))]")
            )
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

    mutating func nextMessage() { self.parser.expectResponse(to: self.method) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let seed = fnv1a(bytes)
    let methods: [HTTPMethod] = [.get, .head, .connect, .post]
    let method = methods[Int(seed >> 60) & 3]
    let limits = fuzzLimits(seed: seed)
    // obs-fold: unfolded (the default) for three inputs in four, rejected for the rest.
    let folding: HTTP1ObsoleteLineFolding = (seed >> 56) & 3 == 0 ? .reject : .replaceWithSpace
    checkSplitInvariant(bytes, seed: seed) { ResponseParser(method: method, limits: limits, folding: folding) }
    return 0
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzResponseParser) }
}
#endif
