// FuzzContentDecoder: libFuzzer target for ContentDecoder (built with -DFUZZING by
// Fuzz/run.sh; without it, a replay `main` runs the same check on the files named).
//
// The first byte picks a mode; the rest is either decoded as it is (random bytes as
// gzip, deflate, stacked codings) or first compressed with zlib / GzipEncoder, then
// possibly cut short or corrupted at a point derived from the input, and decoded.
//
// Invariants (a trap is a bug):
// - decoding ends in output or a HawserError with code .cannotDecodeContent;
// - the decoded size never passes maxDecodedBytes, nor (past the floor) the ratio bound;
// - whole input, random pieces and (small inputs) byte-by-byte agree: the same output and
//   the same error, except that a ratio error may fire at a slightly different point
//   (then the outputs are only required to agree on their common prefix);
// - a compressed, untouched input decodes to exactly the original bytes.

import CHawser
import FuzzSupport
import HawserCore

struct Outcome {
    var output: [UInt8] = []
    var error: HawserError?
    var isRatioError: Bool { (self.error?.underlying as? DecodingLimitError) == .maxExpansionRatio }
}

func decode(_ encoding: String, _ pieces: [ArraySlice<UInt8>], _ limits: DecodingLimits) -> Outcome {
    var outcome = Outcome()
    var decoder: ContentDecoder
    do {
        decoder = try ContentDecoder(contentEncoding: encoding, limits: limits)
    } catch {
        outcome.error = error
        return outcome
    }
    do throws(HawserError) {
        for piece in pieces {
            // An exactly sized copy, so ASan sees any read past the piece.
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: piece.count, alignment: 1)
            defer { copy.deallocate() }
            copy.copyBytes(from: piece)
            try decoder.decode(UnsafeRawBufferPointer(copy)) { chunk in
                precondition(
                    chunk.count > 0 && chunk.count <= ContentDecoder.chunkSize,
                    "chunk of \(chunk.count) bytes"
                )
                outcome.output.append(contentsOf: chunk)
            }
        }
        try decoder.finish()
    } catch {
        outcome.error = error
    }
    precondition(
        outcome.error == nil || outcome.error!.code == .cannotDecodeContent,
        "unexpected error \(outcome.error!)"
    )
    precondition(
        decoder.decodedByteCount == outcome.output.count,
        "decodedByteCount \(decoder.decodedByteCount) != \(outcome.output.count)"
    )
    precondition(outcome.output.count <= limits.maxDecodedBytes, "decoded past maxDecodedBytes")
    if outcome.output.count > limits.ratioCheckFloor {
        precondition(
            outcome.output.count <= max(decoder.encodedByteCount, 1) * limits.maxExpansionRatio,
            "decoded past the ratio bound"
        )
    }
    return outcome
}

func zlibCompress(_ bytes: [UInt8], windowBits: Int32) -> [UInt8] {
    var s = z_stream()
    guard CHawser_deflateInit2(&s, 6, windowBits) == Z_OK else { fatalError("deflateInit2") }
    defer { deflateEnd(&s) }
    var out = [UInt8](repeating: 0, count: Int(deflateBound(&s, uLong(bytes.count))) + 64)
    var input = bytes
    let n = input.withUnsafeMutableBufferPointer { i in
        out.withUnsafeMutableBufferPointer { o in
            s.next_in = i.baseAddress
            s.avail_in = uInt(i.count)
            s.next_out = o.baseAddress
            s.avail_out = uInt(o.count)
            precondition(deflate(&s, Z_FINISH) == Z_STREAM_END)
            return o.count - Int(s.avail_out)
        }
    }
    return Array(out[0..<n])
}

func gzipEncoder(_ bytes: [UInt8]) -> [UInt8] {
    do { return try GzipEncoder.compress(bytes, level: 1 + bytes.count % 9) } catch {
        fatalError("GzipEncoder: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContentDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let seed = fnv1a(bytes)
    let mode = bytes[0] & 15
    let rest = Array(bytes.dropFirst())
    // Small limits for half the inputs, so that both bounds are reachable.
    let limits =
        bytes[0] & 16 == 0
        ? DecodingLimits(maxDecodedBytes: 1 << 16, maxExpansionRatio: 8, ratioCheckFloor: 2048)
        : DecodingLimits(maxDecodedBytes: 1 << 22, maxExpansionRatio: 1000, ratioCheckFloor: 1 << 16)

    var encoding: String
    var encoded: [UInt8]
    var expected: [UInt8]?  // the exact output, when the input is an untouched compression
    switch mode {
    case 0: (encoding, encoded) = ("gzip", rest)
    case 1: (encoding, encoded) = ("deflate", rest)
    case 2: (encoding, encoded) = ("gzip, deflate", rest)
    case 3: (encoding, encoded) = ("deflate, x-gzip, identity", rest)
    case 4: (encoding, encoded, expected) = ("gzip", gzipEncoder(rest), rest)
    case 5: (encoding, encoded, expected) = ("deflate", zlibCompress(rest, windowBits: 15), rest)
    case 6: (encoding, encoded, expected) = ("deflate", zlibCompress(rest, windowBits: -15), rest)
    case 7: (encoding, encoded, expected) = ("deflate, gzip", gzipEncoder(zlibCompress(rest, windowBits: -15)), rest)
    case 8:
        (encoding, encoded, expected) = (
            "gzip", gzipEncoder(rest) + gzipEncoder(rest.reversed()), rest + rest.reversed()
        )
    case 9, 10, 11:
        // Corrupt one byte of a valid stream, or cut it short.
        let valid = mode == 9 ? gzipEncoder(rest) : zlibCompress(rest, windowBits: mode == 10 ? 15 : -15)
        encoding = mode == 9 ? "gzip" : "deflate"
        let at = Int(seed % UInt64(valid.count))
        if seed & 1 == 0 {
            encoded = valid
            encoded[at] ^= UInt8(truncatingIfNeeded: seed >> 8) | 1
        } else {
            encoded = Array(valid[0..<at])
        }
    default:
        // The input's text as the Content-Encoding value, no body.
        (encoding, encoded) = (String(decoding: rest, as: UTF8.self), [])
    }
    if let e = expected, e.count > limits.maxDecodedBytes || e.count > limits.ratioCheckFloor { expected = nil }

    let whole = decode(encoding, [encoded[...]], limits)
    if let e = expected {
        precondition(whole.error == nil, "valid \(encoding) stream failed: \(whole.error!)")
        precondition(whole.output == e, "valid \(encoding) stream decoded to other bytes")
    }
    var splits = [pieces(of: encoded, seed: seed, maxPiece: 1 + Int(seed >> 32 & 255))]
    if encoded.count <= 1024 { splits.append(encoded.indices.map { encoded[$0...$0] }) }
    for split in splits {
        let other = decode(encoding, split, limits)
        if whole.isRatioError || other.isRatioError {
            let n = min(whole.output.count, other.output.count)
            precondition(whole.output[0..<n] == other.output[0..<n], "outputs differ before a ratio error")
            continue
        }
        precondition(
            whole.error?.message == other.error?.message,
            "whole and split differ: \(String(describing: whole.error)) vs \(String(describing: other.error))"
        )
        if whole.error == nil {
            precondition(whole.output == other.output, "whole and split outputs differ")
        } else {
            let n = min(whole.output.count, other.output.count)
            precondition(whole.output[0..<n] == other.output[0..<n], "outputs differ before an error")
        }
    }
    return 0
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzContentDecoder) }
}
#endif
