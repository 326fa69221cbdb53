#!/usr/bin/env bash
# Dependencies point one way (ARCHITECTURE.md): scripts/check-layers finds no include
# against the direction in the tree, and does find one when it is put there (an engine
# file including the store, the HTTP machinery including the service, a header that does
# not exist), naming the file and line.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" layers

out=$(scripts/check-layers 2>&1) && pass layers_one_way || fail layers_one_way "$out"

# A copy of the sources and the table, to break on purpose.
copy() {
  rm -rf "$T/tree" && mkdir -p "$T/tree"
  cp -r engine store server ARCHITECTURE.md "$T/tree/"
}
refused() {  # name, file, include line, expected text in the report
  copy
  sed -i "0,/^#include/s||$3\n#include|" "$T/tree/$2"
  out=$(scripts/check-layers "$T/tree" 2>&1); rc=$?
  line=$(grep -n -F "$3" "$T/tree/$2" | head -1 | cut -d: -f1)
  if [ "$rc" -ne 0 ] && grep -q -F "$2:$line: $4" <<<"$out"; then pass "$1"; else fail "$1" "status $rc: $out"; fi
}
refused layers_engine_may_not_use_store engine/nn/model.c '#include "store/store.h"' 'includes store/store.h (engine/nn may use: engine/core)'
refused layers_core_uses_nothing engine/core/files.c '#include "engine/nn/model.h"' 'includes engine/nn/model.h (engine/core may use: only itself)'
refused layers_http_may_not_use_app server/http/http.c '#include "server/app/app.h"' 'includes server/app/app.h'
refused layers_train_and_infer_apart engine/infer/fillmask.c '#include "engine/train/trainer.h"' 'includes engine/train/trainer.h'
refused layers_missing_header store/store.c '#include "store/nothing.h"' 'includes store/nothing.h, which does not exist'

# A file outside every folder of the table is named too.
copy
mkdir -p "$T/tree/engine/new" && echo '#include "engine/core/err.h"' > "$T/tree/engine/new/x.c"
out=$(scripts/check-layers "$T/tree" 2>&1)
if [ $? -ne 0 ] && grep -q 'engine/new/x.c: in no folder' <<<"$out"; then pass layers_unknown_folder_named; else fail layers_unknown_folder_named "$out"; fi
