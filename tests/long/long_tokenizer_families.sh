#!/usr/bin/env bash
# The full-corpus parity run for BERT's WordPiece and RoBERTa's byte-level BPE: HF trains
# on all of WikiText-2 train, and every line of valid, test and BANKING77 train+test is
# compared (see tests/cli/test_tokenizer_families.sh for what is checked).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" long_tokfam
TOK_FAMILIES_LONG=1 bash tests/cli/test_tokenizer_families.sh
