# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# demo_getaddrinfo.py - rdma_getaddrinfo through pyverbs (which links librdmacm.so.1, so
# LD_LIBRARY_PATH picks ours). Prints what each call returned; never raises.
import pyverbs.cmid as cmid
try:
    import pyverbs.cm_enums as e
    TCP, PASSIVE = e.RDMA_PS_TCP, e.RAI_PASSIVE
except Exception:
    TCP, PASSIVE = 0x0106, 1
cases = [
    ("active  dst=192.0.2.2:7471 src=192.0.2.1", dict(src="192.0.2.1", dst="192.0.2.2", dst_service="7471", port_space=TCP)),
    ("active  dst=[2001:db8::2]:7471", dict(dst="2001:db8::2", dst_service="7471", port_space=TCP)),
    ("passive src=192.0.2.1:7471 (RAI_PASSIVE)", dict(src="192.0.2.1", src_service="7471", port_space=TCP, flags=PASSIVE)),
    ("unresolvable dst=no.such.host.invalid", dict(dst="no.such.host.invalid", dst_service="7471", port_space=TCP)),
]
for label, kw in cases:
    try:
        ai = cmid.AddrInfo(**kw)
        print(f"rdma_getaddrinfo {label}: OK")
        ai.close()
    except Exception as ex:
        print(f"rdma_getaddrinfo {label}: {type(ex).__name__}: {ex}")
