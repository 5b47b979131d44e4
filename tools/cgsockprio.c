// SPDX-License-Identifier: GPL-2.0
/*
 * cgsockprio - give every new IPv4/IPv6 socket of a cgroup v2 subtree a
 * priority, with a BPF cgroup/sock_create program: net_prio's job on a
 * system that has only cgroup v2.
 *
 *   cgsockprio [-j] CGROUP2_DIR PRIO     attach (or replace) the program
 *   cgsockprio -d [-j] CGROUP2_DIR       detach it
 *   cgsockprio -e [-j] CGROUP2_DIR IFNAME PRIO
 *   cgsockprio -d -e [-j] CGROUP2_DIR
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
 * With -e (--egress) the program is a cgroup/skb one attached as
 * BPF_CGROUP_INET_EGRESS instead: for each IPv4/IPv6 packet a socket of
 * the subtree sends, if the packet leaves by IFNAME (its ifindex, looked
 * up in this tool's network namespace when it attaches), it stores PRIO
 * into skb->priority; it returns 1 (pass) for every packet.  It runs in
 * ip_finish_output()/ip6_finish_output(), before the device's
 * __dev_queue_xmit(), so net_prio's map, which fills in only a priority
 * still 0, no longer applies to those packets; unlike sock_create it
 * decides per packet and per device, and it follows the socket's cgroup
 * v2, which is fixed when the socket is made.
 *
 * Exit 0 when done, 1 when the kernel said no (a failed load prints the
 * verifier's log after the error line), 2 on usage errors.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <net/if.h>
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
#define BPF_LDX_MEM(SIZE, DST, SRC, OFF)				\
	((struct bpf_insn) { .code = BPF_LDX | BPF_SIZE(SIZE) | BPF_MEM,	\
			     .dst_reg = DST, .src_reg = SRC, .off = OFF })
#define BPF_JMP_IMM(OP, DST, IMM, OFF)					\
	((struct bpf_insn) { .code = BPF_JMP | BPF_OP(OP) | BPF_K,	\
			     .dst_reg = DST, .off = OFF, .imm = IMM })

#define LOG_SIZE 65536

struct opts {
	bool detach;
	bool egress;
};

static void usage(void)
{
	printf(
"usage: cgsockprio [-j] CGROUP2_DIR PRIO\n"
"       cgsockprio -e [-j] CGROUP2_DIR IFNAME PRIO\n"
"       cgsockprio -d [-e] [-j] CGROUP2_DIR\n"
"Attach a BPF cgroup/sock_create program to a cgroup v2 directory that\n"
"sets SO_PRIORITY of every new IPv4/IPv6 socket of the cgroup and its\n"
"descendants to PRIO (a second attach replaces it).\n"
"  -e, --egress            a cgroup/skb egress program instead: packets of\n"
"                          the subtree's sockets leaving by IFNAME get\n"
"                          skb->priority PRIO\n"
"  -d, --detach            detach the cgroup's program (with -e: egress)\n"
"  -j, --json              print one JSON object\n"
"  -h, --help              this text\n"
"Exit 0 when done, 1 when the kernel said no, 2 usage.\n");
}

static const struct option longopts[] = {
	{ "detach", no_argument, NULL, 'd' },
	{ "egress", no_argument, NULL, 'e' },
	COMMON_OPTIONS,
};

static int set_option(void *ctx, int c, const char *arg)
{
	struct opts *o = ctx;

	(void)arg;
	if (c == 'd')
		o->detach = true;
	else if (c == 'e')
		o->egress = true;
	return 0;
}

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/*
 * The program's fd, or -1 after printing why (and the verifier's log).
 * IFINDEX 0: the sock_create program; else the egress one for IFINDEX.
 */
