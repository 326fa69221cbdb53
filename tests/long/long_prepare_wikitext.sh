#!/usr/bin/env bash
# The prepare-vs-HF-tokenizers check of test_prepare_tok.sh on the whole WikiText-2 train
# split (10.8 MB, ~3.5M tokens): tokenizer trained by HF on it, every shard id compared.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" long_prepare
PREPARE_TOK_TEXT=$DATA/train.txt bash tests/cli/test_prepare_tok.sh | sed 's/^\(PASS\|FAIL\) prepare_tok/\1 long_prepare_wikitext_train/'
