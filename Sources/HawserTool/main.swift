import HawserCore

#if canImport(Glibc)
import Glibc
#endif

// hawser: the command-line face of the Hawser engine.
//   hawser demo            a tour of real requests against the embedded loopback test server
//   hawser get URL [opts]  fetch a URL with curl's common flags
//   hawser serve [PORT]    run the test server in the foreground
//   hawser load URL [opts] a load generator (wrk's flags, wrk2's -R)
//   hawser --version       the package version (HawserVersion)
//
// The event loops are the process's Swift global executor (installed before any task starts):
// every request the commands await is served with no thread hand-off. `hawser load --executor
// default|loop` measures callers on the runtime's default executor, so it leaves it in place.
let args = Array(CommandLine.arguments.dropFirst())
if !LoadOptions.keepsDefaultExecutor(args) {
    do {
        try EventLoopGroup.shared.installAsGlobalExecutor()
    } catch {
        OutputFile.stderr.write("hawser: \(error); running on the default executor\n")
    }
}
let status: Int32
switch args.first {
case "demo":
    status = await DemoCommand.run()
case "get":
    status = await GetCommand.run(Array(args.dropFirst()))
case "serve":
    status = ServeCommand.run(Array(args.dropFirst()))
case "load":
    status = runLoad(arguments: Array(args.dropFirst()))
case "--version", "-V", "version":
    OutputFile.stdout.write("hawser \(HawserVersion.string)\n")
    status = 0
case "help", "--help", "-h", nil:
    OutputFile.stdout.write(
        """
        hawser: an HTTP/1.1 client on its own epoll engine (AFNetworking's architecture, for Linux)

          hawser demo              a tour of real requests against the embedded loopback test server
          hawser get URL [opts]    fetch URL; curl's common flags (hawser get --help)
          hawser serve [PORT]      run the test server on 127.0.0.1 in the foreground
          hawser load URL [opts]   load-test URL: wrk's flags, wrk2's -R (hawser load --help)
          hawser --version         print the version

        """
    )
    if args.first == "get" { OutputFile.stdout.write(CurlOptions.help + "\n") }
    status = args.isEmpty ? 2 : 0
default:
    OutputFile.stderr.write("hawser: unknown command '\(args[0])' (try 'hawser help')\n")
    status = 2
}
exit(status)
