// Helpers the test targets share for the servers and tools they run (nginx, tinyproxy, sockd,
// curl, ip) and for counting this process's descriptors. Never used by the library.
#if canImport(Glibc)
import Glibc
#endif

/// Child processes started with `posix_spawn`.
public enum ChildProcess {
    /// Why a child could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts `path` with `args`: stdin from /dev/null, stdout and stderr to the files named
    /// (created or truncated, mode 0600) or to /dev/null; the same path for both sends them to one
    /// file. The child gets an empty signal mask and default dispositions (the spawning thread's
    /// blocked signals and SIG_IGN would be inherited), the given environment (this process's
    /// when nil), and with `ownGroup` a process group of its own, so that a kill of the group
    /// also reaches the helpers it forks (sockd forks several).
    public static func spawn(
        _ path: String,
        _ args: [String],
        stdout: String? = nil,
        stderr: String? = nil,
        environment: [String]? = nil,
        ownGroup: Bool = false
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if let stderr, stderr == stdout {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setsigdefault(&attr, &all)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownGroup {
            posix_spawnattr_setpgroup(&attr, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attr, Int16(flags))
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var pid: pid_t = 0
        let rc: Int32
        if let environment {
            let env: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
            defer { for e in env { free(e) } }
            rc = posix_spawn(&pid, path, &actions, &attr, argv, env)
        } else {
            rc = posix_spawn(&pid, path, &actions, &attr, argv, environ)
        }
        guard rc == 0 else {
            throw Failure(description: "posix_spawn \(path) failed: \(String(cString: strerror(rc)))")
        }
        return pid
    }

    /// Waits for `pid` to end: its exit code, or nil when a signal ended it, and the raw status.
    public static func wait(_ pid: pid_t) -> (exitCode: Int32?, status: Int32) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7F == 0 ? (status >> 8) & 0xFF : nil, status)
    }
}

/// This process's open descriptors with what they point at (socket:[inode],
/// anon_inode:[eventpoll], …), not counting the one used to list them.
public func openDescriptors() -> [Int: String] {
    var out: [Int: String] = [:]
    guard let dir = opendir("/proc/self/fd") else { return out }
    defer { closedir(dir) }
    let own = Int(dirfd(dir))
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) {
            String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        guard let fd = Int(name), fd != own else { continue }
        var buf = [CChar](repeating: 0, count: 256)
        let n = readlink("/proc/self/fd/\(fd)", &buf, 255)
        out[fd] = n > 0 ? String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    }
    return out
}
