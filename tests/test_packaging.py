"""pyproject.toml: dcblab installs offline, editable, with Debian's pip
and setuptools (no PyPI), into a venv that sees Debian's packages; then
pytest run from a directory outside the checkout loads the plugin by its
entry point (no -p, no PYTHONPATH, no conftest): its fixtures and
options are there, and so is the `dcblab` command."""

import subprocess
import sys

from dcblab.core.paths import ROOT


def _run(argv, cwd, timeout=300):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def test_editable_install_gives_pytest_the_plugin_from_anywhere(tmp_path):
    venv, user = tmp_path / "venv", tmp_path / "mine"
    user.mkdir()
    r = _run([sys.executable, "-m", "venv", "--system-site-packages",
              str(venv)], tmp_path)
    assert r.returncode == 0, r.stderr
    py = str(venv / "bin" / "python")
    r = _run([py, "-m", "pip", "install", "-q", "--no-index",
              "--no-build-isolation", "-e", str(ROOT)], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    (user / "test_mine.py").write_text("def test_x(lab):\n    pass\n")
    r = _run([py, "-m", "pytest", "-p", "no:cacheprovider", "--fixtures",
              "-q"], user)
    assert r.returncode == 0, r.stdout + r.stderr
    listed = {line.split()[0] for line in r.stdout.splitlines()
              if line and not line[0].isspace()}
    assert {"lab", "fabric", "artefact"} <= listed, r.stdout
    r = _run([py, "-m", "pytest", "-p", "no:cacheprovider", "--help"], user)
    assert "--dcblab-backend" in r.stdout and "--dcblab-artefacts" in \
        r.stdout, r.stdout[-2000:]
    r = _run([str(venv / "bin" / "dcblab"), "test", "--version"], user)
    assert r.returncode == 0 and "pytest" in r.stdout + r.stderr, r.stderr
