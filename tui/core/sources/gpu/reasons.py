"""Throttle reason names for AMD GPUs, shared by the exporter join and the amdsmi sampler.

NVIDIA reasons come from the clocks-event bit mask (metrics.names.throttle_names). AMD reports
violations per cause instead; none of these is benign, like NVIDIA's non-idle reasons.
"""

PROCHOT = "prochot_thermal"
PPT = "ppt_power_cap"
SOCKET_THERMAL = "socket_thermal"
VR_THERMAL = "vr_thermal"
HBM_THERMAL = "hbm_thermal"
