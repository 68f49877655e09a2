// Small helpers every test target uses: URLs, byte patterns, temporary files, memory peaks,
// bounded waits.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// VmHWM (peak resident set) of this process, in KiB.
public func peakRSSKiB() -> Int {
    guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in s.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0: write 5 to clear_refs), so growth is measured
/// from now. Returns false if the kernel refused.
@discardableResult
public func resetPeakRSS() -> Bool {
    let fd = open("/proc/self/clear_refs", O_WRONLY)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return write(fd, "5", 1) == 1
}

public func pattern(_ n: Int, from offset: Int = 0) -> [UInt8] {
    (0..<n).map { UInt8((offset + $0) % 251) }
}

public func tempURL(_ name: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("hawser-test-\(UUID().uuidString)-\(name)")
}

/// Waits until `condition` holds, polling, for at most `timeout` seconds; returns whether it held.
/// For what other threads finish asynchronously after the event a test waited for (a completion
/// queue letting go of the objects its closure held).
public func eventually(timeout: Double = 10, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    return true
}
