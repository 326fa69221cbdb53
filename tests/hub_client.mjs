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

(async () => {
  if (cmd === 'encode' && args.length === 2) return encodeLocal(args[0], args[1]);
  if (cmd === 'remote-encode' && args.length === 4) return encodeRemote(...args);
  if (cmd === 'check' && args.length >= 6) { await check(args[0], args[1], args[2], args[3], args[4], args.slice(5)); flush(); return; }
  process.stderr.write('usage: hub_client.mjs check HUB REPO COMMIT EXPORT_DIR CACHE_DIR REV... | encode DIR FILE | remote-encode HUB REPO REV FILE\n');
  process.exit(2);
})().catch(e => { flush(); process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
