// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of cgfuzz's pure parts: the model of what 6.1 answers to a write
 * of net_prio.ifpriomap and net_cls.classid (cgmodel.c), the inputs it
 * generates, and the rtnetlink requests it sends (rtnl.c), as bytes.
 * The expected values come from reading the kernel's parsers (cgmodel.h
 * names them) and from the teaching labs' recorded sessions
 * (docs/labs/03-ifpriomap.md); the guest run (tests/test_cgroup_fuzz.py)
 * holds the model to the kernel itself.
 */
#include "cgmodel.h"
#include "check.h"
#include "rtnl.h"

#include <errno.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>

int checks_passed, checks_failed;

#define PAGE 4096

/* ---- the model, one input at a time ---- */

static struct cgm_parse prio(const char *s, size_t len)
{
	struct cgm_parse p;

	cgm_parse_priomap(s, len, PAGE, &p);
	return p;
}

static struct cgm_parse cls(const char *s, size_t len)
{
	struct cgm_parse p;

	cgm_parse_classid(s, len, PAGE, &p);
	return p;
}

/* Literals with NULs in them: the length is the literal's. */
#define P(lit)	prio(lit, sizeof(lit) - 1)
#define C(lit)	cls(lit, sizeof(lit) - 1)

static bool parsed(struct cgm_parse p, const char *dev, uint32_t value)
{
	return p.err == CGM_OK && !p.empty && !strcmp(p.dev, dev) &&
	       p.value == value;
}

static bool is_value(struct cgm_parse p, uint32_t value)
{
	return p.err == CGM_OK && !p.empty && p.value == value;
}

static void test_lab3_refusals_are_einval(void)
{
	/* docs/labs/03-ifpriomap.md: each of these was EINVAL on h1. */
	CHECK(P("eth0").err == CGM_EINVAL);
	CHECK(P("eth0:5").err == CGM_EINVAL);
	CHECK(P("eth0 high").err == CGM_EINVAL);
	CHECK(P("eth0 -1").err == CGM_EINVAL);
}

static void test_lab3_unknown_device_parses_and_is_enodev(void)
{
	struct cgm_parse p = P("eth9 3");

	CHECK(parsed(p, "eth9", 3));
	CHECK(cgm_allowed(CGM_PRIOMAP, &p, CGM_DEV_ABSENT, false) ==
	      CGM_BIT(CGM_ENODEV));
	CHECK(cgm_allowed(CGM_PRIOMAP, &p, CGM_DEV_PRESENT, false) ==
	      CGM_BIT(CGM_OK));
}

static void test_lab3_priority_wraps_at_32_bits(void)
{
	CHECK(parsed(P("eth0 4294967298"), "eth0", 2));
	CHECK(parsed(P("eth0 4294967295"), "eth0", 4294967295u));
	/* Past 2^64 too: simple_strntoull() wraps, %u keeps 32 bits. */
	CHECK(parsed(P("eth0 18446744073709551621"), "eth0", 5));
	CHECK(parsed(P("eth0 18446744078004518915"), "eth0", 3));
}

static void test_lab3_only_the_first_line_counts(void)
{
	CHECK(parsed(P("eth0 1\neth0.100 2"), "eth0", 1));
}

static void test_priomap_odd_inputs_that_are_accepted(void)
{
	/* Whitespace anywhere between and before the fields, newlines too. */
	CHECK(parsed(P("eth0\n1"), "eth0", 1));
	CHECK(parsed(P("\n\t eth0 \v\f\r 4\n"), "eth0", 4));
	/* lib/ctype.c counts byte 160 (Latin-1 NBSP) as whitespace. */
	CHECK(parsed(P("\xa0" "eth0\xa0" "5"), "eth0", 5));
	/* ...but not 0x85 or 0x1c, which join the name. */
	CHECK(P("eth0\x85" "5").err == CGM_EINVAL);
	CHECK(parsed(P("eth0\x85 5"), "eth0\x85", 5));
	/* %u is decimal: 0x10 stops at the x, 010 is ten. */
	CHECK(parsed(P("eth0 0x10"), "eth0", 0));
	CHECK(parsed(P("eth0 010"), "eth0", 10));
	/* Anything after the number is ignored. */
	CHECK(parsed(P("eth0 5abc"), "eth0", 5));
	CHECK(parsed(P("eth0 5 6"), "eth0", 5));
	CHECK(parsed(P("eth0 5\0junk"), "eth0", 5));
}

