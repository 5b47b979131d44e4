// SPDX-License-Identifier: GPL-2.0
/* Unit tests of seqtrack.c, parse.c and payload.h; run by `make check`. */
#include "parse.h"
#include "payload.h"
#include "seqtrack.h"

#include <stdio.h>

static int passed, failed;

#define CHECK(cond) do {						\
	if (cond) {							\
		passed++;						\
	} else {							\
		failed++;						\
		fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__,	\
			__LINE__, #cond);				\
	}								\
} while (0)

static void test_in_order(void)
{
	struct seqtrack t;

	seqtrack_init(&t);
	for (uint64_t s = 0; s < 1000000; s++)
		seqtrack_add(&t, s);
	CHECK(t.received == 1000000);
	CHECK(seqtrack_lost(&t) == 0);
	CHECK(t.duplicates == 0 && t.reordered == 0);
	seqtrack_free(&t);
}

static void test_loss_dup_reorder(void)
{
	struct seqtrack t;
	const uint64_t seqs[] = { 0, 1, 3, 2, 2, 6, 5 };

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

static void test_empty_has_no_loss(void)
{
	struct seqtrack t;

	seqtrack_init(&t);
	CHECK(seqtrack_lost(&t) == 0 && t.received == 0);
}

static void test_payload_roundtrip(void)
{
	uint8_t buf[PAYLOAD_LEN];
	struct payload in = { .flow = 7, .seq = 1ull << 40, .so_priority = 6 };
	struct payload out;

	payload_put(buf, &in);
	CHECK(buf[0] == 'D' && buf[3] == '1');
	CHECK(payload_get(buf, sizeof(buf), &out) == 0);
	CHECK(out.flow == 7 && out.seq == 1ull << 40 && out.so_priority == 6);
	CHECK(payload_get(buf, PAYLOAD_LEN - 1, &out) == -1);
	buf[0] = 'X';
	CHECK(payload_get(buf, sizeof(buf), &out) == -1);
}

static void test_parse(void)
{
	uint64_t v;
	uint8_t mac[6];

	CHECK(parse_u64("t", "0x88b5", 0, 0xffff, &v) == 0 && v == 0x88b5);
	CHECK(parse_u64("t", "-1", 0, 10, &v) == -1);
	CHECK(parse_u64("t", "11", 0, 10, &v) == -1);
	CHECK(parse_u64("t", "5x", 0, 10, &v) == -1);
	CHECK(parse_u64("t", "", 0, 10, &v) == -1);
	CHECK(parse_mac("t", "02:dc:00:01:0a:ff", mac) == 0 && mac[5] == 0xff);
	CHECK(parse_mac("t", "02:dc:00:01:0a", mac) == -1);
	CHECK(parse_mac("t", "02:dc:00:01:0a:ff:00", mac) == -1);
}

int main(void)
{
	test_in_order();
	test_loss_dup_reorder();
	test_empty_has_no_loss();
	test_payload_roundtrip();
	test_parse();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
