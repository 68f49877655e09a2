#!/usr/bin/env bash
# A fuzzing campaign: every target (or those named) for MINUTES of CPU time each, one after the
# other, with a random seed; new coverage is merged into the committed corpora (docs/FUZZING.md).
#
#   Fuzz/campaign.sh MINUTES [TARGET…]
#   nice -n 19 Fuzz/campaign.sh 60 > campaign.log 2>&1 &     # a long one, in the background
#
# For each target:
#  1. fuzz from the committed corpus Fuzz/corpus/TARGET and the seeds into the working corpus
#     Fuzz/scratch/TARGET until the fuzzer has used MINUTES of CPU time. The budget is CPU time,
#     read from /proc while it runs and from the shell's child accounting when it ends, so a
#     fuzzer that is stopped (SIGSTOP) or starved by other work only takes longer; it is then
#     asked to end with SIGUSR1 (libFuzzer finishes the input it is on and prints its stats).
#     A libFuzzer timeout is re-run alone: if the input is not slow on its own (the fuzzer was
#     stopped or starved while running it), the fuzzing goes on with a new seed.
#  2. merge the committed corpus, the working corpus and the seeds into a new minimized
#     Fuzz/corpus/TARGET with libFuzzer's -set_cover_merge=1 (the -merge=1 that looks for the
#     fewest inputs holding every feature; inputs up to FUZZ_MAX_LEN bytes), and empty the
#     working corpus;
#  3. replay the new corpus for the coverage it holds.
#
# Prints per target the CPU time, executions, coverage (libFuzzer's cov: edges and ft: features
# of the merged corpus), corpus size and any crash, and writes the same as a Markdown table to
# Fuzz/scratch/logs/campaign-STAMP/summary.md next to the fuzzers' logs. A crash (or a timeout or
# out-of-memory that reproduces alone) is saved as Fuzz/artifacts/TARGET-crash-SHA1 (-timeout-,
# -oom-, -leak-), ends that target's fuzzing, and makes the script exit 1 after the others.
set -euo pipefail

