"""Assembling a lab: the wire (a private netns of tap pairs), one guest
per host through a backend, the baseline config, run state and the reaper.
"""

from .baseline import apply_baseline, baseline_devices, baseline_ip
from .lab import Lab
from .reap import leftovers, reap, run_pids, run_tag, teardown
from .runs import (LabError, check_name, lab_dir, list_labs, read_state,
                   run_root)
from .wire import Wire, list_netns, netns_name, netns_run_id

__all__ = ["apply_baseline", "baseline_devices", "baseline_ip", "Lab",
           "leftovers", "reap", "run_pids", "run_tag", "teardown",
           "LabError", "check_name", "lab_dir", "list_labs", "read_state",
           "run_root", "Wire", "list_netns", "netns_name", "netns_run_id"]
