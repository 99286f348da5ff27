"""What the probe and bench/gpu_memory_check.py run on the GPU: a model built from its
configuration with random weights (no download), LoRA/QLoRA through PEFT, and the peak of a
few optimizer steps on its longest batch.

torch, transformers, peft and bitsandbytes are the optional `probe` extra; nothing here imports
them before `missing()` has said they are there.
"""

from __future__ import annotations

import gc
import tempfile
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from pipeline.core.errors import UsageError
from pipeline.memory.models import get_model
from schemas.memory import ALL_LINEAR, GIB, ModelSpec, TrainingSetup

# transformers' model_type of the catalog's families (pipeline/memory/models.py), by name prefix
_MODEL_TYPES = (("qwen3", "qwen3"), ("qwen2", "qwen2"), ("qwen1.5", "qwen2"), ("llama", "llama"),
                ("tinyllama", "llama"), ("mistral", "mistral"))  # fmt: skip
_HF_ATTENTION = {"flash": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}
_BNB_OPTIMIZERS = {"adamw_8bit": "AdamW8bit", "paged_adamw": "PagedAdamW32bit",
                   "paged_adamw_8bit": "PagedAdamW8bit"}  # fmt: skip


@dataclass(frozen=True)
class Measured:
    """Peaks of the probe's steps and what they ran on."""

    allocated_gib: float
    reserved_gib: float
    gpu: str
    torch_version: str
    transformers_version: str


@dataclass(frozen=True)
class Build:
    """How a model is built and prepared for training."""

    method: str  # full | lora | qlora
    weights_fp32: bool  # base weights in fp32 (else bf16; QLoRA: its non-quantized parts)
    attention: str  # transformers' attn_implementation
    recompute: bool  # HF gradient checkpointing (whole layers)
    reentrant: bool = True  # transformers' default use_reentrant
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ALL_LINEAR
    lora_dropout: float = 0.05
    adapters_fp32: bool = True  # PEFT's autocast_adapter_dtype
    kbit_upcast: bool = True  # PEFT's prepare_model_for_kbit_training (non-quantized -> fp32)


def missing(method: str, optimizer: str) -> str | None:
    """What this machine lacks to probe a stage (a package, a CUDA GPU), or None."""
    needed = ["torch", "transformers"]
    needed += ["peft"] if method in ("lora", "qlora") else []
    needed += ["bitsandbytes"] if method == "qlora" or optimizer in _BNB_OPTIMIZERS else []
    needed += ["accelerate"] if method == "qlora" else []  # transformers loads 4-bit through it
    absent = [name for name in needed if find_spec(name) is None]
    if absent:
        return f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not installed"
    import torch

    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        return f"no CUDA GPU visible to torch {torch.__version__} ({build})"
    return None


def card_gib() -> float:
    """Memory of this machine's first CUDA device, GiB."""
    import torch

    return torch.cuda.get_device_properties(0).total_memory / GIB


def attention(planned: str, precision: str = "bf16_mixed") -> str:
    """The attention kernel that runs here: FlashAttention 2 when planned and installed (it has
    no fp32 kernel), else sdpa; eager stays eager."""
    flash = find_spec("flash_attn") is not None and precision != "fp32"
    return "sdpa" if planned == "flash" and not flash else planned


def model_type(spec: ModelSpec) -> str:
    """transformers' model_type of a catalog model."""
    name = spec.name.lower()
    found = next((t for prefix, t in _MODEL_TYPES if name.startswith(prefix)), None)
    if found is None:
        raise UsageError(
            f"{spec.name}: its modeling code is not in transformers; probe a local config.json "
            "of a transformers model instead"
        )
    return found


def hf_config(model: str) -> Any:
    """transformers' config of a catalog model or a local config.json (no download)."""
    from transformers import AutoConfig

    path = Path(model)
    try:
        if path.exists():
            cfg = AutoConfig.from_pretrained(path, local_files_only=True)
        else:
            cfg = AutoConfig.for_model(model_type(get_model(model)), **_fields(get_model(model)))
    except (KeyError, ValueError) as exc:  # a model_type this transformers does not know
        raise UsageError(f"{model}: transformers cannot build it: {exc}") from None
    cfg.use_cache = False
    return cfg


def _fields(spec: ModelSpec) -> dict[str, object]:
    fields: dict[str, object] = dict(
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        vocab_size=spec.vocab_size,
        tie_word_embeddings=spec.tie_embeddings,
        max_position_embeddings=spec.max_context,
    )
    if spec.head_dim:
        fields["head_dim"] = spec.head_dim
    if spec.qkv_bias and not spec.name.lower().startswith("qwen"):  # Qwen2 has q/k/v biases
        fields["attention_bias"] = True
    return fields


