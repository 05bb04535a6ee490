/* uffd_handler SOCKET MEMFILE: a page-fault handler for PUT /snapshot/load
 * with mem_backend {"backend_type": "Uffd", "backend_path": SOCKET}
 * (tests/uffd/uffd_serve.h says what it does). It listens on SOCKET,
 * takes one VMM, serves its guest memory from MEMFILE (the snapshot's
 * memory file) until that VMM closes the connection, then prints
 *
 *   served N pages, R remove events
 *
 * and exits 0 (1 on a bad handshake or a fault it could not serve). */
#include "tests/uffd/uffd_serve.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct uffd_serve_stats st;
	int ls, conn, r;

	if (argc != 3) {
		fprintf(stderr, "usage: uffd_handler SOCKET MEMFILE\n");
		return 2;
	}
	if (strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "uffd_handler: %s: too long for a Unix socket\n", argv[1]);
		return 2;
	}
	memcpy(sa.sun_path, argv[1], strlen(argv[1]) + 1);
	unlink(argv[1]);
	ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 1) < 0) {
		fprintf(stderr, "uffd_handler: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	printf("listening on %s\n", argv[1]);
	fflush(stdout);
	do
		conn = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	while (conn < 0 && errno == EINTR);
	if (conn < 0) {
		fprintf(stderr, "uffd_handler: accept: %s\n", strerror(errno));
		return 1;
	}
	/* One VMM per handler, as Firecracker's examples. */
	close(ls);
	unlink(argv[1]);
	r = uffd_serve(conn, argv[2], &st, stdout);
	close(conn);
	printf("served %llu pages, %llu remove events\n", (unsigned long long)st.pages,
	       (unsigned long long)st.removes);
	return r ? 1 : 0;
}
