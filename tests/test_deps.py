"""`make deps` on a machine that lacks packages, with apt-get, dpkg-query,
update-rc.d and deb-systemd-helper replaced by fakes that record what
they were asked and play a package's postinst (enabling its daemon).

On a fresh machine the recipe once never matched " lldpad " in the list
of missing packages (one package per line), so lldpad's install was not
kept from starting and lldpad stayed enabled on the host.
"""

import os
import stat
import subprocess

import pytest

from dcblab.core.paths import ROOT

FAKES = {
    # Nothing installed: every package asked for is missing.
    "dpkg-query": "#!/bin/sh\nexit 1\n",
    "id": "#!/bin/sh\necho 0\n",
    # Records its arguments and whether policy-rc.d was there; a daemon's
    # postinst enables it (a systemd want, a sysv S link).
    "apt-get": """#!/bin/sh
echo "$*" >> "$FAKE/apt.log"
[ "$1" = install ] || exit 0
[ -e "$POLICY_RC" ] && echo "policy-rc.d present" >> "$FAKE/apt.log"
for p in "$@"; do
    # openssh-server's daemon is ssh (ssh.service, init.d/ssh).
    case $p in lldpad|qemu-guest-agent) d=$p;; openssh-server) d=ssh;;
        *) continue;;
    esac
    mkdir -p "$SYSCONF/systemd/system/multi-user.target.wants" \\
        "$SYSCONF/rc2.d"
    ln -sf /lib/systemd/system/$d.service \\
        "$SYSCONF/systemd/system/multi-user.target.wants/$d.service"
    ln -sf ../init.d/$d "$SYSCONF/rc2.d/S01$d"
done
""",
    "update-rc.d": """#!/bin/sh
[ -n "$FAKE_BROKEN" ] && exit 0
for f in "$SYSCONF"/rc?.d/S??$1; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    mv "$f" "$(dirname "$f")/K01$1"
done
""",
    # As Debian's: does nothing unless run the way dpkg runs it.
    "deb-systemd-helper": """#!/bin/sh
[ -n "$DPKG_MAINTSCRIPT_PACKAGE" ] || { echo "not called from dpkg"; exit 1; }
[ -n "$FAKE_BROKEN" ] && exit 0
shift
for u in "$@"; do rm -f "$SYSCONF"/systemd/system/*.wants/$u; done
""",
}


@pytest.fixture
def fake(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in FAKES.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(stat.S_IRWXU)
    return tmp_path


def _deps(fake, packages, **env):
    policy, sysconf = fake / "policy-rc.d", fake / "etc"
    return subprocess.run(
        ["make", "-s", "-C", str(ROOT), "deps",
         f"DEBIAN_PACKAGES={packages}", f"POLICY_RC={policy}",
         f"SYSCONF={sysconf}"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PATH": f"{fake / 'bin'}:{os.environ['PATH']}",
             "FAKE": str(fake), "POLICY_RC": str(policy),
             "SYSCONF": str(sysconf), **env})


def test_guest_daemons_are_kept_from_starting_and_left_disabled(fake):
    r = _deps(fake, "iproute2 lldpad qemu-guest-agent")
    assert r.returncode == 0, r.stderr
    log = (fake / "apt.log").read_text().splitlines()
    assert log == ["update -q", "install -y -q --no-install-recommends "
                   "iproute2 lldpad qemu-guest-agent", "policy-rc.d present"]
    assert not (fake / "policy-rc.d").exists()
    etc = fake / "etc"
    assert sorted(p.name for p in etc.glob("systemd/system/*.wants/*")) == []
    assert sorted(p.name for p in etc.glob("rc2.d/*")) == [
        "K01lldpad", "K01qemu-guest-agent"]
    assert r.stdout.splitlines()[-2:] == [
        f"deps: {d} installed for the guest image only: not started, not "
        "enabled on this host" for d in ("lldpad", "qemu-guest-agent")]


def test_a_daemon_named_apart_from_its_package_is_left_disabled(fake):
    """openssh-server's daemon is ssh: GUEST_DAEMONS names it
    openssh-server:ssh, and deps disables ssh's units."""
    r = _deps(fake, "iproute2 openssh-server")
    assert r.returncode == 0, r.stderr
    etc = fake / "etc"
    assert list(etc.glob("systemd/system/*.wants/*")) == []
    assert sorted(p.name for p in etc.glob("rc2.d/*")) == ["K01ssh"]
    assert r.stdout.splitlines()[-1] == (
        "deps: openssh-server installed for the lab only: its service ssh "
        "not started, not enabled on this host")


def test_a_daemon_named_apart_left_enabled_fails_deps(fake):
    r = _deps(fake, "openssh-server", FAKE_BROKEN="1")
    assert r.returncode != 0
    assert "deps: ssh is still enabled on this host" in r.stderr


def test_a_daemon_left_enabled_fails_deps(fake):
    r = _deps(fake, "lldpad", FAKE_BROKEN="1")
    assert r.returncode != 0
    assert "deps: lldpad is still enabled on this host" in r.stderr


def test_no_policy_file_without_a_guest_daemon(fake):
    r = _deps(fake, "iproute2 ethtool")
    assert r.returncode == 0, r.stderr
    assert "policy-rc.d present" not in (fake / "apt.log").read_text()
    assert r.stdout.splitlines() == ["deps: installing iproute2 ethtool"]

