# dcblab: make help lists the targets.
#
# BUILD=DIR puts every generated file (kernel tree, objects, initramfs, run
# state of pytest guests) under DIR instead of ./build.
# FLAVOUR=debug builds and tests the debug kernel (KASAN, lockdep, kmemleak,
# UBSAN) instead of the lab kernel; SUITE=... narrows what `make test` runs.

BUILD ?= $(CURDIR)/build
FLAVOUR ?= lab
SUITE ?= tests/
export BUILD FLAVOUR
PY := /usr/bin/python3

# Every Debian package the project uses, host side and guest image.
DEBIAN_PACKAGES := linux-source-6.1 build-essential flex bison bc \
	libelf-dev libssl-dev cpio xz-utils lz4 quilt \
	qemu-system-x86 qemu-guest-agent busybox-static iproute2 ethtool \
	tcpdump procps git python3 python3-pytest python3-ply python3-git

IMAGE := $(BUILD)/initramfs.cpio
TOOLS_OUT := $(BUILD)/tools
TOOLS := $(TOOLS_OUT)/priosend $(TOOLS_OUT)/priosink $(TOOLS_OUT)/cgwrite
IMAGE_INPUTS := guest-image/mkinitramfs guest-image/init guest-image/shutdown \
	guest-image/restore \
	guest-image/contents \
	$(wildcard $(shell awk '!/^\#/ && NF {print $$1}' guest-image/contents 2>/dev/null))

.PHONY: help deps kernel image tools-check checkpatch check-series test demo bench clean

help:
	@echo "dcblab targets:"
	@echo "  make deps        install the Debian packages the lab needs (only missing ones)"
	@echo "  make kernel      extract linux-source-6.1, apply kernel-patches/, build bzImage"
	@echo "                   (FLAVOUR=debug: the debug kernel, in its own object dir)"
	@echo "  make image       build the guest tools and initramfs from Debian's binaries"
	@echo "  make tools-check C unit tests of the guest tools (tools/)"
	@echo "  make checkpatch  scripts/checkpatch.pl --strict on every patch of the series"
	@echo "  make test        everything above, then the pytest suite (SUITE=..., FLAVOUR=debug)"
	@echo "  make demo        boot the two-VM lab, run the two-cgroup scenario live"
	@echo "  make bench       measured figures: build time, boot times"
	@echo "  make clean       remove $(BUILD)"

deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do \
		dpkg-query -W -f='$${db:Status-Abbrev}' $$p 2>/dev/null | grep -q '^ii' || echo $$p; \
	done); \
	if [ -z "$$missing" ]; then \
		echo "deps: all $(words $(DEBIAN_PACKAGES)) Debian packages present"; exit 0; \
	fi; \
	echo "deps: installing" $$missing; \
	[ "$$(id -u)" = 0 ] || { echo "deps: run as root (or sudo make deps) to install them" >&2; exit 1; }; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -q && apt-get install -y -q --no-install-recommends $$missing

kernel: deps
	$(PY) -m dcblab.build kernel

image: deps $(IMAGE)

$(IMAGE): $(IMAGE_INPUTS) $(TOOLS)
	guest-image/mkinitramfs $@ $(TOOLS)

# The guest tools, static; tools/Makefile knows their sources.
$(TOOLS) &: $(wildcard tools/*.c tools/*.h) tools/Makefile
	$(MAKE) -C tools OUT=$(TOOLS_OUT)

tools-check: deps
	$(MAKE) -C tools OUT=$(TOOLS_OUT) check

checkpatch: deps
	@$(PY) -m dcblab.build patch >/dev/null
	$(PY) -m dcblab.build checkpatch

check-series: deps
	$(PY) -m dcblab.build check-series

test: kernel image tools-check checkpatch check-series
	$(PY) -m pytest $(SUITE); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests: failing" >&2; exit 1; fi; \
	exit $$rc

demo: kernel image
	$(PY) bin/dcblab demo

bench: kernel image
	$(PY) bin/dcblab bench

clean:
	rm -rf $(BUILD)
