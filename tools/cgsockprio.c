// SPDX-License-Identifier: GPL-2.0
/*
 * cgsockprio - give every new IPv4/IPv6 socket of a cgroup v2 subtree a
 * priority, with a BPF cgroup/sock_create program: net_prio's job on a
 * system that has only cgroup v2.
 *
 *   cgsockprio [-j] CGROUP2_DIR PRIO     attach (or replace) the program
 *   cgsockprio -d [-j] CGROUP2_DIR       detach it
 *
 * The program is the one the kernel's samples/bpf/test_cgrp2_sock.c builds
 * for its -p option, hand-assembled: store PRIO into the new socket's
 * priority (struct bpf_sock's priority, which the kernel rewrites into
 * sk->sk_priority), return 1 (allow).  It is loaded as
 * BPF_PROG_TYPE_CGROUP_SOCK and attached as BPF_CGROUP_INET_SOCK_CREATE
 * with no flags, as the sample does: one program per cgroup, a second
 * attach replaces it, and it runs for sockets created by processes in the
 * cgroup and its descendants (unless one of them has its own).  It runs in
 * inet_create()/inet6_create(), so AF_PACKET and AF_UNIX sockets are not
 * touched, and a program's later setsockopt(SO_PRIORITY) still wins.
 * The program stays attached after this tool exits; -d or rmdir of the
 * cgroup removes it.
 *
 * Exit 0 when done, 1 when the kernel said no (a failed load prints the
 * verifier's log after the error line), 2 on usage errors.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The instruction macros of the kernel's include/linux/filter.h (also in
 * samples/bpf/bpf_insn.h); the uapi linux/bpf.h has only the opcodes.
 */
#define BPF_MOV64_REG(DST, SRC)						\
	((struct bpf_insn) { .code = BPF_ALU64 | BPF_MOV | BPF_X,	\
			     .dst_reg = DST, .src_reg = SRC })
#define BPF_MOV64_IMM(DST, IMM)						\
	((struct bpf_insn) { .code = BPF_ALU64 | BPF_MOV | BPF_K,	\
			     .dst_reg = DST, .imm = IMM })
#define BPF_STX_MEM(SIZE, DST, SRC, OFF)				\
	((struct bpf_insn) { .code = BPF_STX | BPF_SIZE(SIZE) | BPF_MEM,	\
			     .dst_reg = DST, .src_reg = SRC, .off = OFF })
#define BPF_EXIT_INSN()							\
	((struct bpf_insn) { .code = BPF_JMP | BPF_EXIT })

#define LOG_SIZE 65536

struct opts {
	bool detach;
};

static void usage(void)
{
	printf(
"usage: cgsockprio [-j] CGROUP2_DIR PRIO\n"
"       cgsockprio -d [-j] CGROUP2_DIR\n"
"Attach a BPF cgroup/sock_create program to a cgroup v2 directory that\n"
"sets SO_PRIORITY of every new IPv4/IPv6 socket of the cgroup and its\n"
"descendants to PRIO (a second attach replaces it).\n"
"  -d, --detach            detach the cgroup's sock_create program\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n"
"Exit 0 when done, 1 when the kernel said no, 2 usage.\n");
}

