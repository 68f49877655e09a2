// swift-tools-version: 6.1
//
// Hawser: AFNetworking's architecture in Swift, for Linux, on its own engine.
//
// Layers (each imports only what it declares below; docs/ARCHITECTURE.md draws the graph, and
// scripts/module-graph.py prints it from this file):
//   Hawser          the AFNetworking layer (session manager, serializers, policies, reachability);
//                   FoundationEssentials only; re-exports HawserCore and HawserReachability.
//                   HawserFoundation and HawserXML add what needs full Foundation (property
//                   lists, InputStream, NotificationCenter; XMLParser).
//     HawserReachability  route monitoring over netlink (no request consults it: not the engine's)
//   HawserHTTPTypes swift-http-types conversions and a Session entry point taking HTTPRequest
//   HawserOpenAPI   an OpenAPI ClientTransport (swift-openapi-runtime) on a Session
//   HawserTracing   a client span per request (swift-distributed-tracing) over HawserCore's
//                   RequestInstrumentation hook; `traceparent` through the tracer's injector
//   HawserMetrics   request, error and duration metrics and pool gauges (swift-metrics), same hook
//   HawserCore      the engine's client (Session, tasks, connections, pool; buffered and streaming
//                   bodies); re-exports the modules below, so it is the one import an engine-only
//                   application needs. Its one package dependency, swift-log, sits behind the
//                   trait "Logging", and the br and zstd content codings (libbrotlidec, libzstd)
//                   behind "Brotli" and "Zstd" (all three on by default; `traits: []` gives an
//                   engine with no package dependency that links only OpenSSL and zlib):
//     HawserAuth, HawserCache, HawserCoding, HawserCookies, HawserProxy   HTTP features
//     HawserTLS       OpenSSL: contexts, streams, certificates, trust, pinning policies; adds the
//                     certificate details to HawserError
//     HawserBase      shared vocabulary: HawserError, HTTPClientRequest, TaskMetrics (no TLS type)
//     HawserPosix     event loop, timers, clock, resolver, sockets, files and the blocking-IO pool
//   HawserHTTP1     pure, sans-IO HTTP/1.1 parser and encoder (no IO, no Foundation)
//   CHawser         lean C interop: syscall shims, OpenSSL and zlib macro shims
//   CBrotli, CZstd  the brotli and zstd C libraries (system libraries; only under their traits)
import PackageDescription

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Hawser",
    products: [
        .library(name: "Hawser", targets: ["Hawser"]),
        .library(name: "HawserCore", targets: ["HawserCore"]),
        // The XML response serializer, apart so that only its users link FoundationXML (libxml2).
        .library(name: "HawserXML", targets: ["HawserXML"]),
        // What needs full Foundation (property lists, InputStream parts, NotificationCenter,
        // NSNull/NSNumber parameters), apart so that `Hawser` needs FoundationEssentials only.
        .library(name: "HawserFoundation", targets: ["HawserFoundation"]),
        .library(name: "HawserHTTP1", targets: ["HawserHTTP1"]),
        // swift-http-types conversions, apart so the engine keeps no package dependency.
        .library(name: "HawserHTTPTypes", targets: ["HawserHTTPTypes"]),
        // The OpenAPI ClientTransport, apart so only its users build swift-openapi-runtime.
        .library(name: "HawserOpenAPI", targets: ["HawserOpenAPI"]),
        // Tracing and metrics, apart so that only their users build swift-distributed-tracing and
        // swift-metrics (HawserCore has a dependency-free hook they plug into).
        .library(name: "HawserTracing", targets: ["HawserTracing"]),
        .library(name: "HawserMetrics", targets: ["HawserMetrics"]),
        .library(name: "HawserTestServer", targets: ["HawserTestServer"]),
        .executable(name: "hawser", targets: ["HawserTool"]),
    ],
    traits: [
        .trait(name: "Logging", description: "SessionConfiguration.logger and per-request loggers (swift-log)"),
        // The br and zstd content codings are on by default: servers and CDNs send them to any
        // client that offers them, smaller than gzip, and their run-time libraries are on every
        // Debian system that runs Swift (libzstd1 for dpkg, libbrotli1 for libcurl4, which the
        // Swift runtime's FoundationNetworking needs). Building needs libbrotli-dev and
        // libzstd-dev; without the trait the library neither links nor offers the coding.
        .trait(name: "Brotli", description: "Content-Encoding: br, decoded by libbrotlidec (Debian: libbrotli-dev)"),
        .trait(name: "Zstd", description: "Content-Encoding: zstd, decoded by libzstd (Debian: libzstd-dev)"),
        .default(enabledTraits: ["Logging", "Brotli", "Zstd"]),
    ],
    dependencies: [
        // A command plugin only (`swift package generate-documentation`): it links nothing into
        // any product, and a package that depends on Hawser never builds it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // Both without their Foundation traits: HTTPTypes then needs no Foundation at all, and
        // OpenAPIRuntime FoundationEssentials only (a package that enables them gets them).
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0", traits: []),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4", traits: []),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    ],
    targets: [
        // MARK: - Library targets
        .target(
            name: "CHawser",
            cSettings: [.define("_GNU_SOURCE")],
            linkerSettings: [
                .linkedLibrary("ssl"),
                .linkedLibrary("crypto"),
                .linkedLibrary("z"),
            ]
        ),
        // System libraries (headers in /usr/include, like OpenSSL's and zlib's), linked only when
        // HawserCoding depends on them: traits Brotli (libbrotli-dev) and Zstd (libzstd-dev).
        .systemLibrary(name: "CBrotli"),
        .systemLibrary(name: "CZstd"),
        .target(name: "HawserHTTP1", swiftSettings: strict),
        // The engine, bottom up; each module imports only what it declares (CI builds with
        // --explicit-target-dependency-import-check=error).
        .target(name: "HawserPosix", dependencies: ["CHawser"], swiftSettings: strict),
        .target(name: "HawserBase", dependencies: ["HawserHTTP1", "HawserPosix"], swiftSettings: strict),
        // OpenSSL: above HawserBase, so that only what speaks TLS links it; it adds the certificate
        // details to HawserError (peerTrust, peerCertificates).
        .target(name: "HawserTLS", dependencies: ["CHawser", "HawserPosix", "HawserBase"], swiftSettings: strict),
        .target(
            name: "HawserCoding",
            dependencies: [
                "CHawser", "HawserBase",
                .target(name: "CBrotli", condition: .when(traits: ["Brotli"])),
                .target(name: "CZstd", condition: .when(traits: ["Zstd"])),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "HawserCookies",
            dependencies: ["HawserPosix", "HawserHTTP1", "HawserBase"],
            swiftSettings: strict
        ),
        .target(name: "HawserAuth", dependencies: ["CHawser", "HawserHTTP1"], swiftSettings: strict),
        .target(
            name: "HawserCache",
            dependencies: ["CHawser", "HawserPosix", "HawserHTTP1", "HawserBase"],
            swiftSettings: strict
        ),
        .target(
            name: "HawserProxy",
            dependencies: ["HawserPosix", "HawserHTTP1", "HawserBase"],
            swiftSettings: strict
        ),
        .target(
            name: "HawserCore",
            dependencies: [
                "CHawser", "HawserHTTP1", "HawserPosix", "HawserTLS", "HawserBase", "HawserCoding", "HawserCookies",
                "HawserAuth", "HawserCache", "HawserProxy",
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Logging"])),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "HawserTracing",
            dependencies: ["HawserCore", .product(name: "Tracing", package: "swift-distributed-tracing")],
            swiftSettings: strict
        ),
        .target(
            name: "HawserMetrics",
            dependencies: ["HawserCore", .product(name: "Metrics", package: "swift-metrics")],
            swiftSettings: strict
        ),
        // Route monitoring over netlink: what NetworkReachabilityManager reports. No request consults
        // it, so it is part of the AFNetworking layer, not of the engine.
        .target(name: "HawserReachability", dependencies: ["CHawser", "HawserPosix"], swiftSettings: strict),
        .target(name: "Hawser", dependencies: ["HawserCore", "HawserReachability"], swiftSettings: strict),
        .target(name: "HawserXML", dependencies: ["Hawser"], swiftSettings: strict),
        .target(name: "HawserFoundation", dependencies: ["Hawser", "HawserCore"], swiftSettings: strict),
        .target(
            name: "HawserHTTPTypes",
            dependencies: ["HawserCore", .product(name: "HTTPTypes", package: "swift-http-types")],
            swiftSettings: strict
        ),
        .target(
            name: "HawserOpenAPI",
            dependencies: [
                "HawserCore", "HawserHTTPTypes",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            swiftSettings: strict
        ),
        // Generated by scripts/generate-openapi-example.sh (swift-openapi-generator's CLI), committed.
        // A target for the tests, not a product: the Benchmarks package compiles the same
        // generated files as a target of its own (Benchmarks/Sources/OpenAPIExampleClient).
        .target(
            name: "HawserOpenAPIExample",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/HawserOpenAPIExample",
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),

        // MARK: - Test server, tool (never used by the library)
        .target(
            name: "HawserTestServer",
            dependencies: ["HawserCore", "HawserPosix", "CHawser"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "HawserTool",
            dependencies: ["Hawser", "HawserCore", "HawserTestServer", "CHawser"],
            swiftSettings: strict
        ),
        // Installs the event loops as the global executor in a process of its own and reports
        // what it saw (run by HawserCoreTests' GlobalExecutorTests).
        .executableTarget(
            name: "HawserExecutorProbe",
            dependencies: ["HawserCore", "HawserTestServer"],
            path: "Tests/HawserExecutorProbe",
            swiftSettings: strict
        ),

        // MARK: - Fuzz targets (libFuzzer with -DFUZZING; replay mode otherwise)
        .target(name: "FuzzSupport", dependencies: ["HawserHTTP1"], path: "Fuzz/FuzzSupport", swiftSettings: strict),
        .executableTarget(
            name: "FuzzResponseParser",
            dependencies: ["FuzzSupport", "HawserHTTP1"],
            path: "Fuzz/FuzzResponseParser",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzRequestParser",
            dependencies: ["FuzzSupport", "HawserHTTP1"],
            path: "Fuzz/FuzzRequestParser",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzCertificates",
            dependencies: ["FuzzSupport", "HawserCore"],
            path: "Fuzz/FuzzCertificates",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzAuthChallenge",
            dependencies: ["FuzzSupport", "HawserCore"],
            path: "Fuzz/FuzzAuthChallenge",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzCacheControl",
            dependencies: ["FuzzSupport", "HawserCore"],
            path: "Fuzz/FuzzCacheControl",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzContentDecoder",
            dependencies: ["FuzzSupport", "HawserCore", "CHawser"],
            path: "Fuzz/FuzzContentDecoder",
            swiftSettings: strict
        ),
        // br and zstd: their streams come from the libraries' own encoders (libbrotlienc, linked
        // here only; libzstd has both).
        .executableTarget(
            name: "FuzzBrotliDecoder",
            dependencies: [
                "FuzzSupport", "HawserCore", "CHawser", .target(name: "CBrotli", condition: .when(traits: ["Brotli"])),
            ],
            path: "Fuzz/FuzzBrotliDecoder",
            swiftSettings: strict,
            linkerSettings: [.linkedLibrary("brotlienc", .when(traits: ["Brotli"]))]
        ),
        .executableTarget(
            name: "FuzzZstdDecoder",
            dependencies: [
                "FuzzSupport", "HawserCore", "CHawser", .target(name: "CZstd", condition: .when(traits: ["Zstd"])),
            ],
            path: "Fuzz/FuzzZstdDecoder",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzCookieParser",
            dependencies: ["FuzzSupport", "HawserCore"],
            path: "Fuzz/FuzzCookieParser",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzCookieHeader",
            dependencies: ["FuzzSupport", "HawserCore"],
            path: "Fuzz/FuzzCookieHeader",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzURLValidation",
            dependencies: ["FuzzSupport", "HawserCore"],
            path: "Fuzz/FuzzURLValidation",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzJSON",
            dependencies: ["FuzzSupport", "Hawser"],
            path: "Fuzz/FuzzJSON",
            swiftSettings: strict
        ),

        // MARK: - Tests
        // What the test targets share: descriptor-leak checks, scripted raw-socket servers, process
        // fixtures (nginx, httpbin, tinyproxy, Dante), network namespaces.
        .target(
            name: "HawserTestSupport",
            dependencies: ["HawserCore", "HawserTestServer", "CHawser"],
            path: "Tests/HawserTestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "HawserHTTP1Tests",
            dependencies: ["HawserHTTP1"],
            exclude: ["Fixtures"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HawserToolTests",
            dependencies: ["HawserTool", "HawserCore", "HawserTestServer", "HawserTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HawserTests",
            dependencies: ["Hawser", "HawserFoundation", "HawserCore", "HawserTestServer", "HawserTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HawserHTTPTypesTests",
            dependencies: [
                "HawserHTTPTypes", "HawserCore", "HawserTestServer", "HawserTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HawserOpenAPITests",
            dependencies: [
                "HawserOpenAPI", "HawserOpenAPIExample", "HawserCore", "HawserTestServer", "HawserTestSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HawserObservabilityTests",
            dependencies: [
                "Hawser", "HawserCore", "HawserTracing", "HawserMetrics", "HawserTestServer", "HawserTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // A user's program: Hawser and HTTPTypes imported together, typed calls, one error protocol.
        .testTarget(
            name: "HawserUserProgramTests",
            dependencies: [
                "Hawser", "HawserHTTPTypes", "HawserTestServer",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "HawserXMLTests", dependencies: ["HawserXML", "Hawser"], swiftSettings: strict),
        .testTarget(
            name: "HawserCoreTests",
            dependencies: [
                "HawserCore", "HawserPosix", "HawserCookies", "HawserTestServer", "HawserTestSupport", "CHawser",
                "HawserExecutorProbe",
                // The encoders make the br and zstd bodies the tests decode.
                .target(name: "CBrotli", condition: .when(traits: ["Brotli"])),
                .target(name: "CZstd", condition: .when(traits: ["Zstd"])),
            ],
            swiftSettings: strict,
            linkerSettings: [.linkedLibrary("brotlienc", .when(traits: ["Brotli"]))]
        ),
    ]
)
