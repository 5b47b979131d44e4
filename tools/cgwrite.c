// SPDX-License-Identifier: GPL-2.0
/*
 * cgwrite - write one value to a cgroup (or any kernel) file with a single
 * write(2) and report the errno by name.
 *
 * A shell's "echo x > file" reports a failed write as text that differs
 * between shells; tests that assert what the kernel answers (EINVAL,
 * ENODEV, ...) need the errno itself.
 *
 *   cgwrite [-j] PATH VALUE
 *
 * Exit 0 when the write took the whole value, 1 when open or write failed
 * (stderr: "cgwrite: PATH: ENAME (strerror)"), 2 on usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct {
	int err;
	const char *name;
} errnames[] = {
	{ EINVAL, "EINVAL" }, { ENODEV, "ENODEV" }, { ENOENT, "ENOENT" },
	{ EPERM, "EPERM" }, { EACCES, "EACCES" }, { EBUSY, "EBUSY" },
	{ ENOSPC, "ENOSPC" }, { ERANGE, "ERANGE" }, { ENOMEM, "ENOMEM" },
	{ EEXIST, "EEXIST" }, { ESRCH, "ESRCH" }, { EOPNOTSUPP, "EOPNOTSUPP" },
	{ ENXIO, "ENXIO" }, { E2BIG, "E2BIG" }, { EBADF, "EBADF" },
};

static const char *errname(int err)
{
	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (errnames[i].err == err)
			return errnames[i].name;
	return "E?";
}

static void usage(FILE *f)
{
	fprintf(f, "usage: cgwrite [-j] PATH VALUE\n"
		   "  write VALUE to PATH with one write(2); report errno by name\n"
		   "  -j, --json   print {\"errno\":N,\"name\":\"...\",\"written\":N}\n"
		   "  -h, --help   this text\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int json = 0, c, fd, err = 0;
	ssize_t n = -1;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "try cgwrite -h\n");
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "cgwrite: need PATH and VALUE; try cgwrite -h\n");
		return 2;
	}
	const char *path = argv[optind], *value = argv[optind + 1];
	size_t len = strlen(value);

	fd = open(path, O_WRONLY);
	if (fd < 0) {
		err = errno;
	} else {
		n = write(fd, value, len);
		if (n < 0)
			err = errno;
		if (close(fd) < 0 && !err)
			err = errno;
	}
	if (json)
		printf("{\"errno\":%d,\"name\":\"%s\",\"written\":%zd}\n",
		       err, err ? errname(err) : "", n);
	if (err) {
		fprintf(stderr, "cgwrite: %s: %s (%s)\n", path, errname(err),
			strerror(err));
		return 1;
	}
	if ((size_t)n != len) {
		fprintf(stderr, "cgwrite: %s: short write, %zd of %zu bytes\n",
			path, n, len);
		return 1;
	}
	return 0;
}
