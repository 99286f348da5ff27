"""Contracts of the GPU-memory estimator: the model shape, the training setup, the breakdown.

Byte counts are per device. "GiB" is 2**30 bytes, "GB" 1e9 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

GIB = 2**30

Method = Literal["full", "lora", "qlora", "inference"]
# fp32: everything fp32. bf16_mixed: bf16 compute copy, fp32 master weights and optimizer state
# (LoRA: bf16 frozen base, fp32 adapters as PEFT keeps them). bf16: pure bf16, optimizer state in
# bf16 too (torchtune default, LLaMA-Factory pure_bf16). fp8: fp8 linears over bf16_mixed states.
Precision = Literal["fp32", "bf16_mixed", "bf16", "fp8"]
Optimizer = Literal["adamw", "adamw_8bit", "sgd", "paged_adamw", "paged_adamw_8bit"]
Attention = Literal["flash", "sdpa", "eager"]
# selective: Korthikanti et al. (recompute the attention core: QK^T, softmax, attention over V).
# selective_op: op-level SAC as in torchtitan (keep every other matmul output and the attention
# output, recompute element-wise ops). full: keep only each layer's input.
Recompute = Literal["none", "selective", "selective_op", "full"]
RecomputeModule = Literal["attention", "mlp"]
# standard: logits materialized and upcast to fp32 for cross-entropy (HF, torchtune, torchtitan).
# chunked: output projection and CE per chunk (torchtune CEWithChunkedOutputLoss, TRL chunked_nll).
# fused: linear + CE fused, logits never materialized (Liger FLCE, Apple CCE).
LossImpl = Literal["standard", "chunked", "fused"]
# auto: nf4 for qlora, none otherwise. nf4 and int8 are bitsandbytes; gptq_* are GPTQ kernels.
Quantization = Literal["auto", "none", "nf4", "int8", "gptq_int4", "gptq_int8"]
Offload = Literal["none", "optimizer", "all"]
MlpKind = Literal["gated", "plain"]
NormKind = Literal["rms", "layer", "layer_nobias", "nonparametric"]
LinearName = Literal["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PeakPhase = Literal["backward_start", "layer_backward", "optimizer_step", "inference"]
# The training stack, where it changes the answer. hf: transformers + PEFT (a quantized base is
# prepared with prepare_model_for_kbit_training, which upcasts every non-quantized parameter,
# embeddings, lm_head and norms, to fp32). lightning: Lightning Fabric / LitGPT (FSDP with
# use_orig_params keeps a gradient shard for frozen base weights too). torchtune, torchtitan: the
# PyTorch-native recipes (bf16 throughout, no upcast).
Stack = Literal["hf", "lightning", "torchtune", "torchtitan"]
# What a measured or planned figure means: torch.cuda.max_memory_allocated, max_memory_reserved
# (what the caching allocator holds; what runs out first), or the device total nvidia-smi shows.
Measure = Literal["allocated", "reserved", "device"]

# Allocator constants (the only fitted numbers; tools/calibration.py fits them and reports their
# leave-one-source-out error): the reserve the cache keeps per byte of what is allocated and
# freed within a step (activations, loss, gradients, optimizer scratch), and the extra
# reserve per byte of shape-dependent memory (activations and loss) when batch shapes vary, as
# blocks cached for one length cannot serve another and the pool grows toward the longest batch.
ALLOCATOR_RESERVE = 0.2
FRAGMENTATION = 2.0
# Safety bias of the headline figure (fitted by tools/calibration.py with the allocator
# constants): the smallest lift that keeps leave-one-source-out under-estimates beyond 10 % rare.
# The unbiased figure is still reported as "expected".
HEADLINE_BIAS = 0.12

ALL_LINEAR: tuple[LinearName, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)


class ModelSpec(BaseModel):
    """Shape of a decoder-only transformer: Llama-style by default (RMSNorm, RoPE, GQA, gated
    MLP, no biases); the other fields describe the common variants read from config.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    intermediate_size: int = Field(gt=0, description="MLP width; under MoE, one expert's")
    vocab_size: int = Field(gt=0)
    tie_embeddings: bool = False
    max_context: int = Field(default=4096, gt=0)
    head_dim: int | None = None  # None: hidden_size // num_heads
    qkv_bias: bool = False
    qk_norm: bool = False
    # The forward casts the logits to fp32 before the loss (transformers' Llama-style models,
    # `logits.float()`; torchtune and torchtitan cast in their loss). Qwen1's remote code
    # (modeling_qwen.py) hands lm_head's 16-bit output straight to CrossEntropyLoss.
    logits_upcast: bool = True
    mlp: MlpKind = Field(
        default="gated",
        description="gated: gate/up/down (SwiGLU, GeGLU); plain: up, activation, down (GPT-2)",
    )
    norm: NormKind = Field(
        default="rms",
        description="rms: weight only; layer: weight and bias; layer_nobias: weight only "
        "(MPT); nonparametric: no parameters (OLMo-1)",
    )
    norms_per_layer: int = Field(
        default=2, ge=0, description="2 pre-norm; 1 parallel block sharing one norm; 4 Gemma-2"
    )
    parallel_block: bool = Field(
        default=False,
        description="attention and MLP read the same layer input (Falcon parallel_attn, "
        "GPT-NeoX use_parallel_residual, Phi-2)",
    )
    qk_norm_per_head: bool = Field(
        default=True, description="qk_norm over head_dim (Qwen3), else over all heads (OLMoE)"
    )
    attn_out_bias: bool = Field(default=False, description="the attention output has a bias")
    mlp_bias: bool = Field(default=False, description="the MLP linears have biases")
    lm_head_bias: bool = Field(default=False, description="lm_head has a bias (Phi-2)")
    position_embeddings: int = Field(
        default=0, ge=0, description="rows of a learned position table (GPT-2, OPT); 0: none"
    )
    embedding_norm: bool = Field(default=False, description="a norm after the embedding (BLOOM)")
    num_experts: int = Field(default=0, ge=0, description="routed experts per layer; 0: dense")
    experts_per_token: int = Field(default=0, ge=0, description="routed experts a token uses")
    shared_expert_size: int = Field(
        default=0, ge=0, description="MLP width of the always-active shared expert(s)"
    )
    shared_expert_gate: bool = Field(
        default=False, description="a sigmoid gate on the shared expert (Qwen2-MoE)"
    )
    # FlashAttention saves Q, K, V, its output and one logsumexp per row whatever the window, and
    # HF's eager/sdpa paths build the full s x s mask with the window applied: the activation
    # terms do not depend on it. Kept for what does (a KV cache bounded by the window).
    sliding_window: int | None = Field(
        default=None, description="sliding-window attention span (Mistral v0.1, Gemma-2)"
    )

    @model_validator(mode="after")
    def _experts(self) -> ModelSpec:
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise ValueError("experts_per_token must be in 1..num_experts under MoE")
        return self

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def mlp_branches(self) -> int:
        """Input projections of the MLP: gate and up (gated) or up alone (plain)."""
        return 2 if self.mlp == "gated" else 1

    @property
    def mlp_width_per_token(self) -> int:
        """MLP intermediate width one token passes through: its routed experts and the shared
        expert under MoE, intermediate_size otherwise."""
        if not self.num_experts:
            return self.intermediate_size
        return self.intermediate_size * self.experts_per_token + self.shared_expert_size


