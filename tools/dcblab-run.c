// SPDX-License-Identifier: GPL-2.0
/*
 * dcblab-run - run a command for the host, its output in two files.
 *
 * qemu-guest-agent's guest-exec either captures a command's output until
 * it ends or drops it.  The host starts this instead and reads the two
 * files while the command runs; to stop the command it signals the process
 * group of the pid guest-exec reported, so the command must lead its own
 * group: dcblab-run calls setsid() and then execs the command in place.
 *
 *   dcblab-run --out FILE --err FILE [--] ARGV...
 *
 * Both files are created or truncated (mode 0600) before anything runs;
 * stdin is left as it is.  The exit status is the command's; as in a
 * shell, 127 when it was not found and 126 when it could not be executed,
 * with "dcblab-run: ARGV0: why" in the err FILE.  Like env(1) and
 * nohup(1), 125 when dcblab-run itself failed (a FILE could not be
 * opened; the message goes to its own stderr): 1 would be read as the
 * command's.  2 on usage errors.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_RUN_FAILED 125
#define EXIT_CANNOT_EXEC 126
#define EXIT_NOT_FOUND 127

/* The guest's PATH, for a command the agent started with no environment. */
#define DEFAULT_PATH "/sbin:/usr/sbin:/bin:/usr/bin"

struct opts {
	const char *out, *err;
	bool unlink;			/* remove both files once open */
	char **argv;			/* the command, NULL-terminated */
};

static void usage(void)
{
	printf(
"usage: dcblab-run --out FILE --err FILE [--unlink] [--] ARGV...\n"
"Run ARGV in a new session, stdout to FILE and stderr to the err FILE\n"
"(both created or truncated, mode 0600); stdin is left alone.\n"
"  -o, --out FILE   the command's stdout\n"
"  -e, --err FILE   the command's stderr, and why it could not be run\n"
"  -u, --unlink     remove both files once open (a reader that opened\n"
"                   them before still reads what the command writes)\n"
"  -h, --help       this text\n"
"Exit status: the command's; 127 not found, 126 not executable,\n"
"125 a FILE could not be opened, 2 usage error.\n");
}

/*
 * Not parse_options(): that takes a fixed number of operands, and here
 * everything from the first operand on is the command, options included.
 */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		OPTION_ARG("out", 'o'), OPTION_ARG("err", 'e'),
		{ "unlink", no_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	/* '+': stop at the command's name, whatever options follow it. */
	while ((c = getopt_long(argc, argv, "+:o:e:uh", lo, NULL)) != -1) {
		const char *word = argv[optind - 1];

		switch (c) {
		case 'o':
			o->out = optarg;
			break;
		case 'e':
			o->err = optarg;
			break;
		case 'u':
			o->unlink = true;
			break;
		case 'h':
			usage();
			exit(0);
		case ':':
			return usage_error("'%s' needs a value", word);
		default:
			if (!strncmp(word, "--", 2))
				return usage_error("unknown option '%s'", word);
			return usage_error("unknown option '-%c'", optopt);
		}
	}
	if (!o->out || !o->err)
		return usage_error("need --out FILE and --err FILE");
	if (optind == argc)
		return usage_error("need the command to run");
	o->argv = argv + optind;
	return 0;
}

/* FILE for writing from the start, mode 0600; -1 after saying why. */
static int open_output(const char *path)
{
	struct stat st;
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC,
		  0600);
	if (fd < 0)
		goto fail;
	/* An existing file keeps its mode on open; /dev/null must keep it. */
	if (fstat(fd, &st) < 0 ||
	    (S_ISREG(st.st_mode) && fchmod(fd, 0600) < 0)) {
		close(fd);
		goto fail;
	}
	return fd;
fail:
	runtime_error("%s: %s", path, strerror(errno));
	return -1;
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;

	return !fstat(a, &sa) && !fstat(b, &sb) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	int err, out_fd, err_fd;

	progname = "dcblab-run";
	err = parse_args(argc, argv, &o);
	if (err)
		return err;
	out_fd = open_output(o.out);
	if (out_fd < 0)
		return EXIT_RUN_FAILED;
	err_fd = open_output(o.err);
	if (err_fd < 0)
		return EXIT_RUN_FAILED;
	/* One file for both: one offset, so neither overwrites the other. */
	if (same_file(out_fd, err_fd))
		err_fd = out_fd;
	/*
	 * The host opened both files before starting us: it goes on reading
	 * them through its handles, and nothing is left behind to remove.
	 */
	if (o.unlink && ((unlink(o.out) < 0 && errno != ENOENT) ||
			 (unlink(o.err) < 0 && errno != ENOENT))) {
		runtime_error("unlink: %s", strerror(errno));
		return EXIT_RUN_FAILED;
	}

	/*
	 * Fails only for a process group leader, e.g. a job of an
	 * interactive shell: that already leads its group, which is what the
	 * host signals, so it runs on in the shell's session.
	 */
	if (setsid() < 0 && getpgrp() != getpid()) {
		runtime_error("setsid: %s", strerror(errno));
		return EXIT_RUN_FAILED;
	}
	if (dup2(out_fd, STDOUT_FILENO) < 0 ||
	    dup2(err_fd, STDERR_FILENO) < 0) {
		runtime_error("dup2: %s", strerror(errno));
		return EXIT_RUN_FAILED;
	}

	/*
	 * The guest's init starts qemu-guest-agent as a background job of a
	 * shell without job control, which ignores SIGINT and SIGQUIT (the
	 * agent catches SIGINT again, SIGQUIT stays ignored); the command
	 * should get both as from a terminal.
	 */
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	setenv("PATH", DEFAULT_PATH, 0);

	execvp(o.argv[0], o.argv);
	err = errno;
	if (err == ENOENT) {
		runtime_error("%s: command not found", o.argv[0]);
		return EXIT_NOT_FOUND;
	}
	runtime_error("%s: %s", o.argv[0],
		      err == EACCES ? "permission denied" : strerror(err));
	return EXIT_CANNOT_EXEC;
}
