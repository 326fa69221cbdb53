# Shared prologue of the script tests: `. tests/lib.sh NAME` sets
#   M     the maskd binary ($MASKD, else build/maskd)
#   DATA  the WikiText-2 folder (first argument's or $MASKD_DATA's wikitext-2, else ../shared/data's)
#   T     a private temporary folder, removed on exit
# runs with the environment maskd is measured in, and defines pass/fail in the
# format tests/run counts.
M=${MASKD:-$PWD/build/maskd}
DATA=${2:-${MASKD_DATA:-../shared/data}}/wikitext-2
T=$(mktemp -d "${MASKD_TMP:-/tmp}/$1.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_WAIT_POLICY=PASSIVE
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
