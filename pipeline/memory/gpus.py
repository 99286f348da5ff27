"""GPU catalog: usable memory per device as nvidia-smi reports it (MiB), and device count."""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.memory import GIB

from .names import unknown

MIB = 2**20


@dataclass(frozen=True)
class Gpu:
    name: str
    label: str
    memory_mib: int  # per device, nvidia-smi "Total" with ECC as shipped
    count: int = 1  # devices in the target (e.g. 2 x 80 GB)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB


_SINGLE = (
    Gpu("rtx-3090", "GeForce RTX 3090 24 GB", 24576),
    Gpu("a10", "A10 24 GB", 23028),
    Gpu("a10g", "A10G 24 GB", 23028),
    Gpu("l4", "L4 24 GB", 23034),
    Gpu("v100-32g", "V100 32 GB", 32768),
    Gpu("rtx-4090", "GeForce RTX 4090 24 GB", 24564),
    Gpu("rtx-5090", "GeForce RTX 5090 32 GB", 32607),
    Gpu("a100-40g", "A100 40 GB", 40960),
    Gpu("a6000", "RTX A6000 48 GB", 49140),
    Gpu("l40s-48g", "L40S 48 GB (ECC on)", 46068),
    Gpu("a100-80g", "A100 80 GB", 81920),
    Gpu("h100-80g", "H100 80 GB", 81559),
    Gpu("h100-94g", "H100 NVL 94 GB", 95830),
    Gpu("h200-141g", "H200 141 GB", 143771),
    Gpu("a800-80g", "A800 80 GB", 81920),
    Gpu("h800-80g", "H800 80 GB", 81559),
    Gpu("mi300x", "Instinct MI300X 192 GB", 196592),
)

GPUS: dict[str, Gpu] = {g.name: g for g in _SINGLE}
GPUS["h100-nvl"] = GPUS["h100-94g"]
GPUS["a6000-48g"] = GPUS["a6000"]
for _base in ("a100-80g", "h100-80g"):
    _g = GPUS[_base]
    GPUS[f"2x{_base}"] = Gpu(f"2x{_base}", f"2 x {_g.label}", _g.memory_mib, count=2)


# A card named without its memory size is its largest SXM board (a PCIe-only card: its only
# board), the one rented for fine-tuning; the output says which card the name was read as.
FAMILIES: dict[str, str] = {
    "a100": "a100-80g",  # SXM4 40 GB and 80 GB
    "a800": "a800-80g",
    "h100": "h100-80g",  # SXM5 80 GB (the 94 GB H100 NVL is a PCIe pair: h100-94g)
    "h800": "h800-80g",
    "h200": "h200-141g",
    "v100": "v100-32g",  # SXM2 16 GB and 32 GB
    "l40s": "l40s-48g",
    "mi300": "mi300x",
}
# Spellings of consumer and workstation cards: the model number alone, `rtx4090`, `RTX 4090`.
_SPELLINGS = {"3090": "rtx-3090", "4090": "rtx-4090", "5090": "rtx-5090", "rtxa6000": "a6000"}
_VENDOR = re.compile(r"^(nvidia|amd|tesla|geforce|instinct|rtx(?=a))+")


def _compact(name: str) -> str:
    """`name` as letters and digits only, vendor words, SXM/PCIe and a `b` of `GB` dropped."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    key = re.sub(r"(sxm\d?|pcie)", "", _VENDOR.sub("", key))
    return re.sub(r"(\d)gb$", r"\1g", key)


_BY_COMPACT = {_compact(n): n for n in GPUS} | _SPELLINGS | FAMILIES


def resolve_gpu(name: str) -> tuple[Gpu, str | None]:
    """A catalog card by name in any spelling (RTX_3090, rtx3090, 4090, A100-SXM4-80GB), and a
    note where a card named without its memory size was read as one of its boards."""
    key = _compact(name)
    found = _BY_COMPACT.get(key) or _BY_COMPACT.get(f"rtx{key}")
    if found is None:
        hint = "catalog: cnc-corpus estimate --help; any card: --gpu-mem GIB"
        raise unknown("GPU", name, sorted({*GPUS, *FAMILIES}), hint, key=name.lower())
    gpu = GPUS[found]
    note = None
    if key in FAMILIES:
        note = (
            f"--gpu {name} read as {gpu.name} ({gpu.label}): a card named without its memory "
            "size is its largest SXM board; name the size for another"
        )
    return gpu, note


def get_gpu(name: str) -> Gpu:
    """A catalog card, as `resolve_gpu` reads its name."""
    return resolve_gpu(name)[0]


def custom_gpu(memory_gib: float) -> Gpu:
    """A card of `memory_gib` GiB (as nvidia-smi reports it), for --gpu-mem."""
    if memory_gib <= 0:
        raise ValueError(f"--gpu-mem must be positive, got {memory_gib}")
    return Gpu(f"{memory_gib:g}gib", f"custom {memory_gib:g} GiB", int(memory_gib * 1024))
