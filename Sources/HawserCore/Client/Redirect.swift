import HawserBase
import HawserCookies
import HawserHTTP1

// Following redirects (RFC 9110 §15.4), as a pure function of the request and the response,
// so every rule is testable without a socket.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a session follows redirects.
public struct RedirectConfiguration: Sendable, Hashable {
    /// Follow 301, 302, 303, 307 and 308 responses that carry a `Location` (default true).
    public var followsRedirects = true
    /// The most redirects one task follows; one more is a `tooManyRedirects` error (default 20,
    /// as NSURLSession on Apple's platforms, which AFNetworking runs on, and the browsers).
    public var maximumRedirects = 20
    /// Allow an https URL to redirect to an http one (default false: such a redirect fails with
    /// `redirectRefused`, since it would send the request, and its cookies, in the clear).
    public var allowsInsecureDowngrade = false

    /// Creates the defaults: redirects followed, at most ``maximumRedirects`` of them, never from https to http.
    public init() {}
}

enum Redirect {
    static let statuses: Set<Int> = [301, 302, 303, 307, 308]

    /// Fields that describe a request body: dropped with the body.
    static let bodyFields = [
        "Content-Length", "Content-Type", "Transfer-Encoding", "Content-Encoding",
        "Content-Language", "Content-Location", "Expect",
    ]
    /// Credentials that must not follow a request to another origin.
    static let credentialFields = ["Authorization", "Cookie", "Proxy-Authorization"]

    /// The request that follows `response` to `request`, nil when the response is not a redirect
    /// to follow, or an error when it is one that must not be followed. `redirectsSoFar` counts
    /// the redirects already followed by this task.
    static func nextRequest(
        after request: HTTPClientRequest,
        response: HTTPResponseHead,
        redirectsSoFar: Int,
        configuration: RedirectConfiguration
    ) -> Result<HTTPClientRequest, HawserError>? {
        guard configuration.followsRedirects, Self.statuses.contains(response.status),
            let locationBytes = Self.locationBytes(response.headers)
        else { return nil }
        // The field's bytes, what may not stand in a URL percent-encoded byte for byte (obs-text
        // that is not UTF-8 stays the byte it was: 0x80 is %80, as curl sends it).
        let location = URLAuthority.percentEncodingReference(locationBytes)
        if redirectsSoFar >= configuration.maximumRedirects {
            return .failure(
                HawserError(
                    .tooManyRedirects,
                    "more than \(configuration.maximumRedirects) redirects (the last one, \(response.status), to \(location))",
                    url: request.url
                )
            )
        }
        if let e = Self.authorityFailure(location, base: request.url) {
            return .failure(
                HawserError(
                    .badURL,
                    "the \(response.status) redirect's Location '\(location)' is a bad URL: \(e.message)",
                    url: request.url
                )
            )
        }
        guard let target = Self.resolve(location, against: request.url) else {
            return .failure(
                HawserError(
                    .redirectRefused,
                    "the \(response.status) redirect's Location '\(location)' is not a valid URL",
                    url: request.url
                )
            )
        }
        if let refusal = Self.refusal(of: target, from: request, configuration: configuration, source: "the Location") {
            return .failure(refusal)
        }

        var next = request
        next.url = target
        // 301 and 302 turn POST into GET (what every client does, RFC 9110 §15.4.2-3);
        // 303 turns everything but HEAD into GET; 307 and 308 keep the method and the body.
        let toGet: Bool
        switch response.status {
        case 301, 302: toGet = request.method == .post
        case 303: toGet = request.method != .head && request.method != .get
        default: toGet = false
        }
        if toGet || response.status == 303 {
            if toGet { next.method = .get }
            next.body = nil
            for f in Self.bodyFields { next.headers.remove(name: f) }
        }
        next.headers.remove(name: "Host")
        if !Self.sameOrigin(request.url, target) {
            for f in Self.credentialFields { next.headers.remove(name: f) }
        }
        return .success(next)
    }

