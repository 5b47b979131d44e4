// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of dcblab-run, run as the guest runs it: the built binary, forked
 * and exec'd with the command line under test.  A binary of its own (the
 * first argument names dcblab-run), as what is checked is a process: its
 * session, its files, its exit status.
 *
 *   test_dcblab_run OUT/dcblab-run
 */
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int checks_passed, checks_failed;

static const char *tool;
static char dir[] = "/tmp/dcblab-run-test.XXXXXX";
static char out_path[64], err_path[64];

/* What one run of dcblab-run did. */
struct run {
	pid_t pid;
	int rc;			/* exit status, or 128 + signal */
	char stdout_[512];	/* dcblab-run's own, not the command's */
	char stderr_[512];
};

static void read_all(int fd, char *buf, size_t size)
{
	size_t n = 0;
	ssize_t r;

	while (n < size - 1 && (r = read(fd, buf + n, size - 1 - n)) > 0)
		n += r;
	buf[n] = '\0';
}

static void slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);

	buf[0] = '\0';
	if (fd >= 0) {
		read_all(fd, buf, size);
		close(fd);
	}
}

/* How run_with() starts dcblab-run, besides its arguments. */
enum {
	NO_PATH = 1,		/* no PATH in its environment */
	IGNORE_INT = 2,		/* SIGINT ignored, as a background job's */
	GROUP_LEADER = 4,	/* already leading its process group */
};

/*
 * dcblab-run with args (NULL-terminated, its name not included); input,
 * if not NULL, is its stdin; how is a set of the flags above.
 */
static struct run run_with(const char *const *args, const char *input,
			   int how)
{
	char *argv[16] = { (char *)tool };
	struct run r = { 0 };
	int in[2], out[2], err[2], st;
	int n = 1;

	while (*args && n < 15)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	if (pipe(in) || pipe(out) || pipe(err))
		abort();
	fflush(NULL);
	r.pid = fork();
	if (r.pid < 0)
		abort();
	if (!r.pid) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		close(in[1]);
		if (how & NO_PATH)
			unsetenv("PATH");
		if (how & IGNORE_INT)
			signal(SIGINT, SIG_IGN);
		if (how & GROUP_LEADER)
			setpgid(0, 0);
		execv(tool, argv);
		_exit(99);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	if (input && write(in[1], input, strlen(input)) < 0)
		abort();
	close(in[1]);
	read_all(out[0], r.stdout_, sizeof(r.stdout_));
	read_all(err[0], r.stderr_, sizeof(r.stderr_));
	close(out[0]);
	close(err[0]);
	waitpid(r.pid, &st, 0);
	r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r;
}

static struct run run(const char *const *args)
{
	return run_with(args, NULL, 0);
}

/* The command's output, as dcblab-run left it in the two files. */
static char got_out[512], got_err[512];

static void files(void)
{
	slurp(out_path, got_out, sizeof(got_out));
	slurp(err_path, got_err, sizeof(got_err));
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	return stat(path, &st) ? (mode_t)-1 : st.st_mode & 07777;
}

static void test_output_goes_to_the_files_and_status_passes_through(void)
{
	const char *args[] = { "--out", out_path, "--err", err_path, "--",
			       "sh", "-c", "echo out; echo err >&2; exit 3",
			       NULL };
	struct run r;

	unlink(out_path);
	unlink(err_path);
	r = run(args);
	files();
	CHECK(r.rc == 3);
	CHECK(!strcmp(got_out, "out\n") && !strcmp(got_err, "err\n"));
	CHECK(!r.stdout_[0] && !r.stderr_[0]);
	CHECK(mode_of(out_path) == 0600 && mode_of(err_path) == 0600);
}

static void test_existing_files_are_truncated_and_made_private(void)
{
	const char *args[] = { "-o", out_path, "-e", err_path, "true", NULL };
	int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, "old\n", 4) != 4 || fchmod(fd, 0644))
		abort();
	close(fd);
	CHECK(run(args).rc == 0);
	files();
	CHECK(!got_out[0] && mode_of(out_path) == 0600);
}

