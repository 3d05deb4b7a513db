/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * Prints the size and field offsets of every public structure, in the
 * format of abi/layout.txt.  Compiled once against upstream's installed
 * headers and once against ours (make check-layout); both outputs must
 * equal abi/layout.txt, which src/abi/cma.rs also checks, so a drift in
 * any of the three fails.
 */
#include <stddef.h>
#include <stdio.h>
#include <rdma/rdma_cma.h>
#include <infiniband/ib.h>
#include <infiniband/sa.h>

#define SIZE(t) printf("%s sizeof %zu\n", #t, sizeof(struct t))
#define OFF(t, f) printf("%s %s %zu\n", #t, #f, offsetof(struct t, f))

int main(void)
{
	SIZE(rdma_cm_id);
	OFF(rdma_cm_id, verbs); OFF(rdma_cm_id, channel); OFF(rdma_cm_id, context);
	OFF(rdma_cm_id, qp); OFF(rdma_cm_id, route); OFF(rdma_cm_id, ps);
	OFF(rdma_cm_id, port_num); OFF(rdma_cm_id, event);
	OFF(rdma_cm_id, send_cq_channel); OFF(rdma_cm_id, send_cq);
	OFF(rdma_cm_id, recv_cq_channel); OFF(rdma_cm_id, recv_cq);
	OFF(rdma_cm_id, srq); OFF(rdma_cm_id, pd); OFF(rdma_cm_id, qp_type);
	SIZE(rdma_route);
	OFF(rdma_route, addr); OFF(rdma_route, path_rec); OFF(rdma_route, num_paths);
	SIZE(rdma_addr);
	OFF(rdma_addr, src_addr); OFF(rdma_addr, dst_addr); OFF(rdma_addr, addr);
	SIZE(rdma_ib_addr);
	OFF(rdma_ib_addr, sgid); OFF(rdma_ib_addr, dgid); OFF(rdma_ib_addr, pkey);
	SIZE(rdma_event_channel);
	OFF(rdma_event_channel, fd);
	SIZE(rdma_conn_param);
	OFF(rdma_conn_param, private_data); OFF(rdma_conn_param, private_data_len);
	OFF(rdma_conn_param, responder_resources); OFF(rdma_conn_param, initiator_depth);
	OFF(rdma_conn_param, flow_control); OFF(rdma_conn_param, retry_count);
	OFF(rdma_conn_param, rnr_retry_count); OFF(rdma_conn_param, srq);
	OFF(rdma_conn_param, qp_num);
	SIZE(rdma_ud_param);
	OFF(rdma_ud_param, private_data); OFF(rdma_ud_param, private_data_len);
	OFF(rdma_ud_param, ah_attr); OFF(rdma_ud_param, qp_num); OFF(rdma_ud_param, qkey);
	SIZE(rdma_cm_event);
	OFF(rdma_cm_event, id); OFF(rdma_cm_event, listen_id); OFF(rdma_cm_event, event);
	OFF(rdma_cm_event, status); OFF(rdma_cm_event, param);
	SIZE(rdma_addrinfo);
	OFF(rdma_addrinfo, ai_flags); OFF(rdma_addrinfo, ai_family);
	OFF(rdma_addrinfo, ai_qp_type); OFF(rdma_addrinfo, ai_port_space);
	OFF(rdma_addrinfo, ai_src_len); OFF(rdma_addrinfo, ai_dst_len);
	OFF(rdma_addrinfo, ai_src_addr); OFF(rdma_addrinfo, ai_dst_addr);
	OFF(rdma_addrinfo, ai_src_canonname); OFF(rdma_addrinfo, ai_dst_canonname);
	OFF(rdma_addrinfo, ai_route_len); OFF(rdma_addrinfo, ai_route);
	OFF(rdma_addrinfo, ai_connect_len); OFF(rdma_addrinfo, ai_connect);
	OFF(rdma_addrinfo, ai_next);
	SIZE(rdma_cm_join_mc_attr_ex);
	OFF(rdma_cm_join_mc_attr_ex, comp_mask); OFF(rdma_cm_join_mc_attr_ex, join_flags);
	OFF(rdma_cm_join_mc_attr_ex, addr);
	SIZE(sockaddr_ib);
	OFF(sockaddr_ib, sib_family); OFF(sockaddr_ib, sib_pkey); OFF(sockaddr_ib, sib_flowinfo);
	OFF(sockaddr_ib, sib_addr); OFF(sockaddr_ib, sib_sid); OFF(sockaddr_ib, sib_sid_mask);
	OFF(sockaddr_ib, sib_scope_id);
	SIZE(ibv_ah_attr);
	OFF(ibv_ah_attr, grh); OFF(ibv_ah_attr, dlid); OFF(ibv_ah_attr, sl);
	OFF(ibv_ah_attr, src_path_bits); OFF(ibv_ah_attr, static_rate);
	OFF(ibv_ah_attr, is_global); OFF(ibv_ah_attr, port_num);
	SIZE(ibv_global_route);
	OFF(ibv_global_route, dgid); OFF(ibv_global_route, flow_label);
	OFF(ibv_global_route, sgid_index); OFF(ibv_global_route, hop_limit);
	OFF(ibv_global_route, traffic_class);
	SIZE(ibv_sa_path_rec);
	OFF(ibv_sa_path_rec, dgid); OFF(ibv_sa_path_rec, sgid); OFF(ibv_sa_path_rec, dlid);
	OFF(ibv_sa_path_rec, slid); OFF(ibv_sa_path_rec, raw_traffic);
	OFF(ibv_sa_path_rec, flow_label); OFF(ibv_sa_path_rec, hop_limit);
	OFF(ibv_sa_path_rec, traffic_class); OFF(ibv_sa_path_rec, reversible);
	OFF(ibv_sa_path_rec, numb_path); OFF(ibv_sa_path_rec, pkey); OFF(ibv_sa_path_rec, sl);
	OFF(ibv_sa_path_rec, mtu_selector); OFF(ibv_sa_path_rec, mtu);
	OFF(ibv_sa_path_rec, rate_selector); OFF(ibv_sa_path_rec, rate);
	OFF(ibv_sa_path_rec, packet_life_time_selector);
	OFF(ibv_sa_path_rec, packet_life_time); OFF(ibv_sa_path_rec, preference);
	SIZE(ibv_path_record);
	OFF(ibv_path_record, service_id); OFF(ibv_path_record, dgid); OFF(ibv_path_record, sgid);
	OFF(ibv_path_record, dlid); OFF(ibv_path_record, slid);
	OFF(ibv_path_record, flowlabel_hoplimit); OFF(ibv_path_record, tclass);
	OFF(ibv_path_record, reversible_numpath); OFF(ibv_path_record, pkey);
	OFF(ibv_path_record, qosclass_sl); OFF(ibv_path_record, mtu); OFF(ibv_path_record, rate);
	OFF(ibv_path_record, packetlifetime); OFF(ibv_path_record, preference);
	OFF(ibv_path_record, reserved);
	SIZE(ibv_path_data);
	OFF(ibv_path_data, flags); OFF(ibv_path_data, reserved); OFF(ibv_path_data, path);
	return 0;
}