def _quantized(cfg: Any, attention_impl: str, workdir: Path) -> Any:
    """A random-weight model in NF4 (double quantization): bitsandbytes quantizes while
    loading, so random bf16 weights are built on the CPU, saved locally and loaded back."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    path = workdir / "random-bf16"
    if not (path / "config.json").exists():
        AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16).save_pretrained(path)
    bnb = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )
    return AutoModelForCausalLM.from_pretrained(
        path, quantization_config=bnb, torch_dtype=torch.bfloat16, device_map={"": 0},
        attn_implementation=attention_impl,
    )  # fmt: skip


def build_model(cfg: Any, b: Build, workdir: Path) -> Any:
    """The model on the GPU, prepared for training as `b` says (random weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    if b.method == "qlora":
        model = _quantized(cfg, b.attention, workdir)
    else:  # initialized in place on the GPU, in its dtype (no CPU copy, no uninitialized buffer)
        dtype = torch.float32 if b.weights_fp32 else torch.bfloat16
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(
                cfg, torch_dtype=dtype, attn_implementation=b.attention
            )
    ckpt = {"use_reentrant": b.reentrant}
    if b.method == "qlora" and b.kbit_upcast:  # also enables checkpointing and input grads
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, b.recompute, ckpt)
    elif b.recompute:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=ckpt)
        if b.method != "full":
            model.enable_input_require_grads()  # a frozen base: checkpoints need a grad input
    if b.method != "full":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=b.lora_rank,
            lora_alpha=2 * b.lora_rank,
            lora_dropout=b.lora_dropout,
            target_modules=list(b.lora_targets),
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora, autocast_adapter_dtype=b.adapters_fp32)
    model.train()
    return model


def make_optimizer(params: list[Any], name: str, lr: float = 1e-5) -> Any:
    """The optimizer the trainer configs name (transformers' `optim`), on `params`."""
    import torch

    if name in _BNB_OPTIMIZERS:
        return getattr(import_module("bitsandbytes.optim"), _BNB_OPTIMIZERS[name])(params, lr=lr)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)  # transformers' optim="sgd": no momentum
    return torch.optim.AdamW(params, lr=lr)  # foreach on CUDA; states in the params' dtype


def train_peak(model: Any, opt: Any, shape: tuple[int, int], steps: int, accum: int,
               autocast: bool) -> tuple[float, float]:  # fmt: skip
    """(peak allocated GiB, peak reserved GiB) of `steps` optimizer steps, each over `accum`
    micro-batches of random token ids of `shape`; the build before does not count."""
    import torch

    torch.cuda.reset_peak_memory_stats()
    gen = torch.Generator(device="cuda").manual_seed(0)
    vocab = model.config.vocab_size
    for _ in range(steps):
        for _ in range(accum):
            ids = torch.randint(0, vocab, shape, device="cuda", generator=gen)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss = model(input_ids=ids, labels=ids).loss / accum
            loss.backward()
            del loss
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / GIB, torch.cuda.max_memory_reserved() / GIB


def free() -> None:
    """Release what a measurement left in torch's cache."""
    import torch

    gc.collect()
    torch.cuda.empty_cache()


def build_of(s: TrainingSetup) -> Build:
    """How the probe builds the model of an estimator setup (as the trainer configs run it)."""
    return Build(
        method=s.method,
        weights_fp32=s.precision == "fp32" or (s.precision == "bf16_mixed" and s.method == "full"),
        attention=_HF_ATTENTION[s.attention],
        recompute=s.recompute != "none",
        reentrant=s.hf_reentrant_checkpointing,
        lora_rank=s.lora_rank,
        lora_targets=s.lora_targets,
        lora_dropout=s.lora_dropout,
        adapters_fp32=s.precision != "bf16",
    )


def measure(model: str, s: TrainingSetup, steps: int) -> Measured:
    """Build `model` as `s` plans it and measure its peak over `steps` optimizer steps."""
    import torch
    import transformers

    b = build_of(s)
    free()
    with tempfile.TemporaryDirectory() as tmp:
        net = build_model(hf_config(model), b, Path(tmp))
    opt = make_optimizer([p for p in net.parameters() if p.requires_grad], s.optimizer)
    try:
        peak = train_peak(net, opt, (s.micro_batch, s.seq_len), steps, s.grad_accum_steps,
                          autocast=s.precision == "bf16_mixed")  # fmt: skip
    except torch.cuda.OutOfMemoryError:
        reached = torch.cuda.max_memory_reserved() / GIB
        raise UsageError(
            f"out of memory on {torch.cuda.get_device_name(0)} after {reached:.2f} GiB reserved: "
            "the stage does not fit this card as planned; nothing appended"
        ) from None
    finally:
        del net, opt
        free()
    return Measured(*peak, torch.cuda.get_device_name(0), torch.__version__,
                    transformers.__version__)  # fmt: skip
