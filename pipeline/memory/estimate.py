"""Peak GPU memory per device for training or serving a Llama/Qwen-style decoder.

The terms follow the physics in ../shared/reference/gpu-memory.md:
- model states per parameter by precision regime and optimizer (ZeRO paper accounting: 16 B for
  bf16 mixed Adam), sharded by ZeRO stage / FSDP over the data-parallel degree, split by TP/PP;
- activations tensor by tensor for an RMSNorm + RoPE + GQA + SwiGLU block, adapting Korthikanti
  et al. (2022): what autograd saves depends on which weights train (a frozen linear does not
  keep its input), the attention kernel (FlashAttention keeps no s x s matrix) and recomputation;
- the logits / cross-entropy spike: tokens x vocab elements, 12 bytes each for an fp32-upcast
  loss at the start of the backward pass (fp32 log-probs saved + their gradient + the logits'
  gradient), half that for a loss kept in 16 bit (no upcast, no autocast), 4 bytes when
  torch.compile fuses the loss (16-bit logits saved + their gradient), less when chunked or fused;
- LoRA adapters and QLoRA NF4 storage (4.127 bit/param with double quantization);
- quantized bases: the HF stack (PEFT `prepare_model_for_kbit_training`) upcasts every
  non-quantized parameter (embeddings, lm_head, norms, biases) to fp32; one linear at a time is
  dequantized to bf16 for its matmuls;
- buffers: ZeRO-3/FSDP gather the current and the prefetched layer (plus DeepSpeed's 5e7-element
  prefetch bucket), DeepSpeed ZeRO-1/2's gradient buckets (reduce_bucket_size, two with
  overlap_comm, whatever trains), other ZeRO-1/2 reduce and all-gather buckets; FSDP1 under
  Lightning keeps a gradient shard for frozen base weights in a flat parameter that also holds
  adapters;
- the backward of one layer: its recomputed activations plus the gradients of the MLP's two
  widest intermediates (gate and up, 2 x intermediate_size per token);
- the caching allocator: reserved = allocated + reserve x what is allocated within a step, plus,
  when batch shapes vary, a fragmentation share of the loss buffers (the step's largest blocks);
  then CUDA context and NCCL buffers on top, outside the allocator, and bitsandbytes paged
  optimizer states, which live in unified memory the allocator never sees.
Only the two allocator constants (schemas.memory.ALLOCATOR_RESERVE, FRAGMENTATION) are fitted;
docs/calibration.md gives the in-sample and leave-one-source-out errors against published peaks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from schemas.memory import GIB, MemoryBreakdown, ModelSpec, TrainingSetup

from .gpus import Gpu
from .margins import DEFAULT_PLAN_MARGIN, PLAN_MARGINS

# Bytes per parameter of quantized linear weights.
NF4_DQ_BYTES = (4 + 8 / 64 + 32 / (64 * 256)) / 8  # 4.127 bit: NF4 + double-quantized absmax
NF4_BYTES = (4 + 32 / 64) / 8  # 4.5 bit: NF4 + fp32 absmax per 64 weights
GPTQ_INT4_BYTES = (4 + (16 + 4) / 128) / 8  # int4 + fp16 scale and 4-bit zero per group of 128
GPTQ_INT8_BYTES = (8 + (16 + 8) / 128) / 8  # int8 + fp16 scale and 8-bit zero per group of 128
INT8_BYTES = 1.0

# Logit-element bytes at the loss spike (start of backward) by loss implementation.
LOGIT_BYTES_STANDARD = 12.0  # fp32 log-probs (saved) + fp32 grad of log-probs + fp32 grad of logits
LOGIT_BYTES_BF16_CHUNK = 2.0  # chunked: bf16 logits chunks stay materialized
LOGIT_BYTES_HELD = 4.0  # fp32 logits of a model output the training loop still holds

# DeepSpeed defaults, in elements (16-bit): ZeRO-1/2 reduce and all-gather buckets, ZeRO-3
# prefetch bucket.
ZERO_BUCKET_ELEMENTS = 5e8
ZERO3_PREFETCH_ELEMENTS = 5e7


@dataclass(frozen=True)
class ParamCounts:
    embedding: int
    lm_head: int  # 0 when tied to the embedding
    per_layer: int
    per_layer_linear: int  # the part that quantizes (q/k/v/o/gate/up/down weights)
    largest_linear: int
    final_norm: int
    num_layers: int

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.final_norm + self.per_layer * self.num_layers


def linear_shapes(m: ModelSpec) -> dict[str, tuple[int, int]]:
    """(d_in, d_out) of each linear in one decoder layer."""
    h, d = m.hidden_size, m.d_head
    q, kv = m.num_heads * d, m.num_kv_heads * d
    f = m.intermediate_size
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, f),
        "up_proj": (h, f),
        "down_proj": (f, h),
    }


def param_counts(m: ModelSpec) -> ParamCounts:
    shapes = linear_shapes(m)
    linear = sum(i * o for i, o in shapes.values())
    bias = (shapes["q_proj"][1] + 2 * shapes["k_proj"][1]) if m.qkv_bias else 0
    norms = 2 * m.hidden_size + (2 * m.d_head if m.qk_norm else 0)
    emb = m.vocab_size * m.hidden_size
    return ParamCounts(
        embedding=emb,
        lm_head=0 if m.tie_embeddings else emb,
        per_layer=linear + bias + norms,
        per_layer_linear=linear,
        largest_linear=max(i * o for i, o in shapes.values()),
        final_norm=m.hidden_size,
        num_layers=m.num_layers,
    )


def lora_params_per_layer(m: ModelSpec, rank: int, targets: tuple[str, ...]) -> int:
    shapes = linear_shapes(m)
    return sum(rank * (shapes[t][0] + shapes[t][1]) for t in targets)


def state_bytes_per_param(setup: TrainingSetup) -> tuple[float, float, float]:
    """(weight, gradient, optimizer) bytes per fully trained parameter.

    bf16_mixed Adam: 2 + 2 + 12 (fp32 master, m, v) = 16; pure bf16 Adam: 2 + 2 + 4 = 8;
    fp32 Adam: 4 + 4 + 8 = 16. fp8 linears keep bf16_mixed states (no saving in model states).
    """
    p = setup.precision
    weight = 4.0 if p == "fp32" else 2.0
    grad = weight + (4.0 if setup.fp32_grad_accum and p != "fp32" else 0.0)
    state = 2.0 if p == "bf16" else 4.0  # dtype of optimizer moments
    master = 4.0 if p in ("bf16_mixed", "fp8") else 0.0
    return weight, grad, master + _moment_bytes(setup.optimizer, state)


def _moment_bytes(optimizer: str, state_dtype_bytes: float) -> float:
    """Optimizer moments per trainable parameter (paged variants have the same footprint)."""
    if optimizer.endswith("8bit"):
        return 2.0  # m and v in 8 bit (block-wise absmax adds ~1 %)
    if optimizer == "sgd":
        return state_dtype_bytes  # momentum buffer
    return 2 * state_dtype_bytes  # Adam m and v


def _step_temp_bytes(optimizer: str, state_dtype_bytes: float) -> float:
    """Scratch of torch's foreach AdamW: one state-sized temporary (sqrt of v) per parameter."""
    return 0.0 if optimizer.endswith("8bit") or optimizer == "sgd" else state_dtype_bytes


