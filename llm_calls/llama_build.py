"""The portable llama.cpp build behind the embedded model: built once, on any x86-64 machine, for
every x86-64 CPU with AVX2.

Why: llama-cpp-python builds llama.cpp from source, by default with `GGML_NATIVE=ON`, i.e. for the
CPU of the build machine. On a cloud VM whose CPU advertises AMX or AVX-512 that the hypervisor does
not allow, that library dies with SIGILL (`tileloadd` in libggml-cpu.so) on its first completion;
a library built on one machine and reused on another (a shared venv, pip's wheel cache, an image)
does the same. So the install builds with `GGML_NATIVE=OFF` and a fixed baseline: the x86-64-v3
feature set (SSE4.2, AVX, AVX2, BMI2, FMA, F16C), with every wider variant (AVX-VNNI, AVX-512,
AMX) named off. A runtime CPU-variant dispatch (`GGML_BACKEND_DL` + `GGML_CPU_ALL_VARIANTS`) was the
alternative: it compiles the CPU backend once per variant (14 on x86 in the vendored llama.cpp) and
scores the variants by what `cpuid` advertises, so on a VM that advertises AMX but traps it, it
would load the `sapphirerapids` (AMX) variant: the very failure. The fixed baseline is the choice.
`benchmarks/llama_build.py` measures it against a native build side by side.

pip caches a built wheel by version, not by `CMAKE_ARGS`, so a machine whose cache holds a native
wheel of the same version would silently reinstall it. This module therefore never lets pip choose:
it builds the wheel with `--no-cache-dir` into its own folder, named by the version and a digest of
the build flags (`~/.cache/benchsmith/wheels/...`, or `$BENCHSMITH_WHEELS`), and installs that file
by its path. A venv whose installed library is not that build is reinstalled (compared by the
sha256 the wheel's RECORD gives for the CPU backend).

    python llm_calls/llama_build.py install   # build (or reuse) the portable wheel and install it
    python llm_calls/llama_build.py check     # the installed library: features and instructions
    python llm_calls/llama_build.py flags     # the CMAKE_ARGS it builds with

Standard library only: `make install` runs it before any other package is installed.
A user who knows their CPU runs every instruction it advertises can build natively for speed
(see the README): `BENCHSMITH_LLAMA_NATIVE=1 make install`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "llama-cpp-python"

# The baseline: GGML options of llama.cpp's ggml/CMakeLists.txt, every x86 one named.
BASELINE_ON = ("GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_BMI2", "GGML_FMA", "GGML_F16C")
BASELINE_OFF = ("GGML_AVX_VNNI", "GGML_AVX512", "GGML_AVX512_VBMI", "GGML_AVX512_VNNI", "GGML_AVX512_BF16",
                "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")

# What `llama_print_system_info()` may report as 1 for the CPU backend of the portable build.
ALLOWED_FEATURES = frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "LLAMAFILE", "OPENMP",
                              "REPACK"})
# Features of wider CPUs; any of them reported as 1 means the library is not the portable build.
BEYOND_BASELINE = frozenset({"AVX_VNNI", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8",
                             "AMX_TILE", "AMX_BF16"})

# Instructions (AT&T syntax, as objdump prints them) that need more than x86-64-v3: any AVX-512
# register or mask, the upper 16 vector registers (EVEX only), AMX tiles, VNNI and BF16 dot products.
_BEYOND_INSN = re.compile(
    r"%zmm\d+|%k[1-7]\b|%[xy]mm(?:1[6-9]|2\d|3[01])\b|\{evex\}"
    r"|\b(?:tileloadd\w*|tilestored|tilezero|tilerelease|ldtilecfg|sttilecfg|tdp\w+ps|tdpb\w+d)\b"
    r"|\b(?:vpdpbusds?|vpdpwssds?|vdpbf16ps|vcvtne2ps2bf16|vcvtneps2bf16)\b"
)


class BuildError(RuntimeError):
    pass


def pinned_requirement() -> tuple[str, str]:
    """(version, extras) of llama-cpp-python as pinned in pyproject.toml: the one place it is written."""
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    for req in data["project"]["dependencies"]:
        m = re.fullmatch(r"llama-cpp-python(\[[^\]]*\])?==([\w.]+)", req.strip())
        if m:
            return m.group(2), m.group(1) or ""
    raise BuildError("pyproject.toml: no pinned llama-cpp-python==VERSION dependency")


def native_requested() -> bool:
    return os.environ.get("BENCHSMITH_LLAMA_NATIVE", "") not in ("", "0")


def cmake_args(native: bool | None = None) -> str:
    """The CMAKE_ARGS of the build: the portable baseline, or `GGML_NATIVE=ON` when asked for."""
    if native if native is not None else native_requested():
        return "-DGGML_NATIVE=ON"
    return " ".join(["-DGGML_NATIVE=OFF", *(f"-D{o}=ON" for o in BASELINE_ON), *(f"-D{o}=OFF" for o in BASELINE_OFF)])


def wheel_dir(version: str, args: str) -> Path:
    """Where the wheel of this version and these flags is kept: never pip's cache."""
    digest = hashlib.sha256(f"{version} {args}".encode()).hexdigest()[:12]
    kind = "native" if "GGML_NATIVE=ON" in args else "x86-64-v3"
    root = Path(os.environ.get("BENCHSMITH_WHEELS") or Path.home() / ".cache" / "benchsmith" / "wheels")
    return root / f"{PACKAGE}-{version}-{kind}-{digest}"


