// SPDX-License-Identifier: GPL-2.0
/*
 * rngseed - mix bytes from stdin into the kernel's entropy pool, credited,
 * and reseed the CRNG from it at once.
 *
 * A guest restored from a snapshot resumes with the random state of the
 * guest that was saved: every lab restored from one snapshot would draw
 * the same "random" numbers (TCP ISNs, ports, UUIDs). Writing to
 * /dev/urandom mixes bytes in but leaves the CRNG keyed as before until
 * its next periodic reseed (up to a minute later, drivers/char/random.c:
 * crng_has_old_seed); RNDADDENTROPY then RNDRESEEDCRNG makes the host's
 * bytes take effect before the next read.
 *
 *   rngseed < BYTES      (8 to 512 bytes; the keeper sends 64)
 *
 * Exit 0 once reseeded; 1 when an ioctl failed (stderr names the errno);
 * 2 on usage errors (too few or too many bytes, arguments).
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define MIN_BYTES 8
#define MAX_BYTES 512

int main(int argc, char **argv)
{
	struct {
		struct rand_pool_info info;
		unsigned char buf[MAX_BYTES];
	} req;
	size_t n = 0;
	int fd, rc = EXIT_SUCCESS;

	progname = "rngseed";
	if (argc > 1) {
		if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
			printf("usage: rngseed < BYTES\n"
			       "  credit %d to %d bytes from stdin to the "
			       "kernel's pool and reseed the CRNG\n",
			       MIN_BYTES, MAX_BYTES);
			return EXIT_SUCCESS;
		}
		return usage_error("no arguments: the bytes come on stdin");
	}
	while (n < MAX_BYTES) {
		ssize_t r = read(0, req.buf + n, MAX_BYTES - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return runtime_error("stdin: %s", errname(errno));
		if (r == 0)
			break;
		n += r;
	}
	if (n < MIN_BYTES)
		return usage_error("%zu bytes on stdin, at least %d wanted", n,
				   MIN_BYTES);
	if (read(0, &req.info, 1) > 0)
		return usage_error("more than %d bytes on stdin", MAX_BYTES);
	fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return runtime_error("/dev/urandom: %s", errname(errno));
	req.info.entropy_count = (int)(8 * n);
	req.info.buf_size = (int)n;
	if (ioctl(fd, RNDADDENTROPY, &req) < 0)
		rc = runtime_error("RNDADDENTROPY: %s", errname(errno));
	else if (ioctl(fd, RNDRESEEDCRNG) < 0)
		rc = runtime_error("RNDRESEEDCRNG: %s", errname(errno));
	close(fd);
	explicit_bzero(req.buf, sizeof(req.buf));
	return rc;
}
