# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# callgrind_profile.py: reads a callgrind profile (callgrind's own format, with or without
# --dump-instr) for the scripts beside it (callgrind-self.py, callgrind-lines.py, hot-symbols.py).
import re, collections


def name(v, table):
    """A compressed name "(id) name" (recorded in `table`), or "(id)" (looked up there)."""
    m = re.match(r'\((\d+)\)\s*(.*)', v)
    if not m:
        return v
    if m.group(2):
        table[m.group(1)] = m.group(2)
    return table.get(m.group(1), '?')


class Profile:
    """Per function: self instructions (`selfc`), times called (`calls`), its object (`obj`);
    per caller -> callee edge: inclusive instructions (`incl`)."""

    def __init__(self, path):
        self.selfc, self.calls, self.incl = collections.Counter(), collections.Counter(), collections.Counter()
        self.obj = {}
        # compressed names "(id) name", then "(id)": one table per kind (files, functions and
        # objects count their ids separately)
        fns, objs, files = {}, {}, {}
        cur = ob = callee = cob = None
        npos = 1
        edge = False
        for line in open(path):
            line = line.rstrip('\n')
            key, eq, val = line.partition('=')
            if eq and key in ('ob', 'cob', 'fn', 'cfn', 'fl', 'fi', 'fe', 'cfi', 'cfl', 'calls'):
                if key == 'ob': ob = name(val, objs)
                elif key == 'cob': cob = name(val, objs)
                elif key == 'fn': cur = name(val, fns); self.obj[cur] = ob
                elif key == 'cfn': callee = name(val, fns); self.obj.setdefault(callee, cob or ob)
                elif key == 'calls': self.calls[callee] += int(val.split()[0]); edge = True; cob = None
                else: name(val, files)
                continue
            if line.startswith('positions:'):
                # one column per position ("line", or "instr line" with --dump-instr), then the cost
                npos = len(line.split()) - 1
                continue
            if line and (line[0].isdigit() or line[0] in '+-*'):
                parts = line.split()
                if len(parts) < npos + 1:
                    continue
                c = int(parts[npos])
                if edge:
                    edge = False
                    self.incl[(cur, callee)] += c
                else:
                    self.selfc[cur] += c
