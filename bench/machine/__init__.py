"""The machine a run happens on: hardware capture (NVML, nvidia-smi), the telemetry
sampler, provenance, the bandwidth probe and the roofline arithmetic.
"""

from __future__ import annotations

from bench.machine._dump import hash_uuid, read_dump
from bench.machine._hardware import (
    build_hardware,
    capture_hardware,
    cpu_only,
    lmx_gpu_name,
    record_dump,
)
from bench.machine._nvml import record_nvml
from bench.machine._probe import BandwidthProbe, probe_bandwidth
from bench.machine._provenance import (
    REPO_ROOT,
    SOURCE_RECORD,
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
from bench.machine._smi import (
    SMI_FIELDS,
    Runner,
    parse_nvidia_smi,
    record_nvidia_smi,
    run_command,
)

__all__ = [
    "REPO_ROOT",
    "SMI_FIELDS",
    "SOURCE_RECORD",
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
