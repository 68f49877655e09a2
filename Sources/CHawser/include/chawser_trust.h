// Certificate-trust shims: the OpenSSL function-like macros and STACK_OF accessors that the
// trust evaluation (HawserCore/TLS) and the test PKI generator need. Static inline only; no
// state. Prefixed CHawserTrust_ so they never collide with the TLS transport's shims.
#ifndef CHAWSER_TRUST_H
#define CHAWSER_TRUST_H
#if defined(__linux__) /* CHawser.h reports every other platform */

#include <string.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/ocsp.h>

// MARK: - STACK_OF(X509)
static inline STACK_OF(X509) *CHawserTrust_sk_X509_new(void) { return sk_X509_new_null(); }
static inline int CHawserTrust_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline int CHawserTrust_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *CHawserTrust_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
/// Frees the stack only (the certificates were borrowed).
static inline void CHawserTrust_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
/// Frees the stack and drops one reference of every certificate in it (X509_STORE_CTX_get1_chain).
static inline void CHawserTrust_sk_X509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }

// MARK: - GENERAL_NAMES (subjectAltName)
static inline int CHawserTrust_sk_GENERAL_NAME_num(const GENERAL_NAMES *sk) { return sk_GENERAL_NAME_num(sk); }
static inline GENERAL_NAME *CHawserTrust_sk_GENERAL_NAME_value(const GENERAL_NAMES *sk, int i) {
    return sk_GENERAL_NAME_value(sk, i);
}
/// The type (GEN_DNS, GEN_IPADD, …) and the string payload of one general name; NULL for
/// types without a string payload.
static inline const ASN1_STRING *CHawserTrust_GENERAL_NAME_string(const GENERAL_NAME *n, int *type) {
    *type = n->type;
    switch (n->type) {
    case GEN_DNS: return n->d.dNSName;
    case GEN_IPADD: return n->d.iPAddress;
    case GEN_EMAIL: return n->d.rfc822Name;
    case GEN_URI: return n->d.uniformResourceIdentifier;
    default: return NULL;
    }
}

// MARK: - names
/// RFC 2253 rendering with UTF-8 kept as is (XN_FLAG_RFC2253 would escape every non-ASCII byte).
static const unsigned long CHAWSER_TRUST_XN_FLAG_RFC2253_UTF8 = XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB;

// MARK: - key generation (EVP_RSA_gen / EVP_EC_gen are macros over a variadic function)
static inline EVP_PKEY *CHawserTrust_RSA_generate(unsigned int bits) { return EVP_RSA_gen(bits); }
static inline EVP_PKEY *CHawserTrust_EC_generate_P256(void) { return EVP_EC_gen("P-256"); }


// MARK: - revocation: stapled OCSP (status_request) and CRLs
/// Asks the server to staple an OCSP response (the status_request extension, RFC 6066 §8).
static inline long CHawserTrust_SSL_request_ocsp_status(SSL *s) {
    return SSL_set_tlsext_status_type(s, TLSEXT_STATUSTYPE_ocsp);
}
/// The DER OCSP response the server stapled (borrowed from the SSL), its length; 0 (and NULL)
/// when it stapled none.
static inline long CHawserTrust_SSL_get_ocsp_response(SSL *s, const unsigned char **der) {
    unsigned char *p = NULL;
    long n = SSL_get_tlsext_status_ocsp_resp(s, &p);
    *der = p;
    return (p == NULL || n < 0) ? 0 : n;
}
/// Server side: the callback that staples (it calls CHawserTrust_SSL_set_ocsp_response and
/// returns SSL_TLSEXT_ERR_OK or SSL_TLSEXT_ERR_NOACK).
static inline long CHawserTrust_SSL_CTX_set_status_cb(SSL_CTX *c, int (*cb)(SSL *, void *), void *arg) {
    long r = SSL_CTX_set_tlsext_status_cb(c, cb);
    if (r == 1) r = SSL_CTX_set_tlsext_status_arg(c, arg);
    return r;
}
/// Server side: staples a copy of `der` (OpenSSL takes ownership of the copy).
static inline long CHawserTrust_SSL_set_ocsp_response(SSL *s, const unsigned char *der, long len) {
    unsigned char *copy = OPENSSL_malloc(len > 0 ? (size_t)len : 1);
    if (copy == NULL) return 0;
    memcpy(copy, der, (size_t)len);
    long r = SSL_set_tlsext_status_ocsp_resp(s, copy, len);
    if (r != 1) OPENSSL_free(copy);
    return r;
}
static const int CHAWSER_TRUST_SSL_TLSEXT_ERR_OK = SSL_TLSEXT_ERR_OK;
static const int CHAWSER_TRUST_SSL_TLSEXT_ERR_NOACK = SSL_TLSEXT_ERR_NOACK;

static inline STACK_OF(X509_CRL) *CHawserTrust_sk_X509_CRL_new(void) { return sk_X509_CRL_new_null(); }
static inline int CHawserTrust_sk_X509_CRL_push(STACK_OF(X509_CRL) *sk, X509_CRL *c) { return sk_X509_CRL_push(sk, c); }
static inline int CHawserTrust_sk_X509_CRL_num(const STACK_OF(X509_CRL) *sk) { return sk_X509_CRL_num(sk); }
/// Frees the stack and drops one reference of every CRL in it.
static inline void CHawserTrust_sk_X509_CRL_pop_free(STACK_OF(X509_CRL) *sk) { sk_X509_CRL_pop_free(sk, X509_CRL_free); }

#endif /* __linux__ */
#endif