static void test_priomap_refusals(void)
{
	CHECK(P("eth0 +5").err == CGM_EINVAL);	/* %u takes no sign */
	CHECK(P(" ").err == CGM_EINVAL);
	CHECK(P("\n\n").err == CGM_EINVAL);
	CHECK(P("5").err == CGM_EINVAL);	/* a name, no number */
	CHECK(P("\0eth0 5").err == CGM_EINVAL);
	CHECK(P("eth0\0 5").err == CGM_EINVAL);
	CHECK(P("eth0 \0" "5").err == CGM_EINVAL);
}

static void test_priomap_name_is_cut_at_16_bytes(void)
{
	/* %16s: 16 bytes, then " %u" goes on where the name stopped. */
	CHECK(parsed(P("abcdefghijklmnop 3"), "abcdefghijklmnop", 3));
	CHECK(parsed(P("abcdefghijklmnop7 3"), "abcdefghijklmnop", 7));
	CHECK(P("abcdefghijklmnopq 3").err == CGM_EINVAL);
	CHECK(parsed(P("abcdefghijklmno 3"), "abcdefghijklmno", 3));
}

static void test_empty_write_returns_zero_without_parsing(void)
{
	struct cgm_parse p = prio("", 0), q = cls("", 0);

	CHECK(p.err == CGM_OK && p.empty);
	CHECK(q.err == CGM_OK && q.empty);
	CHECK(cgm_allowed(CGM_PRIOMAP, &p, CGM_DEV_ABSENT, false) ==
	      CGM_BIT(CGM_OK));
}

static void test_writes_past_a_page_are_e2big(void)
{
	static char buf[2 * PAGE];

	memset(buf, ' ', sizeof(buf));
	memcpy(buf, "eth0 5", 6);
	CHECK(parsed(prio(buf, PAGE), "eth0", 5));
	CHECK(prio(buf, PAGE + 1).err == CGM_E2BIG);
	memset(buf, '0', sizeof(buf));
	buf[PAGE - 1] = '7';
	/* 4095 zeros and a 7: octal 7, and exactly a page. */
	CHECK(is_value(cls(buf, PAGE), 7));
	CHECK(cls(buf, PAGE + 1).err == CGM_E2BIG);
	/* A good number padded with NULs: the kernel sees the number. */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, "42\n", 3);
	CHECK(is_value(cls(buf, PAGE), 42));
}

static void test_classid_is_kstrtoull_base_0(void)
{
	CHECK(is_value(C("5"), 5));
	CHECK(is_value(C("5\n"), 5));
	CHECK(is_value(C("0x10"), 16));
	CHECK(is_value(C("0X1F"), 31));
	CHECK(is_value(C("010"), 8));
	CHECK(is_value(C("+5"), 5));
	CHECK(is_value(C("+0x10"), 16));
	CHECK(is_value(C("0"), 0));
	CHECK(is_value(C("5\0junk"), 5));
	CHECK(is_value(C("0x00100001"), 0x100001));
}

