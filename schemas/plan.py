"""Stage plans: configuration of the training stages and the plan.json written per snapshot."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.memory import ALL_LINEAR, Attention, LinearName, LossImpl, Method, Optimizer, Precision

Scheduler = Literal["cosine", "linear", "constant_with_warmup"]

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

    name: str = Field(
        description=(
            "stage name: its entry in plan.json and its trainer config files "
            "(`trainer/.../<name>.yaml`); unique"
        )
    )
    corpus: str = Field(
        description=(
            "rows whose token lengths the stage is planned on: 'pretrain' (manual chunks), "
            "'tier_A', 'tier_B', 'tier_C' (SFT rows of that tier) or 'sft_tools' (tool-use "
            "samples)"
        )
    )
    share: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description=(
            "fraction (0 to 1] of the corpus rows the stage uses; below 1 a seeded sample of the "
            "lengths (`plan.seed`) is planned on"
        ),
    )
    model: str = Field(
        "qwen2.5-7b",
        description="model preset name (e.g. 'qwen2.5-7b') or a path to a config.json",
    )
    method: Method = Field(
        "lora", description="training method: 'full', 'lora', 'qlora' or 'inference'"
    )
    precision: Precision = Field(
        "bf16_mixed",
        description=(
            "'fp32'; 'bf16_mixed' (bf16 compute copy, fp32 master weights and optimizer state); "
            "'bf16' (pure bf16, optimizer state too); 'fp8' (fp8 linears over bf16_mixed states)"
        ),
    )
    optimizer: Optimizer = Field(
        "adamw",
        description=(
            "optimizer whose state the memory estimate counts and the trainer configs set"
        ),
    )
    attention: Attention = Field(
        "flash",
        description=(
            "attention kernel: 'flash' (FlashAttention 2), 'sdpa' or 'eager'; eager holds the "
            "attention scores"
        ),
    )
    loss: LossImpl = Field(
        "standard",
        description=(
            "'standard' (logits materialized, upcast to fp32), 'chunked' (projection and loss per "
            "chunk) or 'fused' (linear + cross-entropy fused, logits never materialized)"
        ),
    )
    lora_rank: int = Field(default=16, gt=0, description="LoRA/QLoRA adapter rank")
    lora_targets: tuple[LinearName, ...] = Field(
        ALL_LINEAR, description="linear layers that get LoRA adapters (default: all of them)"
    )
    packing: bool = Field(
        True,
        description=(
            "pack several rows into each max_seq_len sequence (else each row is padded to "
            "max_seq_len); changes the packing efficiency, the memory estimate and the trainer "
            "configs"
        ),
    )
    quantile: float = Field(
        default=0.99,
        gt=0.0,
        le=1.0,
        description=(
            "max_seq_len covers this quantile (0 to 1] of the stage's row lengths (rounded up to "
            "`plan.seq_multiple`, capped by the model's context); longer rows are truncated"
        ),
    )
    min_steps_per_epoch: int = Field(
        default=50,
        gt=0,
        description=(
            "optimizer steps one epoch should have at least: the tokens per step are the epoch's "
            "token slots divided by this, whole sequences, at least one sequence per device and "
            "at most `max_tokens_per_step`; a stage of fewer sequences gets one per device and "
            "step"
        ),
    )
    max_tokens_per_step: int = Field(
        default=131_072,
        gt=0,
        description=(
            "most tokens (sequence slots) per optimizer step: the cap of a large stage's batch, "
            "reached when the epoch has at least `min_steps_per_epoch` steps of it"
        ),
    )
    learning_rate: float | None = Field(
        None,
        gt=0.0,
        description=(
            "peak learning rate; None: by method (full 1e-5, LoRA 1e-4, QLoRA 2e-4: "
            "`pipeline/training/schedule.py` cites the sources)"
        ),
    )
    epochs: int | None = Field(
        None,
        gt=0,
        description=(
            "passes over the stage's rows; None: by corpus (pretrain 1: domain adaptation on "
            "manuals; tier_A 3: expert samples; tier_B and sft_tools 2; tier_C 1: the small "
            "alignment share)"
        ),
    )
    warmup_ratio: float = Field(
        default=0.03,
        ge=0.0,
        lt=1.0,
        description=(
            "share of the stage's optimizer steps the learning rate warms up over (rounded up)"
        ),
    )
    min_warmup_steps: int = Field(
        default=10,
        ge=0,
        description=(
            "warmup steps at least, where that is at most a tenth of the stage's steps (a stage "
            "of a few steps warms up over `warmup_ratio` of them, at least one)"
        ),
    )
    scheduler: Scheduler = Field(
        "cosine",
        description=(
            "learning-rate schedule after warmup (transformers `lr_scheduler_type`): 'cosine', "
            "'linear' or 'constant_with_warmup'"
        ),
    )
    gpus: tuple[str, ...] = Field(
        DEFAULT_GPUS,
        description=(
            "GPU targets (preset names, smallest first; '2xa100-80g' is two cards) the stage is "
            "fitted on"
        ),
    )
    multi_gpu_zero: int = Field(
        default=3,
        ge=0,
        le=3,
        description="DeepSpeed ZeRO stage (0 to 3) of a target with more than one device",
    )


class PlanConfig(BaseModel):
    """The training stages each snapshot plans (plan.json) and how their GPUs are fitted."""

    model_config = ConfigDict(extra="forbid")

    stages: list[StageConfig] = Field(
        default_factory=lambda: [
            StageConfig(
                name="domain-adapt",
                corpus="pretrain",
                lora_rank=64,
                max_tokens_per_step=524_288,
            ),
            StageConfig(name="sft-expert", corpus="tier_A"),
            StageConfig(name="sft-broad", corpus="tier_B"),
            StageConfig(name="sft-tools", corpus="sft_tools"),
            StageConfig(name="align", corpus="tier_C", share=0.1, max_tokens_per_step=65_536),
        ],
        description=(
            "the training stages planned in each snapshot's plan.json, in order; each gets a "
            "trainer config per fitting GPU target"
        ),
    )
    headroom: float = Field(
        0.15,
        description=(
            "share (0.15 to 0.2) of each card's memory left free when the largest micro-batch that"
            " fits is chosen"
        ),
    )
    seq_multiple: int = Field(
        default=128, gt=0, description="tokens: max_seq_len is rounded up to a multiple of this"
    )
    seed: int = Field(
        0, ge=0, description="seed of the row sample of a stage whose `share` is below 1"
    )

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


class BatchRule(BaseModel):
    """Tokens per optimizer step chosen from the stage's size, and why."""

    model_config = ConfigDict(extra="forbid")

    min_steps_per_epoch: int
    max_tokens_per_step: int
    target_tokens_per_step: int  # whole sequences; the accumulation is chosen to reach it
    reason: str  # the rule with this stage's numbers


