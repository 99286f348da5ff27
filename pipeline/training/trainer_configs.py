"""Trainer configs per training stage, from the snapshot's plan: LLaMA-Factory and TRL.

For each stage with rows and a GPU that fits, under the snapshot's `trainer/` folder:
- `dataset_info.json`: one LLaMA-Factory dataset entry per stage (Parquet folders of the
  snapshot, paths relative to `trainer/`);
- `llamafactory/<stage>.yaml`: a `llamafactory-cli train` file, run from the snapshot folder;
- `trl/<stage>.yaml`: a flat `trl sft --config` file, run from the snapshot folder: fields of
  TRL's `ScriptArguments` (the stage's Parquet folder as `dataset_name`), `SFTConfig` and
  `ModelConfig` only, what the plan expects in its comments;
- `index.json`: the GPU each stage was planned for and its expected peak, or why none;
- `tools.json`: the tool schemas of the tool-use samples.

Sequence length, micro-batch, accumulation, recomputation, learning rate, epochs, warmup steps,
scheduler, LoRA rank and targets, quantization and precision come from the plan and its stage
configuration, nothing else. LoRA alpha is twice the rank in both trainers (LLaMA-Factory's
default; TRL's default is a fixed 32).
"""

from __future__ import annotations

from typing import Protocol

import yaml

from pipeline.kb.tool_samples import TOOLS
from schemas.memory import ALL_LINEAR
from schemas.plan import GpuFit, Plan, PlanConfig, StageConfig, StagePlan
from schemas.trainer import TrainerConfig

FOLDER = "trainer"
_QWEN25_SIZES = ("0.5b", "1.5b", "3b", "7b", "14b", "32b", "72b")
HF_IDS: dict[str, str] = {
    f"qwen2.5-{s}": f"Qwen/Qwen2.5-{s.upper()}-Instruct" for s in _QWEN25_SIZES
}
_TEMPLATES = (("qwen2.5", "qwen"), ("qwen2", "qwen"), ("qwen3", "qwen3"), ("llama-3", "llama3"),
              ("llama-2", "llama2"), ("mistral", "mistral"), ("qwen", "qwen"))  # fmt: skip
_SFT_TAGS = {
    "role_tag": "role",
    "content_tag": "content",
    "user_tag": "user",
    "assistant_tag": "assistant",
    "system_tag": "system",
}
_OPTIM = {"adamw": "adamw_torch", "adamw_8bit": "adamw_bnb_8bit", "sgd": "sgd",
          "paged_adamw": "paged_adamw_32bit", "paged_adamw_8bit": "paged_adamw_8bit"}  # fmt: skip
_LF_ATTENTION = {"flash": "fa2", "sdpa": "sdpa", "eager": "disabled"}
_HF_ATTENTION = {"flash": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}


class Writer(Protocol):
    """What `write_trainer_configs` needs of a snapshot writer (`publish.writer.SnapshotWriter`)."""

    def write_json(self, name: str, obj: object) -> object: ...
    def write_text(self, name: str, text: str) -> object: ...


def dataset_entry(stage: StagePlan) -> dict[str, object]:
    """The LLaMA-Factory dataset_info.json entry of a stage's corpus."""
    if stage.corpus == "pretrain":
        entry: dict[str, object] = {"file_name": "../pretrain", "columns": {"prompt": "text"}}
    elif stage.corpus == "sft_tools":
        entry = {
            "file_name": "../sft_tools",
            "formatting": "sharegpt",
            "columns": {"messages": "conversations", "tools": "tools_json"},
            "tags": {
                **_SFT_TAGS,
                "function_tag": "function_call",
                "observation_tag": "observation",
            },
        }
    elif stage.corpus.startswith("tier_"):
        entry = {
            "file_name": f"../sft/tier={stage.corpus.removeprefix('tier_')}",
            "formatting": "sharegpt",
            "columns": {"messages": "messages"},
            "tags": dict(_SFT_TAGS),
        }
    else:
        raise ValueError(f"stage {stage.name}: no snapshot folder for corpus {stage.corpus!r}")
    if stage.share < 1.0:
        entry["num_samples"] = stage.stats.rows  # the plan's sample of the corpus
    return entry


