// HTTPCacheDiskStore.swift: the HTTP cache's on-disk store.
//
// One file per stored response, named by the SHA-256 of its key and Vary'd request values:
//
//     "HWC1" | meta length (u32) | meta | body length (u64) | body | CRC-32 of all before (u32)
//
// (little-endian). Files are written to a temporary name and renamed, so a reader never
// sees half a file; a file cut short by a crash fails its length or CRC check and is
// removed. The index (key, Vary'd values, size, recency) is rebuilt from the files' meta
// sections when the store opens; recency across reopenings comes from the files' mtimes,
// which a disk hit refreshes.

import CHawser
import HawserBase
import HawserHTTP1
import HawserPosix
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The on-disk store. Its operations block (they read, write and rename files): the cache
/// runs each of them on its `BlockingIOPool`, ordered by cache key, never on an event loop.
/// The index lock is held only for index updates and the quick metadata calls that must stay
/// in step with them (rename into place, unlink), never while a body is read or written.
final class DiskStore: Sendable {
    struct Record {
        var key: String
        var vary: [VaryField]
        var size: Int
        var access: UInt64
        /// Distinguishes this file's record from an earlier or later one with the same name.
        var generation: UInt64
    }

    struct State {
        var records: [String: Record] = [:]  // by file name
        var byKey: [String: [String]] = [:]
        var bytes = 0
        var clock: UInt64 = 0
    }

    static let magic: [UInt8] = Array("HWC1".utf8)
    static let suffix = ".hwc"
    static let temporaryPrefix = "tmp-"
    static let maximumMetaLength = 4 << 20

    let directory: String
    let capacity: Int
    private let state = Mutex(State())

    /// Creates the directory if needed and indexes its files (on the calling thread).
    init(directory: String, capacity: Int) throws(HawserError) {
        self.directory = directory
        self.capacity = capacity
        let names: [String]
        do throws(FileError) {
            try FileSystem.createDirectory(directory)
            names = try FileSystem.contentsOfDirectory(directory)
        } catch {
            throw HawserError(.ioError, "cannot use cache directory \(directory): \(error)", underlying: error)
        }
        var found: [(name: String, record: Record, mtime: Int64)] = []
        for name in names {
            let path = self.path(name)
            if name.hasPrefix(Self.temporaryPrefix) && name.hasSuffix(".partial") {
                FileSystem.unlinkIgnoringErrors(path)  // a write that never finished
                continue
            }
            guard name.hasSuffix(Self.suffix) else { continue }
            guard let (record, mtime) = Self.readIndexRecord(path) else {
                FileSystem.unlinkIgnoringErrors(path)  // not a valid entry: never trusted, never a crash
                continue
            }
            found.append((name, record, mtime))
        }
        found.sort { $0.mtime < $1.mtime }
        self.state.withLock { state in
            for item in found {
                state.clock += 1
                var record = item.record
                record.access = state.clock
                record.generation = state.clock
                state.records[item.name] = record
                state.byKey[record.key, default: []].append(item.name)
                state.bytes += record.size
            }
            self.evict(&state, keeping: nil)
        }
    }

    var usage: Int { self.state.withLock { $0.bytes } }

    private func path(_ name: String) -> String { self.directory + "/" + name }

    static func fileName(key: String, vary: [VaryField]) -> String {
        var identity = key
        for field in vary { identity += "\u{0}" + field.name + "\u{0}" + (field.value.map { "=" + $0 } ?? "-") }
        let hash = Digest.sha256Hex(Array(identity.utf8))
        return hash + Self.suffix
    }

    // MARK: Operations (blocking: run on the cache's IO pool)

