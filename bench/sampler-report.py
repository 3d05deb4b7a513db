#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# sampler-report.py [--top N] PROFILE...: where a process's CPU time went, from the samples of
# ctest/vm/preload/sampler.c (the opt-in bench section rs_prof_duplex writes them to
# build/vm-bench/suite/share/out/prof/<variant>.<end>.<round>). The profiles given are added up.
# Per object: samples taken in a system call (the address follows a syscall instruction: kernel
# time) and the rest (user time); then the functions with the most user-time samples. Functions
# are named from the guest's own libraries, unpacked once from the VM image's rootfs.cpio into
# build/sampler-guestfs (RDMACM_VM_CACHE as vm/testbed.sh), and from build/lib/librdmacm.so.1 for
# ours; a stripped library names its nearest exported symbol at best.
import bisect, collections, glob, os, subprocess, sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUEST = os.path.join(REPO, 'build', 'sampler-guestfs')
OURS = os.path.join(REPO, 'build', 'lib', 'librdmacm.so.1')


def guest_fs():
    if os.path.isdir(GUEST):
        return GUEST
    cache = os.environ.get('RDMACM_VM_CACHE', '/var/cache/rdmacm-rs-vm')
    imgs = sorted(glob.glob(os.path.join(cache, '*', 'rootfs.cpio')), key=os.path.getmtime)
    if not imgs:
        return None
    os.makedirs(GUEST)
    subprocess.run(['cpio', '-i', '-d', '--quiet', '-F', imgs[-1], 'usr/lib/x86_64-linux-gnu/*.so*',
                    'usr/lib/x86_64-linux-gnu/libibverbs/*'], cwd=GUEST, check=False)
    return GUEST


def local_copy(path, fs):
    if path.startswith('/extra/') and 'librdmacm' in path:
        return OURS
    if path.startswith('/extra/bin/'):
        p = os.path.join(REPO, 'build', 'vm-bin', os.path.basename(path))
        return p if os.path.exists(p) else None
    if fs:
        for cand in (fs + path, fs + path.replace('/lib/', '/usr/lib/', 1)):
            if os.path.exists(cand):
                return cand
    return None


class Obj:
    def __init__(self, path):
        self.data = open(path, 'rb').read()
        self.loads = []
        for l in subprocess.run(['readelf', '-lW', path], capture_output=True, text=True).stdout.splitlines():
            q = l.split()
            if q and q[0] == 'LOAD':
                self.loads.append((int(q[1], 16), int(q[2], 16), int(q[4], 16)))
        syms = []
        for flag in ([], ['-D']):
            out = subprocess.run(['nm', '-C', '--defined-only'] + flag + [path], capture_output=True, text=True).stdout
            for l in out.splitlines():
                q = l.split(' ', 2)
                if len(q) == 3 and q[1] in 'tTwWi':
                    try:
                        syms.append((int(q[0], 16), q[2]))
                    except ValueError:
                        pass
        syms.sort()
        self.addrs = [a for a, _ in syms]
        self.names = [n for _, n in syms]

    def vaddr(self, off):
        for o, v, size in self.loads:
            if o <= off < o + size:
                return v + off - o
        return off

    def in_syscall(self, off):
        return self.data[off - 2:off] == b'\x0f\x05'

    def name(self, off):
        i = bisect.bisect_right(self.addrs, self.vaddr(off)) - 1
        return self.names[i] if i >= 0 else '?'


def main(argv):
    top = 30
    if len(argv) > 2 and argv[1] == '--top':
        top = int(argv[2])
        argv = argv[2:]
    files = argv[1:]
    if not files:
        sys.exit('usage: sampler-report.py [--top N] PROFILE...')
    fs = guest_fs()
    objs = {}
    kinds = collections.Counter()
    funcs = collections.Counter()
    total = 0
    for f in files:
        pcs, maps = [], []
        for l in open(f):
            if l.startswith('PC '):
                _, pc, n = l.split()
                pcs.append((int(pc, 16), int(n)))
            elif l.startswith('MAP '):
                q = l[4:].split()
                if len(q) >= 6:
                    a, b = (int(x, 16) for x in q[0].split('-'))
                    maps.append((a, b, int(q[2], 16), q[5]))
        for pc, n in pcs:
            total += n
            m = next((x for x in maps if x[0] <= pc < x[1]), None)
            if m is None:
                kinds[('[vdso or unmapped]', '?')] += n
                continue
            a, _, off, path = m
            base = os.path.basename(path)
            if path not in objs:
                lp = local_copy(path, fs)
                objs[path] = Obj(lp) if lp else None
            o = objs[path]
            if o is None:
                kinds[(base, '?')] += n
                continue
            fo = pc - a + off
            if o.in_syscall(fo):
                kinds[(base, 'system call')] += n
            else:
                kinds[(base, 'user')] += n
                funcs[base + ': ' + o.name(fo)[:110]] += n
    print('samples %d (the kernel tick each)' % total)
    for (base, kind), n in kinds.most_common():
        print('%6d %5.1f%%  %-34s %s' % (n, 100.0 * n / total, base, kind))
    print('-- user time by function')
    for name, n in funcs.most_common(top):
        print('%6d %5.1f%%  %s' % (n, 100.0 * n / total, name))


if __name__ == '__main__':
    main(sys.argv)
