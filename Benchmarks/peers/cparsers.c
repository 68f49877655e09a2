/*
 * cparsers: parse one complete HTTP/1.1 response held in memory N times with a
 * C parser and print ns/message.  Peer figures for HawserHTTP1 (see
 * docs/PERFORMANCE.md and Benchmarks/scripts/parsers.sh).
 *
 *   cparsers pico|hp|both FILE N
 *
 *   pico  picohttpparser (phr_parse_response, plus phr_decode_chunked for a
 *         chunked body), as exported by libh2o-evloop.  It has no public
 *         header there, so the prototypes are declared below.  Framing is done
 *         the way a client would: Content-Length / Transfer-Encoding are looked
 *         up in the parsed fields; a chunked body is copied to a scratch buffer
 *         and de-chunked in place (pico's decoder rewrites its input, and the
 *         input must stay intact for the next iteration), so R2 includes a copy.
 *   hp    http-parser 2.9 (-lhttp_parser), callbacks that only record spans
 *         and counts; a chunked body is framed, not copied.
 *
 * N=0 only loads the file: run it under callgrind as the baseline, then
 * (Ir(N) - Ir(0)) / N is instructions per message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <time.h>
#include <http_parser.h>

/* ---- picohttpparser prototypes (libh2o-evloop exports them, no header) ---- */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
int phr_parse_response(const char *buf, size_t len, int *minor_version, int *status,
                       const char **msg, size_t *msg_len, struct phr_header *headers,
                       size_t *num_headers, size_t last_len);
struct phr_chunked_decoder {
    size_t bytes_left_in_chunk;
    char consume_trailer;
    char _hex_count;
    char _state;
    /* newer picohttpparser releases append fields; keep room so either
       layout of the library can write into this struct safely */
    char _reserved[64];
};
ssize_t phr_decode_chunked(struct phr_chunked_decoder *decoder, char *buf, size_t *bufsz);

/* ---- result of one parse, checked once after the timed loop ---- */
struct result {
    int status;
    size_t fields;
    size_t body;
    int complete;
};

static char *load(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cparsers: %s: %s\n", path, strerror(errno)); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "cparsers: read failed\n"); exit(2); }
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* ------------------------------ picohttpparser ----------------------------- */
static char *pico_scratch;

static int pico_parse(const char *buf, size_t len, struct result *res) {
    int minor, status;
    const char *msg;
    size_t msg_len;
    struct phr_header hdrs[64];
    size_t nh = 64;
    int r = phr_parse_response(buf, len, &minor, &status, &msg, &msg_len, hdrs, &nh, 0);
    if (r < 0) return -1;
    long long content_length = -1;
    int chunked = 0;
    for (size_t i = 0; i < nh; i++) {
        if (hdrs[i].name_len == 14 && strncasecmp(hdrs[i].name, "content-length", 14) == 0) {
            long long v = 0;
            for (size_t j = 0; j < hdrs[i].value_len; j++) {
                unsigned d = (unsigned)(hdrs[i].value[j] - '0');
                if (d > 9) return -1;
                v = v * 10 + d;
            }
            content_length = v;
        } else if (hdrs[i].name_len == 17 && strncasecmp(hdrs[i].name, "transfer-encoding", 17) == 0) {
            chunked = hdrs[i].value_len == 7 && strncasecmp(hdrs[i].value, "chunked", 7) == 0;
        }
    }
    res->status = status;
    res->fields = nh;
    if (chunked) {
        size_t n = len - (size_t)r;
        memcpy(pico_scratch, buf + r, n);
        struct phr_chunked_decoder d;
        memset(&d, 0, sizeof d);
        d.consume_trailer = 1;
        ssize_t left = phr_decode_chunked(&d, pico_scratch, &n);
        if (left < 0) return -1;
        res->body = n;
        res->complete = 1;
    } else {
        if (content_length < 0 || (size_t)r + (size_t)content_length > len) return -1;
        res->body = (size_t)content_length;
        res->complete = 1;
    }
    return 0;
}

/* -------------------------------- http-parser ------------------------------ */
struct hp_ctx {
    struct result *res;
};

static int hp_on_header_field(http_parser *p, const char *at, size_t n) {
    (void)at; (void)n;
    ((struct hp_ctx *)p->data)->res->fields++;
    return 0;
}
static int hp_on_span(http_parser *p, const char *at, size_t n) {
    (void)p; (void)at; (void)n;
    return 0;
}
static int hp_on_body(http_parser *p, const char *at, size_t n) {
    (void)at;
    ((struct hp_ctx *)p->data)->res->body += n;
    return 0;
}
static int hp_on_complete(http_parser *p) {
    ((struct hp_ctx *)p->data)->res->complete = 1;
    return 0;
}
static int hp_on_headers_complete(http_parser *p) {
    ((struct hp_ctx *)p->data)->res->status = (int)p->status_code;
    return 0;
}

static http_parser_settings hp_settings;

static int hp_parse(const char *buf, size_t len, struct result *res) {
    http_parser p;
    struct hp_ctx ctx = {res};
    res->fields = 0;
    res->body = 0;
    res->complete = 0;
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &ctx;
    size_t n = http_parser_execute(&p, &hp_settings, buf, len);
    if (n != len || HTTP_PARSER_ERRNO(&p) != HPE_OK) return -1;
    return res->complete ? 0 : -1;
}

/* ---------------------------------- driver --------------------------------- */
typedef int (*parse_fn)(const char *, size_t, struct result *);

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void run(const char *name, parse_fn fn, const char *buf, size_t len, long n, const char *path) {
    struct result res;
    memset(&res, 0, sizeof res);
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        if (fn(buf, len, &res) != 0) { fprintf(stderr, "cparsers: %s: parse error on %s\n", name, path); exit(1); }
    }
    double t1 = now_ns();
    if (n == 0) {
        printf("%s %s bytes=%zu n=0 (load only)\n", name, path, len);
        return;
    }
    printf("%s %s bytes=%zu n=%ld ns/msg=%.1f status=%d fields=%zu body=%zu\n", name, path, len, n,
           (t1 - t0) / (double)n, res.status, res.fields, res.body);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s pico|hp|both FILE N\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1], *path = argv[2];
    long n = strtol(argv[3], NULL, 10);
    size_t len;
    char *buf = load(path, &len);
    pico_scratch = malloc(len + 1);
    hp_settings.on_status = hp_on_span;
    hp_settings.on_header_field = hp_on_header_field;
    hp_settings.on_header_value = hp_on_span;
    hp_settings.on_headers_complete = hp_on_headers_complete;
    hp_settings.on_body = hp_on_body;
    hp_settings.on_message_complete = hp_on_complete;
    int both = strcmp(mode, "both") == 0;
    int any = 0;
    if (both || strcmp(mode, "pico") == 0) { run("pico", pico_parse, buf, len, n, path); any = 1; }
    if (both || strcmp(mode, "hp") == 0) { run("http-parser", hp_parse, buf, len, n, path); any = 1; }
    if (!any) { fprintf(stderr, "cparsers: unknown mode %s\n", mode); return 2; }
    free(pico_scratch);
    free(buf);
    return 0;
}
