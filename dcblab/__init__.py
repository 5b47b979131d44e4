"""dcblab: a QEMU lab for DCB priorities and the network cgroups."""
