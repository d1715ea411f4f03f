/* QEMU guest agent client (virtio-serial). Like QMP, the agent serves one
 * client at a time; after every connect and every restore the stream is
 * resynchronised with guest-sync-delimited so no stale reply is read. */
#ifndef ENVMGR_GUEST_H
#define ENVMGR_GUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

#define GUEST_OUTPUT_CAP_DEFAULT (1u << 20)
/* stdin for a command goes base64 in the guest-exec request itself: one message, kept small. */
#define GUEST_STDIN_MAX (4 << 20)
#define GUEST_FILE_CAP_DEFAULT (16u << 20)

typedef struct guest guest;

typedef struct guest_exec_result {
    int exit_code;   /* -1 when killed by a signal or the timeout */
    int signal;      /* > 0 when killed by a signal */
    int timed_out;   /* the timeout killed it */
    char *out;       /* stdout, NUL-terminated, at most the cap */
    size_t out_len;
    char *err;       /* stderr, same cap */
    size_t err_len;
    int truncated;   /* output was cut at the cap */
} guest_exec_result;

int guest_open(const char *sock_path, double timeout_ms, guest **out, em_err *err);
/* A guest agent on connected fd (taken over; closed by guest_close), without the opening sync:
 * for guest_open, and for the fuzz target that plays a hostile agent. */
guest *guest_attach(int fd, const char *what);
/* Guest interface osworld: OSWorld's HTTP server, reached through the network namespace of QEMU
 * process qemu_pid (guest_osworld.h). No request is made here: the first operation connects.
 * password: the image user's (sudo, for the clock), or NULL. guest_exec, guest_file_* and
 * guest_set_time then go to the server (exec: /execute, no stdin; files: /file, /setup/upload). */
int guest_open_osworld(pid_t qemu_pid, const char *password, guest **out, em_err *err);
bool guest_is_osworld(const guest *g);
/* A request the server answers itself (POST endpoint with body, "/setup/activate_window"): its HTTP
 * status and up to 300 printable characters of its reply (*reply, caller frees). osworld only. */
int guest_osworld_call(guest *g, const char *endpoint, json_t *body, double timeout_s, long *status, char **reply,
                       em_err *err);
/* The same, whole: its body up to cap bytes (*data, NUL-terminated, caller frees; longer is an error);
 * GET when body is NULL. */
int guest_osworld_fetch(guest *g, const char *path, json_t *body, double timeout_s, size_t cap, long *status,
                        char **data, size_t *len, em_err *err);
void guest_close(guest *g);
/* Set the guest clock from the host: a restored guest wakes with the saved time. */
int guest_set_time(guest *g, em_err *err);
/* The same without a process started in the guest: through the image's clock daemon's FIFO (fails,
 * and changes nothing, on an image without one: then guest_set_time). */
int guest_set_time_fifo(guest *g, const char *fifo, em_err *err);

/* Run argv in the guest as root with a timeout (seconds) and an output cap
 * (bytes per stream), in_len bytes of in as its stdin (in may be NULL: no stdin). */
int guest_exec(guest *g, const char *const *argv, const void *in, size_t in_len, double timeout_s, size_t cap,
               guest_exec_result *res, em_err *err);
void guest_exec_result_free(guest_exec_result *res);

int guest_file_read(guest *g, const char *path, size_t cap, char **data, size_t *len, em_err *err);
int guest_file_write(guest *g, const char *path, const void *data, size_t len, em_err *err);
/* A system file envmgr itself writes (an allowlist env's /etc/hosts and /etc/environment): as
 * guest_file_write, except on an osworld image, whose server's user may not write /etc there: then
 * through /execute and sudo with the image's password (guest_osworld.h). */
int guest_file_write_system(guest *g, const char *path, const void *data, size_t len, em_err *err);
/* A host file (at most cap bytes) into a guest file, a chunk at a time: large assets never sit in
 * memory whole. */
int guest_file_upload(guest *g, const char *guest_path, const char *host_path, uint64_t cap, em_err *err);

#endif
