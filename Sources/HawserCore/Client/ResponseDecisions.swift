// What a final head means for the task, as pure functions of values: the response's class (the
// 417 retry, a 401/407 challenge, a redirect the rules give or refuse, delivery), whether and how
// its body is decoded (the 206 rule), and which credential answers a challenge by default.
// ResponsePipeline.swift asks these and does the IO (cookies, delegates, the credential store).
import HawserAuth
import HawserBase
import HawserCoding
import HawserHTTP1

/// The class of a final head.
enum ResponseClassification {
    /// A final head's class.
    enum Class {
        /// Decided: a ``RequestStateMachine/HeadKind`` for the machine.
        case head(RequestStateMachine.HeadKind)
        /// A 401/407 with challenges: answer it when an answer can be planned, else `otherwise`
        /// (what the head is without the challenge).
        case challenge(isProxy: Bool, [HTTPAuthChallenge], otherwise: RequestStateMachine.HeadKind)
    }

    /// The error a 101 ends the exchange with: it hands the connection to another protocol,
    /// which the engine does not implement, so a protocol error that names the 101 (and whether
    /// the request asked for the upgrade), never an empty success. `peer`: the server answering.
    static func switchingProtocolsError(
        _ head: HTTPResponseHead,
        request: HTTPClientRequest,
        peer: some CustomStringConvertible
    ) -> HawserError {
        let to = head.headers["Upgrade"].map { " to '\($0)'" } ?? ""
        let asked =
            request.headers.contains(name: "Upgrade")
            ? "the request asked for an upgrade, but Hawser speaks HTTP/1.1 only and cannot switch"
            : "the request asked for no upgrade"
        return HawserError(.protocolError, "\(peer) answered 101 Switching Protocols\(to): \(asked)")
    }

    /// Classifies `head`, the answer to `request`. `bodyWasWithheld`: the request's body waited
    /// for 100 Continue and was not sent; `redirectsSoFar`: the redirects the task followed.
    static func classify(
        _ head: HTTPResponseHead,
        request: HTTPClientRequest,
        bodyWasWithheld: Bool,
        redirectsSoFar: Int,
        redirects: RedirectConfiguration
    ) -> Class {
        if head.status == 417, bodyWasWithheld {
            // 417 Expectation Failed: the server will not do 100-continue; send it again without
            // the expectation (RFC 9110 §10.1.1), once.
            var again = request
            again.expectsContinue = false
            again.headers.remove(name: "Expect")
            return .head(.retryWithoutExpectation(again))
        }
        let rules: RequestStateMachine.HeadKind
        switch Redirect.nextRequest(
            after: request,
            response: head,
            redirectsSoFar: redirectsSoFar,
            configuration: redirects
        ) {
        case nil: rules = .deliver
        case .failure(let error)?: rules = .failure(error)
        case .success(let next)?: rules = .redirect(proposed: next)
        }
        if head.status == 401 || head.status == 407 {
            let isProxy = head.status == 407
            let challenges = HTTPAuthChallenge.parse(head.headers, proxy: isProxy)
            if !challenges.isEmpty { return .challenge(isProxy: isProxy, challenges, otherwise: rules) }
        }
        return .head(rules)
    }
}

/// How a delivered response's body reaches the delegate.
enum BodyDecoding: Equatable {
    /// As framed on the wire.
    case identity
    /// Decoded from this Content-Encoding.
    case decode(String)
    /// Not at all: the response cannot be delivered (the task fails with this error).
    case refuse(HawserError)

    static func == (a: BodyDecoding, b: BodyDecoding) -> Bool {
        switch (a, b) {
        case (.identity, .identity): return true
        case (.decode(let x), .decode(let y)): return x == y
        case (.refuse(let x), .refuse(let y)): return x.code == y.code
        default: return false
        }
    }

    /// The decoding of the response `head` to a `method` request when the session decodes
    /// content (`automatic`). A 206 with a coding is refused: its body is a byte range of the
    /// coded representation, which cannot be decoded alone, and splicing it after decoded bytes
    /// corrupts a file.
    static func plan(for head: HTTPResponseHead, method: HTTPMethod, automatic: Bool) -> BodyDecoding {
        guard automatic, method != .head, head.status != 204, head.status != 304,
            let coding = head.headers["Content-Encoding"], ContentDecoder.canDecode(contentEncoding: coding)
        else { return .identity }
        if head.status == 206 {
            return .refuse(
                HawserError(
                    .cannotDecodeContent,
                    "206 Partial Content with Content-Encoding '\(coding)': a byte range of a coded representation cannot be decoded; send the Range request with Accept-Encoding: identity (the session does when it adds Accept-Encoding itself)"
                )
            )
        }
        return .decode(coding)
    }
}

/// Which credential answers a 401/407 by default, and for which protection space.
enum CredentialChoice {
    /// The protection space of a challenge: the origin's, or for a 407 through a proxy, the
    /// proxy's (`proxy`: its host and port).
    static func space(
        origin: ProtectionSpace,
        realm: String?,
        isProxy: Bool,
        proxy: (host: String, port: Int)?
    ) -> ProtectionSpace {
        guard isProxy, let proxy else { return origin }
        return ProtectionSpace(
            host: proxy.host,
            port: proxy.port,
            urlScheme: .http,
            realm: realm,
            authenticationMethod: origin.authenticationMethod,
            isProxy: true
        )
    }

    /// The credential proposed by default, first found of: the store's default for the space,
    /// its only credential, the proxy's configured credentials (a 407), the URL's user info (a
    /// 401). None when the request carried credentials the server refused (`refused`), unless
    /// it asked again because a Digest nonce was stale (`staleRetry`).
    static func proposed(
        storedDefault: Credential?,
        stored: [String: Credential],
        isProxy: Bool,
        proxyCredentials: (user: String, password: String)?,
        urlUser: String?,
        urlPassword: String?,
        refused: Bool,
        staleRetry: Bool
    ) -> Credential? {
        if refused, !staleRetry { return nil }
        if let c = storedDefault ?? (stored.count == 1 ? stored.first?.value : nil) { return c }
        if isProxy, let c = proxyCredentials {
            return Credential(user: c.user, password: c.password, persistence: .none)
        }
        if !isProxy, let user = urlUser {
            return Credential(user: user, password: urlPassword ?? "", persistence: .none)
        }
        return nil
    }
}
