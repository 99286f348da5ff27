"""Trainer configs: only argument names the trainers define, and the plan's numbers."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import yaml

from pipeline.training.plan import plan_stages
from pipeline.training.trainer_configs import choose_gpu, trainer_files
from schemas.plan import GpuFit, Plan, PlanConfig, StageConfig, StagePlan
from schemas.trainer import TrainerConfig

# Argument names as the trainers document them (LLaMA-Factory: src/llamafactory/hparams/
# model_args.py, data_args.py, finetuning_args.py and transformers' Seq2SeqTrainingArguments,
# https://github.com/hiyouga/LLaMA-Factory/tree/main/src/llamafactory/hparams; its data/README.md
# for dataset_info.json. TRL: https://huggingface.co/docs/trl/sft_trainer#trl.SFTConfig (over
# https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments),
# https://huggingface.co/docs/trl/script_utils (ScriptArguments, TrlParser) and ModelConfig in
# trl/trainer/model_config.py). `llamafactory-cli train` refuses a key none of them defines
# (parse_dict without allow_extra_keys) and `trl sft --config` hands unknown keys to accelerate.
LLAMAFACTORY_ARGS = {
    # ModelArguments / QuantizationArguments
    "model_name_or_path", "adapter_name_or_path", "cache_dir", "flash_attn", "enable_liger_kernel",
    "disable_gradient_checkpointing", "use_unsloth_gc", "quantization_method",
    "quantization_bit", "quantization_type", "double_quantization", "fp8", "trust_remote_code",
    # DataArguments
    "template", "dataset", "eval_dataset", "dataset_dir", "cutoff_len", "packing",
    "neat_packing", "tool_format", "max_samples", "preprocessing_num_workers",
    # FinetuningArguments
    "stage", "finetuning_type", "lora_rank", "lora_alpha", "lora_dropout", "lora_target",
    "pure_bf16",
    # transformers Seq2SeqTrainingArguments
    "do_train", "output_dir", "per_device_train_batch_size", "gradient_accumulation_steps",
    "gradient_checkpointing", "bf16", "fp16", "optim", "learning_rate", "num_train_epochs",
    "deepspeed", "logging_steps", "save_steps", "lr_scheduler_type", "warmup_ratio",
    "warmup_steps",
}  # fmt: skip
DATASET_INFO_KEYS = {
    "hf_hub_url", "ms_hub_url", "script_url", "file_name", "formatting", "ranking", "subset",
    "split", "folder", "num_samples", "columns", "tags",
}  # fmt: skip
DATASET_COLUMNS = {"prompt", "query", "response", "history", "messages", "system", "tools",
                   "images", "videos", "audios", "chosen", "rejected", "kto_tag"}  # fmt: skip
DATASET_TAGS = {"role_tag", "content_tag", "user_tag", "assistant_tag", "observation_tag",
                "function_tag", "system_tag"}  # fmt: skip
TRL_SFT_CONFIG = {
    # SFTConfig's own fields
    "model_init_kwargs", "chat_template_path", "dataset_text_field", "dataset_kwargs",
    "dataset_num_proc", "eos_token", "max_length", "truncation_mode", "shuffle_dataset",
    "packing", "packing_strategy", "padding_free", "pad_to_multiple_of", "eval_packing",
    "completion_only_loss", "assistant_only_loss", "loss_type", "activation_offloading",
    "learning_rate",
    # transformers.TrainingArguments
    "output_dir", "per_device_train_batch_size", "gradient_accumulation_steps",
    "gradient_checkpointing", "bf16", "fp16", "optim", "use_liger_kernel", "deepspeed",
    "num_train_epochs", "max_steps", "logging_steps", "save_steps", "lr_scheduler_type",
    "warmup_ratio", "warmup_steps",
}  # fmt: skip
TRL_SCRIPT_ARGS = {"dataset_name", "dataset_config", "dataset_train_split", "dataset_test_split",
                   "dataset_streaming", "ignore_bias_buffers"}  # fmt: skip
TRL_MODEL_CONFIG = {
    "model_name_or_path", "model_revision", "dtype", "trust_remote_code", "attn_implementation",
    "use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
    "lora_modules_to_save", "lora_task_type", "use_rslora", "use_dora", "load_in_8bit",
    "load_in_4bit", "bnb_4bit_quant_type", "use_bnb_nested_quant",
}  # fmt: skip
TRL_ARGS = TRL_SCRIPT_ARGS | TRL_SFT_CONFIG | TRL_MODEL_CONFIG


def _plan() -> tuple[Plan, PlanConfig]:
    rng = np.random.default_rng(3)
    lengths = {
        "pretrain": pl.Series(rng.integers(300, 2049, 2000)),
        "tier_A": pl.Series(rng.lognormal(6.0, 0.5, 900).astype(np.int64) + 40),
        "tier_B": pl.Series([], dtype=pl.Int64),  # an empty tier gets no config
        "tier_C": pl.Series(rng.lognormal(5.0, 0.8, 2000).astype(np.int64) + 40),
        "sft_tools": pl.Series(rng.lognormal(6.3, 0.3, 400).astype(np.int64) + 350),
    }
    cfg = PlanConfig(
        stages=[
            StageConfig(name="domain-adapt", corpus="pretrain", lora_rank=64,
                        max_tokens_per_step=524_288),
            StageConfig(name="sft-expert", corpus="tier_A", model="qwen2.5-14b", method="qlora",
                        lora_targets=("q_proj", "v_proj"), gpus=("rtx-4090", "a100-80g")),
            StageConfig(name="sft-broad", corpus="tier_B"),
            StageConfig(name="sft-tools", corpus="sft_tools", model="qwen2.5-3b",
                        method="full", gpus=("h200-141g", "2xa100-80g")),
            StageConfig(name="align", corpus="tier_C", share=0.1, max_tokens_per_step=65_536),
        ]
    )  # fmt: skip
    return plan_stages(lengths, cfg), cfg


def _yaml(text: str) -> dict:
    return yaml.safe_load(text)


def test_keys_are_the_trainers_own() -> None:
    plan, cfg = _plan()
    files = trainer_files(plan, cfg, TrainerConfig())
    yamls = {k: _yaml(v) for k, v in files.items() if k.startswith("trainer/llamafactory/")}
    assert yamls, "no LLaMA-Factory configs written"
    for name, args in yamls.items():
        assert set(args) <= LLAMAFACTORY_ARGS, (name, set(args) - LLAMAFACTORY_ARGS)
    info = files["trainer/dataset_info.json"]
    assert isinstance(info, dict)
    for entry in info.values():
        assert set(entry) <= DATASET_INFO_KEYS
        assert set(entry.get("columns", {})) <= DATASET_COLUMNS
        assert set(entry.get("tags", {})) <= DATASET_TAGS
    trl = {k: _yaml(v) for k, v in files.items() if k.startswith("trainer/trl/")}
    assert sorted(trl) == sorted(k.replace("llamafactory/", "trl/") for k in yamls)
    for name, conf in trl.items():
        assert set(conf) <= TRL_ARGS, (name, set(conf) - TRL_ARGS)
        # flat: `trl sft --config` sets each key as one argument's default
        assert all(isinstance(v, (str, int, float, bool, list)) for v in conf.values()), name
        assert all(isinstance(x, str) for v in conf.values() if isinstance(v, list) for x in v)
    json.dumps({k: v for k, v in files.items() if not isinstance(v, str)})


def _same_schedule(lf: dict, trl: dict, stage: StagePlan, fit: GpuFit) -> None:
    for key in ("learning_rate", "num_train_epochs", "lr_scheduler_type", "warmup_steps"):
        assert lf[key] == trl[key], key
    assert lf["learning_rate"] == stage.schedule.learning_rate
    assert lf["num_train_epochs"] == stage.schedule.epochs
    assert lf["warmup_steps"] == fit.warmup_steps and lf["lr_scheduler_type"] == "cosine"


def test_numbers_come_from_the_plan() -> None:
    plan, cfg = _plan()
    files = trainer_files(plan, cfg, TrainerConfig())
    settings = {s.name: s for s in cfg.stages}
    written = 0
    for stage in plan.stages:
        key = f"trainer/llamafactory/{stage.name}.yaml"
        if stage.stats.rows == 0:
            assert key not in files
            continue
        fit = choose_gpu(stage, None)
        assert fit is not None and fit.fits
        assert fit is next(g for g in stage.gpus if g.fits)  # the first target that fits
        text = files[key]
        assert isinstance(text, str)
        trl_text = str(files[f"trainer/trl/{stage.name}.yaml"])
        assert f"trl sft --config trainer/trl/{stage.name}.yaml" in trl_text
        lf, sft = _yaml(text), _yaml(trl_text)
        model = sft
        _same_schedule(lf, sft, stage, fit)
        assert lf["cutoff_len"] == sft["max_length"] == stage.max_seq_len
        for key, planned in (("per_device_train_batch_size", fit.micro_batch),
                             ("gradient_accumulation_steps", fit.grad_accum_steps),
                             ("gradient_checkpointing", fit.recompute_needed)):  # fmt: skip
            assert lf[key] == sft[key] == planned, key
        assert lf["disable_gradient_checkpointing"] is not fit.recompute_needed
        assert lf["packing"] == sft["packing"] == stage.packing
        assert lf["bf16"] is sft["bf16"] is True
        assert f"Planned for {fit.gpu}" in text
        assert f"expected peak {fit.peak_gib} GiB" in text and f"{fit.peak_gib} GiB" in trl_text
        st = settings[stage.name]
        if stage.method == "full":
            assert lf["finetuning_type"] == "full" and not model["use_peft"]
            assert "lora_rank" not in lf
        else:
            assert lf["lora_rank"] == model["lora_r"] == st.lora_rank
            assert lf["lora_alpha"] == model["lora_alpha"] == 2 * st.lora_rank
            assert model["dtype"] == "bfloat16"  # frozen weights as the estimate counts them
            assert model["lora_target_modules"] == list(st.lora_targets)
        written += 1
    assert written == 4
    expert = _yaml(files["trainer/llamafactory/sft-expert.yaml"])  # type: ignore[arg-type]
    assert expert["quantization_bit"] == 4 and expert["lora_target"] == "q_proj,v_proj"
    assert expert["model_name_or_path"] == "Qwen/Qwen2.5-14B-Instruct"
    assert _yaml(files["trainer/llamafactory/domain-adapt.yaml"])["stage"] == "pt"  # type: ignore[arg-type]
    info = files["trainer/dataset_info.json"]
    assert isinstance(info, dict)
    align = next(s for s in plan.stages if s.name == "align")
    assert info["cnc_align"]["num_samples"] == align.stats.rows == 200
    assert info["cnc_sft_tools"]["columns"] == {"messages": "conversations", "tools": "tools_json"}
    index = files["trainer/index.json"]
    assert isinstance(index, dict)
    assert index["sft-broad"] == {"written": False, "reason": "no rows in this snapshot"}


def test_preferred_gpu_and_multi_device_sharding() -> None:
    plan, cfg = _plan()
    files = trainer_files(plan, cfg, TrainerConfig(gpu="2xa100-80g"))
    tools = _yaml(files["trainer/llamafactory/sft-tools.yaml"])  # type: ignore[arg-type]
    assert tools["deepspeed"] == "trainer/deepspeed_zero3.json"
    zero = files["trainer/deepspeed_zero3.json"]
    assert isinstance(zero, dict) and zero["zero_optimization"] == {"stage": 3}
    # a preferred target a stage does not list: the first that fits is used
    index = files["trainer/index.json"]
    assert isinstance(index, dict) and index["sft-expert"]["gpu"] in {"rtx-4090", "a100-80g"}
    trl = files["trainer/trl/sft-tools.yaml"]
    assert isinstance(trl, str) and "trl sft --num_processes 2 --config" in trl
    assert _yaml(trl)["deepspeed"] == "trainer/deepspeed_zero3.json"


def test_share_stops_trl_at_the_planned_steps() -> None:
    """TRL reads the whole tier folder: a 10 % share stops at the share's planned steps."""
    plan, cfg = _plan()
    files = trainer_files(plan, cfg, TrainerConfig())
    align = next(s for s in plan.stages if s.name == "align")
    fit = choose_gpu(align, None)
    assert fit is not None and fit.total_steps
    conf = _yaml(files["trainer/trl/align.yaml"])  # type: ignore[arg-type]
    assert conf["max_steps"] == fit.total_steps == fit.steps_per_epoch * align.schedule.epochs
    assert "max_steps" not in _yaml(files["trainer/trl/sft-expert.yaml"])  # type: ignore[arg-type]