class TrainingSetup(BaseModel):
    """Everything besides the model shape that decides peak memory per device."""

    model_config = ConfigDict(extra="forbid")

    method: Method = "lora"
    precision: Precision = "bf16_mixed"
    optimizer: Optimizer = "adamw"
    optimizer_in_backward: bool = False  # step each parameter as its gradient arrives
    optimizer_fused: bool = False  # fused kernel (DeepSpeed, torch fused=True): no step scratch
    seq_len: int = Field(default=2048, gt=0)
    micro_batch: int = Field(default=1, gt=0)
    grad_accum_steps: int = Field(default=1, gt=0)  # >1 keeps gradients alive during forward
    packing: bool = True
    attention: Attention = "flash"
    recompute: Recompute = "full"
    recompute_modules: tuple[RecomputeModule, ...] = ()  # non-empty: checkpoint these modules
    activation_offload: bool = False  # checkpointed layer inputs live on the CPU
    loss: LossImpl = "standard"
    loss_chunks: int = Field(default=8, gt=0)  # chunked loss: chunks the tokens are split into
    # Liger-Kernel (apply_liger_kernel_to_*): fused linear cross-entropy (the loss as
    # loss="fused", logits never materialized), fused RMSNorm (saves its input in its own dtype
    # and one fp32 rstd per row), fused SwiGLU (saves gate and up only), fused RoPE (in place).
    liger: bool = False
    # Fused LoRA kernels (Unsloth's LoRA_QKV / LoRA_MLP / LoRA_W autograd functions): one saved
    # input per fused group, no A output and no dropout copy (the fused path needs dropout 0).
    fused_lora: bool = False
    # The loss runs under torch.compile (torchtune recipes with compile=True call
    # training.compile_loss; torchtitan's build_cross_entropy_loss with --training.compile):
    # inductor fuses the fp32 upcast, log-softmax and NLL, saves only the 16-bit logits and a
    # logsumexp per row, and its backward writes the logits' gradient in their dtype.
    compile_loss: bool = False
    zero: Literal[0, 1, 2, 3] = 0  # 3 == FSDP full shard
    dp: int = Field(default=1, gt=0)
    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    sequence_parallel: bool = True  # only meaningful when tp > 1
    # CPU offload. optimizer: optimizer states and their step on the host (DeepSpeed
    # offload_optimizer, which also moves the gradient partitions; torchao's CPUOffloadOptimizer,
    # which keeps them). all: parameters, gradients and optimizer states on the host (FSDP
    # CPUOffload(offload_params=True), DeepSpeed ZeRO-3 offload_param + offload_optimizer).
    offload: Offload = "none"
    quantization: Quantization = "auto"
    double_quant: bool = True
    fp32_grad_accum: bool = False  # DeepSpeed/Megatron keep an extra fp32 gradient buffer
    lora_rank: int = Field(default=16, gt=0)
    lora_targets: tuple[LinearName, ...] = ALL_LINEAR
    lora_dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    train_embeddings: bool = False  # embeddings and lm_head fully trainable (modules_to_save)
    # PEFT's stock prepare_model_for_kbit_training on a bitsandbytes base: every non-quantized
    # parameter (embeddings, norms, lm_head) becomes fp32, and with them the residual stream.
    # None: it runs on the hf stack unless the base is sharded (ZeRO-3/FSDP over >1 GPU), where
    # TRL and accelerate skip it (sharded QLoRA); False where a trainer prepares without the
    # upcast (fms-acceleration's bnb plugin, Answer.AI's train.py).
    kbit_upcast: bool | None = None
    # The training loop holds the model output (and so its logits) through backward, as a
    # hand-written loop does (`output = model(...)`; `output.loss.backward()`); HF Trainer
    # returns only the loss from compute_loss.
    output_held: bool = False
    # Activation checkpointing is HF's model-level gradient checkpointing with use_reentrant=True
    # (transformers' default): torch.utils.checkpoint runs around each FSDP-wrapped decoder
    # layer, so FSDP1 sees the layer's input as a detached leaf in the recomputed forward.
    # False for use_reentrant=False, or torch's checkpoint_wrapper applied inside the FSDP units
    # (apply_activation_checkpointing: Answer.AI's train.py, accelerate's
    # fsdp_activation_checkpointing).
    hf_reentrant_checkpointing: bool = True
    stack: Stack = "hf"
    # HF Trainer hands mixed precision to DeepSpeed's engine: the model is cast to bf16/fp16 and
    # no torch.autocast region runs (accelerate enables native AMP only without DeepSpeed).
    deepspeed: bool = False
    # DeepSpeed `reduce_bucket_size` (elements: ZeRO-1/2's gradient buckets, ZeRO-3's
    # contiguous-gradient bucket), `overlap_comm` and ZeRO-3's `stage3_prefetch_bucket_size`;
    # defaults are DeepSpeed's own (5e8, off, 5e7). HF's "auto" sets hidden^2 and 0.9 hidden^2.
    reduce_bucket_elements: float = Field(default=5e8, gt=0.0)
    overlap_comm: bool = False
    prefetch_bucket_elements: float = Field(default=5e7, gt=0.0)
    variable_length: bool = False  # batch shapes vary (unpacked rows padded per batch)
    cuda_context_gib: float = Field(default=0.5, ge=0.0)
    allocator_reserve: float = Field(default=ALLOCATOR_RESERVE, ge=0.0)
    fragmentation: float = Field(default=FRAGMENTATION, ge=0.0)
    nccl_gib: float | None = Field(default=None, ge=0.0)  # None: 0 on one GPU, 0.5 otherwise

    @model_validator(mode="after")
    def _check(self) -> TrainingSetup:
        if self.method in ("lora", "qlora") and not self.lora_targets:
            raise ValueError("LoRA needs at least one target module")
        if self.method == "inference" and self.zero:
            raise ValueError("ZeRO sharding applies to training only")
        return self

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def tokens(self) -> int:
        return self.seq_len * self.micro_batch


