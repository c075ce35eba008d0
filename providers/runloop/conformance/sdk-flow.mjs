// Drives Runloop's official TypeScript SDK (@runloop/api-client, pinned in
// package.json), unchanged, against `sandbox serve --api runloop`. The SDK
// finds the emulator through RUNLOOP_BASE_URL and RUNLOOP_API_KEY, and
// speaks cleartext HTTP/2 to it, as it does to any http:// base URL.
//
// Each step prints "ok <step>"; the first failure prints the error and
// exits non-zero. The script ends by itself once the flow is done.
import { createHash, randomBytes } from 'node:crypto';
import { RunloopSDK, toFile } from '@runloop/api-client';

const sdk = new RunloopSDK();
const label = `flow-${process.pid}-${Date.now()}`;

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function step(name, fn) {
  const t0 = Date.now();
  await fn();
  console.log(`ok ${name} (${Date.now() - t0} ms)`);
}

let devbox;
try {
  await step('create and await running', async () => {
    devbox = await sdk.devbox.create({
      name: 'sdk-flow',
      metadata: { 'sdk-flow': label },
      environment_variables: { FLOW_VAR: 'from-create' },
      launch_parameters: { keep_alive_time_seconds: 600 },
    });
    const info = await devbox.getInfo();
    check(info.status === 'running', `status ${info.status}, want running`);
    check(info.metadata['sdk-flow'] === label, `metadata ${JSON.stringify(info.metadata)}`);
  });

  await step('cmd.exec exit 0', async () => {
    const r = await devbox.cmd.exec('echo hello');
    check(r.exitCode === 0, `exit ${r.exitCode}`);
    check((await r.stdout()) === 'hello\n', `stdout ${JSON.stringify(await r.stdout())}`);
  });

  await step('cmd.exec non-zero exit and stderr', async () => {
    const r = await devbox.cmd.exec('echo oops >&2; exit 3');
    check(r.exitCode === 3, `exit ${r.exitCode}, want 3`);
    check(r.failed, 'failed is false');
    check((await r.stderr()) === 'oops\n', `stderr ${JSON.stringify(await r.stderr())}`);
  });

  await step('cmd.exec env and cwd', async () => {
    const r = await devbox.cmd.exec('cd /tmp && LOCAL_VAR=x; echo "$FLOW_VAR $(pwd)"');
    check((await r.stdout()) === 'from-create /tmp\n', `stdout ${JSON.stringify(await r.stdout())}`);
  });

  await step('named shell keeps cwd and env', async () => {
    const sh = devbox.shell(`flow-${process.pid}`);
    await sh.exec('cd /tmp && export SHELL_VAR=kept');
    const r = await sh.exec('echo "$SHELL_VAR $(pwd)"');
    check((await r.stdout()) === 'kept /tmp\n', `stdout ${JSON.stringify(await r.stdout())}`);
  });

  await step('execAsync streams stdout and stderr while it runs', async () => {
    const out = [];
    const err = [];
    let firstOut = 0;
    const exec = await devbox.cmd.execAsync(
      'for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.4; done; exit 5',
      {
        stdout: (s) => {
          if (!firstOut) firstOut = Date.now();
          out.push(s);
        },
        stderr: (s) => err.push(s),
      },
    );
    const state = await exec.getState();
    check(state.status !== 'completed', `already ${state.status} right after start`);
    const r = await exec.result();
    const done = Date.now();
    check(r.exitCode === 5, `exit ${r.exitCode}, want 5`);
    check(out.join('') === 'out1\nout2\nout3\n', `streamed stdout ${JSON.stringify(out)}`);
    check(err.join('') === 'err1\nerr2\nerr3\n', `streamed stderr ${JSON.stringify(err)}`);
    check(firstOut && done - firstOut > 500, `first output came ${done - firstOut} ms before the end`);
  });

  await step('cmd.exec with callbacks', async () => {
    const lines = [];
    const r = await devbox.cmd.exec('echo a; echo b', { stdout: (s) => lines.push(s) });
    check(r.exitCode === 0, `exit ${r.exitCode}`);
    check(lines.join('') === 'a\nb\n', `streamed ${JSON.stringify(lines)}`);
  });

  await step('file write and read text (~ expanded)', async () => {
    const text = 'héllo wörld\nline 2\n';
    await devbox.file.write({ file_path: '~/flow/hello.txt', contents: text });
    check((await devbox.file.read({ file_path: '~/flow/hello.txt' })) === text, 'read back differs');
    const r = await devbox.cmd.exec('cat "$HOME/flow/hello.txt"');
    check((await r.stdout()) === text, 'the file is not in $HOME');
  });

  await step('upload and download 50 MiB binary', async () => {
    const data = randomBytes(50 << 20);
    const sum = createHash('sha256').update(data).digest('hex');
    await devbox.file.upload({ path: '~/big.bin', file: await toFile(data, 'big.bin') });
    const r = await devbox.cmd.exec('wc -c < ~/big.bin');
    check((await r.stdout()).trim() === String(50 << 20), `size in devbox ${await r.stdout()}`);
    const resp = await devbox.file.download({ path: '~/big.bin' });
    const got = Buffer.from(await resp.arrayBuffer());
    check(got.length === data.length, `downloaded ${got.length} bytes`);
    check(createHash('sha256').update(got).digest('hex') === sum, 'downloaded bytes differ');
  });

  await step('read a missing file fails with 404', async () => {
    let status;
    try {
      await devbox.file.read({ file_path: '/no/such/file' });
    } catch (e) {
      status = e.status;
    }
    check(status === 404, `status ${status}, want 404`);
  });

  await step('list', async () => {
    const all = await sdk.devbox.list({ limit: 100 });
    check(all.some((d) => d.id === devbox.id), 'the devbox is not listed');
    const page = await sdk.api.devboxes.list({ limit: 100 });
    const mine = page.devboxes.find((d) => d.id === devbox.id);
    check(mine && mine.metadata['sdk-flow'] === label, 'metadata missing from the list');
  });

  await step('suspend and resume', async () => {
    await devbox.cmd.exec('echo kept > ~/flow-marker');
    await devbox.suspend();
    const info = await devbox.awaitSuspended();
    check(info.status === 'suspended', `status ${info.status}`);
    const resumed = await devbox.resume();
    check(resumed.status === 'running', `status ${resumed.status} after resume`);
    const r = await devbox.cmd.exec('cat ~/flow-marker');
    check((await r.stdout()) === 'kept\n', 'files did not survive suspend');
  });

  await step('shutdown', async () => {
    await devbox.shutdown();
    const info = await devbox.getInfo();
    check(info.status === 'shutdown', `status ${info.status}`);
    devbox = undefined;
  });
  console.log('flow passed');
} catch (e) {
  console.error('flow failed:', e);
  process.exitCode = 1;
  if (devbox) await devbox.shutdown().catch(() => {});
}
