/* blkbench: block-device throughput from inside a guest, with O_DIRECT so
 * the guest's page cache stays out of it. Static (musl).
 *   blkbench DEVICE SIZE_MIB SECONDS
 * Prints one line per figure: "blkbench: seq-write MB/s", "seq-read MB/s",
 * "rand-read-4k IOPS". The device's first SIZE_MIB are overwritten. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (1u << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	unsigned long mib, secs, i, ios = 0;
	uint64_t x = 88172645463325252ull;
	double t0, t;
	void *buf;
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: blkbench DEVICE SIZE_MIB SECONDS\n");
		return 2;
	}
	mib = strtoul(argv[2], NULL, 10);
	secs = strtoul(argv[3], NULL, 10);
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0 || posix_memalign(&buf, 4096, BLOCK)) {
		perror(argv[1]);
		return 1;
	}
	memset(buf, 0x5a, BLOCK);
	t0 = now();
	for (i = 0; i < mib; i++)
		if (pwrite(fd, buf, BLOCK, (off_t)i * BLOCK) != BLOCK) {
			perror("write");
			return 1;
		}
	fsync(fd);
	t = now() - t0;
	printf("blkbench: seq-write %.1f MB/s\n", (double)mib * BLOCK / 1e6 / t);
	t0 = now();
	for (i = 0; i < mib; i++)
		if (pread(fd, buf, BLOCK, (off_t)i * BLOCK) != BLOCK) {
			perror("read");
			return 1;
		}
	t = now() - t0;
	printf("blkbench: seq-read %.1f MB/s\n", (double)mib * BLOCK / 1e6 / t);
	t0 = now();
	do {
		unsigned j;

		for (j = 0; j < 64; j++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			if (pread(fd, buf, 4096, (off_t)((x % (mib * 256)) * 4096)) != 4096) {
				perror("randread");
				return 1;
			}
			ios++;
		}
		t = now() - t0;
	} while (t < (double)secs);
	printf("blkbench: rand-read-4k %.0f IOPS\n", (double)ios / t);
	return 0;
}
