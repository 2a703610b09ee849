#!/usr/bin/env bash
# Makes `import racksim` work for Debian's python3 (/usr/bin/python3, where python3-pandas and
# python3-pytest live) without root: a racksim.pth file in that interpreter's user site-packages
# points at build/python, where the build puts the package (build/python/racksim/). Rebuilding
# updates the module in place; `scripts/python_env.sh --remove` deletes the .pth file.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
[ -x "$py" ] || py=python3
site=$("$py" -m site --user-site)
pth="$site/racksim.pth"
if [ "${1:-}" = "--remove" ]; then
  rm -f "$pth"
  echo "removed $pth" >&2
  exit 0
fi
if ! ls build/python/racksim/_racksim*.so >/dev/null 2>&1; then
  echo "build/python/racksim has no extension module: cmake --build build --target racksim_python" >&2
  exit 1
fi
mkdir -p "$site"
echo "$PWD/build/python" > "$pth"
echo "import racksim: $py now finds build/python (via $pth)" >&2
"$py" -c "import racksim; print('racksim', racksim.__version__, 'for', __import__('sys').executable)" >&2
