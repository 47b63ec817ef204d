#!/usr/bin/env python3
"""The include rules of docs/architecture.md, checked over the tree (ctest: include_rules).

  scripts/check-includes.py [--needs]

1. No two modules include each other, nor any longer cycle: a module is a file's path
   without its extension (io/hf_config.h and io/hf_config.cpp are one), and module A uses
   B when a file of A includes a header of B. The cycles not broken yet are listed, with
   their reasons, in KNOWN_CYCLES: a new one fails, and so does a listed one that is gone.
2. A room's sources reach, through every header they include (transitively), only rooms the
   room declares in CMakeLists.txt (gatedlm_room ... DEPS); its include view holds exactly
   those (so the build refuses the rest too). --needs prints what each room reaches.
   The same holds for the Python module (GATEDLM_PYTHON_ROOMS in python/CMakeLists.txt) and
   for the unit tests of a room (tests/unit/<room>/: the room and what it declares).
3. The private headers of a room (PRIVATE below) are included from that room only: not from
   another room, python/ or tests/.
Prints every breach and exits 1 if there is one.
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Headers only their own room includes: the model's saved activations and the Gated
# DeltaNet layer's parts (model/model.h says why).
PRIVATE = {"model/model_state.h", "model/gated_deltanet_parts.h"}
# Cycles allowed, each with why it is there: none since issue 35. A cycle not listed here
# is a breach, and so is a listed one that no longer exists (delete its line).
KNOWN_CYCLES = set()


def includes_of(path):
    with open(path, encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def source_files(top):
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".h", ".cpp", ".inc")):
                yield os.path.join(d, f)


def module_graph():
    graph = collections.defaultdict(set)
    for path in source_files(SRC):
        module = os.path.splitext(os.path.relpath(path, SRC))[0]
        for inc in includes_of(path):
            target = os.path.splitext(inc)[0]
            if target != module and os.path.exists(os.path.join(SRC, inc)):
                graph[module].add(target)
    return graph


def cycles(graph):
    """Every strongly connected set of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def declared_rooms():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"#[^\n]*", "", text)  # comments
    rooms = {}
    for m in re.finditer(r"gatedlm_room\((\w+)([^)]*)\)", text):
        deps = re.search(r"DEPS((?:\s+\w+)+)", m.group(2))
        found = set(deps.group(1).split()) if deps else set()
        found = {d for d in found if d not in ("LIBS", "SOURCES")}
        rooms.setdefault(m.group(1), set()).update(found)
    return rooms


def reached_rooms(files):
    """The rooms whose headers `files` reach, following headers' own includes."""
    seen, todo, rooms = set(), [], set()
    for path in files:
        todo.extend(includes_of(path))
    while todo:
        inc = todo.pop()
        header = os.path.join(SRC, inc)
        if inc in seen or not os.path.exists(header):
            continue
        seen.add(inc)
        rooms.add(inc.split("/")[0])
        todo.extend(includes_of(header))
    return rooms


def python_rooms():
    with open(os.path.join(ROOT, "python", "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"set\(GATEDLM_PYTHON_ROOMS([^)]*)\)", f.read())
    return set(m.group(1).split()) if m else set()


def consumers(rooms):
    """(name, files, rooms it may reach) for each room, the Python module and each room's tests."""
    out = [(f"room {r}", list(source_files(os.path.join(SRC, r))), rooms[r] | {r}) for r in sorted(rooms)]
    out.append(("python/", list(source_files(os.path.join(ROOT, "python", "src"))), python_rooms()))
    for r in sorted(rooms):
        tests = os.path.join(ROOT, "tests", "unit", r)
        if os.path.isdir(tests):
            out.append((f"tests/unit/{r}/", list(source_files(tests)), rooms[r] | {r}))
    return out


def main():
    problems = []
    found = cycles(module_graph())
    for group in found:
        if frozenset(group) not in KNOWN_CYCLES:
            problems.append("modules that include each other: " + " <-> ".join(group))
    for known in KNOWN_CYCLES - {frozenset(g) for g in found}:
        problems.append("a cycle listed in KNOWN_CYCLES is gone: remove " + " <-> ".join(sorted(known)))
    rooms = declared_rooms()
    for name, files, allowed in consumers(rooms):
        reached = reached_rooms(files)
        if "--needs" in sys.argv:
            print(f"{name}: {' '.join(sorted(reached))}")
        for other in sorted(reached - allowed):
            problems.append(f"{name} reaches {other}/ without declaring it")
    for top in ("src", "python", "tests"):
        for path in source_files(os.path.join(ROOT, top)):
            rel = os.path.relpath(path, ROOT)
            for inc in includes_of(path):
                if inc in PRIVATE and not rel.startswith("src/" + inc.split("/")[0] + "/"):
                    problems.append(f"{rel} includes {inc}, private to src/{inc.split('/')[0]}/")
    for p in problems:
        print(p)
    print(f"include rules: {len(problems)} breach(es)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
