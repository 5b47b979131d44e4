// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of seqtrack.c, and of what the tools share with it: parse.c,
 * payload.h, frame.c.  Run by `make check`; the last line is
 * "N passed, M failed" and the exit status is 1 when M > 0.
 */
#include "frame.h"
#include "parse.h"
#include "payload.h"
#include "seqtrack.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond) do {						\
	if (cond) {							\
		passed++;						\
	} else {							\
		failed++;						\
		printf("%s:%d: FAILED: %s\n", __FILE__, __LINE__,	\
		       #cond);						\
	}								\
} while (0)

static void test_million_in_order_are_all_received(void)
{
	const uint64_t n = 1000000;
	struct seqtrack t;
	int err = 0;

	seqtrack_init(&t);
	for (uint64_t s = 0; s < n; s++)
		err |= seqtrack_add(&t, s);
	CHECK(err == 0);
	CHECK(t.received == n && t.max_seq == n - 1);
	CHECK(seqtrack_lost(&t) == 0);
	CHECK(t.duplicates == 0 && t.reordered == 0);
	seqtrack_free(&t);
}

static void test_loss_duplicates_and_reordering_are_told_apart(void)
{
	const uint64_t seqs[] = { 0, 1, 3, 2, 2, 6, 5 };
	struct seqtrack t;

	seqtrack_init(&t);
	for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++)
		seqtrack_add(&t, seqs[i]);
	CHECK(t.received == 6);		/* 0 1 2 3 5 6 */
	CHECK(seqtrack_lost(&t) == 1);	/* 4 */
	CHECK(t.duplicates == 1);	/* the second 2 */
	CHECK(t.reordered == 2);	/* 2 after 3, 5 after 6 */
	CHECK(t.max_seq == 6);
	seqtrack_free(&t);
}

static void test_numbers_across_a_page_boundary(void)
{
	const uint64_t b = SEQTRACK_PAGE_BITS;
	struct seqtrack t;

	seqtrack_init(&t);
	seqtrack_add(&t, b - 1);
	seqtrack_add(&t, b + 1);
	seqtrack_add(&t, b);
	seqtrack_add(&t, b);
	seqtrack_add(&t, b - 1);
	CHECK(t.received == 3 && t.duplicates == 2 && t.reordered == 1);
	CHECK(seqtrack_lost(&t) == b - 1);	/* 0..b-2 */
	seqtrack_free(&t);
}

static void test_missing_start_counts_as_lost(void)
{
	struct seqtrack t;

	seqtrack_init(&t);
	seqtrack_add(&t, 5);
	CHECK(t.received == 1 && seqtrack_lost(&t) == 5 && t.reordered == 0);
	seqtrack_free(&t);
}

static void test_empty_has_no_loss(void)
{
	struct seqtrack t;

	seqtrack_init(&t);
	CHECK(seqtrack_lost(&t) == 0 && t.received == 0);
	seqtrack_free(&t);
}

static void test_huge_number_is_sparse_and_limit_refused(void)
{
	struct seqtrack t;

	seqtrack_init(&t);
	CHECK(seqtrack_add(&t, 0) == 0);
	CHECK(seqtrack_add(&t, SEQTRACK_LIMIT - 1) == 0);
	CHECK(seqtrack_lost(&t) == SEQTRACK_LIMIT - 2);
	CHECK(seqtrack_add(&t, SEQTRACK_LIMIT) == -ERANGE);
	CHECK(t.received == 2 && t.max_seq == SEQTRACK_LIMIT - 1);
	seqtrack_free(&t);
}

static void test_payload_roundtrip(void)
{
	struct payload in = { .flow = 7, .seq = 1ull << 40, .so_priority = 6 };
	uint8_t buf[PAYLOAD_LEN];
	struct payload out = { 0 };

	payload_put(buf, &in);
	CHECK(!memcmp(buf, "DCB1", 4));
	CHECK(payload_get(buf, sizeof(buf), &out) == 0);
	CHECK(out.flow == 7 && out.seq == 1ull << 40 && out.so_priority == 6);
	CHECK(payload_get(buf, PAYLOAD_LEN - 1, &out) == -1);
	buf[0] = 'X';
	CHECK(payload_get(buf, sizeof(buf), &out) == -1);
}

static void test_parse_u64_is_range_checked(void)
{
	uint64_t v;

	CHECK(parse_u64("t", "0x88b5", 0, 0xffff, &v) == 0 && v == 0x88b5);
	CHECK(parse_u64("t", "10", 0, 10, &v) == 0 && v == 10);
	CHECK(parse_u64("t", "18446744073709551615", 0, UINT64_MAX, &v) == 0 &&
	      v == UINT64_MAX);
	CHECK(parse_u64("t", "18446744073709551616", 0, UINT64_MAX, &v) == -1);
	CHECK(parse_u64("t", "-1", 0, 10, &v) == -1);
	CHECK(parse_u64("t", "+1", 0, 10, &v) == -1);
	CHECK(parse_u64("t", " 1", 0, 10, &v) == -1);
	CHECK(parse_u64("t", "11", 0, 10, &v) == -1);
	CHECK(parse_u64("t", "0", 1, 10, &v) == -1);
	CHECK(parse_u64("t", "5x", 0, 10, &v) == -1);
	CHECK(parse_u64("t", "0x", 0, 10, &v) == -1);
	CHECK(parse_u64("t", "", 0, 10, &v) == -1);
}

