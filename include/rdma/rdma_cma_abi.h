/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rdmacm-rs: the command structures of the kernel's rdma_ucm character
 * device (/dev/infiniband/rdma_cm), as librdmacm has always published
 * them.  A command is one write() of a header (command number, input and
 * output sizes in bytes) followed by the command's fields; commands that
 * answer carry the user address of a response buffer the kernel fills.
 *
 * Every structure here has the same size, field offsets and constant
 * values as rdma-core's <rdma/rdma_cma_abi.h> (checked by
 * ctest/layout-abi.c against abi/layout-abi.txt and upstream's header).
 * Applications do not need this header: the library issues the commands.
 */
#ifndef RDMA_CMA_ABI_H
#define RDMA_CMA_ABI_H

#include <linux/types.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <infiniband/sa.h>

/* The kernel ABI versions (class/misc/rdma_cm/abi_version) this library speaks. */
#define RDMA_USER_CM_MIN_ABI_VERSION	3
#define RDMA_USER_CM_MAX_ABI_VERSION	4

/* Largest private data any transport carries in a CM message. */
#define RDMA_MAX_PRIVATE_DATA		256

/* Command numbers, in the order the kernel assigns them. */
enum {
	UCMA_CMD_CREATE_ID,
	UCMA_CMD_DESTROY_ID,
	UCMA_CMD_BIND_IP,
	UCMA_CMD_RESOLVE_IP,
	UCMA_CMD_RESOLVE_ROUTE,
	UCMA_CMD_QUERY_ROUTE,
	UCMA_CMD_CONNECT,
	UCMA_CMD_LISTEN,
	UCMA_CMD_ACCEPT,
	UCMA_CMD_REJECT,
	UCMA_CMD_DISCONNECT,
	UCMA_CMD_INIT_QP_ATTR,
	UCMA_CMD_GET_EVENT,
	UCMA_CMD_GET_OPTION,
	UCMA_CMD_SET_OPTION,
	UCMA_CMD_NOTIFY,
	UCMA_CMD_JOIN_IP_MCAST,
	UCMA_CMD_LEAVE_MCAST,
	UCMA_CMD_MIGRATE_ID,
	UCMA_CMD_QUERY,
	UCMA_CMD_BIND,
	UCMA_CMD_RESOLVE_ADDR,
	UCMA_CMD_JOIN_MCAST,
	UCMA_CMD_RESOLVE_IB_SERVICE,
	UCMA_CMD_WRITE_CM_EVENT,
};

/* The header every command starts with. */
struct ucma_abi_cmd_hdr {
	__u32 cmd;
	__u16 in;		/* bytes of command after this header */
	__u16 out;		/* bytes of the response buffer */
};

struct ucma_abi_create_id {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 uid;		/* comes back in the id's events */
	__u64 response;		/* struct ucma_abi_create_id_resp * */
	__u16 ps;		/* enum rdma_port_space */
	__u8  qp_type;
	__u8  reserved[5];
};

struct ucma_abi_create_id_resp {
	__u32 id;
};

struct ucma_abi_destroy_id {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;		/* struct ucma_abi_destroy_id_resp * */
	__u32 id;
	__u32 reserved;
};

struct ucma_abi_destroy_id_resp {
	__u32 events_reported;
};

/* Legacy form of BIND: IPv4 or IPv6 only. */
struct ucma_abi_bind_ip {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	struct sockaddr_in6 addr;
	__u32 id;
};

struct ucma_abi_bind {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u16 addr_size;
	__u16 reserved;
	struct sockaddr_storage addr;
};

/* Legacy form of RESOLVE_ADDR: IPv4 or IPv6 only. */
struct ucma_abi_resolve_ip {
	__u32 cmd;
	__u16 in;
	__u16 out;
	struct sockaddr_in6 src_addr;
	struct sockaddr_in6 dst_addr;
	__u32 id;
	__u32 timeout_ms;
};

struct ucma_abi_resolve_addr {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 timeout_ms;
	__u16 src_size;
	__u16 dst_size;
	__u32 reserved;
	struct sockaddr_storage src_addr;
	struct sockaddr_storage dst_addr;
};

struct ucma_abi_resolve_route {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 timeout_ms;
};

/* What UCMA_CMD_QUERY reports (its option field). */
enum {
	UCMA_QUERY_ADDR,
	UCMA_QUERY_PATH,
	UCMA_QUERY_GID,
	UCMA_QUERY_IB_SERVICE,
};

struct ucma_abi_query {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;
	__u32 id;
	__u32 option;
};

/* Answer of UCMA_CMD_QUERY_ROUTE (legacy). */
struct ucma_abi_query_route_resp {
	__be64 node_guid;
	struct ib_user_path_rec ib_route[2];
	struct sockaddr_in6 src_addr;
	struct sockaddr_in6 dst_addr;
	__u32 num_paths;
	__u8  port_num;
	__u8  reserved[3];
	__u32 ibdev_index;
	__u32 reserved1;
};

/* Answer of UCMA_QUERY_ADDR. */
struct ucma_abi_query_addr_resp {
	__be64 node_guid;
	__u8  port_num;
	__u8  reserved;
	__be16 pkey;
	__u16 src_size;
	__u16 dst_size;
	struct sockaddr_storage src_addr;
	struct sockaddr_storage dst_addr;
	__u32 ibdev_index;
	__u32 reserved1;
};

