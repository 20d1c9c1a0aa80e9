#!/usr/bin/env python3
"""Fails when the engine's top-level modules form an import cycle other than the accepted shard <-> proxy pair.

An edge A -> B is any `crate::B` path in a non-test line of a file under module A (`engine/src/A.rs` or
`engine/src/A/**`). Comments, doc comments and `#[cfg(test)]` modules are left out. Prints the layer order
(sinks first) on success; with --edges, every edge with one file:line that makes it.

Also fails when a module other than those of XDP_USERS names the `corelb_xdp` crate (the XDP data path's program
and loader): the config reads `listen ... xdp=` (config/build/xdp.rs), the `l4` control thread drives the program,
and everything else reaches the data path through `l4`.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine", "src")
ACCEPTED = {frozenset({"proxy", "shard"})}
XDP_USERS = {"config", "l4"}
XDP_PATH = re.compile(r"\bcorelb_xdp::")
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
USE_GROUP = re.compile(r"\buse\s+crate::\{([^;]*)\}", re.S)


def top_module(rel):
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def blank_literals(text):
    """Replaces comments, string and char literals by spaces, keeping line breaks, so braces can be counted."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', text[i:i + 40]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            j = text.find('"' + hashes, i + len(hashes) + 2)
            j = n if j < 0 else j + 1 + len(hashes)
        elif c == '"' or (c == "b" and text.startswith('b"', i)):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:])
            j = i + len(m.group(0)) if m else i + 1
            if not m:
                out.append(c)
                i = j
                continue
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


def code_lines(text):
    """Yields (line number, code) with comments, literals and #[cfg(test)] items removed."""
    lines = blank_literals(text).split("\n")
    skip_depth = None
    depth = 0
    pending_test = False
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if skip_depth is None and stripped.startswith("#[cfg(test)]"):
            pending_test = True
            continue
        opens, closes = line.count("{"), line.count("}")
        if pending_test:
            pending_test = False
            if re.match(r"(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*;", stripped):
                continue
            if opens:
                skip_depth = depth
                depth += opens - closes
                if depth <= skip_depth:
                    skip_depth = None
                continue
        depth += opens - closes
        if skip_depth is not None:
            if depth <= skip_depth:
                skip_depth = None
            continue
        yield n, line


def graph(root=ROOT):
    edges = {}
    modules = {f[:-3] if f.endswith(".rs") else f for f in os.listdir(root) if f != "lib.rs"}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            if rel == "lib.rs":
                continue
            src = top_module(rel)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            code = list(code_lines(text))
            joined = "\n".join(c for _, c in code)
            targets = set()
            for n, c in code:
                for m in PATH.finditer(c):
                    targets.add((m.group(1), n))
            for g in USE_GROUP.finditer(joined):
                for part in re.split(r",", g.group(1)):
                    name = part.strip().split("::")[0].strip("{} \n")
                    if re.fullmatch(r"[a-z_][a-z0-9_]*", name or ""):
                        targets.add((name, 0))
            for dst, n in targets:
                if dst != src and dst in modules:
                    edges.setdefault(src, {}).setdefault(dst, f"{os.path.join('engine/src', rel)}:{n}")
    return edges


def xdp_strays(root=ROOT):
    """file:line of each `corelb_xdp::` outside the modules of XDP_USERS (code lines only)."""
    out = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            if top_module(rel) in XDP_USERS:
                continue
            with open(path, encoding="utf-8") as fh:
                for n, c in code_lines(fh.read()):
                    if XDP_PATH.search(c):
                        out.append(f"{os.path.join('engine/src', rel)}:{n}")
    return out


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def self_test():
    """The check finds a planted cycle, and ignores test modules, comments and string literals."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        files = {
            "a.rs": "use crate::b::X;\n",
            "b/mod.rs": "// crate::c in a comment\nconst S: &str = \"crate::c\";\npub fn f() { crate::a::g() }\n",
            "c.rs": "#[cfg(test)]\nmod tests {\n    use crate::a;\n    const T: &str = \"}\";\n}\npub fn h() {}\n",
        }
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
            with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        edges = graph(d)
        got = {s: set(ds) for s, ds in edges.items()}
        want = {"a": {"b"}, "b": {"a"}}
        if got != want:
            print(f"check_layers self-test failed: edges {got}, expected {want}", file=sys.stderr)
            return 1
        nodes = set(edges) | {x for ds in edges.values() for x in ds}
        if not any(c == {"a", "b"} for c in sccs(nodes, edges)):
            print("check_layers self-test failed: the a <-> b cycle was not found", file=sys.stderr)
            return 1
    return 0


def main():
    if self_test():
        return 1
    edges = graph()
    nodes = set(edges) | {d for ds in edges.values() for d in ds}
    comps = sccs(nodes, edges)
    bad = [c for c in comps if len(c) > 1 and frozenset(c) not in ACCEPTED]
    if "--edges" in sys.argv:
        for s in sorted(edges):
            for d, where in sorted(edges[s].items()):
                print(f"{s} -> {d}  ({where})")
    strays = xdp_strays()
    for where in strays:
        print(f"corelb_xdp used outside {sorted(XDP_USERS)}: {where}", file=sys.stderr)
    if strays:
        return 1
    if bad:
        for c in bad:
            print("engine module cycle: " + " ".join(sorted(c)), file=sys.stderr)
            for s in sorted(c):
                for d, where in sorted(edges.get(s, {}).items()):
                    if d in c:
                        print(f"  {s} -> {d}  ({where})", file=sys.stderr)
        return 1
    order = " ".join("{" + ",".join(sorted(c)) + "}" if len(c) > 1 else next(iter(c)) for c in comps)
    print(f"layers ok (sinks first): {order}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
