"""Assembling a lab: the wire (a private netns of tap pairs), one guest
per host through a backend, the baseline config, run state, the keeper
and the reaper. Names are imported on first use (see core/lazy.py).
"""

from ..core.lazy import surface

__all__, __getattr__, __dir__ = surface(__name__, {
    "baseline": ("apply_baseline", "baseline_devices", "baseline_ip",
                 "reset_baseline"),
    "client": ("KeeperAgent", "LabMachine", "attach_guest"),
    "dcbx": ("LLDPAD_LOG", "lldpad_pid", "start_lldpad", "stop_lldpad",
             "DCBAPP_LOG", "dcbapp_pid", "start_dcbapp", "stop_dcbapp"),
    "keeper": ("host_spec",),
    "memory": ("MARGIN_MIB", "ImageFloor", "ImageError", "check_memory",
               "image_floor", "initramfs_unpacked", "kernel_init_size"),
    "lab": ("Lab",),
    "reaper": ("leftovers", "reap", "run_pids", "run_tag", "teardown"),
    "runs": ("LabError", "check_name", "keeper_alive", "lab_dir", "list_labs",
             "owned", "rc_text", "read_state", "run_dirs", "run_root"),
    "wire": ("Wire", "named_netns", "netns_exists", "netns_path"),
    "splitwire": ("MachineWire", "SplitWire", "check_underlays",
                  "remote_teardown"),
})
