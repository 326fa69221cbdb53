#!/usr/bin/env bash
# The script tests make test leaves out of its sanitizer pass for time (tests/run's
# asan_scripts has the ten it runs), against the ASan+UBSan build: a server restarted on
# its store, resume after SIGKILL, Hugging Face folders imported and exported, fine-tuning
# from the command line and fill-mask against the reference. Any ASan, LeakSanitizer or
# UBSan report of any maskd process fails them (tests/lib.sh, MASKD_SANITIZER_LOGS); their
# checks are named asan_<name>. About 4 minutes on 2 cores (2-5 times their own time).
# Needs build-asan/maskd (make asan; make test-long builds it).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" asanscripts "${1:-}"
set -o pipefail
A=$PWD/build-asan/maskd
need long_asan_scripts_build "no $A: run make asan first (make test-long does)" -x "$A"
status=0
for t in tests/http/test_serve_restart.sh tests/cli/test_resume.sh tests/cli/test_import_hf.sh \
         tests/cli/test_export.sh tests/cli/test_finetune_cli.sh tests/cli/test_fillmask_ref.sh tests/cli/test_soup.sh; do
  MASKD=$A MASKD_SANITIZER_LOGS=1 MASKD_DATA=$DATA_ROOT bash "$t" 2>&1 | sed -E 's/^(PASS|FAIL|SKIP) /\1 asan_/' || status=1
done
exit $status