def _quant_bytes(setup: TrainingSetup) -> float | None:
    q = setup.quantization
    if q == "auto":
        q = "nf4" if setup.method == "qlora" else "none"
    if q == "none":
        return None
    if q == "nf4":
        return NF4_DQ_BYTES if setup.double_quant else NF4_BYTES
    return {"gptq_int4": GPTQ_INT4_BYTES, "gptq_int8": GPTQ_INT8_BYTES}.get(q, INT8_BYTES)


def ipg_buffer_bytes(s: TrainingSetup) -> float:
    """DeepSpeed ZeRO-1/2 gradient buckets: one or (overlap_comm) two of reduce_bucket_size."""
    return s.reduce_bucket_elements * (2 if s.overlap_comm else 1) * 2.0


def _bnb(s: TrainingSetup) -> bool:
    """A bitsandbytes base (NF4 or LLM.int8)."""
    return _quant_bytes(s) is not None and not s.quantization.startswith("gptq")


def kbit_upcast(s: TrainingSetup) -> bool:
    """PEFT's stock prepare_model_for_kbit_training ran on a bitsandbytes base: it casts every
    non-quantized parameter (embeddings, norms, lm_head) to fp32. TRL skips it when the 4-bit
    weights are sharded (FSDP/ZeRO-3 over several GPUs); `s.kbit_upcast` overrides."""
    if not _bnb(s):
        return False
    if s.kbit_upcast is not None:
        return s.kbit_upcast
    return s.stack == "hf" and not (s.zero == 3 and s.dp > 1)