static void test_unlink_leaves_output_to_a_reader_that_opened_first(void)
{
	const char *args[] = { "--out", out_path, "--err", err_path,
			       "--unlink", "sh", "-c", "echo out; echo err >&2",
			       NULL };
	int out_fd = open(out_path, O_RDONLY | O_CREAT, 0600);
	int err_fd = open(err_path, O_RDONLY | O_CREAT, 0600);
	char buf[16] = "";

	if (out_fd < 0 || err_fd < 0)
		abort();
	CHECK(run(args).rc == 0);
	CHECK(access(out_path, F_OK) && access(err_path, F_OK));
	CHECK(read(out_fd, buf, sizeof(buf) - 1) == 4 && !strcmp(buf, "out\n"));
	memset(buf, 0, sizeof(buf));
	CHECK(read(err_fd, buf, sizeof(buf) - 1) == 4 && !strcmp(buf, "err\n"));
	close(out_fd);
	close(err_fd);
}

static void test_one_file_for_both_keeps_both(void)
{
	const char *args[] = { "--out", out_path, "--err", out_path,
			       "sh", "-c", "echo out; echo err >&2", NULL };

	CHECK(run(args).rc == 0);
	files();
	CHECK(!strcmp(got_out, "out\nerr\n"));
}

/* Fields 1, 5 and 6 of /proc/PID/stat: pid, process group, session. */
static bool parse_stat(const char *stat, long *pid, long *pgrp, long *sid)
{
	const char *p = strrchr(stat, ')');

	return p && sscanf(stat, "%ld", pid) == 1 &&
	       sscanf(p + 1, " %*c %*d %ld %ld", pgrp, sid) == 2;
}

static void test_command_leads_its_session_under_the_same_pid(void)
{
	const char *args[] = { "--out", out_path, "--err", err_path,
			       "cat", "/proc/self/stat", NULL };
	long pid = 0, pgrp = 0, sid = 0;
	struct run r = run(args);

	files();
	CHECK(r.rc == 0 && parse_stat(got_out, &pid, &pgrp, &sid));
	CHECK(pid == r.pid && pgrp == r.pid && sid == r.pid);
}

/* A job of an interactive shell: setsid() fails, the group is already its. */
static void test_group_leader_runs_on_in_its_session(void)
{
	const char *args[] = { "--out", out_path, "--err", err_path,
			       "cat", "/proc/self/stat", NULL };
	long pid = 0, pgrp = 0, sid = 0;
	struct run r = run_with(args, NULL, GROUP_LEADER);

	files();
	CHECK(r.rc == 0 && parse_stat(got_out, &pid, &pgrp, &sid));
	CHECK(pid == r.pid && pgrp == r.pid && sid == getsid(0));
}

static void test_stdin_is_left_alone(void)
{
	const char *args[] = { "--out", out_path, "--err", err_path, "cat",
			       NULL };

	CHECK(run_with(args, "typed\n", 0).rc == 0);
	files();
	CHECK(!strcmp(got_out, "typed\n"));
}

static void test_options_after_the_command_are_its_own(void)
{
	const char *args[] = { "--out", out_path, "--err", err_path, "echo",
			       "--out", "-h", NULL };

	CHECK(run(args).rc == 0);
	files();
	CHECK(!strcmp(got_out, "--out -h\n"));
}

static void test_path_defaults_to_the_guests(void)
{
	const char *args[] = { "--out", out_path, "--err", err_path, "sh",
			       "-c", "echo \"$PATH\"", NULL };

	CHECK(run_with(args, NULL, NO_PATH).rc == 0);
	files();
	CHECK(!strcmp(got_out, "/sbin:/usr/sbin:/bin:/usr/bin\n"));
}

static void test_sigint_is_not_inherited_ignored(void)
{
	const char *args[] = { "--out", out_path, "--err", err_path, "grep",
			       "^SigIgn:", "/proc/self/status", NULL };
	unsigned long long ign = ~0ULL;

	CHECK(run_with(args, NULL, IGNORE_INT).rc == 0);
	files();
	CHECK(sscanf(got_out, "SigIgn: %llx", &ign) == 1);
	CHECK(!(ign & (1ULL << (SIGINT - 1))) &&
	      !(ign & (1ULL << (SIGQUIT - 1))));
}

