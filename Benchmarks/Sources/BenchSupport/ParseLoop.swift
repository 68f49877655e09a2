import HawserHTTP1

/// Parses one complete response that starts at the beginning of `buffer`, the way
/// a client drives `HTTP1ResponseParser`: `expectResponse(to: .get)`, then `next`
/// from the first unconsumed byte until `.end`.  The parser is passed in so a
/// benchmark can reuse one parser across messages, as a keep-alive connection does.
///
/// Returns a checksum (events + body bytes + keep-alive) so the work can't be
/// optimised away; it is deterministic for a given message.
@inline(never)
public func parseOne(
    _ buffer: UnsafeRawBufferPointer,
    _ parser: inout HTTP1ResponseParser
) throws(HTTP1ParseError) -> Int {
    parser.expectResponse(to: .get)
    var offset = 0
    var checksum = 0
    var event: HTTP1ResponseEvent?
    while true {
        let step = try parser.next(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
        offset += step.consumed
        event = step.event
        if event == nil, step.consumed == 0 {
            // The whole message is in the buffer, so a stall means the parser wants
            // end-of-input (e.g. a body delimited by close): tell it.
            event = try parser.finish()
            guard event != nil else { fatalError("HTTP1ResponseParser stalled at byte \(offset) of \(buffer.count)") }
        }
        switch event {
        case .head?: checksum &+= 1
        case .body(let range)?: checksum &+= range.count
        case .trailers?: checksum &+= 1
        case .end(let keepAlive)?: return checksum &+ (keepAlive ? 1 : 0)
        case nil: continue
        }
    }
}

/// One parse with a fresh parser, describing every event: to check once, outside
/// the timed loop, that the benchmark parses what it claims to.
public func describeOne(_ buffer: UnsafeRawBufferPointer) -> [String] {
    var parser = HTTP1ResponseParser()
    parser.expectResponse(to: .get)
    var offset = 0
    var out: [String] = []
    var bodyBytes = 0
    var bodyEvents = 0
    do {
        while true {
            let step = try parser.next(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
            offset += step.consumed
            var event = step.event
            if event == nil, step.consumed == 0 {
                event = try parser.finish()
                if event == nil {
                    out.append("stalled at byte \(offset)")
                    return out
                }
            }
            switch event {
            case .head(let head)?:
                let text = String(describing: head)
                out.append("head: " + (text.count > 160 ? String(text.prefix(160)) + "…" : text))
            case .body(let range)?:
                bodyBytes += range.count
                bodyEvents += 1
            case .trailers(let fields)?:
                out.append("trailers: \(fields)")
            case .end(let keepAlive)?:
                out.append("body: \(bodyBytes) bytes in \(bodyEvents) events")
                out.append("end: keepAlive=\(keepAlive), consumed \(offset) of \(buffer.count) bytes")
                return out
            case nil:
                continue
            }
        }
    } catch {
        out.append("error at byte \(offset): \(error)")
        return out
    }
}
