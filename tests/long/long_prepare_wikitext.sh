#!/usr/bin/env bash
# The prepare-vs-HF-tokenizers check of test_prepare_tok.sh on the whole WikiText-2 train
# split (10.8 MB, ~3.5M tokens): tokenizer trained by HF on it, every shard id compared.
cd "$(dirname "$0")/../.."
DATA=${MASKD_DATA:-../shared/data}
PREPARE_TOK_TEXT=$DATA/wikitext-2/train.txt bash tests/cli/test_prepare_tok.sh | sed 's/^\(PASS\|FAIL\) prepare_tok/\1 long_prepare_wikitext_train/'
