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
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(void)
{
	printf("usage: cgwrite [-j] PATH VALUE\n"
	       "  write VALUE to PATH with one write(2); report errno by name\n"
	       "  -j, --json   print {\"errno\":N,\"name\":\"...\",\"written\":N}\n"
	       "  -h, --help   this text\n");
}

/*
 * The errno of open, write or close, 0 if none failed; *written is -1 when
 * write did not run or failed.
 */
static int write_once(const char *path, const char *value, ssize_t *written)
{
	int fd, err = 0;

	*written = -1;
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	*written = write(fd, value, strlen(value));
	if (*written < 0)
		err = errno;
	if (close(fd) < 0 && !err)
		err = errno;
	return err;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { COMMON_OPTIONS };
	struct cli cli = { .shortopts = ":jh", .longopts = lo,
			   .operands = "PATH VALUE", .usage = usage };
	ssize_t n;
	int err;

	progname = "cgwrite";
	err = parse_options(argc, argv, &cli);
	if (err)
		return err;
	const char *path = argv[optind], *value = argv[optind + 1];
	size_t len = strlen(value);

	err = write_once(path, value, &n);
	/*
	 * Failures are data here: the JSON reports them as well as stderr.
	 * The text says nothing, like a shell's echo > file that worked.
	 */
	new_json_obj(stdout, cli.json);
	print_int(PRINT_JSON, "errno", NULL, err);
	print_string(PRINT_JSON, "name", NULL, err ? errname(err) : "");
	print_int(PRINT_JSON, "written", NULL, n);
	delete_json_obj();
	if (err)
		return runtime_error("%s: %s (%s)", path, errname(err),
				     strerror(err));
	if ((size_t)n != len)
		return runtime_error("%s: short write, %zd of %zu bytes", path,
				     n, len);
	return 0;
}
