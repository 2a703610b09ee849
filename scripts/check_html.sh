#!/usr/bin/env bash
# Loads a racksim HTML report in headless Chromium and checks that it drew its charts without
# script errors; optionally saves a screenshot to look at.
#   scripts/check_html.sh REPORT.html [SCREENSHOT.png [HEIGHT]]
# Exit 0: drawn; 1: not drawn or console errors; 77: Chromium is not installed
# (apt-get install -y chromium; scripts/deps.sh leaves it out because it is large).
set -euo pipefail
page=$(realpath "${1:?usage: scripts/check_html.sh REPORT.html [SCREENSHOT.png [HEIGHT]]}")
shot=${2:-}
height=${3:-1400}
chromium=""
for c in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$c" >/dev/null 2>&1; then chromium=$c; break; fi
done
if [ -z "$chromium" ]; then
  echo "chromium is not installed: apt-get install -y chromium" >&2
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$tmp/profile")
timeout 120 "$chromium" "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$page" \
  >"$tmp/dom.html" 2>"$tmp/log.txt" || true
status=0
if grep -q 'data-rendered="ok"' "$tmp/dom.html"; then
  charts=$(grep -o 'data-charts="[0-9]*"' "$tmp/dom.html" | head -1 | tr -dc 0-9)
  echo "drawn: ${charts:-0} charts, $(grep -o '<svg' "$tmp/dom.html" | wc -l) svg elements"
else
  echo "NOT drawn: $(grep -o 'id="render-status"[^>]*>[^<]*' "$tmp/dom.html" || echo 'no status element')" >&2
  status=1
fi
if grep -q ':CONSOLE' "$tmp/log.txt"; then
  echo "console messages from the page:" >&2
  grep ':CONSOLE' "$tmp/log.txt" >&2
  status=1
fi
if [ -n "$shot" ]; then
  timeout 120 "$chromium" "${flags[@]}" --screenshot="$(realpath -m "$shot")" --window-size=1400,"$height" \
    "file://$page" >/dev/null 2>&1 || true
  [ -s "$shot" ] && echo "screenshot: $shot" || { echo "no screenshot written" >&2; status=1; }
fi
exit $status