def test_against_installed_trl_classes() -> None:
    """Where TRL is installed (the `trainers` extra), its own parser takes every file as is."""
    pytest.importorskip("trl", reason="trl not installed (extra `trainers`): documented names used")
    from trl import ModelConfig, ScriptArguments, SFTConfig, TrlParser

    plan, cfg = _plan()
    for name, text in trainer_files(plan, cfg, TrainerConfig()).items():
        if name.startswith("trainer/trl/"):
            parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
            assert parser.set_defaults_with_config(**_yaml(text)) == [], name  # type: ignore[arg-type]


def test_against_installed_llamafactory_classes() -> None:
    """Where LLaMA-Factory is installed (the `trainers` extra), its argument classes define
    every key of every file."""
    pytest.importorskip(
        "llamafactory",
        reason="llamafactory not installed (extra `trainers`): documented names used",
    )
    import dataclasses

    from llamafactory.hparams import (
        DataArguments,
        FinetuningArguments,
        ModelArguments,
        TrainingArguments,
    )

    known = {
        f.name
        for c in (DataArguments, FinetuningArguments, ModelArguments, TrainingArguments)
        for f in dataclasses.fields(c)
    }
    plan, cfg = _plan()
    for name, text in trainer_files(plan, cfg, TrainerConfig()).items():
        if name.startswith("trainer/llamafactory/"):
            assert set(_yaml(text)) <= known, name  # type: ignore[arg-type]
