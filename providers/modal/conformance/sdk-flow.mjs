// Drives Modal's official JavaScript SDK (npm `modal`, pinned in
// package.json at 0.11.1 — the npm `latest` of that name is an unrelated
// library), unchanged, against `sandbox serve --api modal`. The SDK finds
// the emulator through MODAL_SERVER_URL, MODAL_TOKEN_ID and
// MODAL_TOKEN_SECRET; it speaks plaintext gRPC to it because the address
// is a loopback one.
//
// Each step prints "ok <step>"; the first failure prints the error and
// exits non-zero. The script ends by itself once the flow is done.
//
// package.json replaces cbor-extract (an optional native decoder of
// cbor-x, which the SDK uses) with no-cbor-extract/, whose loading fails
// the way a missing optional module does: cbor-x then decodes in plain
// JavaScript, and npm ci never fetches the per-platform prebuilt packages
// of cbor-extract, which some registry mirrors do not carry.
import {
  ModalClient,
  NotFoundError,
  SandboxFilesystemDirectoryNotEmptyError,
  SandboxFilesystemNotFoundError,
} from 'modal';

const client = new ModalClient();
const appName = 'sdk-flow-js';
const run = `${process.pid}-${Date.now()}`;

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function step(name, fn) {
  const t0 = Date.now();
  await fn();
  console.log(`ok ${name} (${Date.now() - t0} ms)`);
}

// execText runs argv, writes stdin (if any) and returns exit code and
// both outputs.
async function execText(sb, argv, params, stdin) {
  const p = await sb.exec(argv, params);
  if (stdin !== undefined) await p.stdin.writeText(stdin);
  await p.stdin.close();
  const [stdout, stderr] = await Promise.all([p.stdout.readText(), p.stderr.readText()]);
  return { code: await p.wait(), stdout, stderr };
}

