"""Stage plans: configuration of the training stages and the plan.json written per snapshot."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.memory import ALL_LINEAR, Attention, LinearName, LossImpl, Method, Optimizer, Precision

DEFAULT_GPUS: tuple[str, ...] = (
    "rtx-4090",
    "a100-40g",
    "l40s-48g",
    "a100-80g",
    "h100-80g",
    "h200-141g",
    "2xa100-80g",
)


class StageConfig(BaseModel):
    """One training stage: which corpus, which model and method, which GPUs to fit."""

    model_config = ConfigDict(extra="forbid")

    name: str
    corpus: str  # key of the lengths mapping: "pretrain", "tier_A", "tier_B", "tier_C", "sft_tools"
    share: float = Field(default=1.0, gt=0.0, le=1.0)  # fraction of the corpus rows used
    model: str = "qwen2.5-7b"  # preset name or a config.json path
    method: Method = "lora"
    precision: Precision = "bf16_mixed"
    optimizer: Optimizer = "adamw"
    attention: Attention = "flash"
    loss: LossImpl = "standard"
    lora_rank: int = Field(default=16, gt=0)
    lora_targets: tuple[LinearName, ...] = ALL_LINEAR
    packing: bool = True
    quantile: float = Field(default=0.99, gt=0.0, le=1.0)  # of row lengths max_seq_len covers
    global_batch_tokens: int = Field(default=131_072, gt=0)
    gpus: tuple[str, ...] = DEFAULT_GPUS
    multi_gpu_zero: int = Field(default=3, ge=0, le=3)  # sharding when a target has >1 device


class PlanConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stages: list[StageConfig] = Field(
        default_factory=lambda: [
            StageConfig(
                name="domain-adapt",
                corpus="pretrain",
                lora_rank=64,
                global_batch_tokens=524_288,
            ),
            StageConfig(name="sft-expert", corpus="tier_A"),
            StageConfig(name="sft-broad", corpus="tier_B"),
            StageConfig(name="sft-tools", corpus="sft_tools"),
            StageConfig(name="align", corpus="tier_C", share=0.1, global_batch_tokens=65_536),
        ]
    )
    headroom: float = 0.15
    seq_multiple: int = Field(default=128, gt=0)
    seed: int = Field(0, ge=0)  # for the share sample

    @field_validator("headroom")
    @classmethod
    def _headroom(cls, v: float) -> float:
        if not 0.15 <= v <= 0.2:
            raise ValueError("headroom should be between 0.15 and 0.2 of the card")
        return v


class TokenStats(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rows: int
    tokens: int
    mean: float
    p50: int
    p90: int
    p95: int
    p99: int
    max: int


class GpuFit(BaseModel):
    """The largest micro-batch of `max_seq_len` rows one target fits, and what it needs."""

    model_config = ConfigDict(extra="forbid")

    gpu: str
    devices: int
    memory_gib: float
    fits: bool
    recompute: str  # least recomputation that fits one row: none | selective | full
    recompute_needed: bool
    micro_batch: int  # with `recompute`; 0 when nothing fits
    micro_batch_full_recompute: int
    grad_accum_steps: int | None
    tokens_per_step: int | None  # micro_batch x max_seq_len x devices x grad_accum_steps
    peak_gib: float | None  # expected device total at the chosen micro-batch
    # what the fit was decided with: the expected total plus its regime's leave-one-source-out
    # margin (docs/calibration.md)
    plan_with_gib: float | None = None


class StagePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    corpus: str
    model: str
    method: Method
    share: float
    stats: TokenStats
    quantile: float
    max_seq_len: int
    truncation_rate: float  # rows longer than max_seq_len
    truncated_token_rate: float  # tokens cut off
    packing: bool
    packing_efficiency: float  # real tokens / token slots (packed bins or padded rows)
    global_batch_tokens: int
    gpus: list[GpuFit]


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    headroom: float
    stages: list[StagePlan]
