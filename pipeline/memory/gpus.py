"""GPU catalog: usable memory per device as nvidia-smi reports it (MiB), and device count."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.memory import GIB

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


def get_gpu(name: str) -> Gpu:
    """A catalog card; case, `_` or `-` and spaces do not matter (RTX_3090 == rtx-3090)."""
    key = "-".join(name.lower().replace("_", "-").split())
    try:
        return GPUS[key]
    except KeyError:
        raise ValueError(f"unknown GPU {name!r}; catalog: {', '.join(GPUS)}") from None


def custom_gpu(memory_gib: float) -> Gpu:
    """A card of `memory_gib` GiB (as nvidia-smi reports it), for --gpu-mem."""
    if memory_gib <= 0:
        raise ValueError(f"--gpu-mem must be positive, got {memory_gib}")
    return Gpu(f"{memory_gib:g}gib", f"custom {memory_gib:g} GiB", int(memory_gib * 1024))