def stream_bytes(s: TrainingSetup) -> float:
    """Bytes per element of the residual stream. After the kbit upcast the fp32 embedding feeds
    fp32 hidden states, HF's RMSNorm returns weight(fp32) * x -> fp32, and bnb's Linear4bit casts
    its output back to its input's dtype: layer inputs and MLP intermediates are fp32."""
    if kbit_upcast(s):
        return 4.0
    return 4.0 if s.precision == "fp32" else 2.0


@dataclass(frozen=True)
class _Tensor:
    """A tensor autograd keeps for one layer: bytes per token, whether TP splits it."""

    name: str
    bytes_per_token: float
    tp_split: bool = True
    core: bool = False  # attention-core internal, dropped by selective recompute
    group: str = "attention"


def layer_saved_tensors(m: ModelSpec, s: TrainingSetup) -> list[_Tensor]:
    """Tensors one decoder layer saves for backward without recomputation (per token)."""
    h, d, a, kv, f = m.hidden_size, m.d_head, m.num_heads, m.num_kv_heads, m.intermediate_size
    e = 4.0 if s.precision == "fp32" else 2.0
    full = s.method == "full"
    lora = s.method in ("lora", "qlora")
    adapted = set(s.lora_targets) if lora else set()
    dropout = lora and s.lora_dropout > 0
    quantized = _quant_bytes(s) is not None  # bnb/GPTQ matmuls save their input for backward
    r = stream_bytes(s)
    # An fp32 stream: each quantized linear casts its input to the compute dtype and saves that
    # copy (one per linear, not shared); fp32 adapters read (and keep) the fp32 input itself.
    upcast = r > e

    def linear_in(width: int, modules: tuple[str, ...]) -> float:
        """Bytes per token kept of the input shared by `modules` (q/k/v or gate/up)."""
        if not upcast:
            return e * width if input_kept(*modules) else 0.0
        read_by_adapter = not dropout and bool(adapted.intersection(modules))
        return len(modules) * e * width + (r * width if read_by_adapter else 0.0)

    def input_kept(*modules: str) -> bool:
        """A linear input stays alive if its weight trains, its quantized matmul saves it, or a
        dropout-free adapter reads it."""
        return full or quantized or (not dropout and bool(adapted.intersection(modules)))

    kv_width = kv * d if s.attention == "flash" else a * d  # sdpa/eager repeat K,V to all heads
    t: list[_Tensor] = [
        _Tensor("attn_norm_fp32_in", 4.0 * h, tp_split=False),
        _Tensor("attn_norm_normed", e * h if full else 0.0, tp_split=False),
        _Tensor("qkv_in", linear_in(h, ("q_proj", "k_proj", "v_proj")), False),
        _Tensor("q_k_v", e * (a * d + 2 * kv_width)),
    ]
    if m.qk_norm:
        t.append(_Tensor("qk_norm_fp32_in", 4.0 * (a + kv) * d))
    if s.attention == "eager":
        t.append(_Tensor("softmax_fp32_and_probs", (4.0 + e) * a * s.seq_len, core=True))
        o_in = e * a * d if input_kept("o_proj") else 0.0
        t.append(_Tensor("o_proj_in", o_in))
    else:
        t.append(_Tensor("softmax_lse", 4.0 * a, core=True))
        # The kernel saves its output O, which is also o_proj's input.
        t.append(_Tensor("attn_out", e * a * d, core=not input_kept("o_proj")))
    t += [
        _Tensor("mlp_norm_fp32_in", 4.0 * h, tp_split=False, group="mlp"),
        _Tensor("mlp_norm_normed", e * h if full else 0.0, tp_split=False, group="mlp"),
        _Tensor("gate_up_in", linear_in(h, ("gate_proj", "up_proj")), False, group="mlp"),
        _Tensor("gate_up_silu", 3 * r * f, group="mlp"),  # gate, up and SiLU(gate), stream dtype
        _Tensor("down_in", linear_in(f, ("down_proj",)), group="mlp"),
    ]
    shapes = linear_shapes(m)
    for name in sorted(adapted):
        d_in = shapes[name][0]
        group = "mlp" if name in ("gate_proj", "up_proj", "down_proj") else "attention"
        split = name in ("o_proj", "down_proj")
        t.append(_Tensor(f"lora_{name}_a_out", e * s.lora_rank, False, group=group))
        if dropout:  # the dropped-out copy of x (stream dtype, o_proj's is 16-bit) and its mask
            x_b = e if name == "o_proj" else r
            t.append(_Tensor(f"lora_{name}_dropout", (x_b + 1.0) * d_in, split, group=group))
    return [x for x in t if x.bytes_per_token > 0]