    /// What the will-perform-redirection hook answered, checked again when it moved the target
    /// elsewhere than `proposed`: the same scheme and downgrade rules as a Location, and the
    /// credentials the redirected `request` carried (the same Authorization, Cookie or
    /// Proxy-Authorization value) do not go to another origin. A credential field the hook set
    /// to a new value is its own choice and stays.
    static func checkRewrite(
        _ chosen: HTTPClientRequest,
        proposed: HTTPClientRequest,
        from request: HTTPClientRequest,
        configuration: RedirectConfiguration
    ) -> Result<HTTPClientRequest, HawserError> {
        guard chosen.url != proposed.url else { return .success(chosen) }
        if let refusal = Self.refusal(
            of: chosen.url,
            from: request,
            configuration: configuration,
            source: "the redirect hook"
        ) {
            return .failure(refusal)
        }
        var checked = chosen
        if !Self.sameOrigin(request.url, chosen.url) {
            for f in Self.credentialFields {
                let carried = request.headers.values(for: f)
                if !carried.isEmpty, checked.headers.values(for: f) == carried { checked.headers.remove(name: f) }
            }
        }
        return .success(checked)
    }

    /// The first `Location` field's bytes as received, nil when there is none.
    static func locationBytes(_ headers: HTTPHeaders) -> [UInt8]? {
        for i in 0..<headers.count where headers.name(at: i).lowercased() == "location" {
            var bytes = headers.valueBytes(at: i)[...]
            while let b = bytes.first, b == 0x20 || b == 0x09 { bytes = bytes.dropFirst() }
            while let b = bytes.last, b == 0x20 || b == 0x09 { bytes = bytes.dropLast() }
            return Array(bytes)
        }
        return nil
    }

    /// The authority check of a reference that has an authority (`scheme://…` or `//…`), on its
    /// text as received (before Foundation's parser encodes a space or backslash into it); nil
    /// when it has none or it passes.
    static func authorityFailure(_ location: String, base: URL) -> HawserError? {
        let trimmed = location.trimmingASCIIWhitespace()
        let text: String
        if trimmed.hasPrefix("//") {
            text = (base.scheme ?? "http") + ":" + trimmed
        } else if let colon = trimmed.firstIndex(of: ":"), trimmed[trimmed.index(after: colon)...].hasPrefix("//"),
            ["http", "https"].contains(trimmed[..<colon].lowercased())
        {
            text = trimmed
        } else {
            // Relative references have no authority; other schemes are refused as such (refusal(of:)).
            return nil
        }
        // A missing host is refused as "not http or https with a host" afterwards.
        if case .failure(let e) = URLAuthority.parse(text), e.code == .badURL { return e }
        return nil
    }

    /// Why a redirect from `request` may not go to `target` (which `source` named), or nil: only
    /// http and https URLs with a host, and no https → http unless the configuration allows it.
    private static func refusal(
        of target: URL,
        from request: HTTPClientRequest,
        configuration: RedirectConfiguration,
        source: String
    ) -> HawserError? {
        let scheme = target.scheme?.lowercased() ?? ""
        guard scheme == "http" || scheme == "https", target.host(percentEncoded: false)?.isEmpty == false else {
            return HawserError(
                .redirectRefused,
                "refusing a redirect to \(target.absoluteString) (from \(source)): only http and https URLs with a host are followed",
                url: request.url
            )
        }
        if case .failure(let e) = URLAuthority.parse(target) {
            return HawserError(
                .badURL,
                "refusing a redirect to \(target.absoluteString) (from \(source)): \(e.message)",
                url: request.url
            )
        }
        if request.url.scheme?.lowercased() == "https", scheme == "http", !configuration.allowsInsecureDowngrade {
            return HawserError(
                .redirectRefused,
                "refusing to follow a redirect from https to http (\(target.absoluteString), from \(source)); set allowsInsecureDowngrade to allow it",
                url: request.url
            )
        }
        return nil
    }

    /// RFC 3986 reference resolution; a target without a fragment inherits the original's
    /// (RFC 9110 §10.2.2).
    static func resolve(_ location: String, against base: URL) -> URL? {
        let trimmed = location.trimmingASCIIWhitespace()
        guard !trimmed.isEmpty, let url = URL(string: trimmed, relativeTo: base)?.absoluteURL else { return nil }
        if url.fragment(percentEncoded: true) == nil, let f = base.fragment(percentEncoded: true),
            let withFragment = URL(string: url.absoluteString + "#" + f)
        {
            return withFragment
        }
        return url
    }

    /// Same scheme, host and port, the host and port as they go on the wire (A-labels; the port
    /// digits as written, not Foundation's reading of them).
    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        let sa = a.scheme?.lowercased()
        let sb = b.scheme?.lowercased()
        guard sa == sb, case .success(let x) = URLAuthority.parse(a), case .success(let y) = URLAuthority.parse(b)
        else { return false }
        let defaultPort = sa == "https" ? 443 : 80
        return x.host == y.host && (x.port ?? defaultPort) == (y.port ?? defaultPort)
    }
}
