import HawserTestServer

#if canImport(Glibc)
import Glibc
#endif

/// `hawser serve [PORT]`: the test server in the foreground (benchmarks, manual poking).
enum ServeCommand {
    static func run(_ args: [String]) -> Int32 {
        let port = args.first.flatMap(Int.init) ?? 0
        do {
            let server = try TestServer(port: port)
            OutputFile.stdout.write("serving on \(server.baseURL) (Ctrl-C to stop)\n")
            while true { pause() }
        } catch {
            OutputFile.stderr.write("hawser serve: \(error)\n")
            return 1
        }
    }
}