const cleanup = [];
let exitCode = 0;
try {
  let app, image, sb;

  await step('app and image', async () => {
    app = await client.apps.fromName(appName, { createIfMissing: true });
    check(app.appId, 'no app id');
    let missing;
    try {
      await client.apps.fromName(`no-such-app-${run}`);
    } catch (err) {
      missing = err;
    }
    check(missing instanceof NotFoundError, `fromName of a missing app: ${missing}`);
    image = client.images.fromRegistry('alpine:3.21');
  });

  await step('create with name, tags and env', async () => {
    sb = await client.sandboxes.create(app, image, {
      name: `flow-${run}`,
      tags: { flow: run, team: 'a' },
      env: { FROM_CREATE: 'yes' },
      timeoutMs: 10 * 60 * 1000,
    });
    cleanup.push(sb);
    check(sb.sandboxId, 'no sandbox id');
  });

  await step('exec stdout, stderr and exit code', async () => {
    const r = await execText(sb, ['sh', '-c', 'echo out; echo err >&2; exit 3']);
    check(r.code === 3, `exit ${r.code}, want 3`);
    check(r.stdout === 'out\n', `stdout ${JSON.stringify(r.stdout)}`);
    check(r.stderr === 'err\n', `stderr ${JSON.stringify(r.stderr)}`);
  });

  await step('exec stdin', async () => {
    const r = await execText(sb, ['cat'], undefined, 'piped\nlines\n');
    check(r.code === 0 && r.stdout === 'piped\nlines\n', `cat: exit ${r.code}, stdout ${JSON.stringify(r.stdout)}`);
  });

  await step('exec env, workdir and a missing program', async () => {
    const env = await execText(sb, ['sh', '-c', 'echo "$FROM_CREATE $FROM_EXEC $(pwd)"'], {
      env: { FROM_EXEC: 'too' },
      workdir: '/tmp',
    });
    check(env.stdout === 'yes too /tmp\n', `stdout ${JSON.stringify(env.stdout)}`);
    const missing = await execText(sb, ['no-such-program-here']);
    check(missing.code === 127, `missing program: exit ${missing.code}, want 127`);
  });

  await step('exec streams output while it runs', async () => {
    const p = await sb.exec(['sh', '-c', 'for i in 1 2 3; do echo line$i; sleep 0.4; done; exit 5']);
    await p.stdin.close();
    const t0 = Date.now();
    let first = 0;
    let out = '';
    for await (const chunk of p.stdout) {
      if (!first) first = Date.now() - t0;
      out += chunk;
    }
    const total = Date.now() - t0;
    const code = await p.wait();
    check(code === 5, `exit ${code}, want 5`);
    check(out === 'line1\nline2\nline3\n', `stdout ${JSON.stringify(out)}`);
    // The command runs for about 1.2 s; its first line must not wait
    // for the end.
    check(first < total - 500, `first output after ${first} ms of ${total} ms`);
  });

  await step('exec binary mode and large output', async () => {
    const p = await sb.exec(['sh', '-c', 'head -c 3000000 /dev/zero | tr "\\0" x'], { mode: 'binary' });
    await p.stdin.close();
    const bytes = await p.stdout.readBytes();
    check(bytes.length === 3000000 && bytes.every((b) => b === 0x78), `got ${bytes.length} bytes`);
    check((await p.wait()) === 0, 'exit');
  });

  await step('exec timeout', async () => {
    const t0 = Date.now();
    const p = await sb.exec(['sleep', '30'], { timeoutMs: 1000 });
    await p.stdin.close();
    const code = await p.wait();
    const took = Date.now() - t0;
    check(took < 20000, `a 1 s timeout returned after ${took} ms`);
    // Killed by the server: 128 + SIGKILL.
    check(code === 137, `sleep 30 with a 1 s timeout exited ${code}, want 137`);
  });

  await step('filesystem write, read, list, stat, remove', async () => {
    const fsys = sb.filesystem;
    const dir = `/tmp/flow-${run}`;
    await fsys.writeText('hello modal', `${dir}/a.txt`);
    check((await fsys.readText(`${dir}/a.txt`)) === 'hello modal', 'readText');
    const blob = new Uint8Array(256 * 1024).map((_, i) => i % 251);
    await fsys.writeBytes(blob, `${dir}/b.bin`);
    const back = await fsys.readBytes(`${dir}/b.bin`);
    check(back.length === blob.length && back.every((b, i) => b === blob[i]), 'readBytes differs');
    let missing;
    try {
      await fsys.readText(`${dir}/missing.txt`);
    } catch (err) {
      missing = err;
    }
    check(missing instanceof SandboxFilesystemNotFoundError, `read of a missing file: ${missing}`);
    await fsys.makeDirectory(`${dir}/sub/deeper`, { createParents: true });
    const names = (await fsys.listFiles(dir)).map((e) => `${e.name}:${e.type}`).sort();
    check(
      JSON.stringify(names) === JSON.stringify(['a.txt:file', 'b.bin:file', 'sub:directory']),
      `listFiles ${JSON.stringify(names)}`,
    );
    const st = await fsys.stat(`${dir}/a.txt`);
    check(st.size === 11 && st.type === 'file', `stat ${JSON.stringify(st)}`);
    let notEmpty;
    try {
      await fsys.remove(`${dir}/sub`);
    } catch (err) {
      notEmpty = err;
    }
    check(notEmpty instanceof SandboxFilesystemDirectoryNotEmptyError, `remove of a non-empty directory: ${notEmpty}`);
    await fsys.remove(`${dir}/sub`, { recursive: true });
    const seen = await execText(sb, ['cat', `${dir}/a.txt`]);
    check(seen.stdout === 'hello modal', `exec sees ${JSON.stringify(seen.stdout)}`);
  });

  await step('tags and list', async () => {
    await sb.setTags({ flow: run, team: 'b' });
    const tags = await sb.getTags();
    check(JSON.stringify(tags) === JSON.stringify({ flow: run, team: 'b' }), `getTags ${JSON.stringify(tags)}`);
    const ids = async (tags) => {
      const out = [];
      for await (const found of client.sandboxes.list({ appId: app.appId, tags })) out.push(found.sandboxId);
      return out;
    };
    const b = await ids({ flow: run, team: 'b' });
    check(b.length === 1 && b[0] === sb.sandboxId, `list(team=b) ${JSON.stringify(b)}`);
    const a = await ids({ flow: run, team: 'a' });
    check(a.length === 0, `list(team=a) after the tags were replaced: ${JSON.stringify(a)}`);
  });

  await step('fromName and fromId', async () => {
    const byName = await client.sandboxes.fromName(appName, `flow-${run}`);
    check(byName.sandboxId === sb.sandboxId, `fromName ${byName.sandboxId}`);
    let missing;
    try {
      await client.sandboxes.fromName(appName, `nobody-${run}`);
    } catch (err) {
      missing = err;
    }
    check(missing instanceof NotFoundError, `fromName of a missing sandbox: ${missing}`);
    const byId = await client.sandboxes.fromId(sb.sandboxId);
    const r = await execText(byId, ['echo', 'again']);
    check(r.stdout === 'again\n', `exec through fromId: ${JSON.stringify(r.stdout)}`);
    check((await byId.poll()) === null, 'poll of a running sandbox is not null');
  });

  await step('entrypoint stdin, stdout and exit code', async () => {
    const main = await client.sandboxes.create(app, image, { command: ['sh', '-c', 'cat; exit 4'] });
    cleanup.push(main);
    await main.stdin.writeText('to main\n');
    await main.stdin.close();
    const out = await main.stdout.readText();
    const code = await main.wait();
    check(out === 'to main\n' && code === 4, `entrypoint: exit ${code}, stdout ${JSON.stringify(out)}`);
  });

  await step('terminate', async () => {
    const code = await sb.terminate({ wait: true });
    check(code === 137, `terminate exit ${code}, want 137`);
    await sb.terminate();
    check((await sb.poll()) === 137, 'poll after terminate');
    const left = [];
    for await (const found of client.sandboxes.list({ appId: app.appId, tags: { flow: run } })) left.push(found.sandboxId);
    check(left.length === 0, `list after terminate: ${JSON.stringify(left)}`);
  });
} catch (err) {
  console.error('FAIL', err?.stack ?? err);
  exitCode = 1;
} finally {
  for (const sb of cleanup) await sb.terminate().catch(() => {});
  client.close();
}
process.exitCode = exitCode;
