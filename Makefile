# dcblab: make help lists the targets.
#
# BUILD=DIR puts every generated file (kernel tree, objects, initramfs, run
# state of pytest guests) under DIR instead of ./build.
# FLAVOUR=debug builds and tests the debug kernel (KASAN, lockdep, kmemleak,
# UBSAN) instead of the lab kernel; SUITE=... narrows what `make test` runs
# (default: tests/ and the teaching labs, docs/labs/). BACKEND=libvirt runs
# the suite's labs as libvirt domains (default: qemu, or DCBLAB_BACKEND).
# PATCHES=DIR runs the suite on the series plus your own patches, KERNEL=PATH
# on a bzImage built elsewhere (docs/own-kernel.md); PYTEST_ARGS=... adds
# pytest arguments (-x, -k EXPR).

BUILD ?= $(CURDIR)/build
FLAVOUR ?= lab
SUITE ?= tests/ docs/labs/
export BUILD FLAVOUR
PY := /usr/bin/python3

# Every Debian package the project uses, host side and guest image.
DEBIAN_PACKAGES := linux-source-6.1 build-essential flex bison bc \
	libelf-dev libssl-dev cpio xz-utils lz4 quilt patch dpkg-dev \
	libmnl-dev pkg-config \
	qemu-system-x86 qemu-guest-agent busybox-static iproute2 ethtool \
	tcpdump iperf3 lldpad bash mksh util-linux ncurses-base procps git python3 \
	python3-pytest python3-ply python3-git python3-matplotlib \
	python3-sybil python3-pip python3-setuptools python3-venv nftables \
	libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients python3-libvirt \
	ibverbs-providers ibverbs-utils rdmacm-utils perftest ccache \
	openssh-server openssh-client netcat-openbsd

IMAGE := $(BUILD)/initramfs.cpio
# The guests' dcb: Debian's iproute2 source with iproute2-patches/
# (dcblab/build/iproute2.py says why).
DCB := $(BUILD)/iproute2/dcb
TOOLS_OUT := $(BUILD)/tools
TOOLS := $(TOOLS_OUT)/priosend $(TOOLS_OUT)/priosink $(TOOLS_OUT)/cgwrite \
	$(TOOLS_OUT)/dcblab-run $(TOOLS_OUT)/dcbnl-raw $(TOOLS_OUT)/dcbapp-netprio \
	$(TOOLS_OUT)/prioping $(TOOLS_OUT)/cgsockprio $(TOOLS_OUT)/cgfuzz \
	$(TOOLS_OUT)/dcbfuzz $(TOOLS_OUT)/pfcsend $(TOOLS_OUT)/pfcd \
	$(TOOLS_OUT)/rngseed $(TOOLS_OUT)/nldump
