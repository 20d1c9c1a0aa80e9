/* The floor of an HTTP/1.1 keepalive proxy's CPU per request on this machine: each client connection is paired
 * with its own upstream connection (round-robin over the backends, connected once, never pooled) and bytes are
 * relayed both ways without being parsed, so user space does nothing but the four calls that move a request and
 * its answer (plus epoll_wait, level-triggered: no epoll_ctl per request). Not a proxy: a measuring stick for the
 * side-by-side benchmarks (tools/bench/floor_relay.sh). Usage: floor_relay LISTEN_PORT BACKEND_PORT... */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 65536
static int peer[MAXFD];
static char buf[65536];

static int conn_to(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); exit(1); }
    return s;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s LISTEN BACKEND...\n", argv[0]); return 2; }
    int nb = argc - 2, next = 0, one = 1;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 511) < 0) { perror("listen"); return 1; }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l}, evs[512];
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    for (;;) {
        int n = epoll_wait(ep, evs, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == l) {
                int c = accept4(l, NULL, NULL, 0);
                if (c < 0 || c >= MAXFD) { if (c >= 0) close(c); continue; }
                int u = conn_to(atoi(argv[2 + next++ % nb]));
                if (u >= MAXFD) { close(c); close(u); continue; }
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                peer[c] = u; peer[u] = c;
                struct epoll_event e1 = {.events = EPOLLIN, .data.fd = c}, e2 = {.events = EPOLLIN, .data.fd = u};
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &e1);
                epoll_ctl(ep, EPOLL_CTL_ADD, u, &e2);
                continue;
            }
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                int p = peer[fd];
                close(fd); close(p);
                continue;
            }
            send(peer[fd], buf, r, 0);
        }
    }
}
