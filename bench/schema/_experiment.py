"""The experiment file: pydantic models, loading, and the pin and consistency checks.

An experiment names the engine images (tag + digest, upstream version), the models (HF id +
revision + the path the server sees), the workload and the configurations (engine, method,
speculative tokens, the seed's server flags verbatim, and every deviation from the seed with its
reason). A bad file raises InputError naming the field at fault (exit 2).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from bench.core import (
    DRAFT_CHECKPOINT_METHODS,
    MAX_CONCURRENCY,
    SERVED_NAME,
    EngineName,
    InputError,
    IterationCount,
    MemoryFraction,
    OutputTokens,
    PromptTokens,
    SpecMethod,
    StrictModel,
    TimeoutSeconds,
    WarmupCount,
    canonical_spec_method,
    describe_validation_error,
    parse_yaml,
    read_text,
)

EXPERIMENT_SCHEMA = "specbench.experiment/1"
UNRESOLVED = "unresolved"


def _sha256_or_unresolved(v: str) -> str:
    if v != UNRESOLVED and not re.fullmatch(r"[0-9a-f]{64}", v):
        raise ValueError("must be 64 lowercase hex digits or 'unresolved'")
    return v


#: a file's sha256 as a pin: 64 lowercase hex digits, or 'unresolved' (a first run records it)
Sha256OrUnresolved = Annotated[str, AfterValidator(_sha256_or_unresolved)]
EXPERIMENTS_DIR = Path(__file__).resolve().parents[1] / "experiments"

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
_NAME_RE = r"^[a-z0-9][a-z0-9-]{0,62}$"

Name = Annotated[str, Field(pattern=_NAME_RE)]


def _revision(v: str) -> str:
    if v != UNRESOLVED and not _REVISION_RE.fullmatch(v):
        raise ValueError("must be a 40-hex commit or explicitly 'unresolved'")
    return v


#: a model's or dataset's pinned commit (40 hex), or 'unresolved' until the first provision
Revision = Annotated[
    str, AfterValidator(_revision), Field(description="40-hex commit, or 'unresolved'")
]


class Deviation(StrictModel):
    """A flag that differs from the seed report's command, with the reason.

    ``seed`` is the seed's spelling (None when the seed has no such flag or no command at all);
    ``used`` is what we pass (None when we drop the flag)."""

    flag: str = Field(min_length=1)
    seed: str | None
    used: str | None
    reason: str = Field(min_length=10)


class ImageBuild(StrictModel):
    """How a locally built image is made (the patched SGLang image): from a pinned base."""

    base_image: str = Field(min_length=1)
    base_digest: str
    dockerfile: str = Field(min_length=1)
    patch_sha256: Sha256OrUnresolved = Field(
        description="sha256 of the applied patch, or 'unresolved'"
    )

    @field_validator("base_digest")
    @classmethod
    def _digest(cls, v: str) -> str:
        return _check_digest(v)


def _check_digest(v: str) -> str:
    if v != UNRESOLVED and not _DIGEST_RE.fullmatch(v):
        raise ValueError("must be 'sha256:<64 hex>' or explicitly 'unresolved'")
    return v


class Image(StrictModel):
    """One engine image: tag, digest (required; 'unresolved' must be written out), version."""

    engine: EngineName
    image: str = Field(min_length=1, description="repository:tag, without the digest")
    digest: str = Field(description="sha256:<64 hex> of the image, or 'unresolved'")
    version: str = Field(min_length=1, description="upstream engine version inside the image")
    device: Literal["cuda", "cpu"] = Field(
        default="cuda", description="cuda: the container gets the GPUs; cpu: a CPU build"
    )
    build: ImageBuild | None = None
    notes: str | None = None

    @field_validator("image")
    @classmethod
    def _no_digest_in_tag(cls, v: str) -> str:
        if "@" in v or ":" not in v.rsplit("/", 1)[-1]:
            raise ValueError("must be 'repository:tag' (the digest goes in 'digest')")
        return v

    @field_validator("digest")
    @classmethod
    def _digest(cls, v: str) -> str:
        return _check_digest(v)

    @model_validator(mode="after")
    def _tag_names_patch(self) -> Image:
        if self.build is not None and self.build.patch_sha256 != UNRESOLVED:
            want = self.build.patch_sha256[:12]
            if not self.image.endswith(want):
                raise ValueError(
                    f"tag of a patched build must end with the patch sha256[:12] {want}"
                )
        return self

    @property
    def resolved(self) -> bool:
        """True when the image (and, for a local build, its base) is pinned by digest."""
        base_ok = self.build is None or self.build.base_digest != UNRESOLVED
        return self.digest != UNRESOLVED and base_ok

    @property
    def ref(self) -> str:
        """What Docker runs: ``repo:tag@sha256:...`` for a pulled image once resolved; the tag
        alone for a local build (its ``digest`` is the image ID, which Docker cannot resolve
        after a tag: the launcher checks the ID instead) or while unresolved."""
        if self.build is not None or self.digest == UNRESOLVED:
            return self.image
        return f"{self.image}@{self.digest}"

    @property
    def local_image_id(self) -> str | None:
        """The pinned image ID of a local build (checked before a container starts)."""
        return self.digest if self.build is not None and self.digest != UNRESOLVED else None


class ByteEstimate(StrictModel):
    """A byte count written by hand for the roofline: an ESTIMATE, with how it was derived.

    The report labels it as an estimate; a figure measured from the downloaded checkpoint
    (weights.json in the artifacts, bench.machine.decode_bytes_from_checkpoint) replaces it."""

    estimate: int = Field(gt=0)
    derivation: str = Field(min_length=20, description="the arithmetic and its assumptions")


class ModelPin(StrictModel):
    """A model: Hugging Face id, pinned revision, and the path the server reads it from.

    The optional estimates feed the bandwidth roofline (bench.report roofline): weight bytes one
    forward pass reads (all ranks), the MTP head's bytes per draft step, KV bytes per context
    token (all ranks)."""

    hf_id: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    revision: Revision
    path: str = Field(pattern=r"^/models/[\w.-]+$", description="path inside the container")
    weight_bytes: ByteEstimate | None = None
    mtp_head_bytes: ByteEstimate | None = None
    kv_bytes_per_token: ByteEstimate | None = None

    @field_validator("path")
    @classmethod
    def _a_folder_below_models(cls, v: str) -> str:
        # '/models/..' matches the pattern and is the folder above every model
        if v.removeprefix("/models/") in (".", ".."):
            raise ValueError("must name a folder inside /models, not '.' or '..'")
        return v

    @property
    def dirname(self) -> str:
        return self.path.removeprefix("/models/")


def inside_dataset(v: str) -> str:
    """A dataset's file as a relative path inside the dataset (issue 47, class 6): it becomes
    ``<models_dir>/datasets/<name>/<file>`` on the GPU host and in the matrix, so '..', an
    absolute path, an empty part, a backslash or a control character is refused wherever the
    field is read (plan, pins show and record, the models stage, the matrix)."""
    parts = v.split("/")
    if (
        v.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
        or any(c == "\\" or ord(c) < 32 or ord(c) == 127 for c in v)
    ):
        raise ValueError(f"{v!r} must be a path inside the dataset")
    return v


#: a file of a dataset repository, as a path inside it
DatasetFile = Annotated[
    str,
    Field(min_length=1, description="the JSONL file inside the dataset repository"),
    AfterValidator(inside_dataset),
]


class DatasetPin(StrictModel):
    """A prompt set from a dataset on the Hugging Face hub, pinned like weights: the GPU host
    fetches ``file`` of ``hf_id`` at ``revision`` and checks its sha256 (the pins lock records
    both). The Ansible models stage fetches it into ``<models_dir>/datasets/<name>/<file>``;
    the matrix reads it from there (``--model-cache``)."""

    hf_id: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    revision: Revision
    file: DatasetFile
    sha256: Sha256OrUnresolved = Field(description="sha256 of that file, or 'unresolved'")


_FILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: GitHub's hosts of a repository's raw files, and where the commit stands in their paths
_GITHUB_RAW = {"raw.githubusercontent.com": 2, "github.com": 3}


def pinned_url(v: str) -> str:
    """A file's URL as a pin: https, no credentials, query or fragment (a token in a URL ends
    up in logs and in the lock), a plain file name at the end; on GitHub, a raw file at a
    40-hex commit (a branch or tag moves)."""
    if len(v) > 2048 or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in v):
        raise ValueError("must be a URL of at most 2048 characters without spaces")
    parts = urlsplit(v)
    # refused before the URL is ever echoed: what it would carry is a secret
    if "@" in parts.netloc:
        raise ValueError("must not carry credentials (user:password@)")
    if parts.query or parts.fragment or "?" in v or "#" in v:
        raise ValueError("must have no query or fragment ('?', '#')")
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{v!r} must be an https URL")
    segments = parts.path.split("/")[1:]
    last = segments[-1] if segments else ""
    if not _FILE_NAME_RE.fullmatch(last) or any(x in ("", ".", "..") for x in segments):
        raise ValueError(
            f"{v!r} must be a plain path (no empty, '.' or '..' part) ending in a file name "
            "(letters, digits, '.', '-', '_')"
        )
    at = _GITHUB_RAW.get(parts.hostname)
    if at is not None:
        raw = parts.hostname != "github.com" or segments[2:3] == ["raw"]
        commit = segments[at] if len(segments) > at + 1 else ""
        if not raw or not _REVISION_RE.fullmatch(commit):
            raise ValueError(
                "a GitHub file is pinned as its raw URL at a 40-hex commit: "
                "https://raw.githubusercontent.com/<owner>/<repo>/<commit>/<path>, not a "
                "branch, tag or page"
            )
    return v


class UrlPin(StrictModel):
    """A file pinned by its https URL and sha256 (issue 48: GSM8K's test split, which the hub
    holds only as Parquet): the GPU host's models stage downloads it into
    ``<models_dir>/datasets/<name>/<file name of the URL>`` and checks its sha256 (a first run
    records it in the pins lock when the experiment leaves it 'unresolved'); the matrix reads
    it from there (``--model-cache``)."""

    url: Annotated[str, AfterValidator(pinned_url)] = Field(
        description="https URL of the file; on GitHub its raw URL at a 40-hex commit"
    )
    sha256: Sha256OrUnresolved = Field(description="sha256 of the file, or 'unresolved'")

    @property
    def file(self) -> str:
        """The file's name, where the models stage puts it (the URL's last segment)."""
        return urlsplit(self.url).path.rsplit("/", 1)[-1]


class PromptSetSpec(StrictModel):
    """Prompts with a category each, sent through the engine's chat template: a local JSONL
    file (``path``, relative to the experiment file, with its ``sha256``) or a pinned dataset.
    Each line: ``{"category": ..., "messages": [...]}`` or ``{"category": ..., "prompt": ...}``.
    Each category is measured as its own windows."""

    name: Name
    path: str | None = Field(default=None, description="JSONL file, relative to the experiment")
    sha256: str | None = Field(default=None, description="sha256 of the file's bytes")
    dataset: DatasetPin | None = None

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-f]{64}", v):
            raise ValueError("must be 64 lowercase hex digits")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> PromptSetSpec:
        if (self.path is None) == (self.dataset is None):
            raise ValueError("give exactly one of 'path' (a local JSONL file) and 'dataset'")
        if self.path is not None and self.sha256 is None:
            raise ValueError("a local prompt set needs its sha256 (sha256sum of the file)")
        return self


def _unset(value: object) -> bool:
    """Fields added after experiment/1 was first written are left out of the lock while unset,
    so a lock of an experiment without them is written as before."""
    return value is None


class AccuracyTaskSpec(StrictModel):
    """A small task with known answers, asked of every configuration at temperature 0 after
    its timed levels (issue 48): a local JSONL file (``path`` relative to the experiment, with
    its ``sha256``), a pinned dataset like a prompt set, or a file pinned by URL and sha256
    (``source``). Lines: ``{"id", "prompt" or "messages", "answer"}``, or GSM8K's own
    ``{"question", "answer"}`` (answer ending in ``#### N``) with ``scorer: gsm8k``. ``limit``
    takes the first N lines (a subset defined by the pinned bytes)."""

    name: Name
    path: str | None = Field(default=None, description="JSONL file, relative to the experiment")
    sha256: str | None = Field(default=None, description="sha256 of the file's bytes")
    dataset: DatasetPin | None = None
    source: UrlPin | None = Field(
        default=None,
        exclude_if=_unset,
        description="a file pinned by https URL and sha256, fetched by the models stage",
    )
    scorer: Literal["prefix", "gsm8k"] = Field(
        description="prefix: the output begins with the answer; gsm8k: the last number of the "
        "output equals the number after '#### ' (lm-eval's flexible-extract rule)"
    )
    max_tokens: OutputTokens = Field(description="each answer's max_tokens (it may stop sooner)")
    limit: int | None = Field(default=None, ge=1, description="only the first N questions")
    min_ratio: float = Field(
        default=0.97,
        gt=0,
        le=1,
        description="the gate: a configuration passes with at least this share of its "
        "engine's baseline accuracy (MLPerf's 97%) and greedy-equal output",
    )

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-f]{64}", v):
            raise ValueError("must be 64 lowercase hex digits")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> AccuracyTaskSpec:
        if sum(x is not None for x in (self.path, self.dataset, self.source)) != 1:
            raise ValueError(
                "give exactly one of 'path' (a local JSONL file), 'dataset' and 'source'"
            )
        if self.path is not None and self.sha256 is None:
            raise ValueError("a local accuracy task needs its sha256 (sha256sum of the file)")
        return self

    @property
    def fetched(self) -> bool:
        """Fetched by the models stage into the model cache (not a file beside the experiment)."""
        return self.path is None


class WorkloadSpec(StrictModel):
    """The matched request workload; the seed's lmx speed-test settings."""

    prompt_tokens: PromptTokens
    max_tokens: OutputTokens
    warmup: WarmupCount
    iterations: IterationCount
    concurrency: list[int] = Field(min_length=1)
    request_timeout_s: TimeoutSeconds = 600.0
    stall_timeout_s: TimeoutSeconds = Field(
        default=120.0,
        description="seconds without a byte, once a stream has begun, before the request counts "
        "as stalled (the wait for the first event is bounded by request_timeout_s)",
    )
    prompt_seed: int | None = Field(
        default=None,
        ge=0,
        description="seed of the prompt nonces; every configuration gets the same prompts in the "
        "same order (None: the matrix draws one per run and records it in the lock)",
    )
    logprob_probes: int | None = Field(
        default=None,
        ge=0,
        description="greedy requests re-sent with logprobs after a configuration's last level, "
        "per level, for the lossless check (None: the runner's default; 0: none, for an engine "
        "that cannot serve logprobs)",
    )
    prompt_set: PromptSetSpec | None = Field(
        default=None,
        description="real-text prompts by category instead of the exact-length synthetic ones "
        "(prompt_tokens then only sizes plan's estimate)",
    )
    enable_thinking: bool | None = Field(
        default=None,
        description="sent as chat_template_kwargs.enable_thinking (None: not sent, the "
        "template's default); recorded in every payload",
    )

    accuracy: AccuracyTaskSpec | None = Field(
        default=None,
        exclude_if=_unset,
        description="a task with known answers asked of every configuration (the accuracy gate)",
    )

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        return _check_levels(v)

    @model_validator(mode="after")
    def _fetched_apart(self) -> WorkloadSpec:
        ps, acc = self.prompt_set, self.accuracy
        if (
            ps is not None
            and ps.dataset is not None
            and acc is not None
            and acc.fetched
            and acc.name == ps.name
        ):
            raise ValueError(
                f"accuracy.name {acc.name!r} is also the prompt set's name: both are fetched "
                "into <model cache>/datasets/<name>/, so name them apart"
            )
        return self


def _check_levels(v: list[int]) -> list[int]:
    if any(c < 1 for c in v):
        raise ValueError("every concurrency level must be >= 1")
    if any(c > MAX_CONCURRENCY for c in v):
        raise ValueError(f"every concurrency level must be <= {MAX_CONCURRENCY}")
    if len(set(v)) != len(v):
        raise ValueError("concurrency levels must be unique")
    return sorted(v)


class EmulatorSpec(StrictModel):
    """How the emulator stands in for this configuration (demo, tests, --emulate)."""

    profile: str = Field(min_length=1)
    fail: list[str] = Field(default_factory=list)


class ServerSettings(StrictModel):
    """Lifecycle knobs shared by every configuration."""

    ready_timeout_s: TimeoutSeconds = 1800.0
    stop_timeout_s: TimeoutSeconds = 30.0
    shm_size: str = "16g"
    ipc_host: bool = True


class DepthReference(StrictModel):
    """A published choice of speculative depth a depth sweep is compared with."""

    k: int = Field(ge=1)
    source: str = Field(min_length=3, description="who recommends it, e.g. an engine's recipe")


class Configuration(StrictModel):
    """One server configuration; swept over its concurrency levels with one server start."""

    name: Name
    engine: EngineName
    image: str | None = Field(default=None, description="key in 'images'; default: the engine")
    method: SpecMethod
    spec_num_tokens: int | None = Field(default=None, ge=1)
    draft_model: str | None = Field(default=None, description="key in 'models'")
    target_model: str | None = Field(
        default=None,
        description="key in 'models': the target in the layout this configuration's engine "
        "loads (the same weights and tokenizer as the experiment's target, another wrapper: "
        "bench/tinymodel/_qwen35vl.py); default: the experiment's target_model",
    )
    args: list[str] = Field(description="server flags after the model, the seed's verbatim")
    deviations: list[Deviation] = Field(default_factory=list)
    concurrency: list[int] | None = None
    depth_sweep: list[int] | None = Field(
        default=None,
        description="speculative depths to sweep: one server start per k, each a configuration "
        "named <name>-k<k> (bench.engines expands it)",
    )
    depth_of: str | None = Field(
        default=None, description="set by the expansion: the swept configuration's name"
    )
    depth_references: list[DepthReference] = Field(
        default_factory=list, description="published depths the sweep's best k is compared with"
    )
    emulator: EmulatorSpec
    expect_invalid: str | None = Field(
        default=None, description="why this configuration is expected to be judged invalid"
    )
    require_cuda_graphs: bool = Field(
        default=False,
        description="CUDA graphs not captured or not used in the measured windows makes the "
        "run invalid (default: a validity warning)",
    )
    notes: str | None = None
    synthetic_control: bool | None = Field(
        default=None,
        exclude_if=_unset,
        description="also run a SYNTHETIC ACCEPTANCE control of this speculative configuration: "
        "<name>-synthetic, the same engine and flags with the engine's own knob forcing the "
        "acceptance measured here (bench.engines expands it)",
    )
    synthetic_of: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="set by the expansion: the configuration whose measured acceptance this "
        "control forces",
    )

    @field_validator("method", mode="before")
    @classmethod
    def _canon(cls, v: object) -> object:
        return canonical_spec_method(v)

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int] | None) -> list[int] | None:
        return None if v is None else _check_levels(v)

    @field_validator("depth_sweep")
    @classmethod
    def _depths(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("an empty depth sweep: list the numbers of speculative tokens")
        if any(k < 1 for k in v):
            raise ValueError("every depth must be >= 1 speculative token")
        if len(set(v)) != len(v):
            raise ValueError("depths must be unique")
        return sorted(v)

    @model_validator(mode="after")
    def _spec_consistent(self) -> Configuration:
        if self.method == "NONE":
            if self.spec_num_tokens is not None or self.draft_model is not None:
                raise ValueError("a NONE (baseline) configuration has no spec_num_tokens/draft")
        elif self.spec_num_tokens is None:
            raise ValueError(f"spec_num_tokens is required for method {self.method}")
        if self.method == "NONE" and self.depth_sweep is not None:
            raise ValueError(f"depth_sweep: {self.name} has no speculation to sweep")
        if self.method == "NONE" and (self.synthetic_control or self.synthetic_of):
            raise ValueError(f"synthetic_control: {self.name} has no acceptance to force")
        if self.method in DRAFT_CHECKPOINT_METHODS and self.draft_model is None:
            raise ValueError(f"draft_model is required for method {self.method}")
        if self.method not in DRAFT_CHECKPOINT_METHODS and self.draft_model is not None:
            raise ValueError(f"method {self.method} takes no draft_model")
        return self

    @property
    def image_key(self) -> str:
        return self.image or self.engine

    @property
    def speculative(self) -> bool:
        return self.method != "NONE"


class Experiment(StrictModel):
    """A whole experiment file."""

    schema_: Literal["specbench.experiment/1"] = Field(alias="schema")
    name: Name
    title: str | None = Field(default=None, description="the report's title (default: name)")
    description: str = ""
    toy_model: bool = Field(
        default=False,
        description="a generated tiny model (the engine tier): every payload and report says "
        "so and publish refuses it",
    )
    served_model: str = Field(pattern=SERVED_NAME, description="alias the servers expose")
    quantization: str = Field(min_length=1)
    tensor_parallel: int = Field(ge=1)
    prefix_caching: dict[EngineName, bool] = Field(default_factory=dict)
    gpu_mem_util: dict[EngineName, MemoryFraction] = Field(
        default_factory=dict, description="the share of each GPU's memory the engine may take"
    )
    images: dict[str, Image] = Field(min_length=1)
    models: dict[str, ModelPin]
    target_model: str = Field(description="key in 'models'")
    engine_deviations: dict[EngineName, list[Deviation]] = Field(default_factory=dict)
    workload: WorkloadSpec
    server: ServerSettings = Field(default_factory=ServerSettings)
    configurations: list[Configuration] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> Experiment:
        if self.target_model not in self.models:
            raise ValueError(f"target_model {self.target_model!r} is not a key of 'models'")
        seen: set[str] = set()
        for i, cfg in enumerate(self.configurations):
            where = f"configurations.{i}"
            if cfg.name in seen:
                raise ValueError(f"{where}.name: duplicate configuration name {cfg.name!r}")
            seen.add(cfg.name)
            img = self.images.get(cfg.image_key)
            if img is None:
                raise ValueError(f"{where}.image: {cfg.image_key!r} is not a key of 'images'")
            if img.engine != cfg.engine:
                raise ValueError(f"{where}.image: image is for {img.engine}, not {cfg.engine}")
            if cfg.draft_model is not None and cfg.draft_model not in self.models:
                raise ValueError(f"{where}.draft_model: {cfg.draft_model!r} not in 'models'")
            if cfg.target_model is not None and cfg.target_model not in self.models:
                raise ValueError(f"{where}.target_model: {cfg.target_model!r} not in 'models'")
        return self

    # -- lookups ---------------------------------------------------------------------------

    @property
    def target(self) -> ModelPin:
        return self.models[self.target_model]

    def target_key_for(self, cfg: Configuration) -> str:
        """The key in 'models' of the target ``cfg`` serves."""
        return cfg.target_model or self.target_model

    def target_for(self, cfg: Configuration) -> ModelPin:
        """The target ``cfg`` serves: its own layout of the experiment's target, or that."""
        return self.models[self.target_key_for(cfg)]

    def image_for(self, cfg: Configuration) -> Image:
        return self.images[cfg.image_key]

    def draft_for(self, cfg: Configuration) -> ModelPin | None:
        return self.models[cfg.draft_model] if cfg.draft_model else None

    def levels_for(self, cfg: Configuration) -> list[int]:
        return cfg.concurrency if cfg.concurrency is not None else self.workload.concurrency

    def deviations_for(self, cfg: Configuration) -> list[Deviation]:
        """Engine-wide deviations (harness plumbing) first, then the configuration's own."""
        return [*self.engine_deviations.get(cfg.engine, []), *cfg.deviations]

    def configuration(self, name: str) -> Configuration:
        for cfg in self.configurations:
            if cfg.name == name:
                return cfg
        raise InputError("--only", f"no configuration named {name!r} (have: {self.names()})")

    def names(self) -> list[str]:
        return [c.name for c in self.configurations]

    def select(self, only: list[str] | None) -> list[Configuration]:
        """The named configurations; a depth sweep's name selects every point of it."""
        if not only:
            return list(self.configurations)
        out: list[Configuration] = []
        for n in only:
            points = [c for c in self.configurations if c.depth_of == n]
            out.extend(points or [self.configuration(n)])
        return out

    def unresolved_pins(self) -> list[str]:
        """Every pin still written as 'unresolved', as 'field: value' lines."""
        out: list[str] = []
        for key, img in self.images.items():
            if img.digest == UNRESOLVED:
                out.append(f"images.{key}.digest ({img.image})")
            if img.build is not None and img.build.base_digest == UNRESOLVED:
                out.append(f"images.{key}.build.base_digest ({img.build.base_image})")
        for key, m in self.models.items():
            if m.revision == UNRESOLVED:
                out.append(f"models.{key}.revision ({m.hf_id})")
        ps = self.workload.prompt_set
        if ps is not None and ps.dataset is not None:
            for what in ("revision", "sha256"):
                if getattr(ps.dataset, what) == UNRESOLVED:
                    out.append(f"workload.prompt_set.dataset.{what} ({ps.dataset.hf_id})")
        acc = self.workload.accuracy
        if acc is not None and acc.source is not None and acc.source.sha256 == UNRESOLVED:
            out.append(f"workload.accuracy.source.sha256 ({acc.source.url})")
        return out

    def lock_dict(self) -> dict[str, Any]:
        """The resolved experiment as written to experiment.lock.json."""
        return self.model_dump(mode="json", by_alias=True)


def parse_experiment_document(data: Any, source: str) -> Experiment:
    """Validate a parsed experiment document against the model alone (no engine checks: those
    are ``bench.engines.parse_experiment``); InputError names the field at fault."""
    if not isinstance(data, dict):
        raise InputError(source, "the experiment file must be a YAML mapping")
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as err:
        raise _describe(source, err) from None
    return exp


def _describe(source: str, err: ValidationError) -> InputError:
    """Model-level validators name their field inside the message: surface it as the field."""
    first = err.errors()[0]
    msg = str(first["msg"]).removeprefix("Value error, ")
    m = re.match(r"^(configurations\.\d+\.\w+): (.*)$", msg)
    if m:
        return InputError(f"{source}: {m.group(1)}", m.group(2))
    # A configuration's own model validator names its field first: "<field>: <reason>".
    loc = ".".join(str(p) for p in first["loc"])
    m = re.match(r"^(\w+): (.*)$", msg)
    if m and re.fullmatch(r"configurations\.\d+", loc):
        return InputError(f"{source}: {loc}.{m.group(1)}", m.group(2))
    return describe_validation_error(source, err)


def experiment_path(path: Path | str) -> Path:
    """The experiment file ``path`` names: the path itself, or a shipped experiment's name."""
    p = Path(path)
    if not p.exists() and (EXPERIMENTS_DIR / p.name).exists():
        return EXPERIMENTS_DIR / p.name
    return p


def read_experiment_document(path: Path | str) -> tuple[Any, str]:
    """Read an experiment file (YAML) -> (document, the path it was read from). Exit 2 on an
    unreadable file or invalid YAML."""
    p = experiment_path(path)
    return parse_yaml(read_text(p, what="experiment file"), str(p)), str(p)
