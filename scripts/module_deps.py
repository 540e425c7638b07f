#!/usr/bin/env python3
"""Top-level module dependency graph of src/ (crate:: paths outside #[cfg(test)] modules), and its cycles.
Run from the repository root: python3 scripts/module_deps.py"""
import os, re, sys, itertools
root = 'src'
mods = {}
def top(path):
    rel = os.path.relpath(path, root)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith('.rs') else first
def strip_tests(text):
    # drop from '#[cfg(test)]' followed by 'mod' to end of file (test modules sit at the end)
    m = re.search(r'#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*\{', text)
    return text[:m.start()] if m else text
def names(text):
    out = set()
    for m in re.finditer(r'crate::\{([^}]*(?:\{[^}]*\}[^}]*)*)\}', text, re.S):
        for part in re.split(r',', re.sub(r'\{[^}]*\}', '', m.group(1))):
            p = part.strip().split('::')[0].strip()
            if p: out.add(p)
    for m in re.finditer(r'crate::([a-z_][a-z0-9_]*)', text):
        out.add(m.group(1))
    return out
tops = set()
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            t = top(os.path.join(d, f))
            if t in ('lib', 'main'): continue
            tops.add(t)
edges = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p = os.path.join(d, f); t = top(p)
        if t in ('lib', 'main'): continue
        for n in names(strip_tests(open(p).read())):
            if n in tops and n != t:
                edges.setdefault(t, set()).add(n)
for t in sorted(tops):
    print(f"{t:14} -> {' '.join(sorted(edges.get(t, ())))}")
# strongly connected components (Tarjan)
index = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
sys.setrecursionlimit(10000)
def sc(v):
    index[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges.get(v, ()):
        if w not in index: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in sorted(tops):
    if v not in index: sc(v)
knots = [sorted(s) for s in sccs if len(s) > 1]
print("cycles (strongly connected groups):", knots if knots else "none")