static int load(uint32_t prio, int ifindex)
{
	const struct bpf_insn sock_insns[] = {
		/* r1 = ctx (struct bpf_sock *), r3 = prio */
		BPF_MOV64_IMM(BPF_REG_3, (int32_t)prio),
		/* ctx->priority = r3 (32 bits) */
		BPF_STX_MEM(BPF_W, BPF_REG_1, BPF_REG_3,
			    offsetof(struct bpf_sock, priority)),
		/* return 1: the socket may be created */
		BPF_MOV64_IMM(BPF_REG_0, 1),
		BPF_EXIT_INSN(),
	};
	const struct bpf_insn skb_insns[] = {
		/* r1 = ctx (struct __sk_buff *); r2 = the output device */
		BPF_LDX_MEM(BPF_W, BPF_REG_2, BPF_REG_1,
			    offsetof(struct __sk_buff, ifindex)),
		/* another device: skip the two stores below */
		BPF_JMP_IMM(BPF_JNE, BPF_REG_2, ifindex, 2),
		BPF_MOV64_IMM(BPF_REG_3, (int32_t)prio),
		/* ctx->priority = r3: skb->priority */
		BPF_STX_MEM(BPF_W, BPF_REG_1, BPF_REG_3,
			    offsetof(struct __sk_buff, priority)),
		/* return 1: let the packet go */
		BPF_MOV64_IMM(BPF_REG_0, 1),
		BPF_EXIT_INSN(),
	};
	static char log[LOG_SIZE];
	union bpf_attr attr;
	int fd, err;

	memset(&attr, 0, sizeof(attr));
	if (ifindex) {
		attr.prog_type = BPF_PROG_TYPE_CGROUP_SKB;
		attr.expected_attach_type = BPF_CGROUP_INET_EGRESS;
		attr.insns = (uintptr_t)skb_insns;
		attr.insn_cnt = sizeof(skb_insns) / sizeof(skb_insns[0]);
	} else {
		attr.prog_type = BPF_PROG_TYPE_CGROUP_SOCK;
		attr.expected_attach_type = BPF_CGROUP_INET_SOCK_CREATE;
		attr.insns = (uintptr_t)sock_insns;
		attr.insn_cnt = sizeof(sock_insns) / sizeof(sock_insns[0]);
	}
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

static int attach_error(const char *what, const char *dir, int err,
			bool egress)
{
	const char *why = "";

	if (err == EBADF)
		why = ": not a cgroup v2 directory";
	else if (err == ENOENT)
		why = egress ? ": no egress program attached" :
			       ": no sock_create program attached";
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
		.shortopts = ":dejh", .longopts = longopts,
		.any_operands = true, .usage = usage, .set = set_option,
		.ctx = &o,
	};
	union bpf_attr attr;
	uint64_t prio = 0;
	const char *dir, *ifname = NULL;
	int rc, cg, prog = -1, ifindex = 0, want;

	progname = "cgsockprio";
	rc = parse_options(argc, argv, &cli);
	if (rc)
		return rc;
	want = o.detach ? 1 : o.egress ? 3 : 2;
	if (argc - optind != want)
		return usage_error("need %s, got %d operand%s",
				   o.detach ? "CGROUP2_DIR alone after -d" :
				   o.egress ? "CGROUP2_DIR IFNAME PRIO" :
				   "CGROUP2_DIR PRIO", argc - optind,
				   argc - optind == 1 ? "" : "s");
	dir = argv[optind];
	if (!o.detach) {
		rc = parse_u64("PRIO", argv[optind + want - 1], 0, UINT32_MAX,
			       &prio);
		if (rc)
			return rc;
	}
	if (o.egress && !o.detach) {
		ifname = argv[optind + 1];
		ifindex = (int)if_nametoindex(ifname);
		if (!ifindex)
			return usage_error("IFNAME %s: no such device here",
					   ifname);
	}

	cg = open(dir, O_RDONLY | O_DIRECTORY);
	if (cg < 0)
		return runtime_error("%s: %s (%s)", dir, errname(errno),
				     strerror(errno));
	memset(&attr, 0, sizeof(attr));
	attr.target_fd = cg;
	attr.attach_type = o.egress ? BPF_CGROUP_INET_EGRESS :
				      BPF_CGROUP_INET_SOCK_CREATE;
	if (o.detach) {
		if (sys_bpf(BPF_PROG_DETACH, &attr))
			return attach_error("BPF_PROG_DETACH from", dir, errno,
					    o.egress);
	} else {
		prog = load(prio, ifindex);
		if (prog < 0)
			return EXIT_FAILURE;
		attr.attach_bpf_fd = prog;
		if (sys_bpf(BPF_PROG_ATTACH, &attr))
			return attach_error("BPF_PROG_ATTACH to", dir, errno,
					    o.egress);
	}

	new_json_obj(stdout, cli.json);
	print_string(PRINT_ANY, "cgroup", "%s: ", dir);
	print_string(PRINT_JSON, "action", NULL,
		     o.detach ? "detached" : "attached");
	print_string(PRINT_JSON, "program", NULL,
		     o.egress ? "egress" : "sock_create");
	if (o.detach) {
		print_text(o.egress ? "egress program detached\n" :
			   "sock_create program detached\n");
	} else if (o.egress) {
		print_uint(PRINT_JSON, "prog_id", NULL, prog_id(prog));
		print_string(PRINT_ANY, "dev", "egress program attached: "
			     "packets leaving by %s ", ifname);
		print_uint(PRINT_ANY, "priority", "get priority %llu\n", prio);
	} else {
		print_uint(PRINT_JSON, "prog_id", NULL, prog_id(prog));
		print_uint(PRINT_ANY, "priority",
			   "sock_create program attached: new IPv4/IPv6"
			   " sockets get priority %llu\n", prio);
	}
	delete_json_obj();
	return 0;
}
