"""What one measurement is told (``RunSpec``): the engine and endpoint, the workload, the
speculative method, and what the payload records of the run. Its own module so that the
measured loop (_loop.py) and what a request sends (_request.py) both read it, one way."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from bench.core import SERVED_NAME, SpecMethod, StrictModel, canonical_spec_method
from bench.measure._probes import MAX_PROBES
from bench.measure._promptset import PromptSet
from bench.schema import Hardware


class RunSpec(StrictModel):
    """Everything one measurement needs."""

    engine: Literal["vllm", "sglang"]
    base_url: str
    hf_id: str
    served_model: str = Field(pattern=SERVED_NAME)
    quantization: str
    hardware: Hardware
    spec_method: SpecMethod = "NONE"
    spec_num_tokens: int | None = Field(default=None, ge=1, validate_default=True)
    spec_draft_model: str | None = None
    prompt_tokens: int = Field(ge=1)
    max_tokens: int = Field(ge=2)
    concurrency: int = Field(default=1, ge=1)
    warmup: int = Field(default=2, ge=0)
    iterations: int = Field(default=5, ge=1)
    tokenizer: Path | None = None
    allow_prompt_mismatch: bool = False
    prompt_seed: int | None = Field(default=None, ge=0)
    request_timeout_s: float = Field(default=600.0, gt=0)
    #: no byte for this long once a stream has sent its first event: the stream stalled
    #: (the wait before the first event, prefill and queueing, is bounded by the request's)
    stall_timeout_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    simulated: bool = False
    toy_model: bool = False
    run_id: str | None = None
    config_name: str | None = None
    command: list[str] = Field(default_factory=list)
    engine_version: str | None = None
    tensor_parallel: int = Field(default=1, ge=1)
    prefix_caching: bool | None = None
    gpu_mem_util: float | None = Field(default=None, gt=0, le=1)
    command_snippet: str | None = None
    model_revision: str | None = None
    temperature: float = Field(default=0.0, ge=0)
    logprob_probes: int = Field(
        default=MAX_PROBES,
        ge=0,
        le=MAX_PROBES,
        description="greedy requests re-sent with logprobs after the timed iterations (0: none)",
    )
    prompt_set: PromptSet | None = Field(
        default=None,
        description="real-text prompts by category: each category is measured as its own "
        "windows (warmup + iterations); None: exact-length synthetic prompts",
    )
    enable_thinking: bool | None = Field(
        default=None, description="chat_template_kwargs.enable_thinking (None: not sent)"
    )

    @field_validator("spec_method", mode="before")
    @classmethod
    def _canon(cls, v: object) -> object:
        return canonical_spec_method(v)

    @field_validator("spec_num_tokens")
    @classmethod
    def _tokens_with_speculation(cls, v: int | None, info: ValidationInfo) -> int | None:
        method = info.data.get("spec_method")
        if v is None and method not in (None, "NONE"):
            raise ValueError(f"required with speculative method {method}")
        return v
