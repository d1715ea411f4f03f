/* OSWorld's in-guest HTTP server (guest interface osworld; docs/images.md), reached on port 5000 of
 * the loopback of the network namespace its QEMU alone is in (vm.h, netns.h): one request per
 * connection, over libcurl with a socket made in that namespace. Every reply is hostile input: its
 * body is capped, every request has a deadline, JSON is parsed with jansson and checked member by
 * member. guest.c dispatches its operations here for a guest opened with guest_open_osworld. */
#ifndef ENVMGR_VM_GUEST_OSWORLD_H
#define ENVMGR_VM_GUEST_OSWORLD_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "envmgr/vm/guest.h"

/* The largest reply body envmgr reads from the server (an /execute reply of two capped streams,
 * JSON-escaped, or a capped file): past it the request fails. */
#define OSWORLD_REPLY_MAX (44u << 20)
/* The server itself stops a command after 120 s (its subprocess.run timeout). */
#define OSWORLD_EXEC_SERVER_LIMIT_S 120.0

typedef struct osworld osworld;

typedef struct osworld_reply {
    long status; /* HTTP status */
    char *body;  /* NUL-terminated, at most the cap */
    size_t len;
} osworld_reply;

osworld *osworld_new(pid_t qemu_pid, const char *password);
void osworld_free(osworld *o);
void osworld_reply_free(osworld_reply *r);

/* One request to path ("/screenshot"): GET when body is NULL, else POST with body as JSON. Fails on
 * no connection, the deadline, or a body over cap; any HTTP status is a reply. */
int osworld_request(osworld *o, const char *path, json_t *body, double timeout_ms, size_t cap, osworld_reply *r,
                    em_err *err);

int osworld_exec(osworld *o, const char *const *argv, double timeout_s, size_t cap, guest_exec_result *res,
                 em_err *err);
int osworld_file_read(osworld *o, const char *path, size_t cap, char **data, size_t *len, em_err *err);
/* POST /setup/upload: the bytes of data (len) or, with data NULL, the first len bytes of the open host
 * file fd (read from its start; what it grows by after the caller's check is not sent). */
int osworld_file_upload(osworld *o, const char *guest_path, const void *data, size_t len, int fd, em_err *err);
/* A system file envmgr itself writes (an allowlist env's /etc/hosts): uploaded beside it in /tmp, then
 * moved over it by /execute, as the server's user when it may, else through sudo with the image's
 * password (the server's user on OSWorld's image may not write /etc). */
int osworld_file_write_system(osworld *o, const char *path, const void *data, size_t len, em_err *err);
/* The guest clock from the host's, through /execute (date as the server's user, else sudo with the
 * image's password). */
int osworld_set_time(osworld *o, em_err *err);

/* Pure: an /execute reply (status, body) as a command's result, each stream capped at cap. */
int osworld_exec_reply_parse(long status, const char *body, size_t len, size_t cap, guest_exec_result *res,
                             em_err *err);
/* Pure: up to max printable ASCII characters of an untrusted reply, for a message (static buffer
 * of the caller, out of size max + 1). */
void osworld_excerpt(const char *body, size_t len, char *out, size_t max);

#endif
