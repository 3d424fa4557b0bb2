"""The import graph of a package, read with ast (no module is imported): every import of every
module, those inside functions included, as an edge; and what is wrong with a graph whose
nodes have ranks (an edge up a rank, a cycle). tests/runtime/test_layers.py (the runtime's
layers) and tests/generators/test_packages.py (the package's) check with it."""
import ast
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

Edge = Tuple[str, str, int]


def modules(root: Path, pkg: str) -> Dict[str, Path]:
    """{dotted name: file} of every module of the package ``pkg`` in the folder ``root``."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([pkg] + parts)] = f
    return out


def _is_type_checking(node) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and \
        node.test.id == "TYPE_CHECKING"


def imports(name: str, path: Path, known) -> List[Tuple[str, int, bool, str]]:
    """(imported module, line, inside a function, top-level package) of every import of one
    module; relative imports resolved, ``from pkg import submodule`` to the submodule."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out = []

    def walk(node, infn):
        for ch in ast.iter_child_nodes(node):
            if _is_type_checking(ch):
                continue                         # annotations only: no import at run time
            fn = infn or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(ch, ast.Import):
                for a in ch.names:
                    out.append((a.name, ch.lineno, fn, a.name.split(".")[0]))
            elif isinstance(ch, ast.ImportFrom):
                if ch.level:
                    mod = ".".join(base[:len(base) - ch.level + 1] + ([ch.module] if ch.module
                                                                       else []))
                else:
                    mod = ch.module
                for a in ch.names:
                    sub = f"{mod}.{a.name}"
                    out.append((sub if sub in known else mod, ch.lineno, fn, mod.split(".")[0]))
            walk(ch, fn)
    walk(ast.parse(path.read_text()), False)
    return out


def edges(mods: Dict[str, Path], pkg: str) -> List[Edge]:
    """(importer, imported, line) between modules of the package ``pkg``."""
    return [(name, target, line) for name, path in mods.items()
            for target, line, _, _ in imports(name, path, mods)
            if target == pkg or target.startswith(pkg + ".")]


def check(graph: List[Edge], rank: Callable[[str], int]) -> List[str]:
    """What is wrong with an import graph: edges that run up a layer, and cycles."""
    bad = [f"{a} (line {ln}) imports {b}: up from layer {rank(a)} to {rank(b)}"
           for a, b, ln in graph if rank(b) > rank(a)]
    succ: Dict[str, List[str]] = {}
    for a, b, _ in graph:
        if a != b:
            succ.setdefault(a, []).append(b)
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(n) -> Optional[List[str]]:
        state[n] = 1
        stack.append(n)
        for m in succ.get(n, ()):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(succ):
        if n not in state:
            c = visit(n)
            if c:
                bad.append("cycle: " + " -> ".join(c))
                break
    return bad
