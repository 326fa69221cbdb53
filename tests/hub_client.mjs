// The Hub's official JavaScript clients against maskd: @huggingface/hub (modelInfo,
// listFiles, fileExists, downloadFile, downloadFileToCacheDir) and transformers.js
// (@huggingface/transformers: AutoTokenizer from a folder or from a Hub host). Prints
// the house's `PASS name` / `FAIL name: why` lines; exits 0 when it could run at all.
//
//   node hub_client.mjs check HUB REPO COMMIT EXPORT_DIR CACHE_DIR REV...
//        against the Hub at HUB (http://host:port, no trailing slash) for the model REPO
//        whose revision COMMIT (40 hex) EXPORT_DIR is: each REV naming that revision
//        (main, its number, the commit) in turn: modelInfo's name, sha (= COMMIT) and
//        siblings, listFiles (=
//        the files of EXPORT_DIR, a `maskd export` of that revision), fileExists,
//        downloadFile of every file (bytes = EXPORT_DIR's), downloadFileToCacheDir into
//        CACHE_DIR (the same bytes); when REV main is among them, also modelInfo without
//        a revision (the client asks for HEAD) and a missing repo / revision / file each answered
//        as the client answers the Hub's own (HubApiError 404 with X-Error-Code
//        RepoNotFound / RevisionNotFound; a missing file: downloadFile null, which the
//        client gives only for X-Error-Code EntryNotFound, fileExists false).
//   node hub_client.mjs lists HUB REPO C2 C1 EXPORT2 EXPORT1 CACHE_DIR TOKEN
//        the listings and identity against a store holding REPO (revisions C1 then C2, the
//        exports EXPORT1 and EXPORT2) and team/demo-copy (an import of EXPORT2, pushed after):
//        listModels (search, owner, task, sort, limit, additionalFields, and its paging by
//        Link, forced to one model a page), listCommits (and by pages of one), countCommits,
//        each by main, number and commit, with a missing repo / revision answered 404 and its
//        X-Error-Code; whoAmI with TOKEN (the server's --token) and with another (401);
//        snapshotDownload of main and of C1 (the snapshot folder holds the export's bytes).
//   node hub_client.mjs encode DIR FILE
//        transformers.js's AutoTokenizer loaded from the folder DIR, no network
//        (allowRemoteModels false): each line of FILE -> its ids with the special tokens,
//        space-separated, as `maskd tokenizer encode` prints them.
//   node hub_client.mjs remote-encode HUB REPO REV FILE
//        the same with the tokenizer fetched from the Hub host HUB (env.remoteHost; no
//        local models, no cache).
import fs from 'node:fs';
import path from 'node:path';

const [cmd, ...args] = process.argv.slice(2);
console.debug = () => {};   // downloadFileToCacheDir's "Downloading X to Y" lines
const out = [];
const pass = (name) => out.push(`PASS ${name}`);
const fail = (name, why) => out.push(`FAIL ${name}: ${String(why).replace(/\s+/g, ' ').slice(0, 400)}`);
const flush = () => { if (out.length) process.stdout.write(out.join('\n') + '\n'); out.length = 0; };

function lines(file) {
  const text = fs.readFileSync(file, 'utf8');
  const ls = text.split('\n');
  if (ls.length && ls[ls.length - 1] === '') ls.pop();
  return ls;
}

async function encodeWith(tok, file) {
  const res = [];
  for (const line of lines(file)) res.push(tok.encode(line).join(' '));
  process.stdout.write(res.length ? res.join('\n') + '\n' : '');
}

async function encodeLocal(dir, file) {
  const { AutoTokenizer, env } = await import('@huggingface/transformers');
  const abs = path.resolve(dir);
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.useFSCache = false;
  env.useBrowserCache = false;
  env.localModelPath = path.dirname(abs) + '/';
  const tok = await AutoTokenizer.from_pretrained(path.basename(abs));
  await encodeWith(tok, file);
}

async function encodeRemote(hub, repo, rev, file) {
  const { AutoTokenizer, env } = await import('@huggingface/transformers');
  env.allowLocalModels = false;
  env.allowRemoteModels = true;
  env.useFSCache = false;
  env.useBrowserCache = false;
  env.remoteHost = hub.replace(/\/*$/, '/');
  env.remotePathTemplate = '{model}/resolve/{revision}/';
  const tok = await AutoTokenizer.from_pretrained(repo, { revision: rev });
  await encodeWith(tok, file);
}

// A fetch that remembers the X-Error-Code of the last answer (HubApiError keeps the
// status and the body, not the headers).
let lastErrorCode = null;
const recordingFetch = async (url, init) => {
  const r = await fetch(url, init);
  lastErrorCode = r.headers.get('X-Error-Code');
  return r;
};

async function expectHubError(name, code, fn) {
  const hub = await import('@huggingface/hub');
  lastErrorCode = null;
  try {
    const v = await fn();
    fail(name, `no error, got ${JSON.stringify(v)?.slice(0, 200)}`);
  } catch (e) {
    if (!(e instanceof hub.HubApiError)) return fail(name, `not a HubApiError: ${e && e.stack || e}`);
    if (e.statusCode !== 404) return fail(name, `HubApiError status ${e.statusCode}: ${e.message}`);
    if (lastErrorCode !== code) return fail(name, `X-Error-Code ${lastErrorCode}, want ${code} (${e.message})`);
    pass(name);
  }
}

async function check(hubUrl, repo, commit, exportDir, cacheDir, revs) {
  const hub = await import('@huggingface/hub');
  const files = fs.readdirSync(exportDir).sort();
  const opts = { repo, hubUrl, fetch: recordingFetch };
  const step = async (name, fn) => {
    try { const why = await fn(); why ? fail(name, why) : pass(name); } catch (e) { fail(name, e && e.stack || e); }
  };
  for (const rev of revs) {
    const tag = /^[0-9a-f]{40}$/.test(rev) ? `commit_${rev.slice(0, 8)}` : /^[0-9]+$/.test(rev) ? `number_${rev}` : rev;
    await step(`hub_model_info_${tag}`, async () => {
      const info = await hub.modelInfo({ name: repo, hubUrl, revision: rev, additionalFields: ['sha', 'siblings'], fetch: recordingFetch });
      const sib = (info.siblings ?? []).map(s => s.rfilename).sort();
      if (info.name !== repo) return `name ${info.name}, want ${repo}`;
      if (info.sha !== commit) return `sha ${info.sha}, want ${commit}`;
      if (JSON.stringify(sib) !== JSON.stringify(files)) return `siblings ${JSON.stringify(sib)}, want ${JSON.stringify(files)}`;
      if (typeof info.id !== 'string' || !info.id) return `no id (_id): ${JSON.stringify(info)}`;
      if (isNaN(info.updatedAt.getTime())) return `lastModified not a date`;
    });
    await step(`hub_list_files_${tag}`, async () => {
      const got = [];
      for await (const f of hub.listFiles({ ...opts, revision: rev })) got.push(f);
      const names = got.map(f => f.path).sort();
      if (JSON.stringify(names) !== JSON.stringify(files)) return `files ${JSON.stringify(names)}, want ${JSON.stringify(files)}`;
      for (const f of got) {
        const size = fs.statSync(path.join(exportDir, f.path)).size;
        if (f.type !== 'file' || f.size !== size || typeof f.oid !== 'string' || !f.oid) return `entry ${JSON.stringify(f)} (size ${size})`;
      }
    });
    await step(`hub_file_exists_${tag}`, async () => {
      const yes = await hub.fileExists({ ...opts, revision: rev, path: 'config.json' });
      const no = await hub.fileExists({ ...opts, revision: rev, path: 'no-such-file.bin' });
      if (yes !== true || no !== false) return `config.json ${yes}, no-such-file.bin ${no}`;
    });
    await step(`hub_download_file_${tag}`, async () => {
      for (const f of files) {
        const blob = await hub.downloadFile({ ...opts, revision: rev, path: f });
        if (!blob) return `${f}: null`;
        const got = Buffer.from(await blob.arrayBuffer());
        if (!got.equals(fs.readFileSync(path.join(exportDir, f)))) return `${f}: ${got.length} bytes differ from the export's`;
      }
    });
    await step(`hub_download_to_cache_${tag}`, async () => {
      const dir = path.join(cacheDir, tag);
      for (const f of files) {
        const p = await hub.downloadFileToCacheDir({ ...opts, revision: rev, path: f, cacheDir: dir });
        const want = path.join(dir, `models--${repo.replace(/\//g, '--')}`, 'snapshots', commit, f);
        if (p !== want) return `${f}: cached at ${p}, want ${want}`;
        if (!fs.readFileSync(p).equals(fs.readFileSync(path.join(exportDir, f)))) return `${f}: cached bytes differ from the export's`;
      }
      // A second call finds the file in the cache.
      const again = await hub.downloadFileToCacheDir({ ...opts, revision: rev, path: files[0], cacheDir: dir });
      if (!fs.existsSync(again)) return `second call: ${again} missing`;
    });
  }
  if (!revs.includes('main')) return;
  // Without a revision the client asks for /revision/HEAD: the default branch.
  await step('hub_model_info_default', async () => {
    const info = await hub.modelInfo({ name: repo, hubUrl, additionalFields: ['sha'], fetch: recordingFetch });
    if (info.sha !== commit) return `sha ${info.sha}, want ${commit}`;
  });
  // Once, with the main revision: what is missing.
  await expectHubError('hub_missing_repo_model_info', 'RepoNotFound',
    () => hub.modelInfo({ name: 'no-such-repo', hubUrl, fetch: recordingFetch }));
  await expectHubError('hub_missing_repo_list_files', 'RepoNotFound', async () => {
    for await (const f of hub.listFiles({ ...opts, repo: 'no-such-repo' })) return f;
  });
  await expectHubError('hub_missing_repo_download', 'RepoNotFound',
    () => hub.downloadFile({ ...opts, repo: 'no-such-repo', path: 'config.json' }));
  await expectHubError('hub_missing_revision_model_info', 'RevisionNotFound',
    () => hub.modelInfo({ name: repo, hubUrl, revision: 'ffff0000ffff0000ffff0000ffff0000ffff0000', fetch: recordingFetch }));
  await expectHubError('hub_missing_revision_number', 'RevisionNotFound',
    () => hub.modelInfo({ name: repo, hubUrl, revision: '999999', fetch: recordingFetch }));
  await expectHubError('hub_missing_revision_list_files', 'RevisionNotFound', async () => {
    for await (const f of hub.listFiles({ ...opts, revision: 'no-such-branch' })) return f;
  });
  await expectHubError('hub_missing_revision_download', 'RevisionNotFound',
    () => hub.downloadFile({ ...opts, revision: 'no-such-branch', path: 'config.json' }));
  await step('hub_missing_file_download', async () => {
    lastErrorCode = null;
    const blob = await hub.downloadFile({ ...opts, revision: 'main', path: 'no-such-file.bin' });
    if (blob !== null) return `got a blob of ${blob.size} bytes`;
    if (lastErrorCode !== 'EntryNotFound') return `X-Error-Code ${lastErrorCode}`;
  });
  await step('hub_missing_file_cache', async () => {
    try {
      const p = await hub.downloadFileToCacheDir({ ...opts, revision: 'main', path: 'no-such-file.bin', cacheDir: path.join(cacheDir, 'missing') });
      return `no error, cached at ${p}`;
    } catch (e) {
      // paths-info answers no entry for it: the client's "cannot get path info".
      if (e instanceof hub.HubApiError) return `HubApiError ${e.statusCode}: ${e.message}`;
      if (!/cannot get path info/.test(e.message)) return `error ${e.message}`;
    }
  });
}

async function lists(hubUrl, repo, c2, c1, export2, export1, cacheDir, token) {
  const hub = await import('@huggingface/hub');
  const files = fs.readdirSync(export2).sort();
  const step = async (name, fn) => {
    try { const why = await fn(); why ? fail(name, why) : pass(name); } catch (e) { fail(name, e && e.stack || e); }
  };
  const collect = async (gen) => { const got = []; for await (const x of gen) got.push(x); return got; };
  await step('hub_list_models_search', async () => {
    const got = await collect(hub.listModels({ hubUrl, search: { query: repo }, fetch: recordingFetch,
      additionalFields: ['sha', 'createdAt', 'author', 'tags', 'library_name', 'filePaths'] }));
    const names = got.map(m => m.name);
    if (JSON.stringify(names) !== JSON.stringify([repo, 'team/demo-copy'])) return `names ${JSON.stringify(names)}`;
    for (const m of got) {
      if (!/^[0-9a-f]{24}$/.test(m.id)) return `id ${m.id}`;
      if (m.private !== false || m.gated !== false || m.downloads !== 0 || m.likes !== 0) return `flags ${JSON.stringify(m)}`;
      if (m.task !== 'fill-mask' || m.library_name !== 'transformers' || !m.tags.includes('fill-mask')) return `task ${JSON.stringify(m)}`;
      if (isNaN(m.updatedAt.getTime()) || isNaN(new Date(m.createdAt).getTime())) return `dates ${JSON.stringify(m)}`;
      if (JSON.stringify([...m.filePaths].sort()) !== JSON.stringify(files)) return `filePaths ${JSON.stringify(m.filePaths)}`;
    }
    if (got[0].sha !== c2) return `sha ${got[0].sha}, want ${c2}`;
    if (got[1].author !== 'team' || got[0].author !== undefined) return `authors ${got[0].author} ${got[1].author}`;
  });
  await step('hub_list_models_owner', async () => {
    const got = await collect(hub.listModels({ hubUrl, search: { owner: 'team' } }));
    if (JSON.stringify(got.map(m => m.name)) !== '["team/demo-copy"]') return JSON.stringify(got);
  });
  await step('hub_list_models_task', async () => {
    const mlm = await collect(hub.listModels({ hubUrl, search: { task: 'fill-mask' } }));
    const cls = await collect(hub.listModels({ hubUrl, search: { task: 'text-classification' } }));
    if (mlm.length !== 2 || cls.length !== 0) return `fill-mask ${mlm.length}, text-classification ${cls.length}`;
  });
  await step('hub_list_models_sort_limit', async () => {
    const got = await collect(hub.listModels({ hubUrl, sort: 'lastModified' }));
    if (got[0]?.name !== 'team/demo-copy' || got.length !== 2) return `lastModified first ${got[0]?.name} of ${got.length}`;
    const one = await collect(hub.listModels({ hubUrl, limit: 1 }));
    if (one.length !== 1) return `limit 1 gave ${one.length}`;
  });
  // The client asks for 500 a page; its own Link-following is seen with pages of one.
  await step('hub_list_models_link_paging', async () => {
    const urls = [];
    const onePerPage = (url, init) => { urls.push(url); return fetch(urls.length === 1 ? url.replace('limit=500', 'limit=1') : url, init); };
    const got = await collect(hub.listModels({ hubUrl, fetch: onePerPage }));
    if (JSON.stringify(got.map(m => m.name)) !== JSON.stringify([repo, 'team/demo-copy'])) return `names ${JSON.stringify(got.map(m => m.name))}`;
    if (urls.length !== 2 || !/[?&]p=1(&|$)/.test(urls[1])) return `fetched ${JSON.stringify(urls)}`;
  });
  const commitsOk = (got, want) => {
    if (JSON.stringify(got.map(c => c.oid)) !== JSON.stringify(want)) return `oids ${JSON.stringify(got.map(c => c.oid))}, want ${JSON.stringify(want)}`;
    for (const c of got)
      if (!c.title || typeof c.message !== 'string' || c.authors[0]?.username !== 'maskd' || isNaN(c.date.getTime())) return `commit ${JSON.stringify(c)}`;
  };
  await step('hub_list_commits_main', async () => commitsOk(await collect(hub.listCommits({ repo, hubUrl })), [c2, c1]));
  await step('hub_list_commits_pages_of_one', async () => {
    const urls = [];
    const got = await collect(hub.listCommits({ repo, hubUrl, batchSize: 1, fetch: (u, i) => { urls.push(u); return fetch(u, i); } }));
    return commitsOk(got, [c2, c1]) || (urls.length !== 2 ? `fetched ${JSON.stringify(urls)}` : undefined);
  });
  await step('hub_list_commits_number', async () => commitsOk(await collect(hub.listCommits({ repo, hubUrl, revision: '1' })), [c1]));
  await step('hub_list_commits_commit', async () => commitsOk(await collect(hub.listCommits({ repo, hubUrl, revision: c1 })), [c1]));
  await step('hub_count_commits', async () => {
    const n = await hub.countCommits({ repo, hubUrl }), n1 = await hub.countCommits({ repo, hubUrl, revision: c1 });
    if (n !== 2 || n1 !== 1) return `main ${n}, ${c1} ${n1}`;
  });
  await expectHubError('hub_list_commits_missing_repo', 'RepoNotFound',
    () => collect(hub.listCommits({ repo: 'no-such-repo', hubUrl, fetch: recordingFetch })));
  await expectHubError('hub_count_commits_missing_revision', 'RevisionNotFound',
    () => hub.countCommits({ repo, hubUrl, revision: '999999', fetch: recordingFetch }));
  await step('hub_who_am_i', async () => {
    const me = await hub.whoAmI({ hubUrl, accessToken: token });
    if (me.type !== 'user' || me.name !== 'maskd' || me.auth.type !== 'access_token' || me.auth.accessToken?.role !== 'write' ||
        !Array.isArray(me.orgs)) return JSON.stringify(me);
  });
  await step('hub_who_am_i_wrong_token', async () => {
    try {
      const me = await hub.whoAmI({ hubUrl, accessToken: 'hf_not_the_servers' });
      return `no error: ${JSON.stringify(me)}`;
    } catch (e) {
      if (!(e instanceof hub.HubApiError) || e.statusCode !== 401) return `${e && e.statusCode} ${e && e.message}`;
    }
  });
  for (const [rev, commit, dir] of [['main', c2, export2], [c1, c1, export1]]) {
    await step(`hub_snapshot_download_${rev === 'main' ? 'main' : 'commit'}`, async () => {
      const cache = path.join(cacheDir, 'snapshot');
      const p = await hub.snapshotDownload({ repo, hubUrl, cacheDir: cache, revision: rev });
      const want = path.join(cache, `models--${repo.replace(/\//g, '--')}`, 'snapshots', commit);
      if (p !== want) return `snapshot at ${p}, want ${want}`;
      const got = fs.readdirSync(p).sort();
      if (JSON.stringify(got) !== JSON.stringify(files)) return `files ${JSON.stringify(got)}`;
      for (const f of got)
        if (!fs.readFileSync(path.join(p, f)).equals(fs.readFileSync(path.join(dir, f)))) return `${f}: bytes differ from the export's`;
      if (rev === 'main' && fs.readFileSync(path.join(cache, `models--${repo}`, 'refs', 'main'), 'utf8') !== c2) return 'refs/main is not the commit';
    });
  }
}

(async () => {
  if (cmd === 'lists' && args.length === 8) { await lists(...args); flush(); return; }
  if (cmd === 'encode' && args.length === 2) return encodeLocal(args[0], args[1]);
  if (cmd === 'remote-encode' && args.length === 4) return encodeRemote(...args);
  if (cmd === 'check' && args.length >= 6) { await check(args[0], args[1], args[2], args[3], args[4], args.slice(5)); flush(); return; }
  process.stderr.write('usage: hub_client.mjs check HUB REPO COMMIT EXPORT_DIR CACHE_DIR REV... | lists HUB REPO C2 C1 EXPORT2 EXPORT1 CACHE_DIR TOKEN | encode DIR FILE | remote-encode HUB REPO REV FILE\n');
  process.exit(2);
})().catch(e => { flush(); process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