# guest-image/ holds only what goes into the image (scripts, settings,
# contents) and mkinitramfs itself.
IMAGE_INPUTS := $(wildcard guest-image/*) \
	$(wildcard $(shell awk '!/^\#/ && NF {print $$1}' guest-image/contents 2>/dev/null))

.PHONY: help deps kernel kernel-without image tools-check checkpatch check-series test labs demo bench clean

help:
	@echo "dcblab targets:"
	@echo "  make deps        install the Debian packages the lab needs (only missing ones)"
	@echo "  make kernel      extract linux-source-6.1, apply kernel-patches/, build bzImage"
	@echo "                   (FLAVOUR=debug: the debug kernel, in its own object dir)"
	@echo "  make kernel-without PATCH=NNNN   the lab kernel without one patch (build/variants/)"
	@echo "  make image       build the guest tools and initramfs from Debian's binaries"
	@echo "  make tools-check C unit tests of the guest tools (tools/)"
	@echo "  make checkpatch  scripts/checkpatch.pl --strict on every patch of the series"
	@echo "  make check-series git apply --check of the series on pristine linux-source-6.1"
	@echo "                   (kernel, checkpatch, check-series run only when their inputs"
	@echo "                   changed since their last clean run; FORCE=1 runs them anyway)"
	@echo "  make test        everything above, then the pytest suite (SUITE=..., FLAVOUR=debug,"
	@echo "                   BACKEND=libvirt, PYTEST_ARGS=...; PATCHES=DIR: on the series plus"
	@echo "                   your patches, KERNEL=PATH: on your bzImage; docs/own-kernel.md)"
	@echo "  make labs        run the teaching labs (docs/labs/) in a lab, one line per lab"
	@echo "  make demo        the DCB priority demo: a switch VM and three hosts, ETS shares live, build/demo/shares.png"
	@echo "  make bench       measured figures: build time, boot times; also times the"
	@echo "                   make test suite warm and cold (checkpatch, check-series re-run)"
	@echo "  make fuzz        the guest fuzzers at full volume (10^5 each), FLAVOUR=debug too"
	@echo "  make soak        20 lab up/down cycles, 10 with up, the keeper or pytest SIGKILLed;"
	@echo "                   nothing may be left after any (<= 10 min; SEED=N replays a run)"
	@echo "  make clean       remove $(BUILD)"

# Packages whose install would start and enable a daemon on this host
# that the lab runs only in its guests (or, sshd, in its simulated
# machines): PACKAGE, or PACKAGE:SERVICE when the daemon's systemd units
# and sysv script are named otherwise.
GUEST_DAEMONS := lldpad qemu-guest-agent openssh-server:ssh
# Where deps looks (tests/test_build_glue.py points them at a fake root).
POLICY_RC ?= /usr/sbin/policy-rc.d
SYSCONF ?= /etc

deps:
	@# GUEST_DAEMONS: policy-rc.d (exit 101) keeps them from starting
	@# during the install, they are disabled after, and deps checks that
	@# nothing enables them (systemd wants, sysv S links); the lab runs
	@# them only in the guests.
	@# libvirt: the daemon and its QEMU driver, never libvirt-daemon-system
	@# (it starts a system libvirtd with a NAT network and pulls systemd,
	@# iptables and polkit); each lab runs its own daemon in its netns.
	@# One dpkg-query for all packages (one per package took 0.8 s).
	@# `missing` is one line, words separated by spaces (dpkg-query's
	@# lines joined), so that `case " $missing "` finds a package.
	@missing=$$(dpkg-query -W -f='$${db:Status-Abbrev} $${Package}\n' \
		$(DEBIAN_PACKAGES) 2>/dev/null | awk -v want="$(DEBIAN_PACKAGES)" \
		'$$1 == "ii" { ok[$$2] = 1 } \
		 END { n = split(want, w, " "); for (i = 1; i <= n; i++) if (!ok[w[i]]) printf "%s ", w[i] }'); \
	missing=$${missing% }; \
	if [ -z "$$missing" ]; then \
		echo "deps: all $(words $(DEBIAN_PACKAGES)) Debian packages present"; exit 0; \
	fi; \
	echo "deps: installing $$missing"; \
	[ "$$(id -u)" = 0 ] || { echo "deps: run as root (or sudo make deps) to install them" >&2; exit 1; }; \
	export DEBIAN_FRONTEND=noninteractive; \
	daemons=; for w in $(GUEST_DAEMONS); do \
		case " $$missing " in *" $${w%%:*} "*) daemons="$$daemons $$w";; esac; done; \
	if [ -n "$$daemons" ] && [ ! -e $(POLICY_RC) ]; then \
		printf '#!/bin/sh\nexit 101\n' > $(POLICY_RC); chmod 755 $(POLICY_RC); \
		trap 'rm -f $(POLICY_RC)' EXIT; \
	fi; \
	apt-get update -q && apt-get install -y -q --no-install-recommends $$missing || exit 1; \
	for w in $$daemons; do \
		p=$${w%%:*}; d=$${w#*:}; \
		DPKG_MAINTSCRIPT_PACKAGE=$$p deb-systemd-helper disable $$d.service $$d.socket >/dev/null 2>&1; \
		update-rc.d $$d disable >/dev/null 2>&1; \
		left=$$(ls -d $(SYSCONF)/systemd/system/*.wants/$$d.* $(SYSCONF)/rc[2-5].d/S[0-9][0-9]$$d 2>/dev/null); \
		if [ -n "$$left" ]; then \
			echo "deps: $$d is still enabled on this host (" $$left "): disable it by hand (the lab never runs it as this host's service)" >&2; exit 1; \
		fi; \
		if [ "$$p" = "$$d" ]; then \
			echo "deps: $$d installed for the guest image only: not started, not enabled on this host"; \
		else \
			echo "deps: $$p installed for the lab only: its service $$d not started, not enabled on this host"; \
		fi; \
	done

# FORCE=1: run the kernel's make, checkpatch and check-series even when
# their stamps say nothing they read changed since their last clean run.
FORCE_ARG = $(if $(filter-out 0,$(FORCE)),--force)

kernel: deps
	$(PY) -m dcblab.build kernel $(FORCE_ARG)

# The lab kernel of the series without one patch, PATCH=NNNN (its own
# build directory, BUILD/variants/without-NNNN/): the kernel `make bench`
# compares, and the one labs are shown on beside the lab kernel
# (docs/labs/14-tx-queue.md). Prints its bzImage's path last.
kernel-without: deps
	@test -n "$(PATCH)" || { echo "make kernel-without: PATCH=NNNN names the patch to leave out" >&2; exit 2; }
	$(PY) -m dcblab.build kernel-without --patch $(PATCH)

image: deps $(IMAGE)

$(IMAGE): $(IMAGE_INPUTS) $(TOOLS) $(DCB) Makefile
	guest-image/mkinitramfs $@ $(TOOLS) $(DCB)=/sbin/dcb

$(DCB): $(wildcard iproute2-patches/*.patch) dcblab/build/iproute2.py \
		$(wildcard /var/lib/dpkg/info/iproute2.list)
	$(PY) -m dcblab.build dcb

# The guest tools, static; tools/Makefile knows their sources.
$(TOOLS) &: $(wildcard tools/*.c tools/*.h) tools/Makefile
	$(MAKE) -C tools OUT=$(TOOLS_OUT)

tools-check: deps
	$(MAKE) -C tools OUT=$(TOOLS_OUT) check

checkpatch: deps
	@$(PY) -m dcblab.build patch >/dev/null
	$(PY) -m dcblab.build checkpatch $(FORCE_ARG)

check-series: deps
	$(PY) -m dcblab.build check-series $(FORCE_ARG)

# The kernel the suite's labs boot, as DCBLAB_KERNEL (paths.boot_kernel):
# PATCHES=DIR's, built by dcblab.build kernel-with (progress on stderr,
# the bzImage's path on stdout), or KERNEL=PATH; neither: the flavour's.
# Its embedded config is checked before a lab boots (paths.check_images).
TEST_KERNEL = $(if $(and $(PATCHES),$(KERNEL)),echo "make $@: PATCHES=DIR or KERNEL=PATH (not both)" >&2; exit 2;) \
	$(if $(PATCHES),k=$$($(PY) -m dcblab.build kernel-with --patches "$(PATCHES)") || exit $$?; \
		export DCBLAB_KERNEL="$$k";) \
	$(if $(KERNEL),export DCBLAB_KERNEL="$(abspath $(KERNEL))";)

# pytest's exit 5 (nothing collected) is a failure, not a pass.
# --durations: the slowest tests, what CI's time budget is spent on.
PYTEST = $(PY) -m pytest --durations=15 $(if $(BACKEND),--dcblab-backend $(BACKEND)) $(PYTEST_ARGS) $(1); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make $@: pytest collected no tests: failing" >&2; exit 1; fi; \
	exit $$rc

test: kernel image tools-check checkpatch check-series
	$(TEST_KERNEL) $(call PYTEST,$(SUITE))

# The teaching labs alone (make test runs them too): one line per lab.
labs: kernel image
	$(TEST_KERNEL) $(call PYTEST,-q docs/labs/ tests/test_lab_troubleshoot.py tests/test_lab_without_patch.py)

demo: kernel image
	$(PY) bin/dcblab demo

bench: kernel image
	$(PY) bin/dcblab bench

# The fuzzers at full volume on any flavour (docs/testing.md): 10^5 dcbnl
# requests and 10^5 cgroup writes even where the suite gives them a time
# slot (the debug kernel: ~13 min there).
.PHONY: fuzz
fuzz: kernel image tools-check
	DCBLAB_FUZZ_FULL=1 $(call PYTEST,-s tests/test_dcbnl_fuzz.py tests/test_cgroup_fuzz.py)

# The soak (docs/testing.md): a leak census after every cycle; the seed is
# printed first, SEED=N runs the same cycles again.
.PHONY: soak
soak: kernel image
	$(PY) bin/dcblab soak $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(BUILD)