def _per_token(tensors: list[_Tensor], tp: int, sp: bool) -> float:
    return sum(x.bytes_per_token / (tp if (x.tp_split or sp) else 1) for x in tensors)


@dataclass(frozen=True)
class _Acts:
    stored: float  # alive from forward through the start of backward
    transient: float  # extra while the last layer is recomputed (logits gone by then)


def activation_bytes(m: ModelSpec, s: TrainingSetup, layers: int, in_flight: int) -> _Acts:
    """Activation bytes of `layers` decoder layers holding `in_flight` micro-batches."""
    tokens = s.tokens
    tp, sp = s.tp, s.sequence_parallel and s.tp > 1
    e = 4.0 if s.precision == "fp32" else 2.0
    saved = layer_saved_tensors(m, s)
    full_layer = _per_token(saved, tp, sp)
    layer_in = stream_bytes(s) * m.hidden_size / (tp if sp else 1)
    if s.recompute_modules:
        groups = set(s.recompute_modules)
        kept = [x for x in saved if x.group not in groups]
        stored = _per_token(kept, tp, sp) + layer_in * len(groups)
        transient = max(_per_token([x for x in saved if x.group == g], tp, sp) for g in groups)
    elif s.recompute == "none":
        stored, transient = full_layer, 0.0
    elif s.recompute == "selective":
        core = _per_token([x for x in saved if x.core], tp, sp)
        stored, transient = full_layer - core, core
    elif s.recompute == "selective_op":
        h, d, a, kv, f = (m.hidden_size, m.d_head, m.num_heads, m.num_kv_heads,
                          m.intermediate_size)  # fmt: skip
        # layer input, q and v (1st and 3rd matmul), attention output + lse, gate (5th), down (7th)
        stored = layer_in + e * (a * d + kv * d + a * d + f + h) / tp + 4.0 * a / tp
        transient = max(full_layer - stored, 0.0)
    else:  # full
        stored, transient = layer_in, full_layer
    per_layer_stored = stored * tokens
    n_stored_layers = layers * in_flight
    if s.activation_offload:  # saved tensors stream to the CPU; about two layers stay resident
        n_stored_layers = min(n_stored_layers, 2)
    return _Acts(stored=per_layer_stored * n_stored_layers, transient=transient * tokens)


def fsdp1_held_input_grads(m: ModelSpec, s: TrainingSetup, layers: int) -> float:
    """Layer-input gradients FSDP1 keeps to the end of backward for frozen decoder units under
    HF's reentrant checkpointing (accelerate FSDP1 with PEFT: transformers' Trainer and
    fms-hf-tuning set PEFT's fsdp_auto_wrap_policy, so adapters are their own units and each
    decoder unit's flat parameter is frozen).

    torch.distributed.fsdp._runtime_utils._register_post_backward_reshard_only_hook runs in the
    grad-enabled (recomputed) forward of a frozen unit and calls
    torch.autograd.graph.register_multi_grad_hook on the unit's inputs; its closure keeps
    `grad_fns = list(map(_get_grad_fn_or_grad_acc, tensors))`, here the AccumulateGrad node of
    the checkpoint's detached input leaf, which holds that leaf (the checkpointed input's
    storage) and the gradient accumulated into its `.grad`. The handle is stored as
    `flat_param._post_backward_hook_state` and removed only by `_finalize_params` in the
    post-backward final callback. So every layer's checkpointed input stays alive through the
    backward pass (the estimate already holds all of them at a layer's backward) and gains its
    gradient, stream dtype x hidden per token: at the first layer's backward, one per layer.
    Not when the checkpoint runs inside the unit or without reentry: the hook then holds the
    previous layer's output node, whose saved tensors autograd releases as usual.
    """
    fsdp1 = s.zero == 3 and s.dp > 1 and not s.deepspeed and s.stack == "hf"
    frozen_units = s.method != "full"
    reentrant = s.recompute == "full" and not s.recompute_modules and s.hf_reentrant_checkpointing
    if not (fsdp1 and frozen_units and reentrant):
        return 0.0
    sp = s.sequence_parallel and s.tp > 1
    return layers * s.tokens * stream_bytes(s) * m.hidden_size / (s.tp if sp else 1)


