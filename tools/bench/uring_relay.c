/* The io_uring floor: floor_relay.c's relay (each client paired with its own upstream connection, bytes moved
 * unparsed), with every accept, recv and send through one io_uring submitted in batches, set up as a single issuer
 * with deferred task work (Linux 6.1+): what the four calls of a request cost the kernel when they need no system
 * call each. Not a proxy: a measuring stick (tools/bench/floor_relay.sh --uring; needs liburing-dev).
 * Usage: uring_relay LISTEN_PORT BACKEND_PORT... */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 65536
#define BUF 16384
static int peer[MAXFD];
static char *bufs[MAXFD];
static struct io_uring ring;
static int lfd;

static struct io_uring_sqe *sqe(void) {
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);
    if (!s) { io_uring_submit(&ring); s = io_uring_get_sqe(&ring); }
    return s;
}
static void arm_recv(int fd) { struct io_uring_sqe *s = sqe(); io_uring_prep_recv(s, fd, bufs[fd], BUF, 0); io_uring_sqe_set_data64(s, ((unsigned long long)fd << 2) | 0); }
static void arm_send(int fd, int to, int n) { struct io_uring_sqe *s = sqe(); io_uring_prep_send(s, to, bufs[fd], n, 0); io_uring_sqe_set_data64(s, ((unsigned long long)fd << 2) | 1); }
static void arm_accept(void) { struct io_uring_sqe *s = sqe(); io_uring_prep_accept(s, lfd, NULL, NULL, 0); io_uring_sqe_set_data64(s, 2); }

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
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 511) < 0) { perror("listen"); return 1; }
    if (io_uring_queue_init(4096, &ring, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN) < 0) { perror("io_uring"); return 1; }
    arm_accept();
    for (;;) {
        io_uring_submit_and_wait(&ring, 1);
        struct io_uring_cqe *c;
        unsigned head, n = 0;
        io_uring_for_each_cqe(&ring, head, c) {
            n++;
            unsigned long long d = io_uring_cqe_get_data64(c);
            int res = c->res;
            if (d == 2) {
                arm_accept();
                if (res < 0 || res >= MAXFD) continue;
                int u = conn_to(atoi(argv[2 + next++ % nb]));
                setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                peer[res] = u; peer[u] = res;
                if (!bufs[res]) bufs[res] = malloc(BUF);
                if (!bufs[u]) bufs[u] = malloc(BUF);
                arm_recv(res); arm_recv(u);
                continue;
            }
            int fd = d >> 2, op = d & 3;
            if (op == 0) {
                if (res <= 0) { close(fd); close(peer[fd]); continue; }
                arm_send(fd, peer[fd], res);
            } else {
                arm_recv(fd);
            }
        }
        io_uring_cq_advance(&ring, n);
    }
}
