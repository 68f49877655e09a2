import HawserTestServer

#if canImport(Glibc)
import Glibc
#endif

/// `hawser serve [PORT]`: the test server in the foreground (benchmarks, manual poking).
enum ServeCommand {
    static let help = """
        Usage: hawser serve [PORT]
          Runs the test server on 127.0.0.1:PORT (a free port when PORT is not given) in the
          foreground until Ctrl-C. Its routes are those of HawserTestServer: /hello, /json,
          /bytes/N, /echo, /status/N, /delay/MS, /redirect/N, /gzip, /cookies, /range/N,
          /obs-text, /flaky, /fault/… (see TestServer's documentation).
        """

    static func run(_ args: [String]) -> Int32 {
        if args.contains("--help") || args.contains("-h") || args.contains("help") {
            OutputFile.stdout.write(Self.help + "\n")
            return 0
        }
        guard args.count <= 1, args.first.map({ Int($0).map { (0...65535).contains($0) } ?? false }) ?? true else {
            OutputFile.stderr.write(
                "hawser serve: expected a port number, got '\(args.joined(separator: " "))'\n\(Self.help)\n"
            )
            return 2
        }
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
