/*
 * curl-multi: a libcurl multi-interface HTTP/1.1 load client, the "libcurl"
 * peer in Benchmarks/scripts/compare.sh.
 *
 *   curl-multi [-c CONNECTIONS] [-d SECONDS | -n REQUESTS] [-e] [-C CAFILE] [-F] [-R] URL
 *
 * One thread, one multi handle, CONNECTIONS easy handles kept busy: when a
 * transfer finishes its handle is removed and added again, so libcurl takes
 * the idle keep-alive connection from the multi handle's connection cache
 * (no new TCP connection per request).  Stops issuing at the deadline (-d,
 * default 5 s) or after REQUESTS requests (-n), waits for the ones in flight,
 * then prints requests, seconds, req/s and its own CPU time (getrusage), so
 * requests per client-CPU-second can be compared with wrk and hawser-load.
 *
 * Two event loops, both single-threaded:
 *   default  curl_multi_perform + curl_multi_poll: the documented basic loop
 *            (perform walks every transfer on each wake-up).
 *   -e       curl_multi_socket_action driven by our own epoll (CURLMOPT_SOCKETFUNCTION
 *            / CURLMOPT_TIMERFUNCTION): only the ready sockets are serviced, which is
 *            how event-loop integrations (libevent, libuv) use libcurl at scale.
 *
 * HTTPS (for Benchmarks/scripts/tls-compare.sh):
 *   -C CAFILE  verify the server against these PEM anchors only (CURLOPT_CAINFO, no CAPATH;
 *              peer and host verification stay on, libcurl's defaults)
 *   -F         one request per connection: CURLOPT_FRESH_CONNECT + CURLOPT_FORBID_REUSE, and a
 *              `Connection: close` request header so nginx closes exactly as it does for
 *              hawser-load --new-connection
 *   -R         no TLS session resumption (CURLOPT_SSL_SESSIONID_CACHE 0); by default libcurl
 *              keeps a session cache per easy handle and resumes
 *   With https, a `TLS` line reports the handshakes: how many new connections, how many
 *   resumed (SSL_session_reused on the transfer's SSL*, looked up with dlsym so this file
 *   does not link libssl itself) and the mean CURLINFO_APPCONNECT_TIME - CONNECT_TIME.
 *
 * The last line is machine readable (compare.sh reads it):
 *   RESULT requests=N errors=E seconds=S rps=R cpu_user=U cpu_sys=S maxrss_kb=K
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <dlfcn.h>

/* ---- TLS accounting (-F): the SSL* is valid in the pre-request callback ---- */
static int (*session_reused_fn)(const void *ssl);
static long tls_new_conns = 0, tls_resumed = 0;
static double tls_handshake_s = 0, tls_resumed_s = 0;

static int on_prereq(void *clientp, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port, int conn_local_port) {
    (void)conn_primary_ip; (void)conn_local_ip; (void)conn_primary_port; (void)conn_local_port;
    CURL *e = clientp;
    long reused = 0;
    struct curl_tlssessioninfo *info = NULL;
    curl_off_t connect_us = 0, app_us = 0;
    curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &reused);   /* 1 when this transfer connected */
    if (reused == 0) return CURL_PREREQFUNC_OK;
    if (curl_easy_getinfo(e, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || !info || info->backend != CURLSSLBACKEND_OPENSSL || !info->internals)
        return CURL_PREREQFUNC_OK;
    curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &connect_us);
    curl_easy_getinfo(e, CURLINFO_APPCONNECT_TIME_T, &app_us);
    double hs = (double)(app_us - connect_us) / 1e6;
    tls_new_conns++;
    tls_handshake_s += hs;
    if (session_reused_fn && session_reused_fn(info->internals)) { tls_resumed++; tls_resumed_s += hs; }
    return CURL_PREREQFUNC_OK;
}

/* ---- socket_action mode: libcurl tells us which sockets to watch ---- */
static int epfd = -1;
static double timer_deadline = -1; /* absolute, seconds; -1 = none */

static double now_s(void);

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)easy; (void)userp;
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.data.fd = s;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, s, &ev) != 0) epoll_ctl(epfd, EPOLL_CTL_ADD, s, &ev);
    (void)socketp;
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi; (void)userp;
    timer_deadline = timeout_ms < 0 ? -1 : now_s() + (double)timeout_ms / 1000.0;
    return 0;
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *userdata) {
    (void)ptr;
    *(size_t *)userdata += size * nmemb;
    return size * nmemb;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [-c CONNECTIONS] [-d SECONDS | -n REQUESTS] [-e] URL\n", argv0);
    exit(2);
}

