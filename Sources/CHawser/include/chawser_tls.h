// TLS transport shims: OpenSSL function-like macros and stack accessors that Swift cannot
// import. Static inline only; no state.
#ifndef CHAWSER_TLS_H
#define CHAWSER_TLS_H
#if defined(__linux__) /* CHawser.h reports every other platform */

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/pkcs12.h>

static inline long CHawser_SSL_set_mode(SSL *s, long mode) { return SSL_set_mode(s, mode); }
static inline long CHawser_SSL_CTX_set_mode(SSL_CTX *c, long mode) { return SSL_CTX_set_mode(c, mode); }
static inline void CHawser_SSL_CTX_set_read_ahead(SSL_CTX *c, int yes) { SSL_CTX_set_read_ahead(c, yes); }
static inline int CHawser_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *CHawser_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
static inline void CHawser_sk_X509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }
static inline int CHawser_SSL_CTX_add_extra_chain_cert(SSL_CTX *c, X509 *x) { return (int)SSL_CTX_add_extra_chain_cert(c, x); }
static inline long CHawser_SSL_CTX_set_options(SSL_CTX *c, unsigned long op) { return (long)SSL_CTX_set_options(c, op); }
static inline int CHawser_SSL_CTX_set_session_id_context(SSL_CTX *c, const unsigned char *sid, unsigned int len) {
    return SSL_CTX_set_session_id_context(c, sid, len);
}
/// TLS1_VERSION etc. are plain macros Swift imports; these name the option bits we use.
static inline unsigned long CHawser_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline unsigned long CHawser_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
/// The reason code of an OpenSSL packed error (ERR_GET_REASON is a macro).
static inline int CHawser_ERR_GET_REASON(unsigned long e) { return ERR_GET_REASON(e); }
static inline int CHawser_SSL_R_UNEXPECTED_EOF_WHILE_READING(void) { return SSL_R_UNEXPECTED_EOF_WHILE_READING; }

#endif /* __linux__ */
#endif
