#!/usr/bin/env bash
# Table 3 of the paper: variations of the base model on WMT14 En-De, evaluated on newstest2013 (dev)
# without checkpoint averaging. Trains every row with recipes/wmt14_en_de_base.sh (the big row with
# wmt14_en_de_big.sh) plus the row's flags (transformer_plugin_cli/tools/table3.py), then writes
# $WORK/table3.md: dev perplexity, dev BLEU and parameter count, ours beside the paper's.
#
#   bash recipes/wmt14_table3.sh                       # all 20 rows, one after the other
#   ROWS="base A-h1 C-N2" bash recipes/wmt14_table3.sh # some rows (ids: python -m transformer_plugin_cli.tools.table3 rows)
#   bash recipes/wmt14_table3.sh --dry-run             # every command of every row, nothing runs
#   TOY=1 ROWS="base E-learned" bash recipes/wmt14_table3.sh   # toy size on CPU
#
# The data is prepared once and shared with the WMT14 En-De recipes (same WORK). Every row's stages
# are stamped: a re-run trains only the rows (and stages) that did not finish.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$REPO/recipes/lib.sh"
recipe_options "$0" "$@"

# ---- variables ----------------------------------------------------------------------------------
TOY=${TOY:-0}
WORK=${WORK:-runs/wmt14_en_de$([ "$TOY" != 1 ] || echo _toy)}  # shared with recipes/wmt14_en_de_*.sh
VENV_PYTHON=${VENV_PYTHON:-python}      # the python of the environment `make install` made (default: python on PATH)
ROWS=${ROWS:-}                             # row ids (python -m transformer_plugin_cli.tools.table3 rows); empty: all
# everything else (GPUS, LAUNCH, PRECISION, FROM, MAX_UPDATE, ...) is read by recipes/wmt14.sh
# -------------------------------------------------------------------------------------------------

export WORK TOY VENV_PYTHON
# shellcheck disable=SC2086  # ROWS is a list of ids
PLAN=$("$VENV_PYTHON" -m transformer_plugin_cli.tools.table3 plan $ROWS)  # id, recipe, flags per row; fails on an unknown id
ROWS=$(cut -f1 <<< "$PLAN")
row() {  # row ID RECIPE FLAGS [--check]: one row, trained and evaluated by its recipe
  CONFIG="table3-$1" EXTRA_TRAIN_ARGS="$3" EVAL_SUBSET=valid AVERAGE_LAST=1 TOY_AVERAGE_LAST=1 \
    bash "$REPO/recipes/$2" "${@:4}" < /dev/null
}
if [ "$DRY_RUN" = 0 ]; then  # every row decided before any row's work: none would have to redo its training
  while IFS=$'\t' read -r id recipe flags; do
    status=0 && row "$id" "$recipe" "$flags" --check > /dev/null || status=$?
    case $status in  # 3: a training that would be redone (the row said which, above); else the row's own error
      0) ;;
      3) FAILED_AT="stopped before any work (nothing was changed): row $id would have to redo its training"; exit 3 ;;
      *) FAILED_AT="row $id ($recipe) cannot run as set (exit $status, its message above); no row was started"; exit "$status" ;;
    esac
  done <<< "$PLAN"
fi
while IFS=$'\t' read -r id recipe flags; do
  printf '\n######## Table 3 row %s: %s %s\n' "$id" "$recipe" "${flags:-(the base model)}"
  row "$id" "$recipe" "$flags"
done <<< "$PLAN"

[ "${DRY_RUN:-0}" = 0 ] || exit 0
if [ "${LAUNCH:-local}" = torchrun ] && [ "${NODE_RANK:-0}" != 0 ]; then
  echo "node $NODE_RANK: every row trained; node 0 evaluates them and writes the table"
  exit 0
fi
printf '\n######## Table 3: ours beside the paper (%s)\n' "$WORK/table3.md"
# shellcheck disable=SC2086  # ROWS is a list of ids
"$VENV_PYTHON" -m transformer_plugin_cli.tools.table3 collect --work "$WORK" --rows $ROWS --out "$WORK/table3.md"