static const struct option longopts[] = {
	{ "detach", no_argument, NULL, 'd' },
	COMMON_OPTIONS,
};

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *o = ctx;

	(void)arg;
	if (c == 'd')
		o->detach = true;
	return 0;
}

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/* The program's fd, or -1 after printing why (and the verifier's log). */
static int load(uint32_t prio)
{
	const struct bpf_insn insns[] = {
		/* r1 = ctx (struct bpf_sock *), r3 = prio */
		BPF_MOV64_IMM(BPF_REG_3, (int32_t)prio),
		/* ctx->priority = r3 (32 bits) */
		BPF_STX_MEM(BPF_W, BPF_REG_1, BPF_REG_3,
			    offsetof(struct bpf_sock, priority)),
		/* return 1: the socket may be created */
		BPF_MOV64_IMM(BPF_REG_0, 1),
		BPF_EXIT_INSN(),
	};
	static char log[LOG_SIZE];
	union bpf_attr attr;
	int fd, err;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_SOCK;
	attr.expected_attach_type = BPF_CGROUP_INET_SOCK_CREATE;
	attr.insns = (uintptr_t)insns;
	attr.insn_cnt = sizeof(insns) / sizeof(insns[0]);
	attr.license = (uintptr_t)"GPL";
	attr.log_buf = (uintptr_t)log;
	attr.log_size = sizeof(log);
	attr.log_level = 1;
	strncpy(attr.prog_name, "cgsockprio", sizeof(attr.prog_name) - 1);
	fd = sys_bpf(BPF_PROG_LOAD, &attr);
	if (fd >= 0)
		return fd;
	err = errno;
	runtime_error("BPF_PROG_LOAD: %s (%s)%s", errname(err), strerror(err),
		      log[0] ? "; the verifier's log follows" : "");
	if (log[0])
		fputs(log, stderr);
	return -1;
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info;
	union bpf_attr attr;

	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = (uintptr_t)&info;
	return sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) ? 0 : info.id;
}

static int attach_error(const char *what, const char *dir, int err)
{
	const char *why = "";

	if (err == EBADF)
		why = ": not a cgroup v2 directory";
	else if (err == ENOENT)
		why = ": no sock_create program attached";
	else if (err == EPERM)
		why = ": an ancestor's program does not allow"
		      " another one below it";
	return runtime_error("%s %s: %s (%s)%s", what, dir, errname(err),
			     strerror(err), why);
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct cli cli = {
		.shortopts = ":djh", .longopts = longopts,
		.any_operands = true, .usage = usage, .set = set_option,
		.ctx = &o,
	};
	union bpf_attr attr;
	uint64_t prio = 0;
	const char *dir;
	int rc, cg, prog = -1;

	progname = "cgsockprio";
	rc = parse_options(argc, argv, &cli);
	if (rc)
		return rc;
	if (o.detach && argc - optind != 1)
		return usage_error("-d needs CGROUP2_DIR alone, got %d operand%s",
				   argc - optind, argc - optind == 1 ? "" : "s");
	if (!o.detach && argc - optind != 2)
		return usage_error("need CGROUP2_DIR PRIO, got %d operand%s",
				   argc - optind, argc - optind == 1 ? "" : "s");
	dir = argv[optind];
	if (!o.detach) {
		rc = parse_u64("PRIO", argv[optind + 1], 0, UINT32_MAX, &prio);
		if (rc)
			return rc;
	}

	cg = open(dir, O_RDONLY | O_DIRECTORY);
	if (cg < 0)
		return runtime_error("%s: %s (%s)", dir, errname(errno),
				     strerror(errno));
	memset(&attr, 0, sizeof(attr));
	attr.target_fd = cg;
	attr.attach_type = BPF_CGROUP_INET_SOCK_CREATE;
	if (o.detach) {
		if (sys_bpf(BPF_PROG_DETACH, &attr))
			return attach_error("BPF_PROG_DETACH from", dir, errno);
	} else {
		prog = load(prio);
		if (prog < 0)
			return EXIT_FAILURE;
		attr.attach_bpf_fd = prog;
		if (sys_bpf(BPF_PROG_ATTACH, &attr))
			return attach_error("BPF_PROG_ATTACH to", dir, errno);
	}

	new_json_obj(stdout, cli.json);
	print_string(PRINT_ANY, "cgroup", "%s: ", dir);
	print_string(PRINT_JSON, "action", NULL,
		     o.detach ? "detached" : "attached");
	if (o.detach) {
		print_text("sock_create program detached\n");
	} else {
		print_uint(PRINT_JSON, "prog_id", NULL, prog_id(prog));
		print_uint(PRINT_ANY, "priority",
			   "sock_create program attached: new IPv4/IPv6"
			   " sockets get priority %llu\n", prio);
	}
	delete_json_obj();
	return 0;
}
