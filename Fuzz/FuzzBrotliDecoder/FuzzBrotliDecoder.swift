// FuzzBrotliDecoder: libFuzzer target for ContentDecoder's br layer (package trait "Brotli";
// built with -DFUZZING by Fuzz/run.sh; without it, a replay `main` runs the same check on the
// files named).
//
// The first byte picks a mode; the rest is either decoded as it is (random bytes as br, alone
// or stacked with gzip or zstd) or first compressed by libbrotlienc at a quality and window
// derived from the input, possibly stacked, cut short, corrupted or followed by more bytes,
// and decoded.
//
// Invariants (a trap is a bug):
// - decoding ends in output or a HawserError with code .cannotDecodeContent;
// - the decoded size never passes maxDecodedBytes, nor (past the floor) the ratio bound;
// - whole input, random pieces and (small inputs) byte-by-byte agree: the same output and
//   the same error (but for the library's own words in parentheses at the end of a
//   corrupt-data message, which depend on how much input it had at once), except that a
//   ratio error may fire at a slightly different point, and in a stack of codings which
//   coding reports corrupt data first may depend on the split (libzstd drops what it decoded
//   in a call that fails); then the outputs are only required to agree on their common prefix;
// - a compressed, untouched input decodes to exactly the original bytes, also with zero
//   padding after it; any other trailing byte is an error.

import FuzzSupport

#if Brotli
import CBrotli
import HawserCore

/// An error's message without the decoder library's own words (see above).
func stableMessage(_ error: HawserError?) -> String? {
    guard let m = error?.message else { return nil }
    let bytes = Array(m.utf8)
    let marker = Array(" (lib".utf8)
    for i in bytes.indices where bytes[i...].starts(with: marker) {
        return String(decoding: bytes[..<i], as: UTF8.self)
    }
    return m
}

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

func brotli(_ bytes: [UInt8], seed: UInt64) -> [UInt8] {
    let quality = Int32(seed % 12)  // 0...11
    let lgwin = Int32(10 + (seed >> 8) % 15)  // 10...24
    var size = BrotliEncoderMaxCompressedSize(bytes.count) + 64
    var out = [UInt8](repeating: 0, count: size)
    let ok = bytes.withUnsafeBufferPointer { i in
        out.withUnsafeMutableBufferPointer { o in
            BrotliEncoderCompress(quality, lgwin, BROTLI_MODE_GENERIC, i.count, i.baseAddress, &size, o.baseAddress)
        }
    }
    precondition(ok == BROTLI_TRUE, "BrotliEncoderCompress")
    return Array(out[0..<size])
}

func gzipEncoder(_ bytes: [UInt8]) -> [UInt8] {
    do { return try GzipEncoder.compress(bytes, level: 1 + bytes.count % 9) } catch {
        fatalError("GzipEncoder: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBrotliDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
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

    var encoding = "br"
    var encoded: [UInt8]
    var expected: [UInt8]?  // the exact output, when the input is an untouched compression
    var mustFail = false
    switch mode {
    case 0, 1, 2: encoded = rest
    case 3: (encoding, encoded) = ("gzip, br", rest)
    case 4: (encoding, encoded) = ("br, zstd", rest)
    case 5: (encoded, expected) = (brotli(rest, seed: seed), rest)
    case 6: (encoding, encoded, expected) = ("gzip, br", brotli(gzipEncoder(rest), seed: seed), rest)
    case 7: (encoding, encoded, expected) = ("br, br", brotli(brotli(rest, seed: seed), seed: seed >> 16), rest)
    case 8:
        // Zero padding after the stream is skipped.
        (encoded, expected) = (brotli(rest, seed: seed) + [UInt8](repeating: 0, count: Int(seed >> 40 & 7)), rest)
    case 9:
        // Any other byte after the stream is an error.
        encoded =
            brotli(rest, seed: seed) + [UInt8](repeating: 0, count: Int(seed >> 40 & 3)) + [
                UInt8(seed >> 48 & 0xFF) | 1
            ]
        mustFail = true
    case 10, 11:
        // Corrupt one byte of a valid stream, or cut it short (a cut is always an error).
        let valid = brotli(rest, seed: seed)
        let at = Int((seed >> 20) % UInt64(valid.count))
        if mode == 10 {
            encoded = valid
            encoded[at] ^= UInt8(truncatingIfNeeded: seed >> 32) | 1
        } else {
            encoded = Array(valid[0..<at])
            mustFail = at > 0  // an empty body is no stream at all
        }
    default:
        // A valid stream's first bytes, then the input: gets past the window bits and the
        // first meta-block header more often than random bytes.
        encoded = Array(brotli(rest, seed: seed).prefix(Int(seed >> 24 & 7))) + rest
    }
    if let e = expected, e.count > limits.maxDecodedBytes || e.count > limits.ratioCheckFloor { expected = nil }

    let whole = decode(encoding, [encoded[...]], limits)
    if let e = expected {
        precondition(whole.error == nil, "valid \(encoding) stream failed: \(whole.error!)")
        precondition(whole.output == e, "valid \(encoding) stream decoded to other bytes")
    }
    if mustFail { precondition(whole.error != nil, "a cut stream or a trailing byte decoded without error") }
    var splits = [pieces(of: encoded, seed: seed, maxPiece: 1 + Int(seed >> 32 & 255))]
    if encoded.count <= 1024 { splits.append(encoded.indices.map { encoded[$0...$0] }) }
    for split in splits {
        let other = decode(encoding, split, limits)
        if whole.isRatioError || other.isRatioError {
            let n = min(whole.output.count, other.output.count)
            precondition(whole.output[0..<n] == other.output[0..<n], "outputs differ before a ratio error")
            continue
        }
        if encoding.contains(",") && whole.error != nil && other.error != nil {
            // A stack: libzstd drops what it decoded in a call that fails, so how the input was
            // split can decide which coding reports the corruption first.
            let n = min(whole.output.count, other.output.count)
            precondition(whole.output[0..<n] == other.output[0..<n], "outputs differ before an error")
            continue
        }
        precondition(
            stableMessage(whole.error) == stableMessage(other.error),
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
#else
// Without the trait there is no br decoder to fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBrotliDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { 0 }
#endif

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzBrotliDecoder) }
}
#endif
