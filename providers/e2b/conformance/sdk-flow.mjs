// Drives the official E2B JavaScript SDK, unchanged, through a sandbox's
// whole life against whatever E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// point at (the emulator, `sandbox serve --api e2b`, in this project's
// tests). Every step asserts what it got; the first failure exits non-zero
// with the step's name.
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { CommandExitError, FilesystemEventType, Sandbox, TimeoutError } from 'e2b'

// E2B's sandboxes run commands as the user "user" in its home, where E2B
// code keeps its files; the flow works there too.
const home = '/home/user'
const work = home
const run = randomBytes(4).toString('hex')
const metadata = { suite: 'sdk-conformance', run }

let current = 'start'
async function step(name, fn) {
  current = name
  const t0 = Date.now()
  await fn()
  console.log(`ok - ${name} (${Date.now() - t0} ms)`)
}

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex')

async function waitUntil(what, cond, ms = 10_000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.fail(`timed out waiting until ${what}`)
}

async function main() {
  let sbx
  await step('Sandbox.create with metadata and envs', async () => {
    sbx = await Sandbox.create({ metadata, envs: { SDK_CREATE_ENV: 'from-create' }, timeoutMs: 300_000 })
    assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.deepEqual(info.metadata, metadata)
    assert.equal(info.state, 'running')
  })

  try {
    await flow(sbx)
  } finally {
    await Sandbox.kill(sbx.sandboxId).catch(() => {})
  }
}