    /// Writes `entry` to a temporary file, then renames it into place and indexes it. Returns
    /// false when it is larger than a tenth of the capacity (whatever was stored for its variant
    /// is removed either way: it is out of date); throws when a file operation fails.
    func store(_ entry: CacheEntry) throws(FileError) -> Bool {
        let name = Self.fileName(key: entry.key, vary: entry.vary)
        let (head, size) = Self.encodeHead(entry)
        guard size <= self.capacity / HTTPCache.maximumEntryDivisor else {
            try self.state.withLock { state throws(FileError) in try self.removeFile(&state, name) }
            return false
        }
        let temporary = self.path(Self.temporaryPrefix + Digest.randomHex(byteCount: 16) + ".partial")
        do throws(FileError) {
            let fd = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
            do throws(FileError) {
                let body = entry.response.body
                var crc = crc32Of(head[...])
                crc = crc32Of(body[...], seed: crc)
                try fd.write(all: head)
                try fd.write(all: body)
                var trailer = ByteWriter()
                trailer.u32(crc)
                try fd.write(all: trailer.bytes)
            } catch {
                fd.closeIgnoringErrors()
                throw error
            }
            try fd.close()
        } catch {
            FileSystem.unlinkIgnoringErrors(temporary)
            throw error
        }
        return try self.state.withLock { state throws(FileError) -> Bool in
            // Renamed under the index lock, so the index and the directory change in step.
            do throws(FileError) {
                try FileSystem.rename(temporary, to: self.path(name))
            } catch {
                FileSystem.unlinkIgnoringErrors(temporary)
                throw error
            }
            self.forget(&state, name)  // the file it replaced is gone with the rename
            state.clock += 1
            state.records[name] = Record(
                key: entry.key,
                vary: entry.vary,
                size: size,
                access: state.clock,
                generation: state.clock
            )
            state.byKey[entry.key, default: []].append(name)
            state.bytes += size
            self.evict(&state, keeping: name)
            return state.records[name] != nil
        }
    }

    /// The entry for `key` matching `request`'s Vary'd headers; files that fail to read or to
    /// check (length, CRC, key) are removed.
    func load(key: String, request: HTTPHeaders) -> CacheEntry? {
        let candidates: [(name: String, generation: UInt64)] = self.state.withLock { state in
            (state.byKey[key] ?? []).compactMap { name in
                guard let record = state.records[name],
                    record.vary.allSatisfy({ $0.value == selectingValue(request, $0.name) })
                else { return nil }
                return (name, record.generation)
            }
        }
        for candidate in candidates {
            let path = self.path(candidate.name)
            guard let entry = try? Self.readEntry(path), entry.key == key, entry.matches(request) else {
                self.state.withLock { state in
                    // Only the file that failed: a store may have replaced it meanwhile.
                    if state.records[candidate.name]?.generation == candidate.generation {
                        try? self.removeFile(&state, candidate.name)
                    }
                }
                continue
            }
            self.state.withLock { state in
                state.clock += 1
                if state.records[candidate.name]?.generation == candidate.generation {
                    state.records[candidate.name]!.access = state.clock
                }
            }
            try? FileSystem.touch(path)  // recency survives a reopen
            return entry
        }
        return nil
    }

    func remove(key: String, vary: [VaryField]) throws(FileError) {
        let name = Self.fileName(key: key, vary: vary)
        try self.state.withLock { state throws(FileError) in try self.removeFile(&state, name) }
    }

    func remove(key: String) throws(FileError) {
        try self.state.withLock { state throws(FileError) in
            for name in state.byKey[key] ?? [] { try self.removeFile(&state, name) }
        }
    }

    func removeAll() throws(FileError) {
        try self.state.withLock { state throws(FileError) in
            for name in Array(state.records.keys) { try self.removeFile(&state, name) }
            state = State()
        }
    }

    private func removeFile(_ state: inout State, _ name: String) throws(FileError) {
        let known = state.records[name] != nil
        self.forget(&state, name)
        do {
            try FileSystem.unlink(self.path(name))
        } catch {
            if known { throw error }
        }
    }

    /// Drops `name` from the index (the file is gone or replaced).
    private func forget(_ state: inout State, _ name: String) {
        guard let record = state.records.removeValue(forKey: name) else { return }
        state.bytes -= record.size
        if var names = state.byKey[record.key] {
            names.removeAll { $0 == name }
            state.byKey[record.key] = names.isEmpty ? nil : names
        }
    }

    /// Removes the least recently used files until the store fits.
    private func evict(_ state: inout State, keeping: String?) {
        guard state.bytes > self.capacity else { return }
        let order = state.records.sorted { $0.value.access < $1.value.access }.map(\.key)
        for name in order where state.bytes > self.capacity && name != keeping {
            try? self.removeFile(&state, name)
        }
        if state.bytes > self.capacity, let keeping { try? self.removeFile(&state, keeping) }
    }

    // MARK: Format

