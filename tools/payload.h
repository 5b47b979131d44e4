/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The payload priosend puts in every frame and priosink reads back, in
 * network byte order, at the start of the UDP payload or right after the
 * Ethernet header in raw mode.
 */
#ifndef DCBLAB_PAYLOAD_H
#define DCBLAB_PAYLOAD_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

#define PAYLOAD_MAGIC 0x44434231u	/* "DCB1" */
#define PAYLOAD_LEN 24
#define DEFAULT_PORT 9000
#define DEFAULT_ETHERTYPE 0x88b5	/* IEEE 802 local experimental */

/*
 * The flow ids priosend picks when not given one: FLOW_AUTO_MIN and up,
 * from a random number drawn for each run, so that two senders started
 * without --flow are told apart at the sink (birthday odds: two runs
 * share one with probability 1 in 4.3e9), and never take the small ids
 * a user gives by hand.
 */
#define FLOW_AUTO_MIN 65536u

static inline uint32_t flow_auto(uint32_t random)
{
	return FLOW_AUTO_MIN + random % (UINT32_MAX - FLOW_AUTO_MIN + 1);
}

struct payload {
	uint32_t flow;
	uint64_t seq;
	uint32_t so_priority;
};

static inline void payload_put(uint8_t *buf, const struct payload *p)
{
	uint32_t w32;
	uint64_t w64;

	w32 = htobe32(PAYLOAD_MAGIC);
	memcpy(buf, &w32, 4);
	w32 = htobe32(p->flow);
	memcpy(buf + 4, &w32, 4);
	w64 = htobe64(p->seq);
	memcpy(buf + 8, &w64, 8);
	w32 = htobe32(p->so_priority);
	memcpy(buf + 16, &w32, 4);
	memset(buf + 20, 0, 4);
}

/* 0 and *p filled when buf holds a payload, -1 otherwise. */
static inline int payload_get(const uint8_t *buf, size_t len,
			      struct payload *p)
{
	uint32_t w32;
	uint64_t w64;

	if (len < PAYLOAD_LEN)
		return -1;
	memcpy(&w32, buf, 4);
	if (be32toh(w32) != PAYLOAD_MAGIC)
		return -1;
	memcpy(&w32, buf + 4, 4);
	p->flow = be32toh(w32);
	memcpy(&w64, buf + 8, 8);
	p->seq = be64toh(w64);
	memcpy(&w32, buf + 16, 4);
	p->so_priority = be32toh(w32);
	return 0;
}

#endif
