# Shared by Fuzz/run.sh, Fuzz/replay.sh and Fuzz/campaign.sh (sourced from the repository's
# root): the targets, each one's seeds, dictionary and directories, and the libFuzzer build.
#
#   Fuzz/seeds/<name>     hand-written seeds and regression inputs (committed)
#   Fuzz/corpus/<Target>  the minimized corpus (committed; CI replays it)
#   Fuzz/scratch/<Target>    the working corpus new inputs are written to (git-ignored)
#   Fuzz/scratch/logs/       campaign logs (git-ignored)
#   Fuzz/artifacts/       crashes, as <Target>-crash-<sha1> and the like (git-ignored)

# Inputs the fuzzers generate stay within this many bytes (longer seeds are read truncated),
# so that the committed corpora stay small and every run explores the same size range.
FUZZ_MAX_LEN=4096

# A crash spawns swift-backtrace otherwise, which can outlive the fuzzer and hold its pipe.
export SWIFT_BACKTRACE=enable=no

# Every target: each Fuzz/Fuzz* directory but the shared FuzzSupport library.
fuzz_targets() {
  (cd Fuzz && ls -d Fuzz*/ | tr -d / | grep -vx FuzzSupport)
}

fuzz_check_target() {
  if [ ! -d "Fuzz/$1" ] || [ "$1" = FuzzSupport ]; then
    echo "unknown target $1 (targets: $(fuzz_targets | tr '\n' ' '))" >&2
    exit 2
  fi
}

# Seeds are Fuzz/seeds/<target without its Fuzz prefix>, but for the two HTTP/1.1 parsers.
fuzz_seeds() {
  case "$1" in
    FuzzResponseParser) echo Fuzz/seeds/response ;;
    FuzzRequestParser) echo Fuzz/seeds/request ;;
    *) echo "Fuzz/seeds/${1#Fuzz}" ;;
  esac
}

# The -dict= flag for the target's dictionary, when it has one.
fuzz_dict_flag() {
  local dict
  case "$1" in
    FuzzResponseParser | FuzzRequestParser) dict=Fuzz/http.dict ;;
    *) dict="Fuzz/$1.dict" ;;
  esac
  if [ -f "$dict" ]; then echo "-dict=$dict"; fi
}

fuzz_binary() {
  echo ".build-fuzz/release/$1"
}

# Builds the named targets in release with libFuzzer and AddressSanitizer on the Swift and the C
# code, into the scratch path .build-fuzz (so the normal .build is never disturbed).
fuzz_build() {
  local t
  for t in "$@"; do
    swift build -c release --product "$t" --scratch-path .build-fuzz \
      --sanitize=fuzzer \
      -Xswiftc -sanitize=fuzzer,address \
      -Xcc -fsanitize=address \
      -Xswiftc -DFUZZING
  done
}

# Makes the directories a run writes to.
fuzz_prepare() {
  mkdir -p "Fuzz/corpus/$1" "Fuzz/scratch/$1" Fuzz/artifacts "$(fuzz_seeds "$1")"
}