def _mask_bytes(s: TrainingSetup) -> float:
    """Attention masks materialized for the whole forward: HF builds a 4D float mask for eager."""
    if s.attention == "eager":
        return s.micro_batch * s.seq_len**2 * (4.0 if s.precision == "fp32" else 2.0)
    if s.attention == "sdpa" and s.packing:  # block-causal boolean mask for packed rows
        return float(s.micro_batch * s.seq_len**2)
    return 0.0


def loss_in_fp32(m: ModelSpec, s: TrainingSetup) -> bool:
    """Cross-entropy runs in fp32 when the model upcasts its logits, the run is fp32, or
    torch.autocast is active, which runs cross_entropy and log_softmax in fp32: HF Trainer and
    Lightning train 16-bit runs under autocast (accelerate's native AMP, whatever the weights'
    dtype) except under DeepSpeed, whose engine casts the model to 16 bit and runs none. A model
    that skips the upcast (Qwen1's remote code) there keeps the loss in 16 bit."""
    autocast = s.stack in ("hf", "lightning") and not s.deepspeed
    return m.logits_upcast or s.precision == "fp32" or autocast


def logits_bytes(m: ModelSpec, s: TrainingSetup) -> float:
    """Loss spike at the start of backward, per device."""
    tokens = s.tokens
    v = m.vocab_size / s.tp  # vocab-parallel output layer and cross-entropy
    e = 4.0 if s.precision == "fp32" else 2.0  # the logits' dtype as lm_head writes them
    # The three loss tensors (saved log-probs, their gradient, the logits' gradient) take 4 B
    # each in fp32, e each when the loss stays in the logits' dtype.
    per_chunk = LOGIT_BYTES_STANDARD * (1.0 if loss_in_fp32(m, s) else e / 4.0)
    if s.compile_loss:  # upcast + CE fused: the logits stay saved and get one gradient
        per_chunk = e
    if s.loss == "standard":
        if s.compile_loss:
            return tokens * v * 2 * e
        # A loop that keeps the model output through backward (`output = model(...)`, then
        # `output.loss.backward()`) also keeps its logits, which HF's Llama-style forward
        # returned upcast to fp32 (`logits.float()`); HF Trainer drops them in compute_loss.
        held = (LOGIT_BYTES_HELD if m.logits_upcast else e) if s.output_held else 0.0
        return tokens * v * (per_chunk + held)
    if s.loss == "chunked":
        return tokens * v * (LOGIT_BYTES_BF16_CHUNK + per_chunk / s.loss_chunks)
    # fused: chunks of ceil(tokens / ceil(V/h)) rows (Liger's rule), i.e. about tokens*h logits,
    # plus the bf16 gradient of the hidden states computed in the forward pass.
    chunk_rows = math.ceil(tokens / math.ceil(m.vocab_size / m.hidden_size))
    return chunk_rows * v * LOGIT_BYTES_STANDARD + tokens * m.hidden_size * 2.0


def _overhead_bytes(s: TrainingSetup, dynamic: float, shaped: float) -> tuple[float, float]:
    """(allocator reserve, context + NCCL) in bytes. `dynamic`: bytes allocated and freed within
    a step, whose blocks the cache keeps; `shaped`: the loss buffers (tokens x vocab), the largest
    blocks of a step, which fragment the cache when shapes vary: a longer batch needs bigger
    blocks than the cached ones, so new segments are reserved and the old ones stay cached.
    Activations are many layer-sized tensors that reuse cached blocks and are not counted."""
    nccl = s.nccl_gib if s.nccl_gib is not None else (0.5 if s.world_size > 1 else 0.0)
    reserve = dynamic * s.allocator_reserve
    if s.variable_length:
        reserve += shaped * s.fragmentation
    return reserve, (s.cuda_context_gib + nccl) * GIB


def _stage_layers(m: ModelSpec, s: TrainingSetup) -> int:
    return math.ceil(m.num_layers / s.pp)


def estimate(m: ModelSpec, s: TrainingSetup) -> MemoryBreakdown:
    """Peak memory per device. With pipeline parallelism, the more loaded of first/last stage."""
    if s.method == "inference":
        return _inference(m, s)
    stages = ["only"] if s.pp == 1 else ["first", "last"]
    results = [_train_stage(m, s, stage) for stage in stages]
    return max(results, key=lambda r: r.total_bytes)