# All of it in a function: bash reads the whole script before running it, so editing or checking
# out this file during a campaign of hours cannot derail the campaign.
main() {

  usage="usage: Fuzz/campaign.sh MINUTES [TARGET…]"
  minutes=${1:-}
  shift || true
  [[ $minutes =~ ^[0-9]+$ ]] && [ "$minutes" -gt 0 ] || { echo "$usage" >&2; exit 2; }
  cd "$(dirname "$0")/.."
  . Fuzz/common.sh

  if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(fuzz_targets); fi
  for t in "${targets[@]}"; do fuzz_check_target "$t"; done

  budget_ms=$((minutes * 60 * 1000))
  # Seconds of wall time one input may take before libFuzzer calls it a timeout.
  unit_timeout=${FUZZ_UNIT_TIMEOUT:-60}
  hz=$(getconf CLK_TCK)
  logdir="Fuzz/scratch/logs/campaign-$(date -u +%Y%m%d-%H%M%S)"
  mkdir -p "$logdir"
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  if ! git diff --quiet HEAD -- Sources Fuzz Package.swift ':!Fuzz/corpus' 2>/dev/null; then commit="$commit+changes"; fi

  log() { echo "$(date -u +%FT%TZ) $*"; }
  log "campaign: ${#targets[@]} target(s) × $minutes CPU-minute(s), commit $commit, script pid $$, logs in $logdir"
  log "stop/resume a fuzzer with kill -STOP/-CONT PID (each fuzzer's pid is printed and kept in $logdir/pids)"

  if ! fuzz_build "${targets[@]}" > "$logdir/build.log" 2>&1; then
    tail -30 "$logdir/build.log"
    log "the fuzz build failed"
    exit 1
  fi
  # The campaign runs copies, so that a rebuild of .build-fuzz meanwhile changes nothing.
  mkdir -p "$logdir/bin"
  for t in "${targets[@]}"; do cp "$(fuzz_binary "$t")" "$logdir/bin/"; done

  # CPU time in ms of this shell's waited-for children (the fuzzers), from the `times` builtin.
  # Called directly, never in $(…): a subshell would report its own children.
  children_ms=0
  read_children_ms() {
    times > "$logdir/.times"
    children_ms=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
                                 printf "%d\n", t * 1000 }' "$logdir/.times")
  }

  # CPU seconds a running process has used so far, from /proc: user + system of all its threads
  # and of the children it has waited for (LeakSanitizer's leak checks run in a cloned task;
  # the final count, from `times`, includes them too).
  proc_cpu_s() {
    awk -v hz="$hz" '{ sub(/^.*\) /, ""); print int(($12 + $13 + $14 + $15) / hz) }' "/proc/$1/stat" 2>/dev/null || echo 0
  }

  artifacts() { (cd Fuzz/artifacts && ls -1 -- "$1"-* 2>/dev/null) | sort || true; }

  fuzzer_pid=""
  trap 'if [ -n "$fuzzer_pid" ]; then kill -TERM "$fuzzer_pid" 2>/dev/null || true; fi; rm -rf "$logdir/bin"; log "interrupted"; exit 130' INT TERM

  summary="$logdir/summary.md"
  {
    echo "Campaign of $(date -u +%F), commit $commit: $minutes CPU-minutes per target, one core, random seeds."
    echo
    echo "| target | CPU time | wall time | executions | exec/s (CPU) | cov | ft | corpus | result |"
    echo "|---|---|---|---|---|---|---|---|---|"
  } > "$summary"

  failures=()
  for t in "${targets[@]}"; do
    fuzz_prepare "$t"
    bin="$logdir/bin/$t"
    seeds=$(fuzz_seeds "$t")
    flags=(-max_len="$FUZZ_MAX_LEN" -timeout="$unit_timeout" -artifact_prefix="Fuzz/artifacts/$t-" -print_final_stats=1)
    dict=$(fuzz_dict_flag "$t")
    [ -n "$dict" ] && flags+=("$dict")

    used_ms=0 execs=0 segment=0 result="no crash" started=$(date +%s)
    while [ "$used_ms" -lt "$budget_ms" ]; do
      segment=$((segment + 1))
      seed=$(($(od -An -N4 -tu4 /dev/urandom) % 2147483646 + 1))
      seglog="$logdir/$t.$segment.log"
      artifacts "$t" > "$logdir/.before"
      read_children_ms
      start_ms=$children_ms
      "$bin" "${flags[@]}" -seed="$seed" "Fuzz/scratch/$t" "Fuzz/corpus/$t" "$seeds" > "$seglog" 2>&1 &
      fuzzer_pid=$!
      echo "$t $segment $fuzzer_pid" >> "$logdir/pids"
      log "$t: fuzzing, seed $seed, fuzzer pid $fuzzer_pid, $(((budget_ms - used_ms) / 1000)) CPU-s to go (log $seglog)"
      remaining_s=$(((budget_ms - used_ms + 999) / 1000))
      asked=0
      while kill -0 "$fuzzer_pid" 2>/dev/null; do
        sleep 5
        if [ "$asked" = 0 ] && [ "$(proc_cpu_s "$fuzzer_pid")" -ge "$remaining_s" ]; then
          kill -USR1 "$fuzzer_pid" 2>/dev/null || true
          asked=1
        fi
      done
      rc=0
      wait "$fuzzer_pid" || rc=$?
      fuzzer_pid=""
      read_children_ms
      used_ms=$((used_ms + children_ms - start_ms))
      n=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$seglog" | grep -oE '[0-9]+$' || true)
      [ -n "$n" ] || n=$(grep -oE '^#[0-9]+' "$seglog" | tail -1 | tr -d '#' || true)
      execs=$((execs + ${n:-0}))
      [ "$rc" -eq 0 ] && continue

      # Ended by itself: what did it leave? (slow-unit files are only a note, never a failure.)
      new=$(artifacts "$t" | comm -13 "$logdir/.before" - | grep -v -- "-slow-unit-" | tail -1 || true)
      if [ -z "$new" ]; then
        tail -20 "$seglog"
        result="fuzzer ended with status $rc and no artifact (log $seglog)"
        break
      fi
      if [[ $new == "$t-timeout-"* ]]; then
        # Stopped or starved while on one input, or really slow? Run the input alone.
        read_children_ms
        v0=$children_ms
        vrc=0
        "$bin" -timeout=600 "Fuzz/artifacts/$new" > "$logdir/$t.$segment.timeout-check.log" 2>&1 || vrc=$?
        read_children_ms
        if [ "$vrc" -eq 0 ] && [ $((children_ms - v0)) -lt $((unit_timeout * 1000)) ]; then
          mv "Fuzz/artifacts/$new" "$logdir/"
          log "$t: the timeout input ran alone in $((children_ms - v0)) ms of CPU: not a finding (kept in $logdir); fuzzing on"
          continue
        fi
      fi
      tail -40 "$seglog"
      result="**finding: Fuzz/artifacts/$new**"
      log "$t: FINDING Fuzz/artifacts/$new (log $seglog)"
      break
    done
    wall_s=$(($(date +%s) - started))
    [ "$result" = "no crash" ] || failures+=("$t")

    # Merge everything into a new minimized corpus; replace the committed one only on success.
    # No timeout here or in the replay after it (-timeout=0): every input has just run within
    # the limit, and a stop of the process must not drop one from the corpus.
    merged="Fuzz/scratch/.merge-$t"
    rm -rf "$merged"
    mkdir -p "$merged"
    if "$bin" -set_cover_merge=1 -max_len="$FUZZ_MAX_LEN" -timeout=0 -artifact_prefix="Fuzz/artifacts/$t-" \
        "$merged" "Fuzz/corpus/$t" "Fuzz/scratch/$t" "$seeds" > "$logdir/$t.merge.log" 2>&1; then
      rm -rf "Fuzz/corpus/$t"
      mv "$merged" "Fuzz/corpus/$t"
      find "Fuzz/scratch/$t" -type f -delete
    else
      tail -20 "$logdir/$t.merge.log"
      log "$t: the merge failed; Fuzz/corpus/$t and Fuzz/scratch/$t are left as they were"
      failures+=("$t (merge)")
    fi
    cov=? ft=?
    if "$bin" -runs=0 -timeout=0 "Fuzz/corpus/$t" > "$logdir/$t.replay.log" 2>&1; then
      line=$(grep -oE 'INITED cov: [0-9]+ ft: [0-9]+' "$logdir/$t.replay.log" | tail -1 || true)
      cov=$(echo "$line" | awk '{ print $3 }') ft=$(echo "$line" | awk '{ print $5 }')
    else
      failures+=("$t (replay)")
    fi
    files=$(find "Fuzz/corpus/$t" -type f | wc -l)
    kb=$(find "Fuzz/corpus/$t" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%d", (s + 1023) / 1024 }')
    cpu_min=$(awk -v ms="$used_ms" 'BEGIN { printf "%.1f", ms / 60000 }')
    rate=$(awk -v n="$execs" -v ms="$used_ms" 'BEGIN { printf "%d", (ms > 0 ? n * 1000 / ms : 0) }')
    wall=$(printf '%dh%02dm' $((wall_s / 3600)) $((wall_s % 3600 / 60)))
    log "$t: $cpu_min CPU-min ($wall wall), $execs executions ($rate/s), cov $cov ft $ft, corpus $files files $kb KB, $result"
    echo "| \`$t\` | $cpu_min min | $wall | $execs | $rate | $cov | $ft | $files files, $kb KB | $result |" >> "$summary"
  done

  total_kb=$(find Fuzz/corpus -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%d", (s + 1023) / 1024 }')
  echo >> "$summary"
  echo "All committed corpora: $(find Fuzz/corpus -type f | wc -l) files, $total_kb KB." >> "$summary"
  rm -rf "$logdir/bin"
  echo
  cat "$summary"
  if [ ${#failures[@]} -gt 0 ]; then
    log "failed: ${failures[*]}"
    exit 1
  fi
}

main "$@"; exit
