import HawserTestServer
import Testing

/// Suites that open sockets nest in here: serialized, so one test's descriptor count never sees
/// another test's sockets.
@Suite(.serialized) enum NetworkTests {}

/// Descriptors that can be ours: all but libdispatch's lazily made timerfds.
func ownFDs() -> [Int: String] {
    openDescriptors().filter { $0.value != "anon_inode:[timerfd]" }
}

/// Runs `body`, then expects no descriptor more than before (waiting, bounded, for loops to close sockets).
func expectNoFDLeak(_ what: String = "", _ body: () async throws -> Void) async rethrows {
    try? await Task.sleep(nanoseconds: 1)
    let before = Set(ownFDs().keys)
    try await body()
    var leaked: [String] = []
    for _ in 0..<400 {
        leaked = ownFDs().filter { !before.contains($0.key) }.map { "\($0.key) → \($0.value)" }.sorted()
        if leaked.isEmpty { break }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    #expect(leaked.isEmpty, "file descriptors leaked \(what): \(leaked)")
}
