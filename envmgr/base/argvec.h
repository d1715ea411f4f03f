/* A growing, NULL-terminated argv of copied strings, for the command lines envmgr builds
 * (bubblewrap's for the agent and for evaluator scripts). */
#ifndef ENVMGR_BASE_ARGVEC_H
#define ENVMGR_BASE_ARGVEC_H

#include <stddef.h>

typedef struct argvec {
    char **v; /* always NULL-terminated once anything was added */
    size_t n, cap;
} argvec;

/* Append the arguments up to the first NULL: argvec_add(&a, "--bind", src, dst, NULL). */
void argvec_add(argvec *a, const char *arg, ...) __attribute__((sentinel));
void argvec_free(argvec *a);
/* Free an argv taken from an argvec (a.v). */
void argv_free(char **v);

#endif
