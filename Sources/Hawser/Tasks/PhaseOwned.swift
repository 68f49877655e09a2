import HawserCore

// The fields a task's phase owns (TaskDelegate's), with their owner in the type: while an attempt
// runs they are its callbacks', on the attempt's event loop; between attempts, the thread that
// moved the phase under the task's lock (a launch, a retry decision, the completion) claims them.
// The lock's hand-offs order the owners one after the other; debug builds check every access
// against the current owner, so a field touched outside its phase (a late engine callback after
// its attempt ended, a completion racing a running attempt) traps with the caller's file and line
// instead of racing. Release builds store the value alone.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

struct PhaseOwned<Value> {
    private var storage: Value
    #if DEBUG
    private enum Owner {
        /// Between owners: the phase moved (under the task's lock) and nobody claimed the fields
        /// yet; any thread may (the lock orders it after the last owner).
        case released
        /// The attempt that was just launched; its first callback binds the fields to its loop.
        case attempt
        /// The running attempt's callbacks, on its loop.
        case loop(EventLoop)
        /// The thread that holds the phase between attempts.
        case thread(pthread_t)
    }
    private var owner = Owner.released
    #endif

    init(_ value: Value) {
        self.storage = value
    }

    /// The fields; only for their owner (checked in debug builds).
    var value: Value {
        @inline(__always) _read {
            self.check()
            yield self.storage
        }
        @inline(__always) _modify {
            self.check()
            yield &self.storage
        }
    }

    /// The calling thread holds the phase now (a launch, a retry decision, the completion): it
    /// moved the phase under the task's lock, which orders it after the previous holder. An
    /// attempt that has not ended still owns the fields: claiming them then traps (debug builds).
    @inline(__always)
    mutating func claim(file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        switch self.owner {
        case .attempt, .loop:
            preconditionFailure("a task's phase fields claimed while its attempt runs", file: file, line: line)
        case .released, .thread:
            self.owner = .thread(pthread_self())
        }
        #endif
    }

    /// The attempt that starts now owns the fields (after the launching thread set them up):
    /// its callbacks, once the first of them binds them to its loop, until ``release()``.
    @inline(__always)
    mutating func handToAttempt() {
        #if DEBUG
        self.owner = .attempt
        #endif
    }

    /// An engine callback of the running attempt, whose task runs on `loop`: the first binds the
    /// fields to that loop (or, for an attempt completed without its loop, a loop that has shut
    /// down, to the calling thread); the others are checked against it.
    @inline(__always)
    mutating func bind(to loop: EventLoop, file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        if case .attempt = self.owner {
            self.owner = loop.inEventLoop ? .loop(loop) : .thread(pthread_self())
        }
        self.check(file: file, line: line)
        #endif
    }

    /// The owner is done (its attempt ended): the next one claims the fields.
    @inline(__always)
    mutating func release(file: StaticString = #fileID, line: UInt = #line) {
        self.check(file: file, line: line)
        #if DEBUG
        self.owner = .released
        #endif
    }

    @inline(__always)
    private func check(file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        switch self.owner {
        case .released, .attempt:
            break
        case .loop(let loop):
            loop.assertInLoop(file, line)
        case .thread(let thread):
            precondition(
                pthread_equal(thread, pthread_self()) != 0,
                "a task's phase fields touched by a thread that does not hold the phase",
                file: file,
                line: line
            )
        }
        #endif
    }
}
