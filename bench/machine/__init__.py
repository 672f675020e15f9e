"""The machine a run happens on: hardware capture (NVML, nvidia-smi), the telemetry
sampler, provenance, the bandwidth probe and the roofline arithmetic.
"""

from __future__ import annotations

from bench.machine._hardware import (
    SMI_FIELDS,
    Runner,
    build_hardware,
    capture_hardware,
    cpu_only,
    hash_uuid,
    lmx_gpu_name,
    parse_nvidia_smi,
    read_dump,
    record_dump,
    record_nvidia_smi,
    record_nvml,
    run_command,
)
from bench.machine._probe import BandwidthProbe, probe_bandwidth
from bench.machine._provenance import (
    REPO_ROOT,
    ImageRef,
    Provenance,
    capture_provenance,
    docker_info,
    git_info,
)
from bench.machine._roofline import (
    BandwidthSource,
    card_bandwidth,
    ceiling,
    decode_bytes_from_checkpoint,
    efficiency,
    kv_bytes_per_token,
    mean_decode_context,
    weight_bytes_from_files,
)
from bench.machine._sampler import (
    Sampler,
    SamplerStart,
    measured_summary,
    no_telemetry_note,
    open_sampler,
    summarize,
    summarize_sampler,
)

__all__ = [
    "REPO_ROOT",
    "SMI_FIELDS",
    "BandwidthProbe",
    "BandwidthSource",
    "ImageRef",
    "Provenance",
    "Runner",
    "Sampler",
    "SamplerStart",
    "build_hardware",
    "capture_hardware",
    "capture_provenance",
    "card_bandwidth",
    "ceiling",
    "cpu_only",
    "decode_bytes_from_checkpoint",
    "docker_info",
    "efficiency",
    "git_info",
    "hash_uuid",
    "kv_bytes_per_token",
    "lmx_gpu_name",
    "mean_decode_context",
    "measured_summary",
    "no_telemetry_note",
    "open_sampler",
    "parse_nvidia_smi",
    "probe_bandwidth",
    "read_dump",
    "record_dump",
    "record_nvidia_smi",
    "record_nvml",
    "run_command",
    "summarize",
    "summarize_sampler",
    "weight_bytes_from_files",
]
