#!/usr/bin/env bash
# On a machine with an accelerator (jax, flax, pytest, pytest-xdist and hypothesis installed):
# the backend-dispatch, segmentation and loss benchmarks there, then the tests of the kernels,
# each step within its own time limit so that one slow step leaves the others their time. Logs
# go to OUTDIR.
#
#   benchmarks/accelerator.sh OUTDIR [TEST_SECONDS] [TEST_WORKERS]
set -uo pipefail
out=$(realpath "${1:?usage: benchmarks/accelerator.sh OUTDIR [TEST_SECONDS] [TEST_WORKERS]}")
test_seconds=${2:-150}
workers=${3:-12}
cd "$(dirname "$0")/.."
# Several test workers share one device: each takes memory as it needs it. The tests compile
# with XLA's own settings here (tests/conftest.py asks for quick compilation otherwise).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false JAXSEG_TEST_XLA=default

nvidia-smi -L 2>/dev/null
python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())"

echo "== benchmarks/dispatch.py"
timeout 110 python3 benchmarks/dispatch.py --rounds 3 --repeats 20 2>&1 | tee "$out/dispatch.txt"
echo "== benchmarks/segmentation.py"
timeout 150 python3 benchmarks/segmentation.py --rounds 2 --repeats 5 2>&1 | tee "$out/segmentation.txt"
echo "== benchmarks/losses.py --full-length"
timeout 100 python3 benchmarks/losses.py --quick --full-length 2>&1 | tee "$out/losses.txt"

echo "== tests of the kernels"
# The host-side tests (CLI, files, plots, docstrings, layout, the CPU-simulated sharding) are
# left out; the rest in order of priority (xdist hands out the first files first). At the
# limit pytest gets an interrupt, so that it still prints the failures it has seen.
timeout -s INT -k 30 "$test_seconds" python3 -m pytest -p no:cacheprovider -n "$workers" -v \
  --tb=short -rfE \
  --junitxml="$out/junit.xml" \
  tests/test_segmentation_plain.py tests/test_golden_segmentation.py tests/test_golden_files.py \
  tests/test_segmental.py tests/test_segments.py tests/test_edit_dp.py tests/test_losses_edit.py \
  tests/test_unsupervised.py tests/test_ranking.py tests/test_losses_temporal.py \
  tests/test_losses_overlap.py tests/test_detection.py tests/test_grounding.py \
  tests/test_proposals.py tests/test_dense.py tests/test_frame_metrics.py \
  tests/test_retrieval.py tests/test_ranking_streaming.py tests/test_streaming.py \
  tests/test_evaluator.py tests/test_stats.py tests/test_capacity.py tests/test_programs.py \
  tests/test_contract.py tests/test_quotients.py tests/test_x64.py tests/test_half_precision.py \
  tests/test_degenerate.py tests/test_losses_derivatives.py tests/test_evaluator_intervals.py \
  tests/test_stats_coverage.py tests/test_api.py tests/test_demo.py > "$out/tests.txt" 2>&1
echo "pytest exit status $?"
grep -E "FAILED|ERROR" "$out/tests.txt" | head -40
tail -3 "$out/tests.txt"
