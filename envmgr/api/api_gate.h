/* The gate in front of libmicrohttpd. MHD runs a thread per connection and counts every open
 * connection against its limit, and its timeout is only an idle one: left to MHD, a client that
 * sends a header line every few seconds would hold a slot for as long as it liked, and 64 of them
 * would lock every other client out. So envmgr accepts connections itself: a gate thread holds each
 * new one until its whole request head has arrived (peeked, not read: MHD reads it), within a
 * deadline counted from accept, with a cap on such incomplete connections per client address
 * and in all (over a cap the oldest goes: a real client sends its head at once), and hands the
 * complete ones to MHD. When MHD's connections near its limit, only requests that carry a
 * credential are handed over; the others get a short 503. */
#ifndef ENVMGR_API_GATE_H
#define ENVMGR_API_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/err.h"

#define API_GATE_HEAD_MS 5000.0   /* a request head must be complete this long after accept */
#define API_GATE_HEAD_MAX 32768   /* bytes of a request head (larger: 431) */
#define API_GATE_PEEKS_MAX 32     /* arrivals of head bytes; a head in more pieces is dropped */
#define API_GATE_PER_ADDR 8       /* incomplete connections per client address */
#define API_GATE_PENDING_MAX 128  /* incomplete connections in all */
#define API_GATE_RESERVE 8        /* of MHD's API_CONN_LIMIT, kept for requests with a credential */

/* ---- where a request head ends, and whether it carries a credential (api_gate_head.c) ---- */
/* The offset just past the empty line ending the head in buf[0..len) (CRLF or bare LF lines,
 * empty lines before the request line skipped, as MHD reads them), 0 while it is incomplete. */
size_t api_gate_head_end(const char *buf, size_t len);
/* Whether the complete head (head[0..len), modified in place) carries a credential for its
 * route (api_auth_credential) that is good against master at time now. Values are compared as
 * sent: a percent-encoded ?token= counts as none here (MHD decodes it later; only the reserve is
 * at stake). */
bool api_gate_head_credential(char *head, size_t len, const char *master, long now);

/* ---- incomplete connections (api_gate_book.c) ---- */
typedef struct api_gate_conn {
    int fd;
    double t0;                   /* accepted (ms, now_ms) */
    uint8_t key[16];             /* the client address as counted */
    int peeks;                   /* times head bytes arrived */
    bool watched;                /* in the gate's epoll set */
    struct sockaddr_storage addr;
    socklen_t alen;
} api_gate_conn;

typedef struct api_gate_book {
    api_gate_conn c[API_GATE_PENDING_MAX]; /* oldest first */
    int n;
} api_gate_book;

/* The client address as the per-address cap counts it: IPv4 (IPv4-mapped IPv6 too) whole, IPv6
 * by its /64 (what one host gets), every unix-socket client one address. */
void api_gate_addr_key(const struct sockaddr *sa, socklen_t len, uint8_t key[16]);
/* Which held connection to drop before a new one from key is added: that address's oldest when
 * it holds per_addr already, else the oldest of all when max are held; -1 when none needs to go. */
int api_gate_book_victim(const api_gate_book *b, const uint8_t key[16], int per_addr, int max);
void api_gate_book_add(api_gate_book *b, const api_gate_conn *c); /* room must be made first */
void api_gate_book_remove(api_gate_book *b, int i);
int api_gate_book_find(const api_gate_book *b, int fd);            /* -1: not held */
int api_gate_book_count(const api_gate_book *b, const uint8_t key[16]);

/* ---- the gate thread (api_gate.c) ---- */
typedef struct api_gate api_gate;
struct MHD_Daemon;

/* Start accepting on listen_fd (the caller keeps it and closes it after api_gate_free) and
 * handing connections to mhd (started with MHD_USE_NO_LISTEN_SOCKET, its limit API_CONN_LIMIT).
 * The caller's MHD connection notifications call api_gate_note. Refusals count in metrics. */
int api_gate_start(int listen_fd, struct MHD_Daemon *mhd, const char *master, api_metrics *metrics,
                   api_gate **out, em_err *err);
/* MHD started (+1) or closed (-1) a connection. */
void api_gate_note(api_gate *g, int delta);
/* Stop the thread and close every connection it holds; MHD may still call api_gate_note. */
void api_gate_stop(api_gate *g);
/* After MHD has stopped. */
void api_gate_free(api_gate *g);

#endif