int main(int argc, char **argv) {
    long conns = 1, limit = -1;
    int use_epoll = 0, fresh = 0, no_resume = 0;
    const char *cafile = NULL;
    double duration = 5.0;
    int opt;
    while ((opt = getopt(argc, argv, "c:d:n:eC:FRh")) != -1) {
        switch (opt) {
        case 'c': conns = strtol(optarg, NULL, 10); break;
        case 'd': duration = strtod(optarg, NULL); limit = -1; break;
        case 'n': limit = strtol(optarg, NULL, 10); break;
        case 'e': use_epoll = 1; break;
        case 'C': cafile = optarg; break;
        case 'F': fresh = 1; break;
        case 'R': no_resume = 1; break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc - 1 || conns < 1) usage(argv[0]);
    const char *url = argv[optind];

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) { fprintf(stderr, "curl_global_init failed\n"); return 1; }
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, conns);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns);
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
    if (use_epoll) {
        epfd = epoll_create1(EPOLL_CLOEXEC);
        curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    }

    int https = strncmp(url, "https:", 6) == 0;
    session_reused_fn = (int (*)(const void *))dlsym(RTLD_DEFAULT, "SSL_session_reused");
    struct curl_slist *hdrs = fresh ? curl_slist_append(NULL, "Connection: close") : NULL;
    CURL **easy = calloc((size_t)conns, sizeof *easy);
    size_t body_bytes = 0;
    long issued = 0, done = 0, errors = 0;
    for (long i = 0; i < conns; i++) {
        CURL *e = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &body_bytes);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
        if (cafile) { curl_easy_setopt(e, CURLOPT_CAINFO, cafile); curl_easy_setopt(e, CURLOPT_CAPATH, NULL); }
        if (fresh) {
            curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
            curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
        }
        if (no_resume) curl_easy_setopt(e, CURLOPT_SSL_SESSIONID_CACHE, 0L);
        if (https) {
            curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
            curl_easy_setopt(e, CURLOPT_PREREQDATA, e);
        }
        easy[i] = e;
    }

    double start = now_s();
    double deadline = limit < 0 ? start + duration : 1e300;
    for (long i = 0; i < conns && (limit < 0 || issued < limit); i++) {
        curl_multi_add_handle(multi, easy[i]);
        issued++;
    }

    int running = 1;
    long in_flight = issued;
    struct epoll_event evs[256];
    while (in_flight > 0) {
        if (use_epoll) {
            int wait_ms = 100;
            if (timer_deadline >= 0) {
                double left = (timer_deadline - now_s()) * 1000.0;
                wait_ms = left <= 0 ? 0 : (int)left + 1;
                if (wait_ms > 100) wait_ms = 100;
            }
            int n = epoll_wait(epfd, evs, 256, wait_ms);
            for (int i = 0; i < n; i++) {
                int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                            (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                            (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
                curl_multi_socket_action(multi, evs[i].data.fd, flags, &running);
            }
            if (timer_deadline >= 0 && now_s() >= timer_deadline) {
                timer_deadline = -1;
                curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
            }
        } else {
            curl_multi_perform(multi, &running);
        }
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE) continue;
            CURL *e = m->easy_handle;
            long code = 0;
            curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
            if (m->data.result == CURLE_OK && code >= 200 && code < 400) done++;
            else errors++;
            curl_multi_remove_handle(multi, e);
            in_flight--;
            int more = limit < 0 ? now_s() < deadline : issued < limit;
            if (more) {
                curl_multi_add_handle(multi, e);  /* sets a 0 ms timer: the next loop turn starts it */
                issued++;
                in_flight++;
            }
        }
        if (!use_epoll && in_flight > 0) curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    double secs = now_s() - start;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    double cs = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;

    for (long i = 0; i < conns; i++) curl_easy_cleanup(easy[i]);
    free(easy);
    curl_slist_free_all(hdrs);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    if (epfd >= 0) close(epfd);

    printf("url          %s\n", url);
    printf("connections  %ld (%s)\n", conns, use_epoll ? "socket_action + epoll" : "perform + poll");
    printf("requests     %ld (errors %ld, body bytes %zu)\n", done, errors, body_bytes);
    printf("seconds      %.3f\n", secs);
    printf("req/s        %.0f\n", done / secs);
    printf("cpu user+sys %.3f s (%.3f + %.3f)\n", cu + cs, cu, cs);
    printf("req/cpu-s    %.0f\n", cu + cs > 0 ? done / (cu + cs) : 0.0);
    if (https)
        printf("TLS handshakes=%ld resumed=%ld full_us=%.2f resumed_us=%.2f (APPCONNECT - CONNECT, means)%s\n",
               tls_new_conns, tls_resumed,
               tls_new_conns > tls_resumed ? (tls_handshake_s - tls_resumed_s) / (double)(tls_new_conns - tls_resumed) * 1e6 : 0.0,
               tls_resumed ? tls_resumed_s / (double)tls_resumed * 1e6 : 0.0,
               session_reused_fn ? "" : " [SSL_session_reused not found: resumed unknown]");
    printf("RESULT requests=%ld errors=%ld seconds=%.3f rps=%.1f cpu_user=%.3f cpu_sys=%.3f maxrss_kb=%ld\n",
           done, errors, secs, done / secs, cu, cs, ru.ru_maxrss);
    if (https) printf("TLSRESULT handshakes=%ld resumed=%ld\n", tls_new_conns, tls_resumed);
    return errors ? 1 : 0;
}
