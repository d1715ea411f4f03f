/* A socket inside another process's network namespace (an osworld image's QEMU: vm.h), made by a
 * short-lived thread that enters that namespace (setns of a network namespace is per thread), so
 * the rest of envmgr stays in its own. The socket belongs to the namespace it was made in for its
 * whole life: connecting it to 127.0.0.1 reaches that namespace's loopback. Needs root. */
#ifndef ENVMGR_VM_NETNS_H
#define ENVMGR_VM_NETNS_H

#include <sys/types.h>

#include "envmgr/base/err.h"

/* A TCP socket (close-on-exec, blocking) in the network namespace of process pid. */
int netns_socket(pid_t pid, int *fd, em_err *err);

#endif