async function flow(sbx) {
  await step('commands.run with streaming callbacks, exit 0', async () => {
    const out = []
    const err = []
    const r = await sbx.commands.run('echo hello; echo oops >&2', {
      onStdout: (d) => out.push(d),
      onStderr: (d) => err.push(d),
    })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'hello\n')
    assert.equal(r.stderr, 'oops\n')
    assert.equal(out.join(''), 'hello\n')
    assert.equal(err.join(''), 'oops\n')
  })

  await step('commands.run streams output while the command runs', async () => {
    const seen = []
    const t0 = Date.now()
    await sbx.commands.run('echo first; sleep 1.5; echo second', {
      onStdout: (d) => seen.push([d, Date.now() - t0]),
    })
    assert.equal(seen.map(([d]) => d).join(''), 'first\nsecond\n')
    const firstAt = seen[0][1]
    const lastAt = seen[seen.length - 1][1]
    assert.ok(lastAt - firstAt >= 1000, `first output at ${firstAt} ms, last at ${lastAt} ms: not streamed`)
  })

  await step('commands.run non-zero exit throws CommandExitError', async () => {
    await assert.rejects(sbx.commands.run('echo partial; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e?.constructor?.name}: ${e}`)
      assert.equal(e.exitCode, 3)
      assert.equal(e.stdout, 'partial\n')
      return true
    })
  })

  await step('commands.run sees sandbox envs and per-command envs', async () => {
    const r = await sbx.commands.run('echo "$SDK_CREATE_ENV $SDK_CMD_ENV"', { envs: { SDK_CMD_ENV: 'per-command' } })
    assert.equal(r.stdout, 'from-create per-command\n')
    const again = await sbx.commands.run('echo "[$SDK_CMD_ENV]"')
    assert.equal(again.stdout, '[]\n', 'per-command envs must not persist')
  })

  await step('commands.run in a cwd', async () => {
    assert.equal(await sbx.files.makeDir(`${work}/cwd/nested`), true)
    const r = await sbx.commands.run('pwd', { cwd: `${work}/cwd/nested` })
    assert.equal(r.stdout, `${work}/cwd/nested\n`)
  })

  await step('commands stdin: sendStdin then closeStdin', async () => {
    const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true })
    await sbx.commands.sendStdin(h.pid, 'line one\n')
    await h.sendStdin('line two\n')
    await sbx.commands.closeStdin(h.pid)
    const r = await h.wait()
    assert.equal(r.stdout, 'line one\nline two\ndone\n')
  })

  await step('commands.run with a timeout', async () => {
    const t0 = Date.now()
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1000 }), (e) => {
      assert.ok(e instanceof TimeoutError, `got ${e?.constructor?.name}: ${e}`)
      return true
    })
    assert.ok(Date.now() - t0 < 10_000, `timeout took ${Date.now() - t0} ms`)
    const after = await sbx.commands.run('echo still-usable')
    assert.equal(after.stdout, 'still-usable\n')
  })

  await step('background command listed, then killed', async () => {
    const h = await sbx.commands.run('sleep 120', { background: true })
    assert.ok(h.pid > 0)
    const listed = await sbx.commands.list()
    assert.ok(listed.some((p) => p.pid === h.pid), `pid ${h.pid} not in ${JSON.stringify(listed)}`)
    assert.equal(await sbx.commands.kill(h.pid), true)
    await assert.rejects(h.wait(), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e?.constructor?.name}: ${e}`)
      assert.notEqual(e.exitCode, 0)
      return true
    })
    await waitUntil('the killed command leaves the process list', async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid))
    assert.equal(await sbx.commands.kill(h.pid), false, 'killing a finished command reports false')
    assert.equal(await sbx.commands.kill(999_999), false, 'killing an unknown pid reports false')
  })

  await step('background command: list, connect, sendStdin, wait', async () => {
    const cmd = 'echo ready; head -n1; echo bye >&2; exit 7'
    const h = await sbx.commands.run(cmd, { background: true, stdin: true, cwd: '/tmp', envs: { BG_VAR: 'bg' } })
    assert.ok(h.pid > 0)
    const listed = (await sbx.commands.list()).find((p) => p.pid === h.pid)
    assert.ok(listed, `pid ${h.pid} not listed`)
    assert.equal(listed.cmd, '/bin/bash')
    assert.deepEqual(listed.args, ['-l', '-c', cmd])
    assert.deepEqual(listed.envs, { BG_VAR: 'bg' })
    assert.equal(listed.cwd, '/tmp')
    assert.equal(listed.tag, undefined)

    const attachedOut = []
    const attached = await sbx.commands.connect(h.pid, { onStdout: (d) => attachedOut.push(d) })
    assert.equal(attached.pid, h.pid)
    await sbx.commands.sendStdin(h.pid, 'through connect\n')
    for (const [name, handle] of [['connected', attached], ['started', h]]) {
      await assert.rejects(handle.wait(), (e) => {
        assert.ok(e instanceof CommandExitError, `${name} handle: got ${e?.constructor?.name}: ${e}`)
        assert.equal(e.exitCode, 7, `${name} handle`)
        assert.match(e.stdout, /through connect\n$/, `${name} handle`)
        assert.equal(e.stderr, 'bye\n', `${name} handle`)
        return true
      })
    }
    assert.equal(h.stdout, 'ready\nthrough connect\n')
    assert.match(attachedOut.join(''), /through connect\n$/)
    await waitUntil('the ended command leaves the process list', async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid))
    await assert.rejects(sbx.commands.connect(h.pid), 'connecting to an ended command fails')
  })

  await step('commands start in /home/user; ~ and relative paths start there', async () => {
    const r = await sbx.commands.run('pwd; echo "$HOME"; cd ~ && pwd')
    assert.equal(r.stdout, `${home}\n${home}\n${home}\n`)
    assert.equal(await sbx.files.makeDir('proj/sub'), true)
    assert.equal((await sbx.files.getInfo(`${home}/proj/sub`)).type, 'dir')
    assert.equal((await sbx.commands.run('pwd', { cwd: 'proj' })).stdout, `${home}/proj\n`)
    assert.equal((await sbx.commands.run('pwd', { cwd: '~/proj/sub' })).stdout, `${home}/proj/sub\n`)
    const info = await sbx.files.write('relative.txt', 'relative\n')
    assert.equal(info.path, `${home}/relative.txt`)
    assert.equal(await sbx.files.read('~/relative.txt'), 'relative\n')
    assert.equal((await sbx.commands.run('cat relative.txt ~/relative.txt')).stdout, 'relative\nrelative\n')
    assert.ok((await sbx.files.list('~')).some((e) => e.name === 'relative.txt'))
  })

  await step('files persist in /tmp and /home/user and are shared with commands', async () => {
    const tmp = `/tmp/persist-${run}.txt`
    await sbx.files.write(tmp, 'in tmp\n')
    assert.equal(await sbx.files.read(tmp), 'in tmp\n')
    assert.equal((await sbx.commands.run(`cat ${tmp}`)).stdout, 'in tmp\n')
    await sbx.files.write(`${home}/persist.txt`, 'in home\n')
    assert.equal(await sbx.files.read(`${home}/persist.txt`), 'in home\n')
    assert.equal((await sbx.commands.run(`cat ${home}/persist.txt`)).stdout, 'in home\n')

    await sbx.commands.run(`echo from a command > ${home}/from-cmd.txt; echo kept > /tmp/kept-${run}`)
    assert.equal(await sbx.files.read(`${home}/from-cmd.txt`), 'from a command\n')
    assert.equal(await sbx.files.read(`/tmp/kept-${run}`), 'kept\n')
    assert.equal((await sbx.commands.run(`cat /tmp/kept-${run} ${home}/from-cmd.txt`)).stdout, 'kept\nfrom a command\n')
  })

  await step('a background server answers the next command on localhost', async () => {
    if (!(await sbx.commands.run('command -v python3 || true')).stdout.trim()) {
      console.log('# skip: no python3 in the sandbox')
      return
    }
    const port = 20_000 + Math.floor(Math.random() * 20_000)
    await sbx.files.write(`${home}/www/index.html`, `served ${run}\n`)
    const server = await sbx.commands.run(`python3 -m http.server ${port} --bind 127.0.0.1 --directory ${home}/www`, {
      background: true,
      timeoutMs: 0,
    })
    // bash's /dev/tcp: the client needs nothing but the shell.
    const get = `exec 3<>/dev/tcp/127.0.0.1/${port} && printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3`
    let reply = ''
    await waitUntil('the server answers', async () => {
      const r = await sbx.commands.run(get).catch((e) => e)
      reply = r?.stdout ?? ''
      return reply.endsWith(`served ${run}\n`)
    })
    assert.match(reply, /^HTTP\/1\.0 200/)
    assert.ok((await sbx.commands.list()).some((p) => p.pid === server.pid), 'the server is listed')
    assert.equal(await sbx.commands.kill(server.pid), true)
    await assert.rejects(server.wait())
  })

  await step('files write/read text', async () => {
    const text = 'hello from the official SDK\nsecond line ✓\n'
    const info = await sbx.files.write(`${work}/hello.txt`, text)
    assert.equal(info.path, `${work}/hello.txt`)
    assert.equal(await sbx.files.read(`${work}/hello.txt`), text)
    const r = await sbx.commands.run(`cat ${work}/hello.txt`)
    assert.equal(r.stdout, text)
  })

  await step('files write/read 50 MiB of binary', async () => {
    const data = randomBytes(50 << 20)
    await sbx.files.write(`${work}/big.bin`, data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength))
    const back = await sbx.files.read(`${work}/big.bin`, { format: 'bytes' })
    assert.equal(back.length, data.length)
    assert.equal(sha256(back), sha256(data))
    const r = await sbx.commands.run(`wc -c < ${work}/big.bin`)
    assert.equal(r.stdout.trim(), String(50 << 20))
  })

  await step('files getInfo, stream read, and a multi-file write', async () => {
    const info = await sbx.files.getInfo(`${work}/hello.txt`)
    assert.equal(info.type, 'file')
    assert.equal(info.name, 'hello.txt')
    assert.equal(info.size, Buffer.byteLength('hello from the official SDK\nsecond line ✓\n'))
    assert.ok(info.modifiedTime instanceof Date && !isNaN(info.modifiedTime))
    const dir = await sbx.files.getInfo(work)
    assert.equal(dir.type, 'dir')

    const stream = await sbx.files.read(`${work}/hello.txt`, { format: 'stream' })
    const chunks = []
    for await (const c of stream) chunks.push(Buffer.from(c))
    assert.equal(Buffer.concat(chunks).toString(), 'hello from the official SDK\nsecond line ✓\n')

    const written = await sbx.files.write([
      { path: `${work}/multi/one.txt`, data: 'one' },
      { path: `${work}/multi/deeper/two.txt`, data: 'two' },
    ])
    assert.deepEqual(written.map((w) => w.path).sort(), [`${work}/multi/deeper/two.txt`, `${work}/multi/one.txt`])
    assert.equal(await sbx.files.read(`${work}/multi/deeper/two.txt`), 'two')
    await assert.rejects(sbx.files.read(`${work}/multi/missing.txt`))
  })

  await step('files list, exists, makeDir, rename, remove', async () => {
    const names = (await sbx.files.list(work)).map((e) => e.name)
    for (const n of ['hello.txt', 'big.bin', 'cwd', 'multi']) assert.ok(names.includes(n), `${n} not in ${names}`)
    const entry = (await sbx.files.list(work)).find((e) => e.name === 'hello.txt')
    assert.equal(entry.type, 'file')
    assert.equal(entry.path, `${work}/hello.txt`)
    const dir = (await sbx.files.list(work)).find((e) => e.name === 'cwd')
    assert.equal(dir.type, 'dir')

    assert.equal(await sbx.files.exists(`${work}/hello.txt`), true)
    assert.equal(await sbx.files.exists(`${work}/nope.txt`), false)

    assert.equal(await sbx.files.makeDir(`${work}/made/deep`), true)
    assert.equal(await sbx.files.makeDir(`${work}/made/deep`), false, 'makeDir of an existing dir returns false')

    const moved = await sbx.files.rename(`${work}/hello.txt`, `${work}/made/renamed.txt`)
    assert.equal(moved.path, `${work}/made/renamed.txt`)
    assert.equal(await sbx.files.exists(`${work}/hello.txt`), false)
    assert.equal(await sbx.files.read(`${work}/made/renamed.txt`), 'hello from the official SDK\nsecond line ✓\n')

    await sbx.files.remove(`${work}/made`)
    assert.equal(await sbx.files.exists(`${work}/made`), false)
    await sbx.files.remove(`${work}/big.bin`)
    assert.equal(await sbx.files.exists(`${work}/big.bin`), false)
  })

  await step('Sandbox.list filtered by metadata', async () => {
    const mine = await Sandbox.list({ query: { metadata } }).nextItems()
    assert.deepEqual(mine.map((s) => s.sandboxId), [sbx.sandboxId])
    assert.deepEqual(mine[0].metadata, metadata)
    const other = await Sandbox.list({ query: { metadata: { ...metadata, run: 'not-this-run' } } }).nextItems()
    assert.equal(other.length, 0)
  })

  await step('Sandbox.list pages', async () => {
    const second = await Sandbox.create({ metadata: { ...metadata, second: 'yes' } })
    try {
      const pages = Sandbox.list({ query: { metadata: { run } }, limit: 1 })
      const seen = []
      while (pages.hasNext) {
        const items = await pages.nextItems()
        assert.ok(items.length <= 1, `a page of ${items.length} with limit 1`)
        seen.push(...items.map((s) => s.sandboxId))
      }
      assert.deepEqual(seen.sort(), [sbx.sandboxId, second.sandboxId].sort())
    } finally {
      await second.kill()
    }
  })

  await step('Sandbox.connect by id', async () => {
    await sbx.files.write(`${work}/marker.txt`, 'connected')
    const again = await Sandbox.connect(sbx.sandboxId)
    assert.equal(again.sandboxId, sbx.sandboxId)
    const r = await again.commands.run(`cat ${work}/marker.txt`)
    assert.equal(r.stdout, 'connected')
  })

  await step('setTimeout', async () => {
    await sbx.setTimeout(90_000)
    const info = await sbx.getInfo()
    const left = info.endAt.getTime() - Date.now()
    assert.ok(left > 60_000 && left <= 95_000, `endAt is ${left} ms away, want about 90 s`)
  })

  await step('commands and files run as user "user", or as root when asked', async () => {
    const env = await sbx.commands.run('echo "$HOME $USER $LOGNAME"')
    assert.equal(env.stdout, `${home} user user\n`)
    const root = await sbx.commands.run('whoami; id -u; echo "$HOME $USER"; pwd', { user: 'root' })
    assert.equal(root.stdout, 'root\n0\n/root root\n/root\n')
    await sbx.files.write('/tmp/for-root.txt', 'root', { user: 'root' })
    assert.equal(await sbx.files.read('/tmp/for-root.txt', { user: 'root' }), 'root')
    await assert.rejects(sbx.commands.run('true', { user: 'no-such-user' }), 'an unknown user is refused')

    const me = await sbx.commands.run('whoami; id -u')
    const [name, uid] = me.stdout.trim().split('\n')
    assert.equal(name, 'user', `commands run as ${name} (uid ${uid}), want user`)
    assert.notEqual(uid, '0')
    await sbx.files.write(`${home}/owned/by-user.txt`, 'mine')
    const owners = await sbx.commands.run(`stat -c %U ${home} ${home}/owned ${home}/owned/by-user.txt`)
    assert.equal(owners.stdout, 'user\nuser\nuser\n', 'the home and what files.write made belong to user')
    await sbx.commands.run(`echo by-command > ${home}/owned/by-command.txt`)
    assert.equal((await sbx.commands.run(`stat -c %U ${home}/owned/by-command.txt`)).stdout, 'user\n')
  })

  await step('commands.connect to a background command after disconnecting', async () => {
    const h = await sbx.commands.run('sleep 0.5; echo late-output', { background: true })
    await h.disconnect()
    const out = []
    const again = await sbx.commands.connect(h.pid, { onStdout: (d) => out.push(d) })
    const r = await again.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(out.join(''), 'late-output\n')
  })

  await step('pty: create, sendInput, resize, kill', async () => {
    let screen = ''
    const dec = new TextDecoder()
    const pty = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => { screen += dec.decode(d) } })
    const type = (text) => sbx.pty.sendInput(pty.pid, new TextEncoder().encode(text))
    await type('[ -t 0 ] && echo "tty-$((6*7))"\n')
    await waitUntil('the pty shows tty-42', () => screen.includes('tty-42'))
    await type('echo "size=$(stty size)."\n')
    await waitUntil('the pty is 30x100', () => screen.includes('size=30 100.'))
    await sbx.pty.resize(pty.pid, { cols: 120, rows: 40 })
    await type('echo "size=$(stty size)."\n')
    await waitUntil('the pty follows the resize', () => screen.includes('size=40 120.'))
    assert.equal(await sbx.pty.kill(pty.pid), true)
    const end = await pty.wait().catch((e) => e)
    assert.ok(end instanceof CommandExitError || end?.exitCode !== 0, `a killed pty ends with an error: ${end}`)
  })

  await step('files.watchDir reports writes, creates and removes', async () => {
    const dir = `${work}/watched-${run}`
    await sbx.files.makeDir(dir)
    await sbx.files.write(`${dir}/existing.txt`, 'one')
    const events = []
    const handle = await sbx.files.watchDir(dir, (e) => events.push(`${e.type}:${e.name}`), { recursive: true })
    await sbx.files.write(`${dir}/existing.txt`, 'two, longer')
    await sbx.files.makeDir(`${dir}/sub`)
    await sbx.files.write(`${dir}/sub/new.txt`, 'new')
    await sbx.files.remove(`${dir}/existing.txt`)
    const want = [`${FilesystemEventType.WRITE}:existing.txt`, `${FilesystemEventType.CREATE}:sub`, `${FilesystemEventType.CREATE}:sub/new.txt`, `${FilesystemEventType.REMOVE}:existing.txt`]
    await waitUntil(`watch events ${want} (got ${events})`, () => want.every((w) => events.includes(w)))
    await handle.stop()
    await assert.rejects(sbx.files.watchDir(`${dir}/missing`, () => {}), 'watching a missing directory fails')
  })

  await step('file metadata round trip: write, getInfo, list, rename, overwrite', async () => {
    const md = { author: 'conformance', run }
    const w = await sbx.files.write(`${work}/with-metadata.txt`, 'x', { metadata: md })
    assert.deepEqual(w.metadata, md)
    assert.deepEqual((await sbx.files.getInfo(`${work}/with-metadata.txt`)).metadata, md)
    const listed = (await sbx.files.list(work)).find((e) => e.name === 'with-metadata.txt')
    assert.deepEqual(listed?.metadata, md)
    const moved = await sbx.files.rename(`${work}/with-metadata.txt`, `${work}/moved-metadata.txt`)
    assert.deepEqual(moved.metadata, md)
    await sbx.files.write(`${work}/moved-metadata.txt`, 'y')
    assert.equal((await sbx.files.getInfo(`${work}/moved-metadata.txt`)).metadata, undefined, 'an overwrite clears metadata')
  })

  await step('entries: permission bits and absolute symlink targets', async () => {
    await sbx.commands.run(`mkdir -p ${work}/modes && chmod 750 ${work}/modes && ln -sfn modes ${work}/modes-link`)
    assert.equal((await sbx.files.getInfo(`${work}/modes`)).mode, 0o750)
    assert.equal((await sbx.files.getInfo(`${work}/modes-link`)).symlinkTarget, `${work}/modes`)
  })

  await step('signed upload and download URLs; expired ones are refused', async () => {
    const up = await sbx.uploadUrl('signed.txt', { useSignatureExpiration: 60 })
    const form = new FormData()
    form.append('file', new Blob(['signed content']), 'signed.txt')
    const res = await fetch(up, { method: 'POST', body: form })
    assert.equal(res.status, 200, await res.clone().text())
    assert.deepEqual(await res.json(), [{ name: 'signed.txt', path: `${home}/signed.txt`, type: 'file' }])
    const down = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 60 }))
    assert.equal(down.status, 200)
    assert.equal(await down.text(), 'signed content')
    const asRoot = await fetch(await sbx.uploadUrl('by-root.txt', { user: 'root', useSignatureExpiration: 60 }), { method: 'POST', body: form })
    assert.deepEqual(await asRoot.json(), [{ name: 'by-root.txt', path: '/root/by-root.txt', type: 'file' }])
    const expired = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: -10 }))
    assert.equal(expired.status, 401)
    assert.deepEqual(await expired.json(), { code: 401, message: 'signature is already expired' })
  })

  await step('files.write makes new directories anywhere, as envd does', async () => {
    const [info] = await sbx.files.write([{ path: `/conformance-${run}/deep/file.txt`, data: 'top' }])
    assert.equal(info.path, `/conformance-${run}/deep/file.txt`)
    assert.equal(await sbx.files.read(info.path), 'top')
  })

  await step('getMetrics reports CPU, memory and disk', async () => {
    const metrics = await sbx.getMetrics()
    assert.ok(metrics.length > 0, 'no metrics')
    const m = metrics[metrics.length - 1]
    assert.ok(m.cpuCount > 0 && m.memTotal > 0 && m.memUsed > 0 && m.diskTotal > 0 && m.diskUsed > 0, JSON.stringify(m))
    const old = await sbx.getMetrics({ start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() - 1_800_000) })
    assert.equal(old.length, 0, 'no metrics before the sandbox existed')
  })

  await step('Sandbox.list with startedAfter', async () => {
    const { startedAt } = await sbx.getInfo()
    const since = await Sandbox.list({ query: { metadata, startedAfter: startedAt } }).nextItems()
    assert.ok(since.some((s) => s.sandboxId === sbx.sandboxId))
    const later = await Sandbox.list({ query: { metadata, startedAfter: new Date(startedAt.getTime() + 1000) } }).nextItems()
    assert.ok(!later.some((s) => s.sandboxId === sbx.sandboxId))
  })

  await step('auto-pause on timeout, wake on connect', async () => {
    const paused = await Sandbox.create({ metadata: { ...metadata, autopause: '1' }, timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } })
    try {
      await paused.files.write('/tmp/kept', 'kept')
      await waitUntil('the sandbox pauses at its timeout', async () => (await paused.getInfo()).state === 'paused', 15_000)
      assert.equal(await paused.isRunning(), false)
      await paused.connect()
      assert.equal((await paused.getInfo()).state, 'running')
      assert.equal(await paused.files.read('/tmp/kept'), 'kept')
    } finally {
      await paused.kill().catch(() => {})
    }
  })

  await step('kill', async () => {
    const running = await sbx.commands.run('sleep 60', { background: true })
    await sbx.kill()
    const err = await running.wait().catch((e) => e)
    assert.ok(err instanceof TimeoutError, `a command of a killed sandbox ends with a TimeoutError, not ${err}`)
    assert.match(err.message, /sandbox was killed or reached its end of life/)
    const mine = await Sandbox.list({ query: { metadata } }).nextItems()
    assert.equal(mine.length, 0)
    await assert.rejects(Sandbox.connect(sbx.sandboxId))
    assert.equal(await Sandbox.kill(sbx.sandboxId), false, 'killing a killed sandbox reports false')
  })
}

main().then(
  () => console.log('sdk-flow: all steps passed'),
  (err) => {
    console.error(`not ok - ${current}`)
    console.error(err)
    process.exit(1)
  },
)