def choose_gpu(stage: StagePlan, preferred: str | None) -> GpuFit | None:
    """`preferred` when it fits this stage, else the first target of the plan that fits."""
    fits = [g for g in stage.gpus if g.fits]
    chosen = [g for g in fits if g.gpu == preferred]
    return (chosen or fits or [None])[0]


def _model_path(model: str, cfg: TrainerConfig) -> str:
    return cfg.model_paths.get(model) or HF_IDS.get(model, model)


def _template(model: str) -> str:
    return next((t for prefix, t in _TEMPLATES if model.startswith(prefix)), "default")


def _dataset_name(stage: StagePlan) -> str:
    return "cnc_" + stage.name.replace("-", "_")


def _deepspeed(devices: int, zero: int) -> str | None:
    return f"{FOLDER}/deepspeed_zero{zero}.json" if devices > 1 and zero > 0 else None


def llamafactory_yaml(
    stage: StagePlan, settings: StageConfig, fit: GpuFit, cfg: TrainerConfig
) -> dict[str, object]:
    """Arguments of `llamafactory-cli train` (model, data, finetuning and training arguments)."""
    args: dict[str, object] = {
        "model_name_or_path": _model_path(stage.model, cfg),
        "stage": "pt" if stage.corpus == "pretrain" else "sft",
        "do_train": True,
        "finetuning_type": "full" if stage.method == "full" else "lora",
    }
    if stage.method in {"lora", "qlora"}:
        args["lora_rank"] = settings.lora_rank
        args["lora_alpha"] = 2 * settings.lora_rank
        targets = settings.lora_targets
        args["lora_target"] = "all" if set(targets) == set(ALL_LINEAR) else ",".join(targets)
    if stage.method == "qlora":
        args["quantization_bit"] = 4
        args["quantization_method"] = "bnb"
    args.update(
        dataset=_dataset_name(stage),
        dataset_dir=FOLDER,
        template=_template(stage.model),
        cutoff_len=stage.max_seq_len,
        packing=stage.packing,
        per_device_train_batch_size=fit.micro_batch,
        gradient_accumulation_steps=fit.grad_accum_steps,
        gradient_checkpointing=fit.recompute_needed,
        disable_gradient_checkpointing=not fit.recompute_needed,
        flash_attn=_LF_ATTENTION[settings.attention],
        optim=_OPTIM[settings.optimizer],
        **_schedule_args(stage, fit),
        output_dir=f"{cfg.output_root}/{stage.name}",
    )
    if settings.precision == "bf16":
        args["pure_bf16"] = True
    elif settings.precision in {"bf16_mixed", "fp8"}:
        args["bf16"] = True
    if settings.precision == "fp8":
        args["fp8"] = True
    if settings.loss == "fused":
        args["enable_liger_kernel"] = True
    deepspeed = _deepspeed(fit.devices, settings.multi_gpu_zero)
    if deepspeed:
        args["deepspeed"] = deepspeed
    return args