static void test_parse_seconds(void)
{
	double d;

	CHECK(parse_seconds("t", "2.5", 10, &d) == 0 && d == 2.5);
	CHECK(parse_seconds("t", ".5", 10, &d) == 0 && d == 0.5);
	CHECK(parse_seconds("t", "0", 10, &d) == 0 && d == 0);
	CHECK(parse_seconds("t", "11", 10, &d) == -1);
	CHECK(parse_seconds("t", "-1", 10, &d) == -1);
	CHECK(parse_seconds("t", "inf", 10, &d) == -1);
	CHECK(parse_seconds("t", "nan", 10, &d) == -1);
	CHECK(parse_seconds("t", "0x1p1", 10, &d) == -1);
	CHECK(parse_seconds("t", "2s", 10, &d) == -1);
	CHECK(parse_seconds("t", "", 10, &d) == -1);
}

static void test_parse_mac(void)
{
	uint8_t mac[6] = { 0 };

	CHECK(parse_mac("t", "02:dc:00:01:0A:ff", mac) == 0 &&
	      mac[0] == 0x02 && mac[4] == 0x0a && mac[5] == 0xff);
	CHECK(parse_mac("t", "02:dc:00:01:0a", mac) == -1);
	CHECK(parse_mac("t", "02:dc:00:01:0a:ff:00", mac) == -1);
	CHECK(parse_mac("t", "02:dc:00:01:0a:f", mac) == -1);
	CHECK(parse_mac("t", "2:dc:00:01:0a:ff", mac) == -1);
	CHECK(parse_mac("t", "02-dc-00-01-0a-ff", mac) == -1);
	CHECK(parse_mac("t", "02:dc:00:01:0a:fg", mac) == -1);
	CHECK(parse_mac("t", "", mac) == -1);
}

/* --- frame.c: frames built byte by byte ---------------------------------- */

static const struct frame_match match = { .port = 9000, .ethertype = 0x88b5 };
static const struct payload sample = { .flow = 3, .seq = 42,
				       .so_priority = 5 };

static size_t put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return 2;
}

/* Ethernet header with optional in-band tags (tci < 0: none). */
static size_t eth(uint8_t *f, int tci, int inner_tci, uint16_t proto)
{
	size_t n = 12;

	memset(f, 0xab, 12);
	if (tci >= 0) {
		n += put16(f + n, 0x8100);
		n += put16(f + n, (uint16_t)tci);
	}
	if (inner_tci >= 0) {
		n += put16(f + n, 0x8100);
		n += put16(f + n, (uint16_t)inner_tci);
	}
	n += put16(f + n, proto);
	return n;
}

static size_t udp(uint8_t *u, uint16_t port, size_t plen)
{
	put16(u, 40000);
	put16(u + 2, port);
	put16(u + 4, (uint16_t)(8 + plen));
	put16(u + 6, 0);
	payload_put(u + 8, &sample);
	memset(u + 8 + PAYLOAD_LEN, 0, plen - PAYLOAD_LEN);
	return 8 + plen;
}

/* IPv4/UDP with ihl 32-bit words of header; frag is the flags+offset. */
static size_t ipv4(uint8_t *f, int tci, int ihl, uint16_t port,
		   uint16_t frag)
{
	size_t n = eth(f, tci, -1, 0x0800), hl = (size_t)ihl * 4;
	uint8_t *ip = f + n;
	size_t ulen;

	memset(ip, 0, hl);
	ip[0] = (uint8_t)(0x40 | ihl);
	ip[8] = 64;
	ip[9] = 17;
	put16(ip + 6, frag);
	if (hl > 20)
		ip[20] = 1;	/* NOP options */
	ulen = udp(ip + hl, port, 64);
	put16(ip + 2, (uint16_t)(hl + ulen));
	return n + hl + ulen;
}

static void test_frame_ipv4_udp_untagged(void)
{
	uint8_t f[256];
	struct frame_info fi = { 0 };
	size_t n = ipv4(f, -1, 5, 9000, 0x4000);	/* DF set */

	CHECK(frame_parse(f, n, -1, &match, &fi) == 0);
	CHECK(fi.pcp == FRAME_UNTAGGED && fi.vid == -1);
	CHECK(fi.payload.flow == 3 && fi.payload.seq == 42 &&
	      fi.payload.so_priority == 5);
	/* Ethernet padding after the datagram is not part of it */
	memset(f + n, 0, 20);
	CHECK(frame_parse(f, n + 20, -1, &match, &fi) == 0);
	CHECK(frame_parse(f, n - 1, -1, &match, &fi) == -1);
}

