#!/usr/bin/env bash
# The fuller run of the pair and truncation parity with HF tokenizers: 1200 pairs, nine
# lengths, only_first / only_second at three (see tests/cli/test_tokenizer_pairs.sh).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" long_tokpairs
TOK_PAIRS_LONG=1 bash tests/cli/test_tokenizer_pairs.sh