def _train_stage(m: ModelSpec, s: TrainingSetup, stage: str) -> MemoryBreakdown:
    pc = param_counts(m)
    n_layers = _stage_layers(m, s)
    has_embed = stage in ("only", "first")
    has_head = stage in ("only", "last")
    tp = s.tp
    shard = s.dp if s.zero >= 1 else 1

    layer_params = pc.per_layer * n_layers / tp
    embed_params = pc.embedding / tp if has_embed else 0.0
    head_params = 0.0  # a tied head needs its own copy when it sits on a later stage
    if has_head:
        head_params = (pc.lm_head if stage == "only" else pc.lm_head or pc.embedding) / tp
    stage_params = layer_params + embed_params + head_params + (pc.final_norm if has_head else 0)
    big_params = embed_params + head_params  # embedding-like: never quantized

    w_b, g_b, o_b = state_bytes_per_param(s)
    state_dtype = 2.0 if s.precision == "bf16" else 4.0
    temp_b = 0.0 if s.optimizer_fused else _step_temp_bytes(s.optimizer, state_dtype)
    full = s.method == "full"
    quant = _quant_bytes(s)

    # Frozen or trained base weights. PEFT's kbit preparation upcasts what is not quantized.
    if quant is not None:
        linear = pc.per_layer_linear * n_layers / tp
        rest_b = 4.0 if kbit_upcast(s) else w_b
        base_w = linear * quant + (stage_params - linear) * rest_b
    else:
        base_w = stage_params * w_b
    weights = base_w / (shard if s.zero == 3 else 1)
    gradients = optimizer = step_temp = adapters = 0.0
    trainable = 0.0
    if full:
        trainable = stage_params
        gradients = stage_params * g_b / (shard if s.zero >= 2 else 1)
        optimizer = stage_params * o_b / shard
        step_temp = stage_params * temp_b / shard
    else:
        lora_p = lora_params_per_layer(m, s.lora_rank, s.lora_targets) * n_layers / tp
        trainable = lora_p
        # PEFT keeps adapters in fp32 unless the whole run is pure bf16.
        a_b = 2.0 if s.precision == "bf16" else 4.0
        adapter_states = a_b + a_b + _moment_bytes(s.optimizer, a_b)
        adapters = lora_p * adapter_states / shard
        if not s.optimizer_fused:
            step_temp = lora_p * _step_temp_bytes(s.optimizer, a_b) / shard
        if s.train_embeddings:  # modules_to_save: a trainable copy in the base dtype
            e_b = 4.0 if s.precision == "fp32" else 2.0
            trainable += big_params
            weights += big_params * e_b / (shard if s.zero == 3 else 1)
            gradients = big_params * e_b / (shard if s.zero >= 2 else 1)
            optimizer = big_params * _moment_bytes(s.optimizer, e_b) / shard
            if not s.optimizer_fused:
                step_temp += big_params * _step_temp_bytes(s.optimizer, e_b) / shard
    if s.optimizer_in_backward:  # each gradient is applied and freed as it arrives
        gradients = min(gradients, pc.per_layer / tp * g_b)
        step_temp = min(step_temp, pc.largest_linear / tp * temp_b)

    # ZeRO-3 / FSDP: the current and the prefetched layer unsharded (plus DeepSpeed's prefetch
    # bucket), plus the unsharded gradient of the current layer before its reduce-scatter.
    # ZeRO-1/2: reduce and all-gather buckets of what trains. Quantized: one linear dequantized.
    layer_w = pc.per_layer / tp * (quant if quant is not None else w_b)
    buffers = 0.0
    gathered = 2 * layer_w + (pc.per_layer / tp * w_b if full else 0.0)
    if s.zero == 3 and shard > 1:
        buffers += gathered + ZERO3_PREFETCH_ELEMENTS * 2.0
        if s.stack == "lightning" and not full and quant is None:
            gradients += base_w / shard  # FSDP1 flat parameter: frozen weights get grad shards
    elif s.zero in (1, 2) and s.deepspeed:
        # DeepSpeed's ZeRO-1/2 optimizer allocates its contiguous-gradient (ipg) buffer at every
        # backward, `reduce_bucket_size` 16-bit elements whatever trains (one GPU too), and a
        # second one with `overlap_comm` (stage_1_and_2.py backward(): "double buffers to avoid
        # data access conflict"); the post-step all-gather writes into the 16-bit partitions.
        buffers += ipg_buffer_bytes(s)
    elif s.zero in (1, 2) and shard > 1:  # reduce and all-gather buckets of what trains
        buffers += 2 * min(ZERO_BUCKET_ELEMENTS, trainable) * 2.0
    if quant is not None:
        buffers += pc.largest_linear / tp * 2.0
    paged = 0.0
    if s.optimizer.startswith("paged"):
        # bitsandbytes paged optimizers keep their states in CUDA unified memory
        # (cudaMallocManaged), outside torch's caching allocator: torch.cuda.max_memory_* never
        # sees them and the driver pages them to the CPU under pressure; their step is a fused
        # kernel (no scratch). They count in the device total only, as resident pages.
        paged, optimizer, step_temp = optimizer, 0.0, 0.0
    if s.offload in ("optimizer", "all"):
        optimizer, step_temp, paged = 0.0, 0.0, 0.0
    if s.offload == "all":
        weights, buffers = 0.0, gathered
        gradients = 0.0
    if s.zero == 3 and shard > 1 and not s.deepspeed and s.stack in ("hf", "lightning"):
        # FSDP1 (accelerate, Lightning, hand-written loops) does not reshard the root unit after
        # forward, "with the intention that they are immediately used for backward": what is
        # outside the wrapped decoder layers (embeddings, final norm, lm_head) stays unsharded
        # through the backward pass. The PyTorch-native recipes (FSDP2) can shard embeddings
        # and output as their own units (torchtune's custom_sharded_layers), so not counted.
        root_b = 4.0 if kbit_upcast(s) else w_b
        root = (big_params + (pc.final_norm if has_head else 0)) * root_b
        buffers += root * (1.0 if s.offload == "all" else 1.0 - 1.0 / shard)

    in_flight = min(s.pp, s.grad_accum_steps) if stage == "first" else 1
    acts = activation_bytes(m, s, n_layers, in_flight)
    e = 4.0 if s.precision == "fp32" else 2.0
    outside = 0.0
    if has_head:  # final norm's fp32 input; its output feeds lm_head if the head trains
        head_trains = full or s.train_embeddings
        outside = s.tokens * m.hidden_size * (4.0 + (2 * e if head_trains else 0.0))
    stored = acts.stored + outside + _mask_bytes(s)
    logits = logits_bytes(m, s) if has_head else 0.0

    grads_alive = s.grad_accum_steps > 1 or s.optimizer_in_backward
    g_fwd = gradients if grads_alive else 0.0
    # Backward of one layer: besides its (recomputed) activations, the gradients of gate and up.
    working = s.tokens * 2 * stream_bytes(s) * m.intermediate_size / tp
    static = weights + optimizer + adapters + buffers
    layer_bwd = stored + acts.transient + working + fsdp1_held_input_grads(m, s, n_layers)
    moments = {
        "backward_start": dict(gradients=g_fwd, activations=stored, logits_and_loss=logits),
        "layer_backward": dict(gradients=g_fwd, activations=layer_bwd),
    }
    if not s.optimizer_in_backward:
        moments["optimizer_step"] = dict(gradients=gradients, optimizer_step_temp=step_temp)
    components = dict(
        weights=weights,
        gradients=gradients,
        optimizer=optimizer,
        optimizer_step_temp=step_temp,
        activations=layer_bwd,
        logits_and_loss=logits,
        adapters=adapters,
        buffers=buffers,
    )
    return _breakdown(m, s, pc, trainable, static, components, moments, paged)


