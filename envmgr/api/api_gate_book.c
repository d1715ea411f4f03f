/* The gate's incomplete connections, oldest first, and which one goes when a cap is reached:
 * the oldest, because a real client sends its whole head as soon as it connects and so is
 * never the oldest for long, while a slow one ages. Evicting instead of refusing the newcomer
 * means no client can keep others out by holding connections open. */
#include <netinet/in.h>
#include <string.h>

#include "envmgr/api/api_gate.h"

void api_gate_addr_key(const struct sockaddr *sa, socklen_t len, uint8_t key[16])
{
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        key[15] = 4;
    } else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            memcpy(key, a->s6_addr + 12, 4);
            key[15] = 4;
        } else {
            memcpy(key, a->s6_addr, 8);
            key[15] = 6;
        }
    } /* else a unix socket: one address */
}

int api_gate_book_count(const api_gate_book *b, const uint8_t key[16])
{
    int n = 0;
    for (int i = 0; i < b->n; i++)
        n += !memcmp(b->c[i].key, key, 16);
    return n;
}

int api_gate_book_victim(const api_gate_book *b, const uint8_t key[16], int per_addr, int max)
{
    if (api_gate_book_count(b, key) >= per_addr)
        for (int i = 0; i < b->n; i++)
            if (!memcmp(b->c[i].key, key, 16))
                return i;
    return b->n >= max ? 0 : -1;
}

void api_gate_book_add(api_gate_book *b, const api_gate_conn *c)
{
    if (b->n < API_GATE_PENDING_MAX)
        b->c[b->n++] = *c;
}

void api_gate_book_remove(api_gate_book *b, int i)
{
    if (i < 0 || i >= b->n)
        return;
    memmove(&b->c[i], &b->c[i + 1], (size_t)(b->n - i - 1) * sizeof b->c[0]);
    b->n--;
}

int api_gate_book_find(const api_gate_book *b, int fd)
{
    for (int i = 0; i < b->n; i++)
        if (b->c[i].fd == fd)
            return i;
    return -1;
}
