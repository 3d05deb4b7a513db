/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rdmacm-rs: the message format of the ibacm daemon (InfiniBand address
 * and route resolution service), as librdmacm has always published it.
 * rdma_getaddrinfo() asks a running ibacm for addresses and path records
 * through a unix socket (<rundir>/ibacm.sock) or the TCP port it writes to
 * <rundir>/ibacm.port.
 *
 * Every structure here has the same size, field offsets and constant
 * values as rdma-core's <infiniband/acm.h> (checked by ctest/layout-abi.c
 * against abi/layout-abi.txt).  Byte order: in ACM_OP_RESOLVE messages
 * (local clients only) the header and entry fields are in host order and
 * the addresses and path records in network order; performance and
 * endpoint query messages are entirely in network order.
 */
#ifndef ACM_H
#define ACM_H

#include <infiniband/verbs.h>
#include <infiniband/sa.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACM_VERSION             1

/* acm_hdr.opcode: an operation, or'ed with ACM_OP_ACK in answers. */
#define ACM_OP_MASK             0x0F
#define ACM_OP_RESOLVE          0x01
#define ACM_OP_PERF_QUERY       0x02
#define ACM_OP_EP_QUERY         0x03
#define ACM_OP_ACK              0x80

/* acm_hdr.status of an answer. */
#define ACM_STATUS_SUCCESS      0
#define ACM_STATUS_ENOMEM       1
#define ACM_STATUS_EINVAL       2
#define ACM_STATUS_ENODATA      3
#define ACM_STATUS_ENOTCONN     5
#define ACM_STATUS_ETIMEDOUT    6
#define ACM_STATUS_ESRCADDR     7
#define ACM_STATUS_ESRCTYPE     8
#define ACM_STATUS_EDESTADDR    9
#define ACM_STATUS_EDESTTYPE    10

/* acm_ep_addr_data.flags of a resolve request. */
#define ACM_FLAGS_QUERY_SA      (1<<31)	/* ask the SA, not the cache */
#define ACM_FLAGS_NODELAY       (1<<30)	/* answer at once, even incomplete */

#define ACM_MSG_HDR_LENGTH      16	/* sizeof(struct acm_hdr) */
#define ACM_MAX_ADDRESS         64
#define ACM_MSG_EP_LENGTH       72	/* sizeof(struct acm_ep_addr_data) */
#define ACM_MAX_PROV_NAME       64

/*
 * Room for eight entries: a source, a destination and up to six path
 * records (the CM's primary and alternate paths and the data paths in
 * both directions).
 */
#define ACM_MSG_DATA_LENGTH     (ACM_MSG_EP_LENGTH * 8)

/* Names for acm_hdr.data[] in resolve messages. */
#define src_out     data[0]
#define src_index   data[1]
#define dst_index   data[2]

struct acm_hdr {
	uint8_t                 version;	/* ACM_VERSION */
	uint8_t                 opcode;
	uint8_t                 status;
	uint8_t                 data[3];
	uint16_t                length;		/* of the whole message */
	uint64_t                tid;		/* echoed in the answer */
};

/* acm_ep_addr_data.type: what info holds. */
#define ACM_EP_INFO_NAME        0x0001
#define ACM_EP_INFO_ADDRESS_IP  0x0002
#define ACM_EP_INFO_ADDRESS_IP6 0x0003
#define ACM_EP_INFO_PATH        0x0010

union acm_ep_info {
	uint8_t                 addr[ACM_MAX_ADDRESS];
	uint8_t                 name[ACM_MAX_ADDRESS];
	struct ibv_path_record  path;
};

/* acm_ep_addr_data.flags: which end an address entry names. */
#define ACM_EP_FLAG_SOURCE      (1<<0)
#define ACM_EP_FLAG_DEST        (1<<1)

struct acm_ep_addr_data {
	uint32_t                flags;
	uint16_t                type;		/* ACM_EP_INFO_* */
	uint16_t                reserved;
	union acm_ep_info       info;
};

/* ACM_OP_RESOLVE: the header, then address and path entries. */
struct acm_resolve_msg {
	struct acm_hdr          hdr;
	struct acm_ep_addr_data data[];
};

/* The counters of an ACM_OP_PERF_QUERY answer, in this order. */
enum {
	ACM_CNTR_ERROR,
	ACM_CNTR_RESOLVE,
	ACM_CNTR_NODATA,
	ACM_CNTR_ADDR_QUERY,
	ACM_CNTR_ADDR_CACHE,
	ACM_CNTR_ROUTE_QUERY,
	ACM_CNTR_ROUTE_CACHE,
	ACM_MAX_COUNTER
};

struct acm_perf_msg {
	struct acm_hdr          hdr;
	uint64_t                data[];
};

/* One endpoint of the daemon (ACM_OP_EP_QUERY), with addr_cnt addresses. */
struct acm_ep_config_data {
	uint64_t                dev_guid;
	uint8_t                 port_num;
	uint8_t                 phys_port_cnt;
	uint8_t                 rsvd[2];
	uint16_t                pkey;
	uint16_t                addr_cnt;
	uint8_t                 prov_name[ACM_MAX_PROV_NAME];
	union acm_ep_info       addrs[];
};

struct acm_ep_query_msg {
	struct acm_hdr             hdr;
	struct acm_ep_config_data  data[];
};

/* A message of any kind, at its largest. */
struct acm_msg {
	struct acm_hdr                  hdr;
	union {
		uint8_t                 data[ACM_MSG_DATA_LENGTH];
		struct acm_ep_addr_data resolve_data[0];
		uint64_t                perf_data[0];
		struct acm_ep_config_data ep_data;
	};
};

#ifdef __cplusplus
}
#endif

#endif /* ACM_H */