    /// Everything before the body ("HWC1", meta length, meta, body length) and the file's
    /// total size. The body and the CRC are written after it, so a large body is never copied.
    static func encodeHead(_ entry: CacheEntry) -> (head: [UInt8], size: Int) {
        var meta = ByteWriter()
        let r = entry.response
        meta.string(entry.key)
        meta.u64(r.requestTime.timeIntervalSince1970.bitPattern)
        meta.u64(r.responseTime.timeIntervalSince1970.bitPattern)
        meta.u64(entry.correctedInitialAge.bitPattern)
        meta.u64(UInt64(bitPattern: Int64(r.head.status)))
        meta.u32(UInt32(truncatingIfNeeded: r.head.version.major))
        meta.u32(UInt32(truncatingIfNeeded: r.head.version.minor))
        meta.string(r.head.reasonPhrase)
        meta.u32(UInt32(r.head.headers.count))
        for field in r.head.headers {
            meta.string(field.name)
            meta.string(field.value)
        }
        meta.u32(UInt32(entry.vary.count))
        for field in entry.vary {
            meta.string(field.name)
            meta.bytes.append(field.value == nil ? 0 : 1)
            meta.string(field.value ?? "")
        }
        meta.u32(UInt32(r.userInfo.count))
        for (k, v) in r.userInfo.sorted(by: { $0.key < $1.key }) {
            meta.string(k)
            meta.string(v)
        }
        var out = ByteWriter()
        out.bytes.reserveCapacity(meta.bytes.count + 16)
        out.bytes.append(contentsOf: Self.magic)
        out.u32(UInt32(meta.bytes.count))
        out.bytes.append(contentsOf: meta.bytes)
        out.u64(UInt64(r.body.count))
        return (out.bytes, out.bytes.count + r.body.count + 4)
    }

    /// A whole file back into an entry: nil when anything does not add up (length, CRC,
    /// meta); throws when the file cannot be read. The body is read straight into its array.
    static func readEntry(_ path: String) throws(FileError) -> CacheEntry? {
        let fd = try FileDescriptor.openForReading(path)
        defer { fd.closeIgnoringErrors() }
        guard let size = try fd.regularFileSize(), size >= 20 else { return nil }
        let start = try fd.readExactly(count: 8, at: 0)
        guard start[0..<4].elementsEqual(Self.magic) else { return nil }
        var reader = ByteReader(start[4...])
        guard let metaLength = reader.u32().map(Int.init), metaLength <= Self.maximumMetaLength,
            8 + metaLength + 12 <= size
        else { return nil }
        let meta = try fd.readExactly(count: metaLength + 8, at: 8)
        var lengthReader = ByteReader(meta[metaLength...])
        guard let bodyLength64 = lengthReader.u64(), UInt64(size) == UInt64(8 + metaLength + 12) &+ bodyLength64 else {
            return nil
        }
        let bodyLength = Int(bodyLength64)
        let body = try fd.readExactly(count: bodyLength, at: 16 + metaLength)
        let trailer = try fd.readExactly(count: 4, at: 16 + metaLength + bodyLength)
        var crc = crc32Of(start[...])
        crc = crc32Of(meta[...], seed: crc)
        crc = crc32Of(body[...], seed: crc)
        var trailerReader = ByteReader(trailer[...])
        guard trailerReader.u32() == crc,
            let (key, response, vary, initialAge) = decodeMeta(ByteReader(meta[0..<metaLength]))
        else { return nil }
        var full = response
        full.body = body
        return CacheEntry(key: key, response: full, vary: vary, correctedInitialAge: initialAge)
    }

