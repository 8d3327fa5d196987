#!/usr/bin/env bash
# One idempotent set-up for a fresh Debian/Ubuntu machine: system packages,
# .venv with torch 2.14.1 + torchvision 0.29.1 and the XLA:CPU PJRT plugin, the C++ build,
# and an editable install of torch_tpu. Safe to re-run; fast when done.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- system packages (GoogleTest, Ninja, ccache, CMake; Chromium, which the
# docs test renders the notebook site in) --------------------------------------
need=()
command -v ninja >/dev/null || need+=(ninja-build)
command -v ccache >/dev/null || need+=(ccache)
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev googletest)
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  log "installing Debian packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

# --- Python environment -------------------------------------------------------
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  $PY -m venv .venv
fi
VPY=$ROOT/.venv/bin/python
# Reinstall only when requirements.txt changed since the last install.
REQ_SUM=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat .venv/.requirements.sha256 2>/dev/null)" != "$REQ_SUM" ] || \
   ! TORCH_DEVICE_BACKEND_AUTOLOAD=0 $VPY -c "import torch, xla_plugins.xla_cpu_pjrt; assert torch.__version__.startswith('2.14.1')" 2>/dev/null; then
  log "installing Python packages (torch 2.14.1, torchvision 0.29.1, xla-cpu-pjrt 0.0.1, transformers, ...)"
  # Pinned torch: any other pin would pull a multi-GB CUDA build.
  $VPY -m pip install -q --disable-pip-version-check -r requirements.txt
  echo "$REQ_SUM" > .venv/.requirements.sha256
fi

# --- the PJRT plugin must be present and export GetPjrtApi --------------------
PLUGIN=$($VPY -c "import os, xla_plugins.xla_cpu_pjrt as m; print(os.path.join(os.path.dirname(m.__file__), 'xla_cpu_pjrt.so'))")
[ -f "$PLUGIN" ] || { echo "XLA:CPU plugin missing at $PLUGIN; reinstall xla-cpu-pjrt==0.0.1" >&2; exit 1; }
if ! nm -D --defined-only "$PLUGIN" 2>/dev/null | grep -q ' GetPjrtApi'; then
  echo "$PLUGIN does not export GetPjrtApi; reinstall xla-cpu-pjrt==0.0.1" >&2; exit 1
fi

# --- build (Ninja + ccache; no isolated build env, which would fetch CUDA torch)
if [ ! -f build/build.ninja ]; then
  log "configuring CMake"
  cmake -S . -B build -G Ninja -DPython3_EXECUTABLE="$VPY" >/dev/null
fi
log "building"
t0=$(date +%s)
ninja -C build
log "build step took $(( $(date +%s) - t0 )) s"
if ! $VPY -c "import importlib.metadata as m; m.distribution('torch_tpu')" 2>/dev/null; then
  log "installing torch_tpu (editable)"
  $VPY -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
fi
log "ready: $($VPY -c 'import torch; print("tpu devices:", torch.tpu.device_count(), "-", torch.tpu.get_device_name())' 2>/dev/null)"
