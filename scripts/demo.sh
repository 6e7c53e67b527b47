#!/usr/bin/env bash
# The main job on a generated dataset: build, generate a census-like sample
# with 80 replicate weights, import it once, declare its survey design, then
# answer weighted tabulations with standard errors from the binary columns.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${ROWS:-1000000}"
DIR="${DIR:-target/demo}"
if [ -x target/release/microtab ]; then
    echo "== compiling microtab (cargo build --release; only what changed since the last build)"
else
    echo "== compiling microtab (cargo build --release): a first build takes 5-10 minutes on 2 cores, about 2 on 8"
fi
START=$(date +%s)
cargo build --release --quiet
echo "   compiled in $(( $(date +%s) - START )) s: target/release/microtab (add target/release to PATH to type microtab)"
M=target/release/microtab
echo "== generating $ROWS census-like records with 80 replicate weights, importing them, setting the design"
mkdir -p "$DIR"
$M gen census --rows "$ROWS" --seed 1 --repweights 80 --out "$DIR/census.csv"
$M import "$DIR/census.csv" "$DIR/census.mtab" --force --missing INCTOT=9999999
$M design "$DIR/census.mtab" --weight PERWT --repweights REPWTP1-REPWTP80 --type sdr
$M info "$DIR/census.mtab" | head -12
echo
$M freq "$DIR/census.mtab" EDUC
$M tab "$DIR/census.mtab" SEX EDUC --filter "AGE(25-64)" --pct col --stats
$M means "$DIR/census.mtab" INCTOT --by EDUC --median
echo "time of the mean by EDUC, weighted only, then with 80 replicate weights:"
$M means "$DIR/census.mtab" INCTOT --by EDUC --no-design --weight PERWT --repeat 5 --format csv > /dev/null
$M means "$DIR/census.mtab" INCTOT --by EDUC --repeat 5 --format csv > /dev/null