/* Answer of UCMA_QUERY_PATH: num_paths records follow. */
struct ucma_abi_query_path_resp {
	__u32 num_paths;
	__u32 reserved;
	struct ibv_path_data path_data[0];
};

/* Connection parameters of CONNECT and ACCEPT, and of connection events. */
struct ucma_abi_conn_param {
	__u32 qp_num;
	__u32 reserved;
	__u8  private_data[RDMA_MAX_PRIVATE_DATA];
	__u8  private_data_len;
	__u8  srq;
	__u8  responder_resources;
	__u8  initiator_depth;
	__u8  flow_control;
	__u8  retry_count;
	__u8  rnr_retry_count;
	__u8  valid;
};

/* Datagram parameters of UD and multicast events. */
struct ucma_abi_ud_param {
	__u32 qp_num;
	__u32 qkey;
	struct ib_uverbs_ah_attr ah_attr;
	__u8  private_data[RDMA_MAX_PRIVATE_DATA];
	__u8  private_data_len;
	__u8  reserved[7];
	__u8  reserved2[4];	/* pads the size to a multiple of 8 on every ABI */
};

/* Enhanced connection establishment: vendor and attribute modifier. */
struct ucma_abi_ece {
	__u32 vendor_id;
	__u32 attr_mod;
};

struct ucma_abi_connect {
	__u32 cmd;
	__u16 in;
	__u16 out;
	struct ucma_abi_conn_param conn_param;
	__u32 id;
	__u32 reserved;
	struct ucma_abi_ece ece;
};

struct ucma_abi_listen {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 backlog;
};

struct ucma_abi_accept {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 uid;
	struct ucma_abi_conn_param conn_param;
	__u32 id;
	__u32 reserved;
	struct ucma_abi_ece ece;
};

struct ucma_abi_reject {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u8  private_data_len;
	__u8  reason;		/* ECE rejection reason */
	__u8  reserved[2];
	__u8  private_data[RDMA_MAX_PRIVATE_DATA];
};

struct ucma_abi_disconnect {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
};

struct ucma_abi_init_qp_attr {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;		/* struct ib_uverbs_qp_attr * */
	__u32 id;
	__u32 qp_state;
};

struct ucma_abi_notify {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 event;
};

/* Legacy form of JOIN_MCAST: IPv4 or IPv6 groups only. */
struct ucma_abi_join_ip_mcast {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;		/* struct ucma_abi_create_id_resp * */
	__u64 uid;
	struct sockaddr_in6 addr;
	__u32 id;
};

struct ucma_abi_join_mcast {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;		/* struct ucma_abi_create_id_resp * */
	__u64 uid;
	__u32 id;
	__u16 addr_size;
	__u16 join_flags;
	struct sockaddr_storage addr;
};

struct ucma_abi_get_event {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;		/* struct ucma_abi_event_resp * */
};

struct ucma_abi_event_resp {
	__u64 uid;
	__u32 id;
	__u32 event;
	__u32 status;
	union {
		struct ucma_abi_conn_param conn;
		struct ucma_abi_ud_param   ud;
		__u32 arg32[2];		/* RDMA_CM_EVENT_USER's argument */
	} param;
	struct ucma_abi_ece ece;
};

struct ucma_abi_set_option {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 optval;		/* user address of the value */
	__u32 id;
	__u32 level;
	__u32 optname;
	__u32 optlen;
};

struct ucma_abi_migrate_id {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u64 response;		/* struct ucma_abi_migrate_resp * */
	__u32 id;
	__u32 fd;		/* the event channel the id moves to */
};

struct ucma_abi_migrate_resp {
	__u32 events_reported;
};

/* IB service resolution (rdma_resolve_addrinfo). */
enum {
	UCMA_IB_SERVICE_FLAG_ID = 1 << 0,
	UCMA_IB_SERVICE_FLAG_NAME = 1 << 1,
};

#define UCMA_IB_SERVICE_NAME_SIZE 64

struct ucma_abi_ib_service {
	__u64 service_id;
	__u8  service_name[UCMA_IB_SERVICE_NAME_SIZE];
	__u32 flags;		/* UCMA_IB_SERVICE_FLAG_* */
	__u32 reserved;
};

struct ucma_abi_resolve_ib_service {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	struct ucma_abi_ib_service ibs;
};

/* One service record of an UCMA_QUERY_IB_SERVICE answer (network order). */
struct ucma_user_service_rec {
	__be64 id;
	__u8   gid[16];
	__be16 pkey;
	__u8   reserved[2];
	__be32 lease;
	__u8   key[16];
	__u8   name[64];
	__u8   data_8[16];
	__be16 data_16[8];
	__be32 data_32[4];
	__be64 data_64[2];
};

struct ucma_abi_query_ib_service_resp {
	__u32 num_service_recs;
	struct ucma_user_service_rec recs[];
};

/* Queues an event of the application's on an id (rdma_write_cm_event). */
struct ucma_abi_write_cm_event {
	__u32 cmd;
	__u16 in;
	__u16 out;
	__u32 id;
	__u32 reserved;
	__u32 event;
	__u32 status;
	union {
		struct ucma_abi_conn_param conn;
		struct ucma_abi_ud_param   ud;
		__u64 arg;
	} param;
};

#endif /* RDMA_CMA_ABI_H */
