#!/usr/bin/env bash
# Every Hub weight layout for both families (tests/cli/test_import_hf.sh runs each
# layout once across the two in make test; see there for what is checked).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" long_importhf
IMPORT_HF_LONG=1 bash tests/cli/test_import_hf.sh
