"""The CPU model a fingerprint records on Arm hosts: arm64 /proc/cpuinfo has no "model name",
so the core is named from its MIDR (implementer, part), or described by those numbers."""

from __future__ import annotations

from pathlib import Path

from perfgate.runner.backends import (
    _ARM_IMPLEMENTERS,
    _ARM_PARTS,
    arm_cpu_name,
    cpu_model_from_cpuinfo,
    cpu_model_name,
)
from perfgate.runner.fingerprint import build_fingerprint

DATA = Path(__file__).parent / "data" / "cpuinfo"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_kunpeng_920_is_named_from_its_midr() -> None:
    text = _text("kunpeng920.txt")
    assert "model name" not in text
    assert cpu_model_from_cpuinfo(text) == "HiSilicon Kunpeng 920 (TaiShan v110)"


def test_cpu_model_name_reads_the_files() -> None:
    name = cpu_model_name(str(DATA / "kunpeng920.txt"), str(DATA / "missing_midr_el1"))
    assert name == "HiSilicon Kunpeng 920 (TaiShan v110)"


def test_sysfs_midr_when_cpuinfo_has_no_id(tmp_path: Path) -> None:
    # Some containers show a cpuinfo without the ID lines; cpu0's midr_el1 still has it.
    bare = tmp_path / "cpuinfo"
    bare.write_text("processor\t: 0\nBogoMIPS\t: 200.00\n\n", encoding="utf-8")
    name = cpu_model_name(str(bare), str(DATA / "kunpeng920_midr_el1"))
    assert name == "HiSilicon Kunpeng 920 (TaiShan v110)"
    name = cpu_model_name(str(tmp_path / "absent"), str(DATA / "kunpeng920_midr_el1"))
    assert name == "HiSilicon Kunpeng 920 (TaiShan v110)"


def test_arm_neoverse_and_x86() -> None:
    assert cpu_model_from_cpuinfo(_text("neoverse_n1.txt")) == "ARM Neoverse N1"
    assert cpu_model_from_cpuinfo(_text("epyc_x86.txt")) == "AMD EPYC"


def test_unknown_core_is_described_by_its_numbers() -> None:
    text = _text("kunpeng920.txt").replace("0xd01", "0xd0f")
    assert cpu_model_from_cpuinfo(text) == "aarch64 (implementer 0x48, part 0xd0f)"
    other = cpu_model_from_cpuinfo("CPU implementer\t: 0xfe\nCPU part\t: 0x1\n")
    assert other == "aarch64 (implementer 0xfe, part 0x001)"


def test_big_little_lists_each_kind_once() -> None:
    little = "processor\t: {n}\nCPU implementer\t: 0x41\nCPU part\t: 0xd05\n"
    big = "processor\t: {n}\nCPU implementer\t: 0x41\nCPU part\t: 0xd0b\n"
    text = "\n".join([little.format(n=0), little.format(n=1), big.format(n=2)])
    assert cpu_model_from_cpuinfo(text) == "ARM Cortex-A55 + ARM Cortex-A76"


def test_nothing_to_go_on() -> None:
    assert cpu_model_from_cpuinfo("") is None
    assert cpu_model_from_cpuinfo("processor\t: 0\nCPU part\t: zz\n") is None
    assert cpu_model_from_cpuinfo("", "not a register\n") is None


def test_different_arm_cores_do_not_share_a_history() -> None:
    # Before, every arm64 host fingerprinted as "aarch64": a Kunpeng 920 and an unknown
    # core would have been compared as if they were one machine.
    def key(cpuinfo: str) -> str:
        env = {"cpu_model": cpu_model_from_cpuinfo(cpuinfo), "cpu_cores": 4}
        return build_fingerprint(env, device="cpu", params={}).key()

    kunpeng = _text("kunpeng920.txt")
    assert key(kunpeng) != key(kunpeng.replace("0xd01", "0xd0f"))
    assert key(kunpeng) != key(_text("neoverse_n1.txt"))


def test_every_named_core_has_its_implementer_named() -> None:
    # A pair added to the table without its implementer would raise KeyError on that host.
    for implementer, part in _ARM_PARTS:
        name = arm_cpu_name(implementer, part)
        assert name.startswith(_ARM_IMPLEMENTERS[implementer] + " ")
        assert "implementer" not in name
