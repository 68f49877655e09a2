// The certificate stores evaluations verify against, built once per set of anchors and kept
// per process.
import CHawser
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - stores

/// An X509_STORE holding a set of anchors. The system store is built once and shared (OpenSSL 3
/// stores are safe to verify against from several threads: lookups take the store's lock).
final class TrustStore: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The custom anchors added to the store (kept alive, and used to map chain entries back).
    let anchors: [Certificate]

    private init(pointer: OpaquePointer, anchors: [Certificate]) {
        self.pointer = pointer
        self.anchors = anchors
    }

    deinit { X509_STORE_free(self.pointer) }

    /// Whether `certificate` itself is one of the anchors given as certificates (the custom
    /// ones; the system store is not searched, which would read its hashed directory).
    func holds(_ certificate: Certificate) -> Bool {
        self.anchors.contains(certificate)
    }

    private static func build(system: Bool, anchors: [Certificate]) throws(TrustFailure) -> TrustStore {
        guard let store = X509_STORE_new() else {
            throw TrustFailure(
                .other,
                "cannot create a certificate store: \(openSSLErrorText(fallback: "X509_STORE_new failed"))"
            )
        }
        let result = TrustStore(pointer: store, anchors: anchors)
        if system {
            guard X509_STORE_set_default_paths(store) == 1 else {
                throw TrustFailure(
                    .policyMisconfigured,
                    "cannot load the system trust store: \(openSSLErrorText(fallback: "X509_STORE_set_default_paths failed"))"
                )
            }
        }
        for anchor in anchors {
            guard X509_STORE_add_cert(store, anchor.x509.pointer) == 1 else {
                throw TrustFailure(
                    .policyMisconfigured,
                    "cannot add anchor '\(anchor.subjectSummary)': \(openSSLErrorText(fallback: "X509_STORE_add_cert failed"))"
                )
            }
        }
        // Missing default files are not an error worth keeping in the queue.
        ERR_clear_error()
        return result
    }

    private static let system: Result<TrustStore, TrustFailure> = {
        do throws(TrustFailure) {
            return .success(try build(system: true, anchors: []))
        } catch {
            return .failure(error)
        }
    }()

    /// Stores of custom anchors (with or without the system's), so that neither the system
    /// bundle is re-read nor a store rebuilt per handshake. Bounded: cleared when it reaches
    /// `cacheLimit` anchor sets.
    private struct CacheKey: Hashable {
        let system: Bool
        let anchors: [Certificate]
    }
    private static let cache = Mutex<[CacheKey: TrustStore]>([:])
    private static let cacheLimit = 16

    static func make(_ anchors: TrustAnchors) throws(TrustFailure) -> TrustStore {
        let key: CacheKey
        switch anchors {
        case .system:
            return try system.get()
        case .custom(let certificates):
            key = CacheKey(system: false, anchors: certificates)
        case .systemAndCustom(let certificates):
            if certificates.isEmpty { return try system.get() }
            key = CacheKey(system: true, anchors: certificates)
        }
        if let cached = cache.withLock({ $0[key] }) { return cached }
        let store = try build(system: key.system, anchors: key.anchors)
        cache.withLock {
            if $0.count >= cacheLimit { $0.removeAll() }
            $0[key] = store
        }
        return store
    }
}
