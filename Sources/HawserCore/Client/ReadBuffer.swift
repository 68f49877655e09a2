/// A contiguous, reusable receive buffer: the socket reads into its tail, the parser reads
/// from its head. Unconsumed bytes are moved to the front only when the tail runs out of
/// room, and the storage grows only while a head is incomplete (the parser's head limit
/// bounds that growth). Loop-confined.
import HawserHTTP1

final class ReadBuffer {
    private(set) var storage: UnsafeMutableRawPointer
    private(set) var capacity: Int
    private(set) var readerIndex = 0
    private(set) var writerIndex = 0

    init(capacity: Int) {
        self.capacity = capacity
        self.storage = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    }

    deinit { self.storage.deallocate() }

    var readableCount: Int { self.writerIndex - self.readerIndex }

    /// The unread bytes.
    var readable: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: self.storage + self.readerIndex, count: self.writerIndex - self.readerIndex)
    }

    /// Space to read into, at least `minimum` bytes (compacting or growing as needed).
    func writableSpace(minimum: Int) -> UnsafeMutableRawBufferPointer {
        if self.readerIndex == self.writerIndex {
            self.readerIndex = 0
            self.writerIndex = 0
        }
        if self.capacity - self.writerIndex < minimum {
            let unread = self.writerIndex - self.readerIndex
            if self.readerIndex > 0 && self.capacity - unread >= minimum {
                (self.storage).copyMemory(from: self.storage + self.readerIndex, byteCount: unread)
            } else {
                var newCapacity = self.capacity
                while newCapacity - unread < minimum { newCapacity *= 2 }
                let fresh = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
                fresh.copyMemory(from: self.storage + self.readerIndex, byteCount: unread)
                self.storage.deallocate()
                self.storage = fresh
                self.capacity = newCapacity
            }
            self.readerIndex = 0
            self.writerIndex = unread
        }
        return UnsafeMutableRawBufferPointer(
            start: self.storage + self.writerIndex,
            count: self.capacity - self.writerIndex
        )
    }

    func didWrite(_ n: Int) { self.writerIndex += n }

    /// Appends `bytes` after the unread ones.
    func append(_ bytes: [UInt8]) {
        let space = self.writableSpace(minimum: bytes.count)
        bytes.withUnsafeBytes { space.copyMemory(from: $0) }
        self.writerIndex += bytes.count
    }

    func consume(_ n: Int) {
        self.readerIndex += n
        if self.readerIndex == self.writerIndex {
            self.readerIndex = 0
            self.writerIndex = 0
        }
    }

    func clear() {
        self.readerIndex = 0
        self.writerIndex = 0
    }
}

/// A FIFO ring buffer (the pool's wait queues). Not thread-safe.
struct CircularQueue<Element> {
    private var items: [Element?] = []
    private var head = 0
    private(set) var count = 0

    var isEmpty: Bool { self.count == 0 }

    /// The element `popFirst` would return, without removing it.
    var first: Element? { self.count == 0 ? nil : self.items[self.head] }

    mutating func append(_ e: Element) {
        if self.count == self.items.count { self.grow() }
        self.items[(self.head + self.count) % self.items.count] = e
        self.count += 1
    }

    mutating func prepend(_ e: Element) {
        if self.count == self.items.count { self.grow() }
        self.head = (self.head - 1 + self.items.count) % self.items.count
        self.items[self.head] = e
        self.count += 1
    }

    mutating func popFirst() -> Element? {
        guard self.count > 0 else { return nil }
        let e = self.items[self.head]
        self.items[self.head] = nil
        self.head = (self.head + 1) % self.items.count
        self.count -= 1
        return e
    }

    /// Removes the first element matching `predicate` (O(n)).
    mutating func removeFirst(where predicate: (Element) -> Bool) -> Element? {
        for i in 0..<self.count {
            let idx = (self.head + i) % self.items.count
            if let e = self.items[idx], predicate(e) {
                var rest: [Element] = []
                for j in (i + 1)..<self.count { rest.append(self.items[(self.head + j) % self.items.count]!) }
                for j in i..<self.count { self.items[(self.head + j) % self.items.count] = nil }
                self.count = i
                for r in rest { self.append(r) }
                return e
            }
        }
        return nil
    }

    private mutating func grow() {
        let newCap = max(8, self.items.count * 2)
        var fresh = [Element?](repeating: nil, count: newCap)
        for i in 0..<self.count { fresh[i] = self.items[(self.head + i) % self.items.count] }
        self.items = fresh
        self.head = 0
    }
}
