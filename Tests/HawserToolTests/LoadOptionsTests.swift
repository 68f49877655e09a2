import Testing

@testable import HawserTool

@Suite("hawser load: flags")
struct LoadOptionsTests {
    func parse(_ a: [String]) throws -> LoadOptions { try LoadOptions.parse(a + ["http://127.0.0.1:1/"]) }

    func error(_ a: [String], url: Bool = true) -> String? {
        do {
            _ = try LoadOptions.parse(a + (url ? ["http://127.0.0.1:1/"] : []))
            return nil
        } catch {
            return error.description
        }
    }

    @Test("durations: seconds, or wrk's 10s, 2m, 1h; -d 10s by default")
    func durations() throws {
        #expect(LoadOptions.duration("30") == 30)
        #expect(LoadOptions.duration("1.5") == 1.5)
        #expect(LoadOptions.duration("10s") == 10)
        #expect(LoadOptions.duration("2m") == 120)
        #expect(LoadOptions.duration("1h") == 3600)
        for bad in ["0", "-1", "10x", "m", "", "1e999", "nan", "abc"] {
            #expect(LoadOptions.duration(bad) == nil, "\(bad)")
        }
        #expect(try parse([]).duration == 10)
        #expect(try parse(["-d", "2m"]).duration == 120)
        #expect(try parse(["--timeout", "500"]).timeout == 500)
    }

    @Test("bad values are usage errors that say which flag and what was wrong")
    func badValues() {
        #expect(error(["-d", "10x"]) == "-d needs a positive duration (30, 10s, 2m, 1h), not '10x'")
        #expect(error(["-c", "0"]) == "-c needs a positive number of connections, not '0'")
        #expect(error(["-t", "two"]) == "-t needs a positive number of loops (threads), not 'two'")
        #expect(error(["-n", "-5"]) == "-n needs a positive number of requests, not '-5'")
        #expect(error(["-R", "0"]) == "-R needs a positive rate in requests per second, not '0'")
        #expect(error(["-c"], url: false) == "-c needs a value")
        #expect(error(["--order", "zigzag"]) == "--order takes round-robin or random, not 'zigzag'")
        #expect(error(["--engine", "fast"]) == "--engine takes raw or session, not 'fast'")
        #expect(error(["-H", "NoColon"]) == "header 'NoColon' is not 'Name: value'")
        #expect(error(["-X", "GE T"]) == "-X needs an HTTP method token, not 'GE T'")
        #expect(error(["--bogus"]) == "unknown option '--bogus' (see hawser load --help)")
        #expect(error([], url: false) == "no URL given")
    }

