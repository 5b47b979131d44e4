// SPDX-License-Identifier: GPL-2.0
#include "frame.h"

#define ETH_HLEN 14
#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
#define ETHERTYPE_8021Q 0x8100
#define ETHERTYPE_8021AD 0x88a8
#define IPPROTO_UDP_ 17
#define UDP_HLEN 8

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The UDP payload at udp (left bytes of the IP payload) if it goes to port. */
static int udp_payload(const uint8_t *udp, size_t left, uint16_t port,
		       struct payload *p)
{
	size_t ulen;

	if (left < UDP_HLEN || get16(udp + 2) != port)
		return -1;
	ulen = get16(udp + 4);
	if (ulen < UDP_HLEN || ulen > left)
		return -1;
	return payload_get(udp + UDP_HLEN, ulen - UDP_HLEN, p);
}

static int ipv4_payload(const uint8_t *ip, size_t len, uint16_t port,
			struct payload *p)
{
	size_t ihl, tot;

	if (len < 20 || ip[0] >> 4 != 4 || ip[9] != IPPROTO_UDP_)
		return -1;
	ihl = (size_t)(ip[0] & 0xf) * 4;
	tot = get16(ip + 2);
	/* Link padding may follow tot; anything shorter is malformed. */
	if (ihl < 20 || tot < ihl || tot > len)
		return -1;
	/* Only whole datagrams: a fragment's payload is not ours to read. */
	if (get16(ip + 6) & 0x3fff)
		return -1;
	return udp_payload(ip + ihl, tot - ihl, port, p);
}

static int ipv6_payload(const uint8_t *ip, size_t len, uint16_t port,
			struct payload *p)
{
	size_t plen;

	if (len < 40 || ip[0] >> 4 != 6 || ip[6] != IPPROTO_UDP_)
		return -1;
	plen = get16(ip + 4);
	if (plen > len - 40)
		return -1;
	return udp_payload(ip + 40, plen, port, p);
}

int frame_parse(const uint8_t *frame, size_t len, int aux_tci,
		const struct frame_match *m, struct frame_info *fi)
{
	const uint8_t *l3 = frame + ETH_HLEN;
	int tci = aux_tci, tags = 0;
	uint16_t proto;
	size_t left;
	int ret = -1;

	if (len < ETH_HLEN)
		return -1;
	proto = get16(frame + 12);
	left = len - ETH_HLEN;
	/* A tag the kernel left in the frame: the outer one if it stripped
	 * none, else an inner (QinQ) tag that only has to be skipped. */
	while ((proto == ETHERTYPE_8021Q || proto == ETHERTYPE_8021AD) &&
	       tags < 2 && left >= 4) {
		if (tci < 0)
			tci = get16(l3);
		proto = get16(l3 + 2);
		l3 += 4;
		left -= 4;
		tags++;
	}
	if (proto == m->ethertype)
		ret = payload_get(l3, left, &fi->payload);
	if (ret < 0 && proto == ETHERTYPE_IPV4)
		ret = ipv4_payload(l3, left, m->port, &fi->payload);
	if (ret < 0 && proto == ETHERTYPE_IPV6)
		ret = ipv6_payload(l3, left, m->port, &fi->payload);
	if (ret < 0)
		return -1;
	fi->pcp = tci < 0 ? FRAME_UNTAGGED : tci >> 13;
	fi->vid = tci < 0 ? -1 : tci & 0x0fff;
	return 0;
}
