#!/bin/sh
# The planners are pure (docs/architecture.md §2, §5): libtend_plan.a may reference no
# event loop, no database, no clock and no I/O. What the archive leaves
# undefined is what it calls; nothing of that may be on the list below.
archive=${1:?usage: check-plan-pure.sh libtend_plan.a}
command -v nm >/dev/null 2>&1 || { echo "nm not installed: skipped"; exit 77; }
undefined=$(nm -u "$archive" | awk 'NF == 2 { print $2 }' | sort -u)
[ -n "$undefined" ] || { echo "$archive: nm found no symbols"; exit 1; }
bad=$(printf '%s\n' "$undefined" | grep -E \
  '^(uv_|sqlite3_|curl_|sd_|MHD_|clock_gettime|gettimeofday|time$|now_|(__)?(open|read|write|close|fopen|fwrite|fread|recv|send|socket|connect|poll|epoll_|fork|exec|kill|waitpid|sleep|usleep|nanosleep|getrandom|rand)(64)?$)' || true)
if [ -n "$bad" ]; then
  echo "$archive is not pure; it references:"
  printf '  %s\n' $bad
  exit 1
fi
echo "$archive: pure ($(printf '%s\n' "$undefined" | wc -l) outside symbols, none of them I/O or clock)"
