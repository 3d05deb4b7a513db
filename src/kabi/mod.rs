// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Raw kernel ABI: the ucma command and event structures written to and
//! read from `/dev/infiniband/rdma_cm` (see the kernel's
//! `include/uapi/rdma/rdma_user_cm.h`).  Nothing outside the kernel
//! protocol layer uses these types directly.
