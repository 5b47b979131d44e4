// SPDX-License-Identifier: GPL-2.0
/* Unit tests of seqtrack.c and payload.h. */
#include "check.h"
#include "payload.h"
#include "seqtrack.h"

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

void test_seqtrack(void)
{
	test_in_order();
	test_loss_dup_reorder();
	test_empty_has_no_loss();
	test_payload_roundtrip();
}