def build_wheel(version: str, args: str, python: str = sys.executable) -> Path:
    """The wheel of `version` built with `args` (reused when built before). About 10 minutes on 2 cores."""
    folder = wheel_dir(version, args)
    found = sorted(folder.glob("llama_cpp_python-*.whl")) if folder.is_dir() else []
    if found:
        return found[0]
    print(f"llama_build: building {PACKAGE}=={version} with CMAKE_ARGS={args!r} (about 10 minutes on 2 cores) "
          f"into {folder}", flush=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".build-") as tmp:
        env = {**os.environ, "CMAKE_ARGS": args, "FORCE_CMAKE": "1"}
        cmd = [python, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps", "--no-binary", PACKAGE,
               "--quiet", f"{PACKAGE}=={version}", "-w", tmp]
        done = subprocess.run(cmd, env=env)
        if done.returncode != 0:
            raise BuildError(f"building {PACKAGE}=={version} failed (exit {done.returncode}): {' '.join(cmd)}")
        wheels = sorted(Path(tmp).glob("llama_cpp_python-*.whl"))
        if not wheels:
            raise BuildError(f"pip wheel left no llama_cpp_python wheel in {tmp}")
        (Path(tmp) / "BUILD.json").write_text(json.dumps({"version": version, "cmake_args": args}, indent=1))
        os.replace(tmp, folder)  # whole or not at all: a killed build leaves no half folder behind
    return sorted(folder.glob("llama_cpp_python-*.whl"))[0]


def _record_hashes(record: str) -> dict[str, str]:
    out = {}
    for line in record.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256="):
            out[parts[0]] = parts[1]
    return out


def wheel_cpu_hash(wheel: Path) -> str:
    """The RECORD hash of the CPU backend library inside a wheel."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        hashes = _record_hashes(z.read(name).decode())
    for path, digest in hashes.items():
        if re.search(r"libggml-cpu[^/]*\.so$", path):
            return digest
    raise BuildError(f"{wheel}: no libggml-cpu library in its RECORD")


def installed_libraries() -> list[Path]:
    """The native libraries of the installed llama_cpp package (`lib*.so`; the versioned names are
    copies of them), without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted((Path(list(spec.submodule_search_locations)[0]) / "lib").glob("lib*.so"))


def installed_cpu_library() -> Path | None:
    """The CPU backend library of the installed llama_cpp package."""
    return next((lib for lib in installed_libraries() if lib.name.startswith("libggml-cpu")), None)


def file_hash(path: Path) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()


def install(python: str = sys.executable) -> Path:
    """Build (or reuse) the wheel for the configured flags and make it the installed one."""
    version, extras = pinned_requirement()
    args = cmake_args()
    wheel = build_wheel(version, args, python)
    lib = installed_cpu_library()
    if lib is not None and file_hash(lib) == wheel_cpu_hash(wheel):
        print(f"llama_build: the installed {PACKAGE} is {wheel.name} ({args})", flush=True)
        return wheel
    if lib is not None:
        print(f"llama_build: the installed {PACKAGE} is another build ({lib}); replacing it with {wheel}", flush=True)
    # by path, so no cached wheel of the same version can stand in; dependencies from the index
    cmd = [python, "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", str(wheel)]
    subprocess.run(cmd, check=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", f"{wheel}{extras}"], check=True)
    return wheel


def system_features(info: str) -> dict[str, bool]:
    """`llama_print_system_info()` text -> {feature: on}, e.g. 'CPU : SSE3 = 1 | AVX2 = 1 | ...'."""
    return {name: value == "1" for name, value in re.findall(r"([A-Z][A-Z0-9_]*) = (\d)", info)}


def beyond_baseline_instructions(library: Path, limit: int = 5) -> list[str]:
    """Up to `limit` disassembled lines of `library` that need more than the baseline (objdump)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        raise BuildError("objdump (Debian package binutils) is needed to read the library's instructions")
    proc = subprocess.Popen([objdump, "-d", "--no-show-raw-insn", str(library)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    found: list[str] = []
    for line in proc.stdout:
        if _BEYOND_INSN.search(line):
            found.append(line.strip())
            if len(found) >= limit:
                proc.kill()
                break
    proc.wait()
    return found


def check(python: str = sys.executable) -> list[str]:
    """What is wrong with the installed library for a portable build (empty: nothing)."""
    probe = "import llama_cpp, sys; sys.stdout.write(llama_cpp.llama_print_system_info().decode())"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return [f"importing llama_cpp failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"]
    features = system_features(done.stdout)
    problems = [f"compiled feature {name} = 1 is beyond the x86-64-v3 baseline"
                for name, on in sorted(features.items()) if on and name in BEYOND_BASELINE]
    if installed_cpu_library() is None:
        problems.append("no libggml-cpu library in the installed llama_cpp package")
    for lib in installed_libraries():
        problems += [f"{lib.name}: instruction beyond the baseline: {line}"
                     for line in beyond_baseline_instructions(lib)]
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    what = argv[0] if argv else ""
    try:
        if what == "flags":
            print(cmake_args())
        elif what == "install":
            install()
        elif what == "check":
            if native_requested():
                print("llama_build: BENCHSMITH_LLAMA_NATIVE is set: the library is built for this CPU only")
                return 0
            problems = check()
            for p in problems:
                print(f"llama_build: {p}", file=sys.stderr)
            if problems:
                print("llama_build: the installed llama.cpp may die with SIGILL on another CPU; "
                      "run `make install` (it builds the portable wheel)", file=sys.stderr)
                return 1
            print("llama_build: the installed llama.cpp needs nothing beyond x86-64-v3 (AVX2)")
        else:
            print(__doc__)
            return 2
    except (BuildError, subprocess.CalledProcessError) as exc:
        print(f"llama_build: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
