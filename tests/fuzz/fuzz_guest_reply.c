/* libFuzzer target: the guest agent's replies are the guest's to choose (guest root runs the
 * agent). Whatever bytes it sends after a command, guest_exec and guest_file_read must end with a
 * result or an error, never crash, and what they return must fit the caps they were given. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "envmgr/vm/guest.h"

#define CAP 4096

/* A guest agent whose whole answer is data: written into a socket pair up front, then its
 * sending side shut, so every read past the data meets EOF at once (no waiting out deadlines);
 * our commands land unread in *peer's buffer. */
static guest *agent_saying(const uint8_t *data, size_t size, int *peer)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    int big = 4 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    for (size_t off = 0; off < size;) {
        ssize_t w = write(sv[1], data + off, size - off);
        if (w <= 0)
            break; /* more than the buffers hold: the rest is never sent */
        off += (size_t)w;
    }
    shutdown(sv[1], SHUT_WR);
    *peer = sv[1];
    return guest_attach(sv[0], "fuzz");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    em_err err = {0};
    int peer;
    guest *g = agent_saying(data, size, &peer);
    const char *const argv[] = {"true", NULL};
    guest_exec_result res;
    if (guest_exec(g, argv, NULL, 0, 1, CAP, &res, &err) == 0) {
        if (res.out_len > CAP || res.err_len > CAP || !res.out || !res.err || strlen(res.out) > res.out_len)
            abort();
        guest_exec_result_free(&res);
    } else if (!err.msg[0]) {
        abort();
    }
    if (getenv("FUZZ_GUEST_SAY"))
        fprintf(stderr, "exec: %s\n", err.msg[0] ? err.msg : "ok");
    guest_close(g);
    close(peer);

    memset(&err, 0, sizeof err);
    g = agent_saying(data, size, &peer);
    char *file = NULL;
    size_t len = 0;
    if (guest_file_read(g, "/f", CAP, &file, &len, &err) == 0) {
        if (len > CAP || file[len] != '\0')
            abort();
        free(file);
    } else if (file || !err.msg[0]) {
        abort();
    }
    if (getenv("FUZZ_GUEST_SAY"))
        fprintf(stderr, "file: %s\n", err.msg[0] ? err.msg : "ok");
    guest_close(g);
    close(peer);
    return 0;
}
