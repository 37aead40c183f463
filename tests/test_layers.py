"""The import graph has no cycle between modules, across packages too (import-linter's contracts,
run by `make test`, check cycles between the siblings of one package)."""

import grimp

PACKAGES = ("configs", "corpus", "pretrain", "evaluation", "slurm", "bench")


def module_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(imports.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return cycles


def test_module_cycles_are_found():
    assert module_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert module_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)
    imports = {m: {i for i in graph.find_modules_directly_imported_by(m) if i.split(".")[0] in PACKAGES}
               for m in graph.modules if m.split(".")[0] in PACKAGES}
    assert module_cycles(imports) == []