class Schedule(BaseModel):
    """Learning rate, epochs, warmup and scheduler of a stage; `reasons` says why each."""

    model_config = ConfigDict(extra="forbid")

    learning_rate: float
    epochs: int
    warmup_ratio: float
    min_warmup_steps: int
    scheduler: str
    reasons: dict[str, str]  # learning_rate, epochs, warmup, scheduler -> why


class GpuFit(BaseModel):
    """The largest micro-batch of `max_seq_len` rows one target fits, and what it needs."""

    model_config = ConfigDict(extra="forbid")

    gpu: str
    devices: int
    memory_gib: float
    fits: bool
    recompute: str  # least recomputation that fits one row: none | selective | full
    recompute_needed: bool
    micro_batch: int  # rows per device and forward pass: min(max_micro_batch, what a step takes)
    max_micro_batch: int  # the largest that fits with `recompute`; 0 when nothing fits
    micro_batch_full_recompute: int
    grad_accum_steps: int | None  # ceil(target tokens per step / (micro_batch x seq x devices))
    tokens_per_step: int | None  # micro_batch x max_seq_len x devices x grad_accum_steps
    steps_per_epoch: int | None  # ceil(sequences per epoch x max_seq_len / tokens_per_step)
    total_steps: int | None  # steps_per_epoch x epochs
    warmup_steps: int | None
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
    sequences_per_epoch: int  # packed bins, or rows when each row is padded
    batch: BatchRule
    schedule: Schedule
    gpus: list[GpuFit]


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    headroom: float
    stages: list[StagePlan]