def _breakdown(
    m: ModelSpec,
    s: TrainingSetup,
    pc: ParamCounts,
    trainable: float,
    static: float,
    components: dict[str, float],
    moments: dict[str, dict[str, float]],
    paged: float = 0.0,
) -> MemoryBreakdown:
    phases: dict[str, int] = {}
    parts: dict[str, tuple[int, int, int]] = {}
    best: tuple[float, str, dict[str, float], float, float] | None = None
    for name, terms in moments.items():
        allocated = static + sum(terms.values())
        dynamic, shaped = sum(terms.values()), terms.get("logits_and_loss", 0.0)
        parts[name] = (int(allocated), int(dynamic), int(shaped))
        reserve, fixed = _overhead_bytes(s, dynamic, shaped)
        fixed += paged
        phases[name] = int(allocated + reserve + fixed)
        if best is None or allocated + reserve > best[0] + best[3]:
            best = (allocated, name, terms, reserve, fixed)
    assert best is not None
    allocated, phase, terms, reserve, fixed = best
    name = regime(s)
    return MemoryBreakdown(
        model=m.name,
        params=pc.total,
        trainable_params=int(trainable),
        weights=int(components["weights"]),
        gradients=int(terms.get("gradients", 0.0)),
        optimizer=int(components["optimizer"]),
        optimizer_step_temp=int(terms.get("optimizer_step_temp", 0.0)),
        activations=int(terms.get("activations", 0.0)),
        logits_and_loss=int(terms.get("logits_and_loss", 0.0)),
        adapters=int(components["adapters"]),
        buffers=int(components["buffers"]),
        allocator_reserve=int(reserve),
        context=int(fixed - paged),
        paged_optimizer=int(paged),
        peak_phase=phase,  # type: ignore[arg-type]
        phases=phases,
        phase_parts=parts,
        variable_length=s.variable_length,
        components={k: int(v) for k, v in components.items()},
        regime=name,
        plan_margin=PLAN_MARGINS.get(name, DEFAULT_PLAN_MARGIN),
        allocated_bytes=int(allocated),
        reserved_bytes=int(allocated + reserve),
        total_bytes=int(allocated + reserve + fixed),
    )