static void test_classid_refusals(void)
{
	static const char *const bad[] = {
		"-1", "++5", "+-5", "08", "09", "0x", "0xg", "0x+5", " 5",
		"5 ", "5\n\n", "5\r\n", "\n5", "1:1", "abc", "5abc", "\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(cls(bad[i], strlen(bad[i])).err == CGM_EINVAL);
	CHECK(C("\0" "5").err == CGM_EINVAL);
}

static void test_classid_keeps_32_bits_and_refuses_past_64(void)
{
	CHECK(is_value(C("4294967298"), 2));
	CHECK(is_value(C("18446744073709551615"), 0xffffffffu));
	CHECK(is_value(C("0xffffffffffffffff"), 0xffffffffu));
	CHECK(is_value(C("01777777777777777777777"), 0xffffffffu));
	CHECK(C("18446744073709551616").err == CGM_ERANGE);
	CHECK(C("0x10000000000000000").err == CGM_ERANGE);
	CHECK(C("02000000000000000000000").err == CGM_ERANGE);
	/* The overflow is flagged as the digits go: it wins over garbage. */
	CHECK(C("99999999999999999999x").err == CGM_ERANGE);
	/* Leading zeros do not overflow. */
	CHECK(is_value(C("000000000000000000000000000001"), 1));
}

static void test_allowed_outcomes_of_races(void)
{
	struct cgm_parse ok = P("cgfz-d0 3"), bad = P("cgfz-d0"), big;
	static char buf[PAGE + 1];

	CHECK(cgm_allowed(CGM_PRIOMAP, &ok, CGM_DEV_RACING, false) ==
	      (CGM_BIT(CGM_OK) | CGM_BIT(CGM_ENODEV)));
	/* A refused input stays refused whatever the device does. */
	CHECK(cgm_allowed(CGM_PRIOMAP, &bad, CGM_DEV_RACING, false) ==
	      CGM_BIT(CGM_EINVAL));
	/* A cgroup being removed: open() ENOENT or write() ENODEV too. */
	CHECK(cgm_allowed(CGM_PRIOMAP, &ok, CGM_DEV_PRESENT, true) ==
	      (CGM_BIT(CGM_OK) | CGM_BIT(CGM_ENOENT) | CGM_BIT(CGM_ENODEV)));
	CHECK(cgm_allowed(CGM_PRIOMAP, &bad, CGM_DEV_PRESENT, true) ==
	      (CGM_BIT(CGM_EINVAL) | CGM_BIT(CGM_ENOENT) |
	       CGM_BIT(CGM_ENODEV)));
	/* The page limit comes before the removed-file check. */
	memset(buf, ' ', sizeof(buf));
	big = prio(buf, sizeof(buf));
	CHECK(cgm_allowed(CGM_PRIOMAP, &big, CGM_DEV_PRESENT, true) ==
	      (CGM_BIT(CGM_E2BIG) | CGM_BIT(CGM_ENOENT)));
	ok = C("7");
	CHECK(cgm_allowed(CGM_CLASSID, &ok, CGM_DEV_ABSENT, false) ==
	      CGM_BIT(CGM_OK));
}

static void test_kernel_whitespace_is_lib_ctype(void)
{
	int n = 0;

	for (int c = 0; c < 256; c++)
		n += cgm_kernel_isspace((unsigned char)c);
	CHECK(n == 7);
	CHECK(cgm_kernel_isspace(160) && cgm_kernel_isspace('\v'));
	CHECK(!cgm_kernel_isspace(0x85) && !cgm_kernel_isspace(0));
}

static void test_outcome_names_and_errnos(void)
{
	CHECK(cgm_outcome_of(0) == CGM_OK);
	CHECK(cgm_outcome_of(ENODEV) == CGM_ENODEV);
	CHECK(cgm_outcome_of(EPERM) == CGM_OTHER);
	CHECK(!strcmp(cgm_outcome_name(CGM_E2BIG), "E2BIG"));
	CHECK(!strcmp(cgm_category_name(CGM_GONE_CGROUP), "gone_cgroup"));
	CHECK(!cgm_applies(CGM_CLASSID, CGM_GONE_DEV));
	CHECK(cgm_applies(CGM_CLASSID, CGM_GONE_CGROUP));
}

/* ---- the generator ---- */

static const char *const stable[] = { "cgfz-s0", "cgfz-s1", "cgfz-sv" };
static const char *const churn[] = { "cgfz-d0", "cgfz-v0" };
static const struct cgm_names names = {
	.stable = stable, .nstable = 3, .churn = churn, .nchurn = 2,
	.unknown_prefix = "cgfz-u",
};

static int in(const char *name, const char *const *list, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(name, list[i]))
			return 1;
	return 0;
}

static void test_same_seed_same_inputs(void)
{
	static char a[CGM_INPUT_MAX], b[CGM_INPUT_MAX];
	struct cgm_rng r1, r2, r3;
	int differ = 0;

	cgm_seed(&r1, 42, 3);
	cgm_seed(&r2, 42, 3);
	cgm_seed(&r3, 42, 4);
	for (int i = 0; i < 1000; i++) {
		enum cgm_file f = (enum cgm_file)(i % 2);
		enum cgm_category c = (enum cgm_category)(i % CGM_NCATS);
		size_t la, lb;

		if (!cgm_applies(f, c))
			continue;
		la = cgm_generate(&r1, f, c, &names, PAGE, a);
		lb = cgm_generate(&r2, f, c, &names, PAGE, b);
		CHECK(la == lb && !memcmp(a, b, la));
		lb = cgm_generate(&r3, f, c, &names, PAGE, b);
		differ += la != lb || memcmp(a, b, la);
	}
	CHECK(differ > 100);	/* another stream, other inputs */
}

/*
 * What each category yields, by the model, over many inputs: valid ones
 * are accepted on a stable device, the others reach the outcomes they
 * are there for.
 */
static void test_categories_reach_their_outcomes(void)
{
	static char buf[CGM_INPUT_MAX];
	unsigned int seen[CGM_NFILES][CGM_NCATS] = { { 0 } };
	int valid_bad = 0, gone_bad = 0, unknown_bad = 0, range_bad = 0;
	struct cgm_rng r;

	cgm_seed(&r, 1, 0);
	for (int i = 0; i < 20000; i++) {
		enum cgm_file f = (enum cgm_file)cgm_below(&r, 2);
		enum cgm_category c = (enum cgm_category)cgm_below(&r,
								  CGM_NCATS);
		struct cgm_parse p;
		size_t len;

		if (!cgm_applies(f, c))
			continue;
		len = cgm_generate(&r, f, c, &names, PAGE, buf);
		CHECK(len <= CGM_INPUT_MAX);
		cgm_parse(f, buf, len, PAGE, &p);
		seen[f][c] |= CGM_BIT(p.err);
		if (c == CGM_VALID || c == CGM_GONE_CGROUP)
			valid_bad += p.err != CGM_OK || p.empty ||
				     (f == CGM_PRIOMAP &&
				      !in(p.dev, stable, 3));
		if (c == CGM_GONE_DEV)
			gone_bad += p.err != CGM_OK || !in(p.dev, churn, 2);
		if (c == CGM_UNKNOWN_DEV)
			unknown_bad += p.err == CGM_OK &&
				       (in(p.dev, stable, 3) ||
					in(p.dev, churn, 2));
		if (c == CGM_RANGE && f == CGM_PRIOMAP)
			range_bad += p.err != CGM_OK;
	}
	CHECK(valid_bad == 0);
	CHECK(gone_bad == 0);
	CHECK(unknown_bad == 0);
	CHECK(range_bad == 0);
	for (int f = 0; f < CGM_NFILES; f++) {
		CHECK(seen[f][CGM_MALFORMED] & CGM_BIT(CGM_OK));
		CHECK(seen[f][CGM_MALFORMED] & CGM_BIT(CGM_EINVAL));
		CHECK(seen[f][CGM_OVERLONG] & CGM_BIT(CGM_E2BIG));
		CHECK(seen[f][CGM_OVERLONG] & CGM_BIT(CGM_OK));
	}
	CHECK(seen[CGM_PRIOMAP][CGM_OVERLONG] & CGM_BIT(CGM_EINVAL));
	CHECK(seen[CGM_CLASSID][CGM_RANGE] & CGM_BIT(CGM_ERANGE));
	CHECK(seen[CGM_CLASSID][CGM_RANGE] & CGM_BIT(CGM_OK));
	CHECK(seen[CGM_CLASSID][CGM_OVERLONG] & CGM_BIT(CGM_ERANGE));
}

static void test_escape_shows_every_byte(void)
{
	char out[64];

	cgm_escape("a\n\t\"\\\0" "b", 7, 100, out, sizeof(out));
	CHECK(!strcmp(out, "a\\n\\t\\\"\\\\\\0b"));
	cgm_escape("\0" "1\xa0", 3, 100, out, sizeof(out));
	CHECK(!strcmp(out, "\\x001\\xa0"));
	cgm_escape("abcdef", 6, 3, out, sizeof(out));
	CHECK(!strcmp(out, "abc...(6 bytes)"));
}

/* ---- rtnetlink requests, as the kernel will read them ---- */

static const struct nlattr *attr(const void *base, size_t len, uint16_t type)
{
	const char *p = base;

	while (len >= NLA_HDRLEN) {
		const struct nlattr *a = (const struct nlattr *)p;

		if (a->nla_len < NLA_HDRLEN || a->nla_len > len)
			return NULL;
		if ((a->nla_type & NLA_TYPE_MASK) == type)
			return a;
		size_t step = NLA_ALIGN((size_t)a->nla_len);

		len -= step < len ? step : len;
		p += step;
	}
	return NULL;
}

#define PAYLOAD(a)	((const char *)(a) + NLA_HDRLEN)
#define PAYLEN(a)	((size_t)(a)->nla_len - NLA_HDRLEN)

static void test_newlink_of_a_vlan_nests_its_id(void)
{
	struct rtnl_msg m;
	const struct nlmsghdr *h = (const struct nlmsghdr *)m.buf;
	const char *attrs;
	const struct nlattr *name, *link, *info, *kind, *data, *vid;
	size_t alen;

	rtnl_build_newlink(&m, "cgfz-v0", "vlan", 12, 100);
	attrs = m.buf + NLMSG_SPACE(sizeof(struct ifinfomsg));
	alen = m.len - NLMSG_SPACE(sizeof(struct ifinfomsg));
	CHECK(!m.overflow && h->nlmsg_len == m.len);
	CHECK(h->nlmsg_type == RTM_NEWLINK);
	CHECK(h->nlmsg_flags == (NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL));
	name = attr(attrs, alen, IFLA_IFNAME);
	CHECK(name && PAYLEN(name) == 8 && !strcmp(PAYLOAD(name), "cgfz-v0"));
	link = attr(attrs, alen, IFLA_LINK);
	CHECK(link && PAYLEN(link) == 4 &&
	      *(const uint32_t *)PAYLOAD(link) == 12);
	info = attr(attrs, alen, IFLA_LINKINFO);
	CHECK(info != NULL);
	if (!info)
		return;
	/* The nest ends where the message does: nothing after it. */
	CHECK((const char *)info + info->nla_len == m.buf + m.len);
	kind = attr(PAYLOAD(info), PAYLEN(info), IFLA_INFO_KIND);
	CHECK(kind && !strcmp(PAYLOAD(kind), "vlan"));
	data = attr(PAYLOAD(info), PAYLEN(info), IFLA_INFO_DATA);
	CHECK(data != NULL);
	if (!data)
		return;
	vid = attr(PAYLOAD(data), PAYLEN(data), IFLA_VLAN_ID);
	CHECK(vid && PAYLEN(vid) == 2 &&
	      *(const uint16_t *)PAYLOAD(vid) == 100);
}

static void test_newlink_of_a_dummy_has_no_link_or_data(void)
{
	struct rtnl_msg m;
	const char *attrs;
	const struct nlattr *info;
	size_t alen;

	rtnl_build_newlink(&m, "cgfz-s0", "dummy", 0, 0);
	attrs = m.buf + NLMSG_SPACE(sizeof(struct ifinfomsg));
	alen = m.len - NLMSG_SPACE(sizeof(struct ifinfomsg));
	CHECK(!attr(attrs, alen, IFLA_LINK));
	info = attr(attrs, alen, IFLA_LINKINFO);
	CHECK(info && !attr(PAYLOAD(info), PAYLEN(info), IFLA_INFO_DATA));
	CHECK(info && !strcmp(PAYLOAD(attr(PAYLOAD(info), PAYLEN(info),
					     IFLA_INFO_KIND)), "dummy"));
}

