#!/usr/bin/env bash
# The main job on a generated dataset: build, generate a census-like sample,
# import it once, then answer weighted tabulations from the binary columns.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${ROWS:-1000000}"
DIR="${DIR:-target/demo}"
cargo build --release --quiet
M=target/release/microtab
mkdir -p "$DIR"
$M gen census --rows "$ROWS" --seed 1 --out "$DIR/census.csv"
$M import "$DIR/census.csv" "$DIR/census.mtab" --force --missing INCTOT=9999999
$M info "$DIR/census.mtab"
echo
$M tab "$DIR/census.mtab" SEX EDUC --weight PERWT --filter "AGE(25-64)" --pct col --stats
$M means "$DIR/census.mtab" INCTOT --by EDUC --weight PERWT