def _inference(m: ModelSpec, s: TrainingSetup) -> MemoryBreakdown:
    """Weights + KV cache + the prefill working set of one layer + last-token logits."""
    pc = param_counts(m)
    tp = s.tp
    e = 4.0 if s.precision == "fp32" else 2.0
    quant = _quant_bytes(s)
    n_layers = _stage_layers(m, s)
    layer_params = pc.per_layer * n_layers / tp
    other = (pc.embedding + pc.lm_head + pc.final_norm) / tp
    buffers = 0.0
    if quant is not None:
        linear = pc.per_layer_linear * n_layers / tp
        weights = linear * quant + (layer_params - linear + other) * e
        buffers = pc.largest_linear / tp * e  # one dequantized tile
    else:
        weights = (layer_params + other) * e
    tokens = s.tokens
    kv_cache = 2.0 * n_layers * tokens * m.num_kv_heads * m.d_head * e / tp
    h, f = m.hidden_size, m.intermediate_size
    a_width = (m.num_heads + 2 * m.num_kv_heads) * m.d_head
    prefill = tokens * e * (2 * h + a_width + 3 * f) / tp  # one layer's live tensors at prefill
    logits = s.micro_batch * m.vocab_size * 4.0 * 2  # last-token logits in fp32 + softmax
    moments = {"inference": dict(activations=kv_cache + prefill, logits_and_loss=logits)}
    components = dict(weights=weights, activations=kv_cache + prefill, logits_and_loss=logits)
    components |= dict(gradients=0.0, optimizer=0.0, optimizer_step_temp=0.0, adapters=0.0)
    components["buffers"] = buffers
    return _breakdown(m, s, pc, 0.0, weights + buffers, components, moments)


def regime(s: TrainingSetup) -> str:
    """The calibration regime of a setup: method and base, then how states are placed."""
    if s.method == "inference":
        return "inference"
    if s.method == "qlora" or _quant_bytes(s) is not None:
        q = s.quantization if s.quantization != "auto" else "nf4"
        name = {"gptq_int4": "QLoRA (GPTQ int4)", "nf4": "QLoRA (NF4)"}.get(q, "LoRA (int8 base)")
    elif s.method == "lora":
        name = "LoRA + trainable embeddings" if s.train_embeddings else "LoRA"
    else:
        name = "full"
    if s.optimizer.startswith("paged") or s.offload != "none":
        name += ", paged/offloaded states"
    elif s.world_size > 1:
        name += ", sharded/parallel"
    return name


def fits(
    m: ModelSpec, s: TrainingSetup, gpu: Gpu, headroom: float = 0.15, conservative: bool = True
) -> bool:
    """True if the device total stays below (1 - headroom) of the card's memory; with
    `conservative`, the plan-with figure (total plus its regime's margin) is what must fit."""
    b = estimate(m, s)
    need = b.plan_with_bytes if conservative else b.total_bytes
    return need <= gpu.memory_bytes * (1.0 - headroom)


def max_micro_batch(
    m: ModelSpec,
    s: TrainingSetup,
    gpu: Gpu,
    headroom: float = 0.15,
    limit: int = 1024,
    conservative: bool = True,
) -> int:
    """Largest micro-batch (rows of `s.seq_len`) that fits with `headroom`; 0 if none does.

    A `gpu` with several devices trains data-parallel over them: the setup's `dp` is raised to
    the device count (sharding follows `s.zero`).
    """
    if not 0.0 <= headroom < 1.0:
        raise ValueError(f"headroom must be in [0, 1), got {headroom}")
    if gpu.count > s.world_size:
        s = s.model_copy(update={"dp": gpu.count // (s.tp * s.pp)})

    def ok(b: int) -> bool:
        return fits(m, s.model_copy(update={"micro_batch": b}), gpu, headroom, conservative)

    if not ok(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:  # memory is monotone in the micro-batch
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo
