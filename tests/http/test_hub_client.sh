#!/usr/bin/env bash
# maskd serve as the Hub for the Hub's official JavaScript clients (tests/hub_client.mjs):
# @huggingface/hub's modelInfo, listFiles, fileExists, downloadFile and
# downloadFileToCacheDir with hubUrl set to the server, on a model maskd trained (two
# revisions), by "main", by revision number and by 40-hex commit: the revision's commit and
# files, every file's bytes as `maskd export` writes them, the client's own answers for a
# missing repo, revision and file; and transformers.js's AutoTokenizer fetched from the
# server (env.remoteHost) encoding every WikiText-2 test line as `maskd tokenizer encode`
# does on the exported folder. The listings: listModels (search, owner, task, sort, limit,
# additionalFields, Link paging), listCommits and countCommits, whoAmI with the server's token
# and another, snapshotDownload of main and of a commit.
# What the clients (@huggingface/hub 2.17.5, transformers.js 4.3.1) ask of the server:
#   GET  /api/models/R/revision/REV?expand=...  (REV "HEAD" when none is given) -> JSON
#        with _id, id, sha, lastModified, siblings [{rfilename}]
#   GET  /api/models/R/tree/REV?recursive=false&expand=false -> [{type, oid, size, path}]
#   POST /api/models/R/paths-info/REV {"paths": [...], "expand": true} -> [{type, path,
#        size, oid, lastCommit: {id}}], no entry for a missing path
#   HEAD /R/raw/REV/FILE (fileExists: 404 -> false)
#   GET  /R/resolve/REV/FILE with Range: bytes=0-0 -> 206, Content-Range bytes 0-0/SIZE,
#        ETag; then the whole file by a plain GET (transformers.js: HEAD and GET)
#   GET  /api/models?limit=500&search=..&author=..&pipeline_tag=..&sort=..&expand=... -> [{_id, id,
#        private, pipeline_tag, gated, downloads, likes, lastModified, ...}], Link: <URL>; rel="next"
#   GET  /api/models/R/commits/REV?limit=N -> [{id, title, message, authors: [{user}], date}],
#        Link for the next page; countCommits reads X-Total-Count (?limit=1)
#   GET  /api/whoami-v2 with Authorization: Bearer hf_... -> {type, name, orgs, auth: {type, accessToken}}
#   snapshotDownload: model info (sha), the tree (?recursive=true) by commit, paths-info and resolve
#   404s with Content-Type application/json {"error": ...} and X-Error-Code RepoNotFound,
#        RevisionNotFound or EntryNotFound (downloadFile answers null only for the last).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" hubclient
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
serve_wrap=(timeout 300)
need hub_client_setup "tests/node_modules/@huggingface/hub is missing (run scripts/setup --tests)" -d tests/node_modules/@huggingface/hub
need hub_client_setup "tests/node_modules/@huggingface/transformers is missing (run scripts/setup --tests)" -d tests/node_modules/@huggingface/transformers
need hub_client_setup "$DATA/test.txt missing (MASKD_DATA=$DATA_ROOT)" -f "$DATA/test.txt"

# A 300-piece Unigram tokenizer maskd trains and a tiny RoBERTa trained two short epochs:
# revisions 1 and 2 of "demo" (main is 2).
small_training_setup hub_client_setup 20000 || exit 1
"$M" train --db "$T/hub.db" --name demo --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
  --epochs 2 --batch 8 --threads 1 --seed 3 --quiet >"$T/train.log" 2>&1 ||
  { fail hub_client_setup "training failed: $(tail -2 "$T/train.log")"; exit 1; }

# A token (reads stay open: no --auth-reads) for whoAmI; @huggingface/hub sends only hf_ ones.
token=hf_maskd_hub_client_test
serve_start --db "$T/hub.db" --no-worker --quiet --token "$token" || { fail hub_client_start "$(cat "$T/err")"; exit 1; }
pass hub_client_start
# The revisions' commits, newest first, from the server's own listing.
curl -s --max-time 30 "$base/models/demo" >"$T/models.json"
mapfile -t commits < <($PY -c "import json,sys; [print(r['commit']) for r in json.load(open(sys.argv[1]))['revisions']]" "$T/models.json" 2>/dev/null)
need hub_client_revisions "want 2 revisions of demo, got: $(head -c 300 "$T/models.json")" "${#commits[@]}" -eq 2
c2=${commits[0]} c1=${commits[1]}
for r in 1 2; do
  "$M" export --db "$T/hub.db" "demo@$r" "$T/export$r" >/dev/null 2>"$T/export.err" ||
    { fail hub_client_export "demo@$r: $(cat "$T/export.err")"; exit 1; }
done

node tests/hub_client.mjs check "$base" demo "$c2" "$T/export2" "$T/cache" main 2 "$c2" 2>"$T/check2.err" ||
  fail hub_client_check_2 "$(tail -c 400 "$T/check2.err")"
node tests/hub_client.mjs check "$base" demo "$c1" "$T/export1" "$T/cache" 1 "$c1" 2>"$T/check1.err" ||
  fail hub_client_check_1 "$(tail -c 400 "$T/check1.err")"

# The listings, whoAmI and snapshotDownload, with a second repository pushed after demo.
"$M" import --db "$T/hub.db" "$T/export2" team/demo-copy >"$T/import.log" 2>&1 ||
  fail hub_client_import "$(tail -2 "$T/import.log")"
node tests/hub_client.mjs lists "$base" demo "$c2" "$c1" "$T/export2" "$T/export1" "$T/cache" "$token" 2>"$T/lists.err" ||
  fail hub_client_lists "$(tail -c 400 "$T/lists.err")"

# transformers.js fetching the tokenizer from the server encodes as maskd does.
"$M" tokenizer encode --tokenizer "$T/export2" --input "$DATA/test.txt" >"$T/maskd.ids" 2>"$T/maskd.ids.err"
if node tests/hub_client.mjs remote-encode "$base" demo main "$DATA/test.txt" >"$T/js.ids" 2>"$T/js.err"; then
  same hub_client_transformersjs_remote "$T/js.ids" "$T/maskd.ids"
else
  fail hub_client_transformersjs_remote "AutoTokenizer from $base failed: $(tail -c 400 "$T/js.err")"
fi
serve_stop
ok hub_client_clean_stop test $? -eq 0