def _schedule_args(stage: StagePlan, fit: GpuFit) -> dict[str, object]:
    """Learning rate, epochs, scheduler and warmup (transformers `TrainingArguments` names)."""
    return {
        "learning_rate": stage.schedule.learning_rate,
        "num_train_epochs": float(stage.schedule.epochs),
        "lr_scheduler_type": stage.schedule.scheduler,
        "warmup_steps": fit.warmup_steps,
        "logging_steps": max(1, min(10, (fit.steps_per_epoch or 0) // 5)),
    }


def _trl_model(stage: StagePlan, settings: StageConfig, cfg: TrainerConfig) -> dict[str, object]:
    """TRL `ModelConfig` fields; frozen weights load in bf16, full-FT master weights in fp32."""
    frozen = stage.method in {"lora", "qlora"} or settings.precision == "bf16"
    model: dict[str, object] = {
        "model_name_or_path": _model_path(stage.model, cfg),
        "dtype": "bfloat16" if frozen else "float32",
        "attn_implementation": _HF_ATTENTION[settings.attention],
        "use_peft": stage.method in {"lora", "qlora"},
    }
    if stage.method in {"lora", "qlora"}:
        model["lora_r"] = settings.lora_rank
        model["lora_alpha"] = 2 * settings.lora_rank
        model["lora_target_modules"] = list(settings.lora_targets)
    if stage.method == "qlora":
        model["load_in_4bit"] = True
        model["bnb_4bit_quant_type"] = "nf4"
    return model


def trl_config(
    stage: StagePlan, settings: StageConfig, fit: GpuFit, cfg: TrainerConfig
) -> dict[str, object]:
    """One flat mapping of TRL `ScriptArguments`, `SFTConfig` and `ModelConfig` fields, as
    `trl sft --config FILE` reads it. A stage on a share of its corpus stops at its planned
    steps (`max_steps`): TRL reads the whole folder and has no row sample of its own."""
    args: dict[str, object] = {
        "dataset_name": str(dataset_entry(stage)["file_name"]).removeprefix("../"),
        "dataset_train_split": "train",
        **_trl_model(stage, settings, cfg),
        "output_dir": f"{cfg.output_root}/{stage.name}",
        "max_length": stage.max_seq_len,
        "packing": stage.packing,
        "per_device_train_batch_size": fit.micro_batch,
        "gradient_accumulation_steps": fit.grad_accum_steps,
        "gradient_checkpointing": fit.recompute_needed,
        "bf16": settings.precision in {"bf16_mixed", "bf16", "fp8"},
        "optim": _OPTIM[settings.optimizer],
        **_schedule_args(stage, fit),
    }
    if stage.share < 1.0:
        args["max_steps"] = fit.total_steps
    if stage.corpus == "pretrain":
        args["dataset_text_field"] = "text"
    if settings.loss == "fused":
        args["use_liger_kernel"] = True
    deepspeed = _deepspeed(fit.devices, settings.multi_gpu_zero)
    if deepspeed:
        args["deepspeed"] = deepspeed
    return args


def _planned_for(stage: StagePlan, fit: GpuFit, headroom: float) -> dict[str, object]:
    return {
        "stage": stage.name,
        "corpus": stage.corpus,
        "rows": stage.stats.rows,
        "tokens": stage.stats.tokens,
        "share": stage.share,
        "model": stage.model,
        "method": stage.method,
        "gpu": fit.gpu,
        "devices": fit.devices,
        "gpu_memory_gib": fit.memory_gib,
        "expected_peak_gib": fit.peak_gib,
        "headroom": headroom,
        "recompute": fit.recompute,
        "micro_batch": fit.micro_batch,
        "grad_accum_steps": fit.grad_accum_steps,
        "tokens_per_step": fit.tokens_per_step,
        "steps_per_epoch": fit.steps_per_epoch,
        "total_steps": fit.total_steps,
        "warmup_steps": fit.warmup_steps,
        "learning_rate": stage.schedule.learning_rate,
        "epochs": stage.schedule.epochs,
        "max_seq_len": stage.max_seq_len,
        "truncation_rate": stage.truncation_rate,
        "packing_efficiency": stage.packing_efficiency,
    }


def _yaml_text(
    stage: StagePlan, fit: GpuFit, args: dict[str, object], headroom: float, command: str
) -> str:
    """The YAML of `args` under comments saying what the plan expects and how to run it."""
    recompute = {
        "none": "none",
        "selective": "selective (attention); the trainer recomputes whole layers: peak at or"
        " below the plan's",
        "full": "full (whole layers)",
    }.get(fit.recompute, fit.recompute)
    sched = stage.schedule
    head = [
        f"# cnc-corpus stage {stage.name}: corpus {stage.corpus}, {stage.stats.rows:,} rows, "
        f"{stage.stats.tokens:,} tokens, {stage.model} {stage.method}",
        f"# Planned for {fit.gpu}: {fit.devices} device(s) x {fit.memory_gib:g} GiB; expected"
        f" peak {fit.peak_gib} GiB per device ({headroom:.0%} of the card left free)",
        f"# Recomputation: {recompute}. Tokens per optimizer step: {fit.tokens_per_step:,};"
        f" {fit.steps_per_epoch} steps per epoch, {fit.total_steps} in all.",
        f"# Batch: {stage.batch.reason}",
        f"# Learning rate {sched.learning_rate:g}: {sched.reasons['learning_rate']}",
        f"# Epochs {sched.epochs}: {sched.reasons['epochs']}",
        f"# Warmup {fit.warmup_steps} steps: {sched.reasons['warmup']}; {sched.scheduler}",
        f"# Run from the snapshot folder: {command}",
    ]
    return "\n".join(head) + "\n" + yaml.safe_dump(args, sort_keys=False, allow_unicode=True)


def _commands(stage: StagePlan, fit: GpuFit) -> tuple[str, str]:
    """The LLaMA-Factory and TRL command lines of a stage."""
    launch = f" --num_processes {fit.devices}" if fit.devices > 1 else ""
    return (
        f"llamafactory-cli train {FOLDER}/llamafactory/{stage.name}.yaml",
        f"trl sft{launch} --config {FOLDER}/trl/{stage.name}.yaml",
    )


def trainer_files(plan: Plan, plan_cfg: PlanConfig, cfg: TrainerConfig) -> dict[str, object]:
    """Relative path under the snapshot -> JSON object or YAML text, for every stage."""
    settings = {s.name: s for s in plan_cfg.stages}
    files: dict[str, object] = {}
    dataset_info: dict[str, object] = {}
    index: dict[str, object] = {}
    for stage in plan.stages:
        fit = choose_gpu(stage, cfg.gpu)
        if stage.stats.rows == 0 or fit is None:
            reason = "no rows in this snapshot" if stage.stats.rows == 0 else "no GPU target fits"
            index[stage.name] = {"written": False, "reason": reason}
            continue
        st = settings[stage.name]
        dataset_info[_dataset_name(stage)] = dataset_entry(stage)
        lf_cmd, trl_cmd = _commands(stage, fit)
        lf = llamafactory_yaml(stage, st, fit, cfg)
        files[f"{FOLDER}/llamafactory/{stage.name}.yaml"] = _yaml_text(
            stage, fit, lf, plan.headroom, lf_cmd
        )
        trl = trl_config(stage, st, fit, cfg)
        files[f"{FOLDER}/trl/{stage.name}.yaml"] = _yaml_text(
            stage, fit, trl, plan.headroom, trl_cmd
        )
        zero = _deepspeed(fit.devices, st.multi_gpu_zero)
        if zero:
            files[zero] = {
                "zero_optimization": {"stage": st.multi_gpu_zero},
                "bf16": {"enabled": "auto"},
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "train_batch_size": "auto",
            }
        index[stage.name] = {"written": True, **_planned_for(stage, fit, plan.headroom)}
    files[f"{FOLDER}/dataset_info.json"] = dataset_info
    files[f"{FOLDER}/index.json"] = index
    files[f"{FOLDER}/tools.json"] = TOOLS
    return files


def write_trainer_configs(
    writer: Writer, plan: Plan, plan_cfg: PlanConfig, cfg: TrainerConfig
) -> list[str]:
    """Write `trainer_files` through the snapshot writer; returns the paths written."""
    files = trainer_files(plan, plan_cfg, cfg)
    for name, content in files.items():
        if isinstance(content, str):
            writer.write_text(name, content)
        else:
            writer.write_json(name, content)
    return sorted(files)