    @Test("-d and -n exclude each other; --body and --requests too")
    func exclusive() throws {
        #expect(
            error(["-d", "5", "-n", "100"])
                == "-d and -n exclude each other: run for a duration or for a number of requests"
        )
        #expect(
            error(["--body", "a", "--requests", "b"])?.hasPrefix("--body and --requests exclude each other") == true
        )
        let n = try parse(["-n", "100"])
        #expect(n.requestCount == 100 && n.duration == nil)
    }

    @Test("the engine: raw when the flags allow it; TLS flags and https need session; -t needs raw or async callers")
    func engines() throws {
        #expect(try parse([]).resolvedEngine == .raw)
        #expect(try parse(["--resolve", "example:80:127.0.0.1"]).resolvedEngine == .raw)
        #expect(try parse(["--cacert", "ca.pem"]).resolvedEngine == .session)
        #expect(try LoadOptions.parse(["https://127.0.0.1:1/"]).resolvedEngine == .session)
        #expect(
            error(["--engine", "raw", "-k"]) == "--engine raw speaks plain http over TCP: -k needs --engine session"
        )
        #expect(
            error(["--engine", "session", "-t", "2"])
                == "-t 2 with --api completion: the completion chains run on one loop (use --api async or --engine raw)"
        )
        let o = try parse(["--unix-socket", "/tmp/s", "-k", "--pinning", "none"])
        #expect(o.curlArguments == ["--unix-socket", "/tmp/s", "-k", "--pinning", "none"])
    }

    @Test(
        "--api async runs the session engine; --executor needs it; the tool keeps the default executor only for load --executor default|loop"
    )
    func asyncCallers() throws {
        let o = try parse(["--api", "async"])
        #expect(o.resolvedEngine == .session && o.api == .async && o.executor == nil)
        #expect(try parse(["--api", "async", "--executor", "loop"]).executor == .loop)
        #expect(try parse(["--api", "async", "-t", "2"]).threads == 2)
        #expect(try parse([]).api == .completion)
        #expect(error(["--api", "sync"]) == "--api takes completion or async, not 'sync'")
        #expect(
            error(["--api", "async", "--executor", "main"]) == "--executor takes installed, default or loop, not 'main'"
        )
        #expect(
            error(["--executor", "default"]) == "--executor places async callers: it needs --engine session --api async"
        )
        #expect(
            error(["--engine", "session", "--executor", "default"])
                == "--executor places async callers: it needs --api async"
        )
        #expect(error(["--engine", "raw", "--api", "async"]) == "--api async needs --engine session")
        #expect(LoadOptions.keepsDefaultExecutor(["load", "--api", "async", "--executor", "default", "http://h/"]))
        #expect(LoadOptions.keepsDefaultExecutor(["load", "--executor", "loop"]))
        #expect(!LoadOptions.keepsDefaultExecutor(["load", "--api", "async", "--executor", "installed", "http://h/"]))
        #expect(!LoadOptions.keepsDefaultExecutor(["get", "--executor", "default"]))
        #expect(!LoadOptions.keepsDefaultExecutor([]))
    }

    @Test("wrk's flags")
    func wrkFlags() throws {
        let o = try parse([
            "-c", "64", "-t", "2", "-d", "30s", "--latency", "-H", "X-A: 1", "-H", "X-B:2", "-X", "PUT", "-R", "2000",
            "--new-connection", "--json", "--hdr-out", "h.log", "--svg", "s.svg", "--fail-if", "p99>50ms",
            "--fail-if", "errors>0", "--result-line",
        ])
        #expect(o.connections == 64 && o.threads == 2 && o.duration == 30 && o.latency)
        #expect(o.headers.map { "\($0.0)=\($0.1)" } == ["X-A=1", "X-B=2"])
        #expect(o.method == "PUT" && o.rate == 2000 && o.newConnection && o.json && o.resultLine)
        #expect(o.hdrOutPath == "h.log" && o.svgPath == "s.svg" && o.failIf == ["p99>50ms", "errors>0"])
    }

    @Test("--requests: 'METHOD PATH' lines and JSON lines; -H applies to each; a bad line names its number")
    func requestsFile() throws {
        var o = try parse(["-H", "X-All: 1"])
        let files = ["body.bin": Array("hello".utf8)]
        let read: (String) throws -> [UInt8] = { p in
            guard let b = files[p] else { throw LoadOptions.UsageError(description: "no \(p)") }
            return b
        }
        let specs = try LoadRequests.parse(
            """
            # a comment
            GET /a

            {"method": "PUT", "path": "/b?x=1", "headers": {"X-One": "y"}, "body_file": "body.bin"}
            {"path": "/c"}
            """,
            defaults: o,
            readFile: read
        )
        #expect(
            specs == [
                LoadRequestSpec(method: "GET", target: "/a", headers: [("X-All", "1")], body: nil),
                LoadRequestSpec(
                    method: "PUT",
                    target: "/b?x=1",
                    headers: [("X-All", "1"), ("X-One", "y")],
                    body: Array("hello".utf8)
                ),
                LoadRequestSpec(method: "GET", target: "/c", headers: [("X-All", "1")], body: nil),
            ]
        )
        o.headers = []
        for (text, message) in [
            ("GET /a\nGET", "--requests line 2: expected 'METHOD /path', got 'GET'"),
            (
                "{\"path\": 1}",
                "--requests line 1: not a JSON object with \"path\" (and \"method\", \"headers\", \"body_file\")"
            ),
            ("{\"path\": \"/x\", \"body_file\": \"none\"}", "--requests line 1: cannot read body_file 'none'"),
            ("# only a comment\n", "--requests: the file has no requests"),
        ] {
            #expect(throws: LoadOptions.UsageError(description: message)) {
                try LoadRequests.parse(text, defaults: o, readFile: read)
            }
        }
    }

    @Test("round-robin visits every request in turn from the connection's own start; random stays in range")
    func picker() {
        var p = RequestPicker(count: 3, order: .roundRobin, seed: 1)
        #expect((0..<6).map { _ in p.next() } == [1, 2, 0, 1, 2, 0])
        var r = RequestPicker(count: 5, order: .random, seed: 7)
        let picks = (0..<1000).map { _ in r.next() }
        #expect(picks.allSatisfy { (0..<5).contains($0) } && Set(picks).count == 5)
    }

    @Test("-n is split exactly over the connections")
    func quotas() {
        let plan = LoadPlan(connections: 4, total: 10, rate: nil, order: .roundRobin, timeout: nil)
        #expect((0..<4).map { plan.quota($0) } == [3, 3, 2, 2])
    }
}
