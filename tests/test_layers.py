"""The package's layers: imports run one way only, nobody uses another
module's _private names (STYLE.md rules 1 and 3).

    core → topology, guest → backends → lab → testing → scenarios → cli
    build: imports core only; only cli may import it

Every module is parsed (ast), never imported. A layer may import its own
package and any lower layer; topology and guest are both leaves and do not
import each other. Anywhere (tests too), ``from m import _x`` or ``m._x``
on another module is a violation.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RANK = {"core": 0, "topology": 1, "guest": 1, "backends": 2, "lab": 3,
        "testing": 4, "scenarios": 5, "cli": 6}
APART = {"build": ({"core"}, {"cli"})}   # may import, may be imported by


def _module_name(path, root):
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(importer, node, is_pkg, root):
    """What an Import/ImportFrom node brings in, as (module, private name
    or None, local name bound to a module or None) triples."""
    if isinstance(node, ast.Import):
        return [(a.name, None, a.asname or a.name.split(".")[0])
                for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = importer.split(".")
        if not is_pkg:
            pkg = pkg[:-1]
        pkg = pkg[:len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([node.module] if node.module else []))
    out = []
    for a in node.names:
        sub = f"{base}.{a.name}"
        if _is_module(root, sub):          # from pkg import module
            out.append((sub, None, a.asname or a.name))
        else:                              # from module import name
            out.append((base, a.name, None))
    return out


def _layer(module, package):
    parts = module.split(".")
    if parts[0] != package or len(parts) < 2:
        return None
    return parts[1]


def _allowed(src, dst):
    if src == dst or dst is None:
        return True
    if src in APART:
        return dst in APART[src][0]
    if dst in APART:
        return src in APART[dst][1]
    if src not in RANK or dst not in RANK:
        return False
    return RANK[dst] < RANK[src]


def check_file(path, root, package="dcblab", layered=True):
    """Violations in one file, as 'file:line: message' strings."""
    tree = ast.parse(path.read_text(), str(path))
    me = _module_name(path, root)
    is_pkg = path.name == "__init__.py"
    src = _layer(me, package) if layered else None
    shown = path.relative_to(root)
    bad, modules = [], {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for target, name, bound in _imports(me, node, is_pkg, root):
            if bound:
                modules[bound] = target
            dst = _layer(target, package)
            if layered and src and not _allowed(src, dst):
                bad.append(f"{shown}:{node.lineno}: {me} ({src}) imports "
                           f"{target} ({dst}): imports run core → topology, "
                           "guest → backends → lab → testing → scenarios → "
                           "cli; build only from cli")
            if name and _private(name) and target != me:
                bad.append(f"{shown}:{node.lineno}: {me} imports {target}'s "
                           f"private name {name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and \
                isinstance(node.value, ast.Name) and \
                node.value.id in modules and _private(node.attr):
            bad.append(f"{shown}:{node.lineno}: {me} uses "
                       f"{modules[node.value.id]}'s private name {node.attr}")
    return bad


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def _is_module(root, dotted):
    p = root.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def check_tree(root, package="dcblab", others=()):
    """Violations in ROOT/PACKAGE (layers and privates) and in the files
    ``others`` (privates only)."""
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        bad += check_file(path, root, package)
    for path in others:
        bad += check_file(path, root, package, layered=False)
    return bad


def test_the_package_keeps_its_layers_and_privates():
    others = sorted(ROOT.glob("tests/**/*.py")) + [ROOT / "conftest.py"]
    assert check_tree(ROOT, others=others) == []


def test_every_dcblab_folder_is_a_known_layer():
    found = {p.parent.name for p in (ROOT / "dcblab").glob("*/__init__.py")}
    assert found == set(RANK) | set(APART)


def test_every_module_states_all():
    missing = [str(p.relative_to(ROOT))
               for p in sorted((ROOT / "dcblab").rglob("*.py"))
               if p.name != "__main__.py" and p.parent.name != "dcblab" and
               "__all__" not in p.read_text()]
    assert missing == []


# --- the checker itself, on a synthetic tree ---------------------------------

def _tree(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for d in {p.parent for p in tmp_path.rglob("*.py")}:
        (d / "__init__.py").touch()
    return tmp_path


GOOD = {
    "dcblab/core/errors.py": "class E(Exception): pass\n",
    "dcblab/topology/model.py": "from ..core.errors import E\n",
    "dcblab/lab/lab.py": "from .. import backends\nfrom ..topology import model\n",
    "dcblab/backends/qemu.py": "def _helper(): pass\ndef run(): _helper()\n",
    "dcblab/cli/main.py": "from ..build import kernel\nfrom ..lab.lab import x\n",
    "dcblab/build/kernel.py": "from ..core import errors\n",
}


def test_checker_passes_a_tree_that_keeps_the_rules(tmp_path):
    assert check_tree(_tree(tmp_path, GOOD)) == []


@pytest.mark.parametrize("name, text, expected", [
    ("dcblab/topology/bad.py", "from ..lab import lab\n",
     "dcblab.topology.bad (topology) imports dcblab.lab.lab (lab)"),
    ("dcblab/backends/bad.py", "import dcblab.testing\n",
     "dcblab.backends.bad (backends) imports dcblab.testing (testing)"),
    ("dcblab/guest/bad.py", "from dcblab.topology import model\n",
     "dcblab.guest.bad (guest) imports dcblab.topology.model (topology)"),
    ("dcblab/lab/bad.py", "from ..build import kernel\n",
     "dcblab.lab.bad (lab) imports dcblab.build.kernel (build)"),
    ("dcblab/build/bad.py", "from ..lab import lab\n",
     "dcblab.build.bad (build) imports dcblab.lab.lab (lab)"),
], ids=["upward", "upward-absolute", "leaf-to-leaf", "build-from-lab",
        "build-imports-lab"])
def test_checker_fails_on_an_import_against_the_layers(tmp_path, name, text,
                                                       expected):
    bad = check_tree(_tree(tmp_path, {**GOOD, name: text}))
    assert len(bad) == 1 and expected in bad[0], bad


@pytest.mark.parametrize("text, expected", [
    ("from ..backends.qemu import _helper\n",
     "imports dcblab.backends.qemu's private name _helper"),
    ("from ..backends import qemu\nqemu._helper()\n",
     "uses dcblab.backends.qemu's private name _helper"),
    ("from dcblab.backends import qemu as q\nq._helper()\n",
     "uses dcblab.backends.qemu's private name _helper"),
], ids=["from-import", "attribute", "attribute-via-alias"])
def test_checker_fails_on_another_modules_private_name(tmp_path, text,
                                                       expected):
    bad = check_tree(_tree(tmp_path, {**GOOD, "dcblab/lab/bad.py": text}))
    assert len(bad) == 1 and expected in bad[0], bad


def test_checker_reads_tests_for_private_names_only(tmp_path):
    root = _tree(tmp_path, GOOD)
    t = root / "tests" / "test_x.py"
    t.parent.mkdir()
    t.write_text("from dcblab.backends import qemu\nfrom dcblab.cli import "
                 "main\nqemu._helper()\n")
    bad = check_tree(root, others=[t])
    assert len(bad) == 1 and "private name _helper" in bad[0], bad
