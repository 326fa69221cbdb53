#!/usr/bin/env bash
# The full-corpus tokenizer parity run: HF trains on all of WikiText-2 train, and
# every line of valid, test and BANKING77 train+test is compared (see
# tests/cli/test_tokenizer_hf.sh for what is checked).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" long_tokhf
TOK_HF_LONG=1 bash tests/cli/test_tokenizer_hf.sh
