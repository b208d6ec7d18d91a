"""The portable llama.cpp build: what the installed library needs of a CPU, on whatever machine the
suite runs, and how the install keeps pip's cache from standing in a native wheel."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from llm_calls import llama_build as lb

NATIVE_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
               "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | "
               "OPENMP = 1 | REPACK = 1 | ")


@pytest.mark.slow
def test_the_installed_library_needs_nothing_beyond_the_baseline():
    """Holds on every machine, not only on one that traps: compiled features and instructions."""
    import llama_cpp

    features = lb.system_features(llama_cpp.llama_print_system_info().decode())
    assert features.get("AVX2") and features.get("FMA")  # the baseline is there
    assert {name for name, on in features.items() if on} <= lb.ALLOWED_FEATURES
    assert lb.check() == []


def test_a_native_build_is_named_by_its_features():
    features = lb.system_features(NATIVE_INFO)
    beyond = {name for name, on in features.items() if on and name in lb.BEYOND_BASELINE}
    assert beyond == {"AVX_VNNI", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"}


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("objdump") is None, reason="needs cc and objdump")
@pytest.mark.parametrize("flags, beyond", [(["-mavx2", "-mfma"], False), (["-mavx512f"], True)])
def test_the_instruction_scan_tells_avx512_code_from_avx2_code(tmp_path, flags, beyond):
    src = tmp_path / "k.c"
    src.write_text("#include <immintrin.h>\n"
                   "void add(float *a, const float *b, int n) {\n"
                   "  for (int i = 0; i < n; i++) a[i] += b[i] * 3.0f;\n}\n")
    lib = tmp_path / "libk.so"
    subprocess.run(["cc", "-O3", "-shared", "-fPIC", *flags, str(src), "-o", str(lib)], check=True)
    found = lb.beyond_baseline_instructions(lib)
    assert bool(found) is beyond, found
    if beyond:
        assert "%zmm" in found[0]


def test_the_baseline_names_every_x86_option_and_turns_the_wide_ones_off():
    args = lb.cmake_args(native=False).split()
    assert args[0] == "-DGGML_NATIVE=OFF"
    assert {a for a in args if a.endswith("=OFF")} >= {f"-D{o}=OFF" for o in ("GGML_AVX512", "GGML_AMX_TILE",
                                                                               "GGML_AMX_INT8", "GGML_AVX_VNNI")}
    assert {a for a in args if a.endswith("=ON")} == {f"-D{o}=ON" for o in lb.BASELINE_ON}
    assert lb.cmake_args(native=True) == "-DGGML_NATIVE=ON"


def test_wheels_are_kept_per_build_flags_outside_pips_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHSMITH_WHEELS", str(tmp_path))
    portable = lb.wheel_dir("0.3.36", lb.cmake_args(native=False))
    native = lb.wheel_dir("0.3.36", lb.cmake_args(native=True))
    assert portable != native and portable.parent == native.parent == tmp_path
    assert "x86-64-v3" in portable.name and "native" in native.name


def fake_wheel(path: Path, cpu_hash: str) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("llama_cpp_python-0.3.36.dist-info/RECORD",
                   f"llama_cpp/lib/libggml-cpu.so,{cpu_hash},100\nllama_cpp/__init__.py,sha256=abc,10\n")
    return path


def test_install_replaces_another_build_by_the_wheels_path_and_leaves_its_own(tmp_path, monkeypatch):
    """A venv holding the native wheel from pip's cache gets the portable one, installed by file path
    (pip never chooses); a venv that already has it is left alone."""
    lib = tmp_path / "libggml-cpu.so"
    lib.write_bytes(b"native build")
    folder = tmp_path / "wheels" / "w"
    folder.mkdir(parents=True)
    built = tmp_path / "built.so"
    built.write_bytes(b"portable build")
    wheel = fake_wheel(folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl", lb.file_hash(built))
    monkeypatch.setattr(lb, "build_wheel", lambda version, args, python: wheel)
    monkeypatch.setattr(lb, "installed_cpu_library", lambda: lib)
    commands = []
    monkeypatch.setattr(lb.subprocess, "run", lambda cmd, check=False: commands.append(cmd))
    lb.install(sys.executable)
    assert commands[0][-4:] == ["--quiet", "--force-reinstall", "--no-deps", str(wheel)]
    assert commands[1][-1] == f"{wheel}[server]"
    commands.clear()
    lib.write_bytes(b"portable build")  # now it is the installed one
    lb.install(sys.executable)
    assert commands == []


def test_the_version_is_read_from_pyproject():
    version, extras = lb.pinned_requirement()
    assert extras == "[server]"
    import importlib.metadata

    assert importlib.metadata.version("llama_cpp_python") == version