static void test_exec_failures_are_126_and_127_with_why(void)
{
	const char *missing[] = { "--out", out_path, "--err", err_path,
				  "dcblab-no-such-command", NULL };
	const char *not_dir[] = { "--out", out_path, "--err", err_path,
				  "/etc/passwd/x", NULL };
	char plain[96];
	const char *not_exec[] = { "--out", out_path, "--err", err_path,
				   plain, NULL };
	char want[160];
	struct run r;
	int fd;

	r = run(missing);
	files();
	CHECK(r.rc == 127 && !r.stderr_[0] && !got_out[0]);
	CHECK(!strcmp(got_err, "dcblab-run: dcblab-no-such-command: "
		      "command not found\n"));

	snprintf(plain, sizeof(plain), "%s/plain", dir);
	fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		abort();
	close(fd);
	r = run(not_exec);
	files();
	snprintf(want, sizeof(want), "dcblab-run: %s: permission denied\n",
		 plain);
	CHECK(r.rc == 126 && !strcmp(got_err, want));
	unlink(plain);

	r = run(not_dir);
	files();
	snprintf(want, sizeof(want), "dcblab-run: /etc/passwd/x: %s\n",
		 strerror(ENOTDIR));
	CHECK(r.rc == 126 && !strcmp(got_err, want));
}

static void test_unopenable_file_is_125_on_own_stderr(void)
{
	const char *args[] = { "--out", "/nonexistent/dir/out", "--err",
			       err_path, "true", NULL };
	char want[160];
	struct run r = run(args);

	snprintf(want, sizeof(want), "dcblab-run: /nonexistent/dir/out: %s\n",
		 strerror(ENOENT));
	CHECK(r.rc == 125 && !strcmp(r.stderr_, want));
}

static void test_usage_errors_exit_2_with_one_line(void)
{
	static const struct {
		const char *args[8];
		const char *message;
	} cases[] = {
		{ { NULL }, "need --out FILE and --err FILE" },
		{ { "--out", "o", "true", NULL },
		  "need --out FILE and --err FILE" },
		{ { "--out", "o", "--err", "e", NULL },
		  "need the command to run" },
		{ { "--out", "o", "--err", "e", "--", NULL },
		  "need the command to run" },
		{ { "--bogus", "true", NULL }, "unknown option '--bogus'" },
		{ { "-x", "true", NULL }, "unknown option '-x'" },
		{ { "--out", NULL }, "'--out' needs a value" },
		{ { "-e", NULL }, "'-e' needs a value" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[160];
		struct run r = run(cases[i].args);

		snprintf(want, sizeof(want),
			 "dcblab-run: %s; try dcblab-run -h\n",
			 cases[i].message);
		CHECK(r.rc == 2);
		CHECK(!strcmp(r.stderr_, want));
		if (strcmp(r.stderr_, want))
			fprintf(stderr, "  case %zu: got \"%s\"\n", i,
				r.stderr_);
	}
}

static void test_help_prints_usage_and_exits_0(void)
{
	const char *args[] = { "-h", NULL };
	struct run r = run(args);

	CHECK(r.rc == 0 && !strncmp(r.stdout_, "usage: dcblab-run ", 18));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_dcblab_run PATH-OF-dcblab-run\n");
		return 2;
	}
	tool = argv[1];
	if (!mkdtemp(dir)) {
		perror("test_dcblab_run: mkdtemp");
		return 1;
	}
	snprintf(out_path, sizeof(out_path), "%s/out", dir);
	snprintf(err_path, sizeof(err_path), "%s/err", dir);

	test_output_goes_to_the_files_and_status_passes_through();
	test_existing_files_are_truncated_and_made_private();
	test_one_file_for_both_keeps_both();
	test_unlink_leaves_output_to_a_reader_that_opened_first();
	test_command_leads_its_session_under_the_same_pid();
	test_group_leader_runs_on_in_its_session();
	test_stdin_is_left_alone();
	test_options_after_the_command_are_its_own();
	test_path_defaults_to_the_guests();
	test_sigint_is_not_inherited_ignored();
	test_exec_failures_are_126_and_127_with_why();
	test_unopenable_file_is_125_on_own_stderr();
	test_usage_errors_exit_2_with_one_line();
	test_help_prints_usage_and_exits_0();

	unlink(out_path);
	unlink(err_path);
	rmdir(dir);
	printf("dcblab-run: %d passed, %d failed\n", checks_passed,
	       checks_failed);
	return checks_failed ? 1 : 0;
}