static void test_frame_ipv4_options_are_skipped_by_ihl(void)
{
	uint8_t f[256];
	struct frame_info fi = { 0 };
	size_t n = ipv4(f, -1, 7, 9000, 0);

	CHECK(frame_parse(f, n, -1, &match, &fi) == 0 && fi.payload.seq == 42);
}

static void test_frame_other_port_or_fragment_is_not_ours(void)
{
	uint8_t f[256];
	struct frame_info fi = { 0 };
	size_t n;

	n = ipv4(f, -1, 5, 9001, 0);
	CHECK(frame_parse(f, n, -1, &match, &fi) == -1);
	n = ipv4(f, -1, 5, 9000, 0x2000);	/* MF: first fragment */
	CHECK(frame_parse(f, n, -1, &match, &fi) == -1);
	n = ipv4(f, -1, 5, 9000, 0x0010);	/* a later fragment */
	CHECK(frame_parse(f, n, -1, &match, &fi) == -1);
}

static void test_frame_ipv6_udp(void)
{
	uint8_t f[256];
	struct frame_info fi = { 0 };
	size_t n = eth(f, -1, -1, 0x86dd), ulen;
	uint8_t *ip = f + n;

	memset(ip, 0, 40);
	ip[0] = 0x60;
	ip[6] = 17;
	ip[7] = 64;
	ulen = udp(ip + 40, 9000, 100);
	put16(ip + 4, (uint16_t)ulen);
	n += 40 + ulen;
	CHECK(frame_parse(f, n, -1, &match, &fi) == 0 && fi.payload.seq == 42);
	ip[6] = 0;	/* hop-by-hop options first: not followed */
	CHECK(frame_parse(f, n, -1, &match, &fi) == -1);
}

static void test_frame_raw_ethertype(void)
{
	uint8_t f[128];
	struct frame_info fi = { 0 };
	size_t n = eth(f, -1, -1, 0x88b5);

	payload_put(f + n, &sample);
	n += PAYLOAD_LEN;
	CHECK(frame_parse(f, n, -1, &match, &fi) == 0 && fi.payload.flow == 3);
	CHECK(frame_parse(f, n - 1, -1, &match, &fi) == -1);
	f[14] ^= 1;	/* magic */
	CHECK(frame_parse(f, n, -1, &match, &fi) == -1);
}

static void test_frame_tag_from_auxdata(void)
{
	uint8_t f[256];
	struct frame_info fi = { 0 };
	size_t n = ipv4(f, -1, 5, 9000, 0);

	CHECK(frame_parse(f, n, 5 << 13 | 100, &match, &fi) == 0);
	CHECK(fi.pcp == 5 && fi.vid == 100);
	/* TCI 0 (priority-tagged, VID 0) is a tag, not "untagged" */
	CHECK(frame_parse(f, n, 0, &match, &fi) == 0);
	CHECK(fi.pcp == 0 && fi.vid == 0);
}

static void test_frame_tag_left_in_band(void)
{
	uint8_t f[256];
	struct frame_info fi = { 0 };
	size_t n = ipv4(f, 3 << 13 | 200, 5, 9000, 0);

	CHECK(frame_parse(f, n, -1, &match, &fi) == 0);
	CHECK(fi.pcp == 3 && fi.vid == 200);
}

static void test_frame_inner_tag_under_auxdata_is_skipped(void)
{
	uint8_t f[256];
	struct frame_info fi = { 0 };
	size_t n = eth(f, 1 << 13 | 7, -1, 0x88b5);

	payload_put(f + n, &sample);
	n += PAYLOAD_LEN;
	CHECK(frame_parse(f, n, 6 << 13 | 100, &match, &fi) == 0);
	CHECK(fi.pcp == 6 && fi.vid == 100);
}

int main(void)
{
	/* The parsers explain each refusal on stderr; here refusals are
	 * expected, and a failed CHECK reports on stdout. */
	if (!freopen("/dev/null", "w", stderr))
		return 1;
	test_million_in_order_are_all_received();
	test_loss_duplicates_and_reordering_are_told_apart();
	test_numbers_across_a_page_boundary();
	test_missing_start_counts_as_lost();
	test_empty_has_no_loss();
	test_huge_number_is_sparse_and_limit_refused();
	test_payload_roundtrip();
	test_parse_u64_is_range_checked();
	test_parse_seconds();
	test_parse_mac();
	test_frame_ipv4_udp_untagged();
	test_frame_ipv4_options_are_skipped_by_ihl();
	test_frame_other_port_or_fragment_is_not_ours();
	test_frame_ipv6_udp();
	test_frame_raw_ethertype();
	test_frame_tag_from_auxdata();
	test_frame_tag_left_in_band();
	test_frame_inner_tag_under_auxdata_is_skipped();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