    private static func decodeMeta(_ reader: ByteReader) -> (String, CachedResponse, [VaryField], Double)? {
        var r = reader
        guard let key = r.string(), let requestBits = r.u64(), let responseBits = r.u64(), let ageBits = r.u64(),
            let statusBits = r.u64(), let major = r.u32(), let minor = r.u32(), let reason = r.string(),
            let headerCount = r.u32(), Int(headerCount) <= r.remaining
        else { return nil }
        var fields: [(name: String, value: String)] = []
        for _ in 0..<headerCount {
            guard let name = r.string(), let value = r.string() else { return nil }
            fields.append((name, value))
        }
        guard let varyCount = r.u32(), Int(varyCount) <= r.remaining else { return nil }
        var vary: [VaryField] = []
        for _ in 0..<varyCount {
            guard let name = r.string(), let flag = r.u8(), flag <= 1, let value = r.string() else { return nil }
            vary.append(VaryField(name: name, value: flag == 1 ? value : nil))
        }
        guard let infoCount = r.u32(), Int(infoCount) <= r.remaining else { return nil }
        var userInfo: [String: String] = [:]
        for _ in 0..<infoCount {
            guard let k = r.string(), let v = r.string() else { return nil }
            userInfo[k] = v
        }
        let status = Int64(bitPattern: statusBits)
        guard r.remaining == 0, (100...999).contains(status) else { return nil }
        let requestTime = Double(bitPattern: requestBits)
        let responseTime = Double(bitPattern: responseBits)
        let initialAge = Double(bitPattern: ageBits)
        guard requestTime.isFinite, responseTime.isFinite, initialAge.isFinite, initialAge >= 0 else { return nil }
        let head = HTTPResponseHead(
            version: HTTPVersion(major: Int(major), minor: Int(minor)),
            status: Int(status),
            reasonPhrase: reason,
            headers: HTTPHeaders(fields)
        )
        let response = CachedResponse(
            head: head,
            body: [],
            requestTime: Date(timeIntervalSince1970: requestTime),
            responseTime: Date(timeIntervalSince1970: responseTime),
            userInfo: userInfo,
            storagePolicy: .allowed
        )
        return (key, response, vary, initialAge)
    }

    /// The index record of a file from its first bytes (magic, meta, body length checked
    /// against the file size), and its mtime; nil when the file is not a valid entry.
    static func readIndexRecord(_ path: String) -> (Record, Int64)? {
        guard let fd = try? FileDescriptor.openForReading(path) else { return nil }
        defer { fd.closeIgnoringErrors() }
        guard let st = try? fd.status(), (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        let size = Int(st.st_size)
        guard size >= 20, let head = try? fd.readExactly(count: 8, at: 0), head[0..<4].elementsEqual(Self.magic) else {
            return nil
        }
        var reader = ByteReader(head[4...])
        guard let metaLength = reader.u32().map(Int.init), metaLength <= Self.maximumMetaLength,
            8 + metaLength + 12 <= size,
            let meta = try? fd.readExactly(count: metaLength + 8, at: 8)
        else { return nil }
        var lengthReader = ByteReader(meta[metaLength...])
        guard let bodyLength = lengthReader.u64(), UInt64(size) == UInt64(8 + metaLength + 12) &+ bodyLength,
            let (key, _, vary, _) = decodeMeta(ByteReader(meta[0..<metaLength]))
        else { return nil }
        return (Record(key: key, vary: vary, size: size, access: 0, generation: 0), Int64(st.st_mtim.tv_sec))
    }
}

// MARK: - Byte helpers

struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { self.bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { self.bytes.append(contentsOf: $0) } }
    mutating func string(_ s: String) {
        self.u32(UInt32(s.utf8.count))
        self.bytes.append(contentsOf: s.utf8)
    }
}

/// Bounds-checked little-endian reads; every read returns nil past the end.
struct ByteReader {
    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    var remaining: Int { self.bytes.endIndex - self.index }

    mutating func skip(_ n: Int) { self.index += min(n, self.remaining) }

    mutating func u8() -> UInt8? {
        guard self.remaining >= 1 else { return nil }
        defer { self.index += 1 }
        return self.bytes[self.index]
    }

    mutating func u32() -> UInt32? {
        guard self.remaining >= 4 else { return nil }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(self.bytes[self.index + i]) << (8 * i) }
        self.index += 4
        return v
    }

    mutating func u64() -> UInt64? {
        guard self.remaining >= 8 else { return nil }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(self.bytes[self.index + i]) << (8 * i) }
        self.index += 8
        return v
    }

    mutating func string() -> String? {
        guard let n = self.u32().map(Int.init), n <= self.remaining else { return nil }
        defer { self.index += n }
        return String(decoding: self.bytes[self.index..<(self.index + n)], as: UTF8.self)
    }
}

/// zlib's CRC-32 of `bytes` continuing from `seed` (a CRC so far), in chunks that fit its
/// 32-bit length.
func crc32Of(_ bytes: ArraySlice<UInt8>, seed: UInt32? = nil) -> UInt32 {
    var crc: UInt = seed.map { UInt($0) } ?? crc32(0, nil, 0)
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let n = min(raw.count - offset, 1 << 30)
            crc = crc32(crc, raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + offset, UInt32(n))
            offset += n
        }
    }
    return UInt32(truncatingIfNeeded: crc)
}