static void test_dellink_names_the_device(void)
{
	struct rtnl_msg m;
	const struct nlmsghdr *h = (const struct nlmsghdr *)m.buf;
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	const struct nlattr *name;

	rtnl_build_dellink(&m, "cgfz-d3");
	CHECK(h->nlmsg_type == RTM_DELLINK && ifi->ifi_index == 0);
	name = attr(m.buf + NLMSG_SPACE(sizeof(*ifi)),
		    m.len - NLMSG_SPACE(sizeof(*ifi)), IFLA_IFNAME);
	CHECK(name && !strcmp(PAYLOAD(name), "cgfz-d3"));
}

static void test_overflowing_message_is_flagged_not_sent(void)
{
	static char big[2000];
	struct rtnl_msg m;
	struct rtnl r = { .fd = -1 };

	memset(big, 'x', sizeof(big) - 1);
	rtnl_msg_init(&m, RTM_NEWLINK, 0, NULL, 0);
	rtnl_msg_put_str(&m, IFLA_IFNAME, big);
	CHECK(m.overflow);
	CHECK(rtnl_talk(&r, &m) == EMSGSIZE);
}

/* NLM_F_EXCL and NLM_F_REPLACE are NLM_F_DUMP's two bits: a NEWLINK
 * with them waited for an NLMSG_DONE that never came (cgfuzz hung in its
 * setup, in CI).
 */
static void test_only_a_get_with_both_bits_is_a_dump(void)
{
	struct rtnl_msg m;
	const struct nlmsghdr *h = (const struct nlmsghdr *)m.buf;

	rtnl_build_newlink(&m, "cgfz-s0", "dummy", 0, 0);
	CHECK(!rtnl_is_dump(h));
	rtnl_msg_init(&m, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE |
		      NLM_F_EXCL, NULL, 0);
	CHECK(!rtnl_is_dump(h));
	rtnl_msg_init(&m, RTM_GETQDISC, NLM_F_DUMP, NULL, 0);
	CHECK(rtnl_is_dump(h));
	rtnl_msg_init(&m, RTM_GETLINK, NLM_F_MATCH, NULL, 0);
	CHECK(!rtnl_is_dump(h));
	rtnl_msg_init(&m, RTM_GETDCB, 0, NULL, 0);
	CHECK(!rtnl_is_dump(h));
}

int main(void)
{
	test_lab3_refusals_are_einval();
	test_lab3_unknown_device_parses_and_is_enodev();
	test_lab3_priority_wraps_at_32_bits();
	test_lab3_only_the_first_line_counts();
	test_priomap_odd_inputs_that_are_accepted();
	test_priomap_refusals();
	test_priomap_name_is_cut_at_16_bytes();
	test_empty_write_returns_zero_without_parsing();
	test_writes_past_a_page_are_e2big();
	test_classid_is_kstrtoull_base_0();
	test_classid_refusals();
	test_classid_keeps_32_bits_and_refuses_past_64();
	test_allowed_outcomes_of_races();
	test_kernel_whitespace_is_lib_ctype();
	test_outcome_names_and_errnos();
	test_same_seed_same_inputs();
	test_categories_reach_their_outcomes();
	test_escape_shows_every_byte();
	test_newlink_of_a_vlan_nests_its_id();
	test_newlink_of_a_dummy_has_no_link_or_data();
	test_dellink_names_the_device();
	test_overflowing_message_is_flagged_not_sent();
	test_only_a_get_with_both_bits_is_a_dump();
	printf("test_cgfuzz: %d passed, %d failed\n", checks_passed,
	       checks_failed);
	return checks_failed ? 1 : 0;
}
