#include "envmgr/vm/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct ns_job {
    int nsfd;
    int fd;     /* the socket made, or -1 */
    int errnum; /* why not */
    const char *what;
} ns_job;

static void *ns_thread(void *arg)
{
    ns_job *j = arg;
    if (setns(j->nsfd, CLONE_NEWNET) < 0) {
        j->errnum = errno;
        j->what = "enter its network namespace";
        return NULL;
    }
    j->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (j->fd < 0) {
        j->errnum = errno;
        j->what = "socket";
    }
    return NULL; /* the thread ends: nothing else ever runs in that namespace */
}

int netns_socket(pid_t pid, int *fd, em_err *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    ns_job j = {.nsfd = open(path, O_RDONLY | O_CLOEXEC), .fd = -1};
    if (j.nsfd < 0)
        return em_fail_errno(err, "the network namespace of process %d (`%s`)", (int)pid, path);
    pthread_t t;
    int rc = pthread_create(&t, NULL, ns_thread, &j);
    if (rc != 0) {
        close(j.nsfd);
        errno = rc;
        return em_fail_errno(err, "network namespace of process %d: pthread_create", (int)pid);
    }
    pthread_join(t, NULL);
    close(j.nsfd);
    if (j.fd < 0) {
        errno = j.errnum;
        return em_fail_errno(err, "network namespace of process %d: %s", (int)pid, j.what);
    }
    *fd = j.fd;
    return 0;
}