@dataclass(frozen=True)
class Term:
    """One breakdown term explained: `formula`, an expression of + - * / over the numeric
    `inputs`, gives `bytes` (string inputs are notes, not operands)."""

    name: str
    formula: str
    inputs: dict[str, float | int | str] = field(default_factory=dict)
    bytes: float = 0.0

    def plus(self, formula: str, value: float, **inputs: float | int | str) -> Term:
        """This term with `formula` (of `inputs`, worth `value` bytes) added."""
        return Term(
            self.name, f"{self.formula} + {formula}", self.inputs | inputs, self.bytes + value
        )

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "formula": self.formula,
            "inputs": self.inputs,
            "bytes": int(self.bytes),
            "gib": round(self.bytes / GIB, 3),
        }


def zero_term(name: str, why: str) -> Term:
    """A term that holds nothing on the device at the peak, and why."""
    return Term(name, "0", {"why": why}, 0.0)


class MemoryBreakdown(BaseModel):
    """Peak memory per device, in bytes: the terms alive at the peak moment.

    Memory peaks at one of a few moments of a step: the start of the backward pass (all stored
    activations plus the loss's gradient spike), the backward of the last layer (`layer_backward`:
    a checkpointed layer's activations rebuilt and its gradient working set, logits already
    freed), or the optimizer step (all gradients plus
    optimizer scratch, activations freed). `phases` gives the device total at each moment;
    `peak_phase` names the largest, and the terms below are what is alive then, so they sum to
    `allocated_bytes`; plus `allocator_reserve` they make `reserved_bytes`, plus `context`
    `total_bytes`. `components` (not in the JSON) is each term's full size at any moment.
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    params: int
    trainable_params: int
    weights: int
    gradients: int
    optimizer: int
    optimizer_step_temp: int  # foreach optimizer scratch during step()
    activations: int
    logits_and_loss: int
    adapters: int  # LoRA A/B weights with their gradients and optimizer state
    buffers: int  # gathered ZeRO-3/FSDP layers, ZeRO buckets, dequantized weight tiles
    allocator_reserve: int  # reserved - allocated (cache; fragmentation when shapes vary)
    context: int  # CUDA context + NCCL buffers, outside the allocator
    paged_optimizer: int = 0  # bitsandbytes paged states: unified memory, outside the allocator
    peak_phase: PeakPhase
    phases: dict[str, int]  # device total (with overhead) at each candidate moment
    # (allocated, allocated within the step, loss buffers, other streams' cached pools) per
    # moment, without overheads: what the calibration needs to refit the allocator constants
    # (not in the JSON)
    phase_parts: dict[str, tuple[int, int, int, int]] = Field(default_factory=dict)
    variable_length: bool = False
    components: dict[str, int]  # full size of every term, whether or not alive at the peak
    regime: str  # the calibration regime this setup belongs to (docs/calibration.md)
    plan_margin: float  # leave-one-source-out under-estimation margin of that regime
    allocated_bytes: int  # what torch.cuda.max_memory_allocated would report
    reserved_bytes: int  # what torch.cuda.max_memory_reserved would report
    total_bytes: int  # device total, as nvidia-smi would show it
    # each term at the peak with its formula and inputs (estimate --explain; not in as_json)
    explain: tuple[Term, ...] = ()

    def terms(self) -> dict[str, int]:
        """The breakdown terms, in bytes, in display order."""
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "optimizer_step_temp": self.optimizer_step_temp,
            "activations": self.activations,
            "logits_and_loss": self.logits_and_loss,
            "adapters": self.adapters,
            "buffers": self.buffers,
            "allocator_reserve": self.allocator_reserve,
            "context": self.context,
            "paged_optimizer": self.paged_optimizer,
        }

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB

    def measured(self, measure: Measure) -> int:
        """The figure a measurement of kind `measure` would report."""
        return {"allocated": self.allocated_bytes, "reserved": self.reserved_bytes}.get(
            measure, self.total_bytes
        )

    def headline(self, measure: Measure = "reserved", bias: float = HEADLINE_BIAS) -> int:
        """The headline figure: the `measure` figure lifted by the calibrated safety bias."""
        return int(self.measured(measure) * (1.0 + bias))

    @property
    def plan_with_bytes(self) -> int:
        """The conservative figure to plan with: the device total plus its regime's margin."""
        return int(self.total_bytes * (1.0 + self.plan_margin))

    def as_json(self, measure: Measure = "reserved") -> dict[str, object]:
        """Machine-readable summary. `total_gib` is the headline: the `measure` figure (default
        reserved, what runs out first) with the safety bias; `expected_gib` the same figure
        without it; `device_gib` the device total; then bytes and GiB per term and the phases."""
        return {
            "model": self.model,
            "params": self.params,
            "trainable_params": self.trainable_params,
            "peak_phase": self.peak_phase,
            "regime": self.regime,
            "measure": measure,
            "total_gib": round(self.headline(measure) / GIB, 3),
            "expected_gib": round(self.measured(measure) / GIB, 3),
            "safety_bias": HEADLINE_BIAS,
            "device_gib": round(self.total_gib, 3),
            "plan_with_gib": round(self.plan_with_bytes / GIB, 3),
            "plan_margin": round(self.plan_margin, 3),
            "allocated_gib": round(self.allocated_bytes / GIB, 3),
            "reserved_gib": round(self.reserved_bytes / GIB, 3),
            "total_bytes": self.total_bytes,
            "breakdown": {
                k: {"bytes": v, "gib": round(v / GIB, 3)} for k, v in self.terms().items()
            },
            "phases_gib": {k: round(v / GIB, 3) for k, v in self.phases.items()},
        }
